"""The offline agent on the small KBs written blind and held out (tests/data/blind_kb: four
everyday businesses, 12 answerable questions and 12 that ask for something the documents do not
state; tests/data/blind_kb2: five businesses, 15 and 15; each unstated question placed next to a
figure or name of the same kind stated for something else; written by helpers that never read the
project's code). blind_kb3 and blind_kb4, written the same way, tune the local judge and are not
run here unless named.

    .venv/bin/python benchmarks/bench_blind_kb.py [KB_DIR ...]

Prints each question's outcome, then per KB the answerable questions answered right and the
unstated ones answered anyway (each one a wrong answer). Offline; with
GROUNDED_AGENT_LOCAL_JUDGE_URL set, with the local judge. About a minute per KB on two cores.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HELD_OUT = (ROOT / "tests" / "data" / "blind_kb", ROOT / "tests" / "data" / "blind_kb2")
ANSWERED = ("answered", "answered_with_caveat", "partial")


def run(kb: Path) -> tuple[int, int, int, int]:
    """(answerable right, answerable, unstated answered, unstated) through the whole graph."""
    from grounded_agent import ask, build_graph
    from grounded_agent.store import ingest_paths, open_store

    store = open_store(table_name=f"blind_{uuid.uuid4().hex[:8]}")
    try:
        ingest_paths([kb / "docs"], store)
        graph = build_graph(chat_model=None, store=store)
        right = wrong = answerable = unstated = 0
        for line in (kb / "questions.jsonl").read_text("utf-8").splitlines():
            if not line.strip():
                continue
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
            print(f"{q['id']} {q['kind']:<10} {q['asks_for']:<8} {r.status:<20} {mark:<6} "
                  f"{q['question']}")
    finally:
        store.run_sync(store.adrop())
        store.close()
    return right, answerable, wrong, unstated


def main(argv: list[str]) -> int:
    kbs = [Path(a) for a in argv] or list(HELD_OUT)
    totals = []
    for kb in kbs:
        print(f"== {kb.name}")
        totals.append((kb.name, run(kb)))
    for name, (right, answerable, wrong, unstated) in totals:
        print(f"{name}: answerable answered right: {right}/{answerable}; "
              f"unstated answered anyway: {wrong}/{unstated}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
