"""Inputs generated from a JSON schema, then broken on purpose: the schema fuzzer of issue 26.

`SchemaFuzzer(schema, components)` draws instances that follow the schema (the endpoint's own
request schema from its OpenAPI document, a pydantic model's JSON schema for the Python API),
then applies 0 to 3 mutations at random places: null or a value of the wrong type at any field,
integers past Python's 4,300-digit conversion limit and floats past the double range, NUL and
lone surrogates in any string (field names too), deep nesting, a missing required field, an
unknown one, an over-long string. `body()` renders one as request bytes (non-ASCII escaped, so a
lone surrogate travels as the `\\ud800` escape a client would send); `value()` returns it as a
Python value for the Python API.

Seeded `random.Random`, not hypothesis: a run of 2,000 bodies per route costs only the requests,
and a failure names its seed and index so it can be replayed.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Iterator
from typing import Any

HUGE_DIGITS = 5_000
"""Digits of a 'huge' integer: past the 4,300 that int() converts from text."""

WORDS = [
    "What is the Pro plan price?", "refund policy", "Pro plan", "price", "contract",
    "How many days of leave?", "knowledge_base", "en", "de", "newest", "2025-01-01", "x",
    "مرحبا؟", "שלום", "日本語", "😀 price", "\u202eprice", "\u200b", "'; DROP TABLE x; --",
    "</source>", "[99]", "{{question}}", " ", "",
]
"""Valid text drawn for a string field without an enum: odd, hostile and plain."""

HINTS: dict[str, list[Any]] = {
    "question": ["What is the Pro plan price?", "How much does the Pro plan cost per user?",
                 "Pro plan price?", "مرحبا؟ price", "👩‍💻 Pro plan?"],
    "sources": ["knowledge_base"],
    "language": ["en", "de", "English", None],
    "wikipedia_language": ["en", "de"],
    "model": ["gpt-4o-mini"],
    "text": ["price", "contract", "Pro plan", "\"quoted phrase\" -word", "a or b", None],
    "date_from": ["2020-01-01", "2025-06-30"],
    "date_to": ["2026-12-31", "2025-01-01"],
}
"""Plausible values for named fields, so that a share of the generated inputs is accepted and
runs (a fuzzer whose every input is refused tests only the refusal)."""

SPECIAL_TEXT = ["\x00", "\ud800", "\udfff", "\udcff", "\ud83d", "a\x00b", "\x00" * 3,
                "x\udc80y", "\ufffe", "\uffff", "\x1b[31m", "\r\n"]
"""Inserted into strings: NUL, lone surrogates (high, low, surrogateescape's), and neighbours."""

MUTATIONS = ("null", "wrong_type", "huge_number", "huge_float", "nul", "surrogate", "deep",
             "drop_required", "extra_field", "long_string", "key_surrogate", "empty")


class Huge:
    """An integer literal too long to convert; rendered as raw digits by `render`."""

    def __init__(self, negative: bool) -> None:
        self.negative = negative


class RawFloat:
    """A float literal past the double range (`1e999`), which JSON parsers read as infinity."""

    def __init__(self, text: str) -> None:
        self.text = text


class SchemaFuzzer:
    """Instances of `schema` ($refs resolved in `components`), mutated; seeded and replayable."""

    def __init__(self, schema: dict[str, Any], components: dict[str, Any] | None = None,
                 *, seed: int = 0, thread_prefix: str = "fuzz-") -> None:
        self.schema = schema
        self.components = components or {}
        self.rng = random.Random(seed)
        self.thread_prefix = thread_prefix
        self.mutations_used: dict[str, int] = dict.fromkeys(MUTATIONS, 0)

    # --- valid instances -------------------------------------------------------------------------

    def _resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in schema:
            name = schema["$ref"].rsplit("/", 1)[-1]
            schema = {**self.components[name], **{k: v for k, v in schema.items() if k != "$ref"}}
        return schema

    def instance(self, schema: dict[str, Any] | None = None, name: str = "", depth: int = 0) -> Any:
        """A value that follows `schema` (the whole schema by default)."""
        rng = self.rng
        schema = self._resolve(self.schema if schema is None else schema)
        if "anyOf" in schema or "oneOf" in schema:
            options = schema.get("anyOf") or schema.get("oneOf") or []
            return self.instance(rng.choice(options), name, depth)
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            return rng.choice(schema["enum"])
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = rng.choice(kind)
        if kind == "object" or "properties" in schema:
            out: dict[str, Any] = {}
            required = set(schema.get("required", ()))
            for prop, sub in (schema.get("properties") or {}).items():
                if prop in required or rng.random() < 0.5:
                    out[prop] = self.instance(sub, prop, depth + 1)
            return out
        if kind == "array":
            count = rng.randint(0, 3) if depth < 6 else 0
            return [self.instance(schema.get("items") or {}, name, depth + 1) for _ in range(count)]
        if kind == "string":
            if name == "thread_id":
                return f"{self.thread_prefix}{rng.getrandbits(40):010x}"
            if schema.get("format") == "date":
                return rng.choice(["2025-01-01", "2026-02-28", "1999-12-31"])
            pool = HINTS.get(name, WORDS)
            value = rng.choice(pool)
            if value is None:
                value = rng.choice(WORDS)
            limit = schema.get("maxLength")
            return value[:limit] if isinstance(limit, int) else value
        if kind == "integer":
            low = int(schema.get("minimum", 0))
            high = int(schema.get("maximum", low + 20))
            return rng.randint(low, min(high, low + 20))
        if kind == "number":
            bottom = float(schema.get("minimum", 0.0))
            top = float(schema.get("maximum", 1.0))
            return round(rng.uniform(bottom, top), 3)
        if kind == "boolean":
            return rng.random() < 0.5
        if kind == "null":
            return None
        return rng.choice(WORDS)  # an unconstrained field (additionalProperties: true)

    # --- mutations -------------------------------------------------------------------------------

    def _places(self, value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
        yield path
        if isinstance(value, dict):
            for key, item in value.items():
                yield from self._places(item, (*path, key))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                yield from self._places(item, (*path, i))

    def _wrong(self) -> Any:
        return self.rng.choice([None, 0, -1, 3.5, True, False, "", "text", [], [1, "a"], {},
                                {"a": 1}, 2**63, -(2**64), 1e308])

    def _deep(self) -> Any:
        depth = self.rng.choice([8, 20, 31, 33, 60, 200])
        inner: Any = self.rng.choice([1, "x", None])
        for _ in range(depth):
            inner = [inner] if self.rng.random() < 0.5 else {"a": inner}
        return inner

    def _spoil_text(self, text: str) -> str:
        where = self.rng.randint(0, len(text))
        return text[:where] + self.rng.choice(SPECIAL_TEXT) + text[where:]

    def mutate(self, value: Any) -> Any:
        """`value` with one mutation at a random place (the root included)."""
        rng = self.rng
        kind = rng.choice(MUTATIONS)
        self.mutations_used[kind] += 1
        places = list(self._places(value))
        path = rng.choice(places)
        current = _get(value, path)
        if kind == "null":
            new: Any = None
        elif kind == "wrong_type":
            new = self._wrong()
        elif kind == "huge_number":
            new = Huge(rng.random() < 0.3)
        elif kind == "huge_float":
            new = RawFloat(rng.choice(["1e999", "-1e999", "1" + "0" * 400 + ".5"]))
        elif kind == "nul" or kind == "surrogate":
            strings = [p for p in places if isinstance(_get(value, p), str)]
            if strings:
                path = rng.choice(strings)
                current = _get(value, path)
            base = current if isinstance(current, str) else rng.choice(WORDS)
            spoiled = self._spoil_text(base)
            if kind == "nul" and "\x00" not in spoiled:
                spoiled += "\x00"
            new = spoiled
        elif kind == "deep":
            new = self._deep()
        elif kind == "long_string":
            new = rng.choice(["x" * 4_001, "😀" * 5_000, "a " * 3_000])
        elif kind == "empty":
            new = rng.choice(["", " ", [], {}])
        else:  # drop_required, extra_field, key_surrogate: change an object
            objects = [p for p in places if isinstance(_get(value, p), dict)]
            if not objects:
                return value
            path = rng.choice(objects)
            target = dict(_get(value, path))
            if kind == "drop_required" and target:
                target.pop(rng.choice(list(target)))
            elif kind == "extra_field":
                target[rng.choice(["extra", "search", "question", "inputs", "input"])] = (
                    self._wrong())
            else:
                target[self._spoil_text(rng.choice(["k", "question", ""]))] = 1
            new = target
        return _set(value, path, new)

    def value(self) -> Any:
        """One generated value: valid, or with 1 to 3 mutations (three in four are mutated)."""
        value = self.instance()
        if self.rng.random() < 0.75:
            for _ in range(self.rng.choice([1, 1, 2, 3])):
                value = self.mutate(value)
        return value

    def body(self) -> bytes:
        """One request body: `value()` rendered as JSON bytes."""
        return render(self.value())


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


def _set(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _set(value[head], rest, new)}
    copy = list(value)
    copy[head] = _set(copy[head], rest, new)
    return copy


def render(value: Any) -> bytes:
    """JSON bytes, ASCII only; `Huge` and `RawFloat` become raw literals no encoder would write."""
    raws: dict[str, str] = {}

    def swap(item: Any) -> Any:
        if isinstance(item, Huge):
            key = f"@@raw{len(raws)}@@"
            digits = "".join(random.Random(len(raws)).choices(string.digits, k=HUGE_DIGITS))
            raws[key] = ("-" if item.negative else "") + "9" + digits[1:]
            return key
        if isinstance(item, RawFloat):
            key = f"@@raw{len(raws)}@@"
            raws[key] = item.text
            return key
        if isinstance(item, dict):
            return {k: swap(v) for k, v in item.items()}
        if isinstance(item, list):
            return [swap(v) for v in item]
        return item

    text = json.dumps(swap(value), ensure_ascii=True)
    for key, raw in raws.items():
        text = text.replace(f'"{key}"', raw)
    return text.encode("ascii")


def python_value(value: Any) -> Any:
    """A generated value as a Python caller could pass it: `Huge` as a real 5,000-digit int,
    `RawFloat` as the float it reads as."""
    if isinstance(value, Huge):
        return (-1 if value.negative else 1) * 10 ** (HUGE_DIGITS - 1)
    if isinstance(value, RawFloat):
        return float(value.text)
    if isinstance(value, dict):
        return {k: python_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [python_value(v) for v in value]
    return value


def batch_shapes(fuzzer: SchemaFuzzer, item_schema: dict[str, Any]) -> Any:
    """A batch envelope of an odd shape: inputs not a list, too many, configs of another count."""
    rng = fuzzer.rng
    items = [fuzzer.instance(item_schema) for _ in range(rng.choice([0, 1, 2, 17]))]
    shape = rng.choice(["scalar_inputs", "many", "config_count", "config_null", "nested"])
    if shape == "scalar_inputs":
        return {"inputs": rng.choice([None, True, False, 0, 7, "q", {"question": "q?"}])}
    if shape == "config_count":
        return {"inputs": items, "config": [{} for _ in range(len(items) + 1)]}
    if shape == "config_null":
        return {"inputs": items, "config": rng.choice([None, [None], 3, "x"])}
    if shape == "nested":
        return {"inputs": [items]}
    return {"inputs": items}
