"""The offline agent on a small KB written blind (tests/data/blind_kb: four everyday businesses,
12 answerable questions and 12 that ask for something the documents do not state, each placed
next to a tempting figure or name; written by someone who never read the project's code).

    .venv/bin/python benchmarks/bench_blind_kb.py

Prints each question's outcome, then the answerable questions answered with their answer and the
unstated ones answered anyway (each one a wrong answer). About a minute on two cores.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KB = ROOT / "tests" / "data" / "blind_kb"
ANSWERED = ("answered", "answered_with_caveat", "partial")


def main() -> int:
    from grounded_agent import ask, build_graph
    from grounded_agent.store import ingest_paths, open_store

    store = open_store(table_name=f"blind_{uuid.uuid4().hex[:8]}")
    try:
        ingest_paths([KB / "docs"], store)
        graph = build_graph(chat_model=None, store=store)
        right = wrong = answerable = unstated = 0
        for line in (KB / "questions.jsonl").read_text("utf-8").splitlines():
            q = json.loads(line)
            r = ask(q["question"], graph=graph)
            said = r.status in ANSWERED
            if q["kind"] == "unstated":
                unstated += 1
                wrong += said
                mark = "WRONG" if said else "ok"
            else:
                answerable += 1
                hit = said and q["answer"].lower() in r.answer.lower()
                right += hit
                mark = "ok" if hit else "missed"
            print(f"{q['id']} {q['kind']:<10} {q['asks_for']:<8} {r.status:<20} {mark:<6} {q['question']}")
        print(f"\nanswerable answered right: {right}/{answerable}; "
              f"unstated answered anyway: {wrong}/{unstated}")
    finally:
        store.run_sync(store.adrop())
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
