"""A thread's checkpoint revives every model the graph state holds: a model missing from the
serializer's allow-list comes back as a plain value (with a warning), and a follow-up turn would
read a pointer or a citation that is no longer one."""

from __future__ import annotations

import typing
from typing import Any

from pydantic import BaseModel

from grounded_agent import state as state_module
from grounded_agent.checkpoint import state_serializer


def _models(tp: Any, seen: set[Any]) -> set[type[BaseModel]]:
    """The pydantic models reachable from a type hint (through TypedDicts, lists, unions)."""
    if tp in seen:
        return set()
    seen.add(tp)
    found: set[type[BaseModel]] = set()
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        found.add(tp)
    if isinstance(tp, type) and typing.is_typeddict(tp):
        for hint in typing.get_type_hints(tp).values():
            found |= _models(hint, seen)
    for arg in typing.get_args(tp):
        found |= _models(arg, seen)
    return found


def test_every_model_in_the_state_survives_a_checkpoint() -> None:
    hints = typing.get_type_hints(state_module.AgentState, include_extras=False)
    models: set[type[BaseModel]] = set()
    for hint in hints.values():
        models |= _models(hint, set())
    assert len(models) >= 5, models  # the walk finds the state's models
    serde = state_serializer()
    for model in models:
        fields = {name: None for name, f in model.model_fields.items() if not f.is_required()}
        sample = model.model_construct(**fields)
        revived = serde.loads_typed(serde.dumps_typed(sample))
        assert isinstance(revived, model), f"{model.__name__} comes back as {type(revived)}"
