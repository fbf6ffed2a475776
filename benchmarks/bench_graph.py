"""Graph benchmarks: orchestration overhead against a bare retrieve -> generate graph, and model
calls per question on the evaluation sample beside a per-document grading design (CRAG).

    python benchmarks/bench_graph.py [--runs 300] [--calls-sample 100] [--json]

Part 1 needs nothing but the package. Part 2 needs the SQuAD-derived data in ../shared/eval/squad
(or --questions/--kb) and uses the embedded store (the evaluation table is reused if present).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, TypedDict

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # evals/ and tests/ live in the checkout, not the wheel

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel, Field

from evals.scripted import DecisionFollowingModel
from grounded_agent import aask, build_graph
from grounded_agent.context import Context
from grounded_agent.nodes.draft_answer import format_sources
from grounded_agent.prompts.answer import ANSWER_SYSTEM, ANSWER_USER
from grounded_agent.schemas import Finding, ToolOutcome
from grounded_agent.tools.base import SourceTool

TEXT = ("The Pro plan costs 49 EUR per user per month. It includes priority support and single "
        "sign-on. Annual billing gives two months free.")
QUESTION = "What does the Pro plan cost per month?"
TARGET_RATIO = 1.5
TARGET_MEAN_CALLS = 2.5
TARGET_MAX_CALLS = 5


class _Args(BaseModel):
    query: str = Field(min_length=1, max_length=300)
    k: int = Field(default=5, ge=1, le=10)


async def _search(args: _Args) -> ToolOutcome:
    """An in-process knowledge base: one found passage, no I/O."""
    item = Finding(source="knowledge_base", source_id="pricing#0", title="Pricing", text=TEXT, score=0.93)
    return ToolOutcome.from_items("knowledge_base", args.query, [item])


def in_process_tool() -> SourceTool:
    return SourceTool(name="knowledge_base", description="Search the knowledge base.",
                      args_schema=_Args, func=_search, timeout_s=5.0)


class BareState(TypedDict, total=False):
    question: str
    passages: list[Finding]
    answer: str


def bare_graph(model: Any, tool: SourceTool) -> Any:
    """The textbook RAG graph: retrieve with the question, generate once from what came back."""

    async def retrieve(state: BareState) -> dict[str, Any]:
        outcome = await tool.run(_Args(query=state["question"]))
        return {"passages": list(outcome.items)}

    async def generate(state: BareState) -> dict[str, Any]:
        reply = await model.ainvoke([
            SystemMessage(ANSWER_SYSTEM.format(language="English")),
            HumanMessage(ANSWER_USER.format(question=state["question"],
                                            sources=format_sources(state["passages"]))),
        ])
        return {"answer": str(reply.content)}

    g = StateGraph(BareState)
    g.add_node("retrieve", retrieve)
    g.add_node("generate", generate)
    g.add_edge(START, "retrieve")
    g.add_edge("retrieve", "generate")
    g.add_edge("generate", END)
    return g.compile()


async def _time_runs(fn: Any, runs: int, warmup: int = 20) -> list[float]:
    for _ in range(warmup):
        await fn()
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        await fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


async def overhead(runs: int) -> dict[str, Any]:
    """Per-question wall time, zero-latency model and in-process tool, sequential runs."""
    tool = in_process_tool()
    ctx = Context(sources=["knowledge_base"])
    full_model = DecisionFollowingModel()
    full = build_graph(chat_model=full_model, tools={"knowledge_base": tool})
    bare_model = DecisionFollowingModel()
    bare = bare_graph(bare_model, tool)

    first = await aask(QUESTION, graph=full, context=ctx)
    assert first.status == "answered", first.status

    full_ms = await _time_runs(lambda: aask(QUESTION, graph=full, context=ctx), runs)
    bare_ms = await _time_runs(lambda: bare.ainvoke({"question": QUESTION}), runs)
    full_med, bare_med = statistics.median(full_ms), statistics.median(bare_ms)
    return {
        "runs": runs,
        "full_graph_ms_median": round(full_med, 2),
        "full_graph_ms_p95": round(sorted(full_ms)[int(0.95 * (runs - 1))], 2),
        "bare_rag_ms_median": round(bare_med, 2),
        "bare_rag_ms_p95": round(sorted(bare_ms)[int(0.95 * (runs - 1))], 2),
        "ratio_median": round(full_med / bare_med, 2),
        "target_ratio": TARGET_RATIO,
        "met": full_med / bare_med <= TARGET_RATIO,
        "full_graph_model_calls": first.usage.llm_calls,
        "bare_rag_model_calls": 1,
        "full_graph_path": [f"{t.node}:{t.decision}" for t in first.trail],
    }


async def model_calls(per_kind: int, seed: int, questions: Path, kb: Path | None) -> dict[str, Any]:
    """Model calls per question of the full graph on a stratified eval sample, with the real store
    and a model that decides as the agent's local logic would; CRAG counted on the same searches."""
    from evals.data import load_eval_set, stratified_sample
    from evals.harness import aingest, awarm_up, open_eval_store

    eval_set = load_eval_set(questions, kb)
    sample = stratified_sample(eval_set.questions, per_kind, seed)
    store = open_eval_store(eval_set)
    await aingest(eval_set, store, progress=False)
    await awarm_up(store)
    model = DecisionFollowingModel()
    graph = build_graph(chat_model=model, store=store)
    ctx = Context(sources=["knowledge_base"])
    per_kind_calls: dict[str, list[int]] = {}
    crag: list[int] = []
    sem = asyncio.Semaphore(4)

    async def one(q: Any) -> None:
        async with sem:
            result = await aask(q.question, graph=graph, context=ctx)
            found = await store.asearch(q.question, k=ctx.top_k)
        per_kind_calls.setdefault(q.kind, []).append(result.usage.llm_calls)
        relevant = [f for f in found if f.score >= ctx.low_threshold]
        # CRAG: one grading call per retrieved document, a rewrite when none is relevant, generation
        crag.append(len(found) + (0 if relevant else 1) + 1)

    started = time.perf_counter()
    await asyncio.gather(*(one(q) for q in sample))
    await store.aclose()
    all_calls = [c for v in per_kind_calls.values() for c in v]
    mean = statistics.mean(all_calls)
    return {
        "questions": len(all_calls),
        "seconds": round(time.perf_counter() - started, 1),
        "mean": round(mean, 3),
        "max": max(all_calls),
        "distribution": {str(k): all_calls.count(k) for k in sorted(set(all_calls))},
        "by_kind": {k: round(statistics.mean(v), 3) for k, v in per_kind_calls.items()},
        "by_step": dict(model.calls),
        "target_mean": TARGET_MEAN_CALLS,
        "target_max": TARGET_MAX_CALLS,
        "met": mean <= TARGET_MEAN_CALLS and max(all_calls) <= TARGET_MAX_CALLS,
        "crag_per_document_grading": {
            "mean": round(statistics.mean(crag), 3), "max": max(crag),
            "note": f"k={ctx.top_k} grading calls + 1 generation (+1 query rewrite when no "
                    "document is graded relevant), LangGraph's CRAG example",
        },
    }


