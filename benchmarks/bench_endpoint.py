"""Endpoint concurrency: 50 concurrent /agent/invoke requests against one, on a loopback port.

    python benchmarks/bench_endpoint.py [--concurrent 50] [--latency 0.2] [--json]

The app is grounded_agent.serve.app.create_app with a graph built from a scripted model of fixed
latency (non-blocking, like an API round trip) and an in-process knowledge base, served by uvicorn
on a free 127.0.0.1 port with the server's default concurrency limit (64); a second round with a
limit of 8 shows how the endpoint sheds load it will not take.
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
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # evals/ and tests/ live in the checkout, not the wheel

from bench_graph import QUESTION, in_process_tool

TARGET_RATIO = 3.0


async def _round(base: str, n: int) -> dict[str, Any]:
    import httpx

    async def one(client: httpx.AsyncClient) -> tuple[int, float, str]:
        t0 = time.perf_counter()
        try:
            r = await client.post(f"{base}/agent/invoke", json={"input": {"question": QUESTION}})
            status = (r.json().get("output") or {}).get("status", "") if r.status_code == 200 else ""
            return r.status_code, (time.perf_counter() - t0) * 1000, status
        except httpx.HTTPError as exc:
            return 0, (time.perf_counter() - t0) * 1000, type(exc).__name__

    limits = httpx.Limits(max_connections=n + 5, max_keepalive_connections=n + 5)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        await one(client)  # warm-up: first request builds what is built lazily
        single = [await one(client) for _ in range(5)]
        t0 = time.perf_counter()
        many = await asyncio.gather(*(one(client) for _ in range(n)))
        wall = (time.perf_counter() - t0) * 1000
    one_ms = statistics.median(ms for _, ms, _ in single)
    codes: dict[str, int] = {}
    for code, _, _ in many:
        codes[str(code)] = codes.get(str(code), 0) + 1
    answered = sum(1 for code, _, status in many if code == 200 and status == "answered")
    return {
        "single_request_ms": round(one_ms, 1),
        "concurrent": n,
        "wall_ms": round(wall, 1),
        "ratio": round(wall / one_ms, 2),
        "status_codes": codes,
        "errors": sum(1 for code, _, _ in many if code != 200),
        "answered": answered,
        "latency_ms_p50": round(statistics.median(ms for _, ms, _ in many), 1),
        "latency_ms_max": round(max(ms for _, ms, _ in many), 1),
    }


def _default_limit() -> int:
    from grounded_agent.serve.app import ServeSettings

    return ServeSettings().max_concurrency


def bench(concurrent: int, latency_s: float, max_concurrency: int) -> dict[str, Any]:
    from evals.scripted import DecisionFollowingModel
    from grounded_agent import build_graph
    from grounded_agent.serve.app import ServeSettings, create_app
    from grounded_agent.store import open_store
    from tests.support.serving import serving

    graph = build_graph(chat_model=DecisionFollowingModel(latency_s=latency_s),
                        tools={"knowledge_base": in_process_tool()})
    app = create_app(graph, store=open_store(), threads=False,
                     settings=ServeSettings(max_concurrency=max_concurrency))
    with serving(app) as base:
        result = asyncio.run(_round(base, concurrent))
    result["server_max_concurrency"] = max_concurrency
    result["model_latency_s"] = latency_s
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--concurrent", type=int, default=50)
    p.add_argument("--latency", type=float, default=0.2, help="model latency per call, seconds")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    out = {
        "default_limit": bench(args.concurrent, args.latency, _default_limit()),
        "limit_8": bench(args.concurrent, args.latency, 8),
    }
    a, d = out["default_limit"], out["limit_8"]
    print(f"endpoint, {a['concurrent']} concurrent requests, model latency {args.latency * 1000:.0f} ms "
          f"per call: one request {a['single_request_ms']:.0f} ms, all {a['wall_ms']:.0f} ms = "
          f"{a['ratio']:.2f}x (target <= {TARGET_RATIO}x) "
          f"{'met' if a['ratio'] <= TARGET_RATIO else 'NOT met'}; errors {a['errors']} (target 0), "
          f"answered {a['answered']}/{a['concurrent']}", file=sys.stderr)
    print(f"  with a limit of 8 in flight: {d['status_codes']} in {d['wall_ms']:.0f} ms "
          "(503 = shed with Retry-After, by design)", file=sys.stderr)
    out["target_ratio"] = TARGET_RATIO  # type: ignore[assignment]
    if args.json:
        print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
