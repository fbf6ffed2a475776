"""Grounding check: what the classified outcomes add up to (usable evidence, every source failed,
or nothing usable), and the evidence the later steps read."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from grounded_agent.context import Context
from grounded_agent.deps import Deps
from grounded_agent.nodes._common import ctx_of, outcomes_of, require_turn, step
from grounded_agent.schemas import Finding, ToolOutcome
from grounded_agent.state import AgentState, turn_of

MAX_EVIDENCE = 8
"""Passages kept as evidence for scoring and answering, best first."""


def collect_evidence(outcomes: list[ToolOutcome], low: float) -> list[Finding]:
    """Usable passages of every completed read, deduplicated, best answer first.

    Each source's own order is kept (the knowledge base ranks by which passage answers, which is
    not always the most relevant one); sources are interleaved by position, then relevance."""
    seen: dict[str, tuple[int, Finding]] = {}
    for outcome in outcomes:
        if outcome.status not in ("found", "low_relevance"):
            continue
        for pos, item in enumerate(i for i in outcome.items if i.score >= low):
            held = seen.get(item.key)
            if held is None or item.score > held[1].score:
                seen[item.key] = (pos, item)
    ordered = sorted(seen.values(), key=lambda p: (p[0], -p[1].score))
    return [f for _, f in ordered][:MAX_EVIDENCE]


async def check_grounding(
    state: AgentState, runtime: Runtime[Context], *, deps: Deps
) -> dict[str, Any]:
    require_turn(state, "check_grounding")
    ctx = ctx_of(runtime)
    low = deps.thresholds(ctx).low  # lower with a model that judges (Context.run_thresholds)
    turn = turn_of(state)
    attempt = int(turn.get("attempt") or 1)
    # classified once, by the run's thresholds, when the tools ran (call_tools)
    current = outcomes_of(state, attempt)
    evidence = collect_evidence(outcomes_of(state), low)
    failed = [o.source for o in current if o.status == "error"]
    if evidence:
        grounding = "usable"
    elif current and len(failed) == len(current):
        grounding = "all_failed"
    else:
        grounding = "nothing_usable"
    best = max((e.score for e in evidence), default=None)
    detail = {
        "usable": f"{len(evidence)} usable passage(s), best relevance {best or 0:.2f}",
        "all_failed": f"every source failed ({', '.join(failed)}): no re-query of broken services",
        "nothing_usable": "no passage reached the relevance threshold "
        f"{low:.2f}" + (f"; failed: {', '.join(failed)}" if failed else ""),
    }[grounding]
    return {
        "turn": {"evidence": evidence, "grounding": grounding},
        "trail": [
            step(
                state,
                "check_grounding",
                grounding,
                detail,
                best_score=best,
                failed=failed,
                evidence=len(evidence),
            )
        ],
    }
