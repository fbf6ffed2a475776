"""What the gate benchmark measures is what the graph decides (issue 47): on a project KB, with a
deterministic stand-in for the local judge (the trained judge behind the same interface), every
question the whole offline graph answers through the local gate is one the benchmark's replay
(bench_gate_ceiling: the graph's evidence, the shared signals, the shipped gate) answers, and no
other. Were the benchmark to read other passages than the graph's scoring step (all those found,
not those check_grounding keeps), questions would differ here. About 30 s."""

from __future__ import annotations

from pathlib import Path

import pytest

from grounded_agent.store import StoreSettings
from tests.support.benchmarks import load_benchmark

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.slow]

KB = Path(__file__).resolve().parents[2] / "benchmarks" / "kbs" / "tallyhub_support"


async def test_the_graph_decides_as_the_gate_benchmark_replays(store_settings: StoreSettings
                                                               ) -> None:
    if not (KB / "questions.jsonl").is_file():
        pytest.skip(f"no project knowledge base at {KB}")
    from evals.data import load_kb_dir
    from evals.harness import ingested
    from grounded_agent import aask
    from grounded_agent.context import Context
    from grounded_agent.deps import Deps
    from grounded_agent.graph.builder import compile_graph
    from grounded_agent.grounding.judge import load_judge
    from grounded_agent.grounding.judge.gate import gate_verdict, load_gate

    bench = load_benchmark("bench_gate_ceiling")
    kb = load_kb_dir(KB)
    stand_in = load_judge()
    ctx = Context(sources=["knowledge_base"], local_judge_url="http://stand-in.invalid")
    graph_says, replay_says = [], []
    async with ingested(kb) as store:
        graph = compile_graph(Deps(chat_model=None, store=store,
                                   local_judge_factory=lambda c, shipped: stand_in))
        for q in kb.questions:
            found = await store.asearch(q.question, k=ctx.top_k)
            evidence = bench.graph_evidence(q.question, found, ctx)
            verdict = (gate_verdict(q.question, evidence, ctx, stand_in, stand_in, load_gate())
                       if evidence else None)
            replay_says.append(verdict is not None and verdict.can_answer)
            out = await aask(q.question, graph=graph, context=ctx)
            detail = " ".join(t.detail for t in out.trail if t.node == "score_confidence")
            graph_says.append("the local gate finds" in detail)
    assert graph_says == replay_says
    # both ways occur: the comparison is not of two empty lists
    assert 0 < sum(graph_says) < len(graph_says)