def main(argv: list[str] | None = None) -> int:
    from evals.cli import DEFAULT_DATA

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=300)
    p.add_argument("--calls-sample", type=int, default=100, help="questions per kind (0 skips)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--questions", type=Path, default=DEFAULT_DATA / "questions.jsonl")
    p.add_argument("--kb", type=Path, default=DEFAULT_DATA / "kb_corpus.jsonl")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)

    out: dict[str, Any] = {"overhead": asyncio.run(overhead(args.runs))}
    o = out["overhead"]
    print(f"orchestration overhead ({o['runs']} runs, zero-latency model, in-process tool): "
          f"full graph {o['full_graph_ms_median']:.2f} ms median ({o['full_graph_model_calls']} model "
          f"calls) vs bare retrieve->generate {o['bare_rag_ms_median']:.2f} ms: ratio "
          f"{o['ratio_median']:.2f} (target <= {TARGET_RATIO}) {'met' if o['met'] else 'NOT met'}",
          file=sys.stderr)
    if args.calls_sample > 0:
        if not args.questions.exists():
            print(f"model calls per question: skipped, {args.questions} is absent", file=sys.stderr)
        else:
            m = asyncio.run(model_calls(args.calls_sample, args.seed, args.questions, args.kb))
            out["model_calls"] = m
            c = m["crag_per_document_grading"]
            print(f"model calls per question ({m['questions']} questions, seed {args.seed}): mean "
                  f"{m['mean']:.2f}, max {m['max']} (targets <= {TARGET_MEAN_CALLS}, <= "
                  f"{TARGET_MAX_CALLS}) {'met' if m['met'] else 'NOT met'}; by kind {m['by_kind']}; "
                  f"distribution {m['distribution']}; CRAG-style grading: mean {c['mean']:.2f}, "
                  f"max {c['max']}", file=sys.stderr)
    if args.json:
        print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
