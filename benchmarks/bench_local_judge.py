"""The local judge (issue 47) against the shipped one: its cut-offs chosen on tuning data, its AUC
on held-out questions, the offline agent with and without it, and what it costs.

Two parts, each printing its numbers (and writing them as JSON with --out):

    nice -n 10 .venv/bin/python benchmarks/bench_local_judge.py replay [--url URL] [--write]
        [--tune-per-kind 60] [--test-per-kind 80]
    nice -n 10 .venv/bin/python benchmarks/bench_local_judge.py agent [--url URL]
        [--squad-per-kind 100] [--seed 0] [--kb NAME ...]

`replay` replays the offline agent's first attempt (benchmarks/calibrate_judge.py's steps: the
store's search, the passages at or above the low threshold, the local verdict, the extractive
answer) and, where the rules answer, reads the quoted and the best candidate sentence with both
judges. Tuning data: the judge's tune articles of SQuAD (seed 7 sample per kind) and the tuning half
of each of the six project KBs (`evals.splits.kb_half`); the cut-offs are chosen there by the rule
fixed before the run (grounding/judge/local_cutoffs.json, "rule") and `--write` stores them. Held
out: the judge's test articles and the other KB halves, where it prints the AUC of the quoted
sentence's score between right answers and the rest the rules would answer (both judges, the same
questions, with a bootstrap interval of the difference) and the credited score with no judge, the
shipped judge and the local one.

`table --load FILE` prints, from a `replay --out` file, each held-out set's answerable correct /
abstained / wrong and near-misses (or out-of-KB questions) abstained with no judge, the shipped and
the local judge, as the replay finds them (no server needed).

`agent` runs the whole offline graph (`aask`) on the held-out half of every project KB
(alpenrail_travel included: never tuned on) and a sample of the SQuAD test articles (`python -m
evals`'s stratified sample: --squad-per-kind per kind at --seed), three ways: no judge (veto 0,
margin 1), the shipped judge, the local judge; per set: answerable correct and wrong,
near-misses abstained, out-of-KB abstained, and how often the local judge fell back (the
`judged_by` field of score_confidence's log line); seconds per question (p50/p95) with the local
judge; the server's resident memory (peak) when this script started it.

Without --url, the script starts `scripts/local_model.py serve --model qwen2.5-coder-1.5b-instruct
--judge` (one 2,048-token slot, two threads, at the script's own niceness) and stops it at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import calibrate_judge as cal  # noqa: E402

from evals.data import (  # noqa: E402
    EvalQuestion,
    EvalSet,
    load_blind_kb,
    load_eval_set,
    load_kb_dir,
    stratified_sample,
)
from evals.grading import Graded  # noqa: E402
from evals.harness import arun_sample, ingested  # noqa: E402
from evals.splits import Split, kb_half, select  # noqa: E402
from grounded_agent.context import LOCAL_JUDGE_RULES, Context  # noqa: E402
from grounded_agent.grounding.judge import load_judge  # noqa: E402
from grounded_agent.grounding.judge.local import (  # noqa: E402
    CUTOFFS,
    LocalJudge,
    LocalJudgeUnavailable,
    local_manifest,
)
from grounded_agent.grounding.judge.reading import (  # noqa: E402
    judged_pairs,
    quoted_claims,
    quoted_sentences,
    read,
)
from grounded_agent.prompts.local_judge import LOCAL_JUDGE_PROMPT  # noqa: E402
from grounded_agent.schemas import Finding  # noqa: E402

JUDGE_MODEL = "qwen2.5-coder-1.5b-instruct"
KBS = ROOT / "benchmarks" / "kbs"
BLIND = ROOT / "tests" / "data"
BLIND_TUNE = ("blind_kb3", "blind_kb4")
"""Small KBs written blind whose every unanswerable question sits next to a figure or name of the
same kind stated for something else: tuning sets, so the cut-offs see that kind of question."""
BLIND_TEST = ("blind_kb", "blind_kb2")
"""Written blind the same way: held out, reported only."""
VETOES = (0.0, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
"""The rule's grid (local_cutoffs.json): the shipped judge's, extended above 0.5."""
MARGINS = cal.MARGINS
Row = dict[str, Any]


# -- the server -------------------------------------------------------------------------------

@contextmanager
def judge_server(url: str | None) -> Iterator[tuple[str, dict[str, int]]]:
    """(base URL without /v1, memory) of the given server, or of one started here; `memory` gets
    the llama-server's peak resident kB (VmHWM) when this script started it."""
    memory: dict[str, int] = {}
    if url:
        yield url.rstrip("/").removesuffix("/v1"), memory
        return
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "local_model.py"), "serve", "--model",
         JUDGE_MODEL, "--judge"], stdout=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "LOCAL_MODEL_THREADS": "2"})
    first = proc.stdout.readline().strip() if proc.stdout else ""  # the base URL, once ready
    if not first.startswith("http://"):
        os.killpg(proc.pid, signal.SIGTERM)
        sys.exit(f"the judge server did not start: {first!r}")
    threading.Thread(target=lambda: proc.stdout and proc.stdout.read(), daemon=True).start()
    try:
        yield first.removesuffix("/v1"), memory
    finally:
        memory.update(_server_memory(proc.pid))
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


def _server_memory(parent: int) -> dict[str, int]:
    """VmRSS and VmHWM (kB) of the llama-server process under `parent`."""
    for pid in Path("/proc").iterdir():
        if not pid.name.isdigit():
            continue
        try:
            status = (pid / "status").read_text()
            cmd = (pid / "cmdline").read_bytes()
        except OSError:
            continue
        if b"llama-server" in cmd and f"PPid:\t{parent}\n" in status:
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            return {k: int(fields[k].split()[0]) for k in ("VmRSS", "VmHWM")}
    return {}


def local_judge(url: str, timeout_s: float = 60.0) -> LocalJudge:
    """As the agent builds it, with a generous timeout: here the scores are measured, and a
    reply slower than the agent's timeout is counted by the agent run."""
    return LocalJudge(url=url, shipped=load_judge(), prompt=LOCAL_JUDGE_PROMPT,
                      max_candidates=Context().local_judge_max_candidates, timeout_s=timeout_s,
                      manifest=local_manifest())


# -- replay: cut-offs and AUC -----------------------------------------------------------------

async def collect(eval_set: EvalSet, questions: Sequence[EvalQuestion], judge: LocalJudge
                  ) -> list[Row]:
    """calibrate_judge.collect, with both judges' readings (`j`, `b`: shipped; `lj`, `lb`:
    local) and the local judge's seconds where the rules answer."""
    ctx = Context(sources=["knowledge_base"])
    shipped = load_judge()
    rows: list[Row] = []
    async for q, usable, answers, right in cal.first_attempts(eval_set, list(questions), ctx):
        row: Row = {"id": q.id, "kind": q.kind, "note": q.note, "answers": answers,
                    "right": right, "j": 0.0, "b": 0.0, "lj": 0.0, "lb": 0.0, "s": None}
        if answers:
            mine = read(q.question, usable, shipped)
            row["j"], row["b"] = mine.quoted, mine.best
            started = time.perf_counter()
            try:
                theirs = read(q.question, usable, judge)
            except LocalJudgeUnavailable as exc:
                row["error"] = str(exc)
            else:
                row["lj"], row["lb"] = theirs.quoted, theirs.best
            row["s"] = time.perf_counter() - started
        rows.append(row)
    return rows


def source_of(name: str, squad: EvalSet) -> EvalSet:
    """The evaluation set a replayed set's rows come from, by the set's name."""
    if name.startswith("squad"):
        return squad
    return load_blind_kb(BLIND / name) if name.startswith("blind_") else load_kb_dir(KBS / name)


async def refresh(eval_set: EvalSet, rows: list[Row], judge: LocalJudge) -> int:
    """Bring rows replayed before quoted-first reading up to date: read again, in place, each
    answer whose quoted sentences the judge then left unread (it read only the trained judge's
    top `max_candidates`); any other row is read alike by both rules, so its scores stand. The
    rows' first attempts are replayed to check they are the same. Returns how many were read."""
    ctx = Context(sources=["knowledge_base"])
    by_id = {r["id"]: r for r in rows}
    wanted = [q for q in eval_set.questions if q.id in by_id]
    again = 0
    async for q, usable, answers, right in cal.first_attempts(eval_set, wanted, ctx):
        row = by_id[q.id]
        if (answers, right) != (row["answers"], row["right"]):
            raise SystemExit(f"{q.id}: the first attempt is not the one replayed before")
        if not answers or "error" in row:
            continue
        _, pairs, own = judged_pairs(usable, [quoted_sentences(q.question, usable)])
        ranked = judge.shipped.score(q.question, pairs)
        before = sorted(range(len(pairs)), key=lambda i: -ranked[i])[: judge.max_candidates]
        if all(i in before for i in range(own)):
            continue
        started = time.perf_counter()
        theirs = read(q.question, usable, judge)
        row["lj"], row["lb"], row["s"] = theirs.quoted, theirs.best, time.perf_counter() - started
        row["refreshed"] = True
        again += 1
    return again


def _keep(args: argparse.Namespace, tune: dict[str, list[Row]], test: dict[str, list[Row]]
          ) -> None:
    """The rows read so far, beside --out (FILE.partial), so a run cut short keeps them."""
    if args.out:
        Path(f"{args.out}.partial").write_text(json.dumps({"tune": tune, "test": test}),
                                               encoding="utf-8")


def as_local(rows: list[Row]) -> list[Row]:
    return [{**r, "j": r["lj"], "b": r["lb"]} for r in rows]


def choose(tune: dict[str, list[Row]]) -> tuple[float, float]:
    """The rule fixed before the run (local_cutoffs.json): calibrate_judge.choose over VETOES."""
    base = {name: cal.credited(rows, cal.OFF) for name, rows in tune.items()}

    def gain(cut: tuple[float, float]) -> tuple[float, float]:
        deltas = [cal.credited(as_local(rows), cut) - base[name] for name, rows in tune.items()]
        return min(deltas), sum(deltas) / len(deltas)

    safe = [(v, m) for v in VETOES for m in MARGINS if gain((v, m))[0] >= 0.0]
    return max(safe, key=lambda c: (round(gain(c)[1], 9), -c[0], c[1]))


def auc(pos: Sequence[float], neg: Sequence[float]) -> float:
    """P(a positive scores above a negative), ties half."""
    if not pos or not neg:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def auc_of(rows: list[Row], key: str) -> float:
    answered = [r for r in rows if r["answers"] and "error" not in r]
    return auc([r[key] for r in answered if r["right"]],
               [r[key] for r in answered if not r["right"]])


def auc_difference(rows: list[Row], rounds: int = 1000) -> tuple[float, float]:
    """95% bootstrap interval (over questions) of local AUC minus shipped AUC."""
    answered = [r for r in rows if r["answers"] and "error" not in r]
    rng = random.Random(0)
    diffs = []
    for _ in range(rounds):
        pick = [rng.choice(answered) for _ in answered]
        d = auc_of(pick, "lj") - auc_of(pick, "j")
        if d == d:  # not nan
            diffs.append(d)
    diffs.sort()
    return diffs[int(0.025 * len(diffs))], diffs[int(0.975 * len(diffs)) - 1]


async def replay(args: argparse.Namespace, url: str) -> dict[str, Any]:
    judge = local_judge(url)
    tune: dict[str, list[Row]] = {}
    test: dict[str, list[Row]] = {}
    if args.resume:  # the sets a run cut short read already (its --out FILE.partial)
        kept = json.loads(args.resume.read_text(encoding="utf-8"))
        tune, test = kept["tune"], kept["test"]
    squad = load_eval_set(cal.SQUAD / "questions.jsonl", cal.SQUAD / "kb_corpus.jsonl")
    if args.refresh:
        for split, sets in (("tune", tune), ("test", test)):
            for name, rows in sets.items():
                source = source_of(name, squad)
                again = await refresh(source, rows, judge)
                print(f"{split} {name}: {again} of {len(rows)} read again", file=sys.stderr,
                      flush=True)
                _keep(args, tune, test)
    splits: tuple[tuple[Split, dict[str, list[Row]], int], ...] = (
        ("tune", tune, args.tune_per_kind), ("test", test, args.test_per_kind))
    for split, into, per_kind in splits:
        if split == "test" and args.squad_seeds:  # the sample: per kind, per seed
            for seed in args.squad_seeds:
                if f"squad-s{seed}" in into:
                    continue
                into[f"squad-s{seed}"] = await collect(
                    squad, stratified_sample(select(squad.questions, "test"), per_kind, seed),
                    judge)
                print(f"squad test seed {seed}: read", file=sys.stderr, flush=True)
                _keep(args, tune, test)
            continue
        if "squad" in into:
            continue
        into["squad"] = await collect(squad, cal.sample(select(squad.questions, split), per_kind),
                                      judge)
        print(f"squad {split}: read", file=sys.stderr, flush=True)
        _keep(args, tune, test)
    for name in cal.TUNING_KBS:
        if name in tune:
            continue
        kb = load_kb_dir(KBS / name)
        rows = await collect(kb, kb.questions, judge)
        tune[name] = [r for r in rows if kb_half(r["id"]) == "tune"]
        test[name] = [r for r in rows if kb_half(r["id"]) == "test"]
        print(f"{name}: read", file=sys.stderr, flush=True)
        _keep(args, tune, test)
    for names, into in ((BLIND_TUNE, tune), (BLIND_TEST, test)):
        for name in names:
            if name in into:
                continue
            blind = load_blind_kb(BLIND / name)
            into[name] = await collect(blind, blind.questions, judge)
            print(f"{name}: read", file=sys.stderr, flush=True)
            _keep(args, tune, test)
    cut = choose(tune)
    shipped = (load_judge().manifest.veto, load_judge().manifest.margin)
    report: dict[str, Any] = {"veto": cut[0], "margin": cut[1], "sets": {}}
    for label, sets in (("tune", tune), ("test", test)):
        print(f"== {label}: credited (no judge / shipped {shipped} / local {cut})")
        for name, rows in sets.items():
            line = {"questions": len(rows),
                    "judged": sum(1 for r in rows if r["answers"]),
                    "errors": sum(1 for r in rows if "error" in r),
                    "none": round(cal.credited(rows, cal.OFF), 4),
                    "shipped": round(cal.credited(rows, shipped), 4),
                    "local": round(cal.credited(as_local(rows), cut), 4),
                    "rates_shipped": cal.rates(rows, shipped),
                    "rates_local": cal.rates(as_local(rows), cut)}
            report["sets"][f"{label}/{name}"] = line
            print(f"{name:20s} {line['questions']:4d} q ({line['judged']} judged, "
                  f"{line['errors']} errors)  {line['none']:+.3f} / {line['shipped']:+.3f} / "
                  f"{line['local']:+.3f}   shipped: {line['rates_shipped']}   local: "
                  f"{line['rates_local']}")
    held = [r for rows in test.values() for r in rows]
    held_squad = [r for n, rows in test.items() if n.startswith("squad") for r in rows]
    held_kbs = [r for n, rows in test.items() if not n.startswith("squad") for r in rows]
    print("== AUC of the quoted sentence's score, right answers vs the rest the rules answer "
          "(held out)")
    for label, rows in (("all held out", held), ("squad test", held_squad),
                        ("KB halves, blind KBs", held_kbs)):
        answered = [r for r in rows if r["answers"] and "error" not in r]
        lo, hi = auc_difference(rows)
        report[f"auc/{label}"] = {"answered": len(answered),
                                  "right": sum(1 for r in answered if r["right"]),
                                  "shipped": round(auc_of(rows, "j"), 4),
                                  "local": round(auc_of(rows, "lj"), 4),
                                  "difference_95": [round(lo, 4), round(hi, 4)]}
        a = report[f"auc/{label}"]
        print(f"{label:16s} {a['answered']} answered ({a['right']} right): shipped "
              f"{a['shipped']:.3f}, local {a['local']:.3f} (difference {lo:+.3f} to {hi:+.3f})")
    seconds = sorted(r["s"] for rows in (*tune.values(), *test.values()) for r in rows
                     if r["s"] is not None)
    report["judge_seconds"] = {"questions": len(seconds), "p50": statistics.median(seconds),
                               "p95": seconds[int(0.95 * (len(seconds) - 1))]}
    print(f"local judge per judged question: p50 {report['judge_seconds']['p50']:.2f} s, p95 "
          f"{report['judge_seconds']['p95']:.2f} s ({len(seconds)} questions)")
    report["rows"] = {"tune": tune, "test": test}
    if args.write:
        raw = json.loads(CUTOFFS.read_text())
        raw.update(veto=cut[0], margin=cut[1], status=(
            "chosen by benchmarks/bench_local_judge.py replay --write by the rule below: "
            f"SQuAD tune articles {args.tune_per_kind} per kind (seed 7), the six project "
            f"KBs' tuning halves and the blind tuning KBs ({', '.join(BLIND_TUNE)})"))
        raw["tuning"] = {k.split("/", 1)[1]: {x: v[x] for x in ("questions", "none", "local")}
                         for k, v in report["sets"].items() if k.startswith("tune/")}
        CUTOFFS.write_text(json.dumps(raw, indent=2) + "\n")
        print(f"written to {CUTOFFS}")
    return report


def quoted_passages(question: str, evidence: Sequence[Finding]) -> list[tuple[str, str]]:
    """(title, text) of each passage the offline answer quotes from, in the answer's order."""
    return list(dict.fromkeys((f.title, f.text) for f, _ in quoted_claims(question, evidence) if f))


def as_passage(rows: list[Row]) -> list[Row]:
    """The passage's P(yes) as the reading; no margin (nothing else is read to compare with)."""
    return [{**r, "j": r.get("pj", 0.0), "b": r.get("pj", 0.0)} for r in rows]


async def passages(args: argparse.Namespace, url: str) -> dict[str, Any]:
    """The other unit the issue allows: the local judge reads each passage the answer quotes
    from, whole, instead of sentences. Same rows (a `replay --out` file), same rule for its
    veto, same held-out report; the unit with the larger mean credited gain on the tuning sets
    would be the one to ship."""
    judge = local_judge(url)
    kept = json.loads(args.resume.read_text(encoding="utf-8"))
    kept = kept.get("rows", kept)
    test = {n: r for n, r in kept["test"].items() if not n.startswith("squad")}
    tune = kept["tune"]
    test.update((n, kept["test"][n]) for n in args.sets if n)  # SQuAD last: the longest
    squad = load_eval_set(cal.SQUAD / "questions.jsonl", cal.SQUAD / "kb_corpus.jsonl")
    ctx = Context(sources=["knowledge_base"])
    for split, sets in (("tune", tune), ("test", test)):
        for name, rows in sets.items():
            if all("pj" in r or not r["answers"] or "error" in r for r in rows):
                continue
            source = source_of(name, squad)
            by_id = {r["id"]: r for r in rows}
            wanted = [q for q in source.questions if q.id in by_id]
            async for q, usable, answers, right in cal.first_attempts(source, wanted, ctx):
                row = by_id[q.id]
                if (answers, right) != (row["answers"], row["right"]):
                    raise SystemExit(f"{q.id}: the first attempt is not the one replayed before")
                if not answers or "error" in row or "pj" in row:
                    continue
                said = quoted_passages(q.question, usable)
                started = time.perf_counter()
                row["pj"] = max(judge.score(q.question, said, quoted=len(said)), default=0.0)
                row["ps"] = time.perf_counter() - started
            print(f"{split} {name}: passages read", file=sys.stderr, flush=True)
            _keep(args, tune, test)
    base = {name: cal.credited(rows, cal.OFF) for name, rows in tune.items()}
    cut = choose({n: as_passage(r) for n, r in tune.items()})
    sentence_cut = (local_manifest().veto, local_manifest().margin)
    report: dict[str, Any] = {"veto": cut[0], "sets": {}}
    for label, sets in (("tune", tune), ("test", test)):
        print(f"== {label}: credited (no judge / local, sentences {sentence_cut} / local, "
              f"passages veto {cut[0]})")
        for name, rows in sets.items():
            line = {"none": cal.credited(rows, cal.OFF),
                    "sentences": cal.credited(as_local(rows), sentence_cut),
                    "passages": cal.credited(as_passage(rows), cut),
                    "outcomes_sentences": outcomes(as_local(rows), sentence_cut),
                    "outcomes_passages": outcomes(as_passage(rows), cut)}
            report["sets"][f"{label}/{name}"] = line
            print(f"{name:20s} {len(rows):4d} q  {line['none']:+.3f} / {line['sentences']:+.3f}"
                  f" / {line['passages']:+.3f}")
        if label == "tune":
            gains = {k: statistics.mean(report["sets"][f"tune/{n}"][k] - base[n] for n in tune)
                     for k in ("sentences", "passages")}
            report["mean_gain_tune"] = gains
            print(f"mean credited gain over no judge on the tuning sets: sentences "
                  f"{gains['sentences']:+.4f}, passages {gains['passages']:+.4f}")
    held = [r for rows in test.values() for r in rows if "pj" in r]
    for key, label in (("j", "shipped, sentences"), ("lj", "local, sentences"),
                       ("pj", "local, passages")):
        report[f"auc/{key}"] = auc_of(held, key)
        print(f"AUC held out ({len(held)} answered): {label} {report[f'auc/{key}']:.3f}")
    seconds = sorted(r["ps"] for rows in (*tune.values(), *test.values()) for r in rows
                     if "ps" in r)
    report["passage_seconds"] = {"questions": len(seconds), "p50": statistics.median(seconds),
                                 "p95": seconds[int(0.95 * (len(seconds) - 1))]}
    print(f"passages per judged question: p50 {report['passage_seconds']['p50']:.2f} s, p95 "
          f"{report['passage_seconds']['p95']:.2f} s ({len(seconds)} questions)")
    report["rows"] = {"tune": tune, "test": test}
    return report


def outcomes(rows: list[Row], cut: tuple[float, float]) -> dict[str, float | None]:
    """The evaluation's shares (benchmarks/results/evaluation.md) for replayed rows under `cut`:
    answerable correct / abstained / wrong, near-misses and out-of-KB questions abstained."""
    ans = [r for r in rows if r["kind"] == "answerable"]
    near = [r for r in rows if r.get("note") == "near_miss"]
    away = [r for r in rows if r["kind"] == "out_of_kb"]
    said = [r for r in ans if cal.stands(r, cut)]

    def share(part: int, whole: list[Row]) -> float | None:
        return part / len(whole) if whole else None

    return {"answerable": len(ans),
            "correct": share(sum(1 for r in said if r["right"]), ans),
            "abstained": share(len(ans) - len(said), ans),
            "wrong": share(sum(1 for r in said if not r["right"]), ans),
            "near_miss": len(near),
            "near_miss_abstained": share(sum(1 for r in near if not cal.stands(r, cut)), near),
            "out_of_kb": len(away),
            "out_of_kb_abstained": share(sum(1 for r in away if not cal.stands(r, cut)), away)}


def table(args: argparse.Namespace) -> dict[str, Any]:
    """The held-out table from a `replay --out` file: per set, no judge / shipped / local judge,
    the first attempt replayed (offline, weak evidence is final: grounding.confidence
    .offline_verdict, so the first attempt is the offline answer but for the citation check)."""
    report = json.loads(args.load.read_text(encoding="utf-8"))
    shipped = (load_judge().manifest.veto, load_judge().manifest.margin)
    local = (float(report["veto"]), float(report["margin"]))
    out: dict[str, Any] = {}

    def cell(o: dict[str, float | None]) -> str:
        def pct(x: float | None) -> str:
            return "-" if x is None else f"{100 * x:.1f}"
        held = o["near_miss_abstained"] if o["near_miss"] else o["out_of_kb_abstained"]
        return f"{pct(o['correct'])} / {pct(o['abstained'])} / {pct(o['wrong'])}, {pct(held)}"

    print(f"| held-out set | questions | no judge | shipped {shipped} | local {local} |")
    print("|---|---|---|---|---|")
    for name, rows in report["rows"]["test"].items():
        ways = {"none": outcomes(rows, cal.OFF), "shipped": outcomes(rows, shipped),
                "local": outcomes([{**r, "j": r["lj"], "b": r["lb"]} for r in rows], local)}
        out[name] = ways
        print(f"| {name} | {len(rows)} | " + " | ".join(cell(o) for o in ways.values()) + " |")
    return out


# -- the agent ----------------------------------------------------------------------------------

class JudgedBy(logging.Handler):
    """Counts score_confidence's log lines by who judged (`judged_by`, set where a local judge
    was asked): decided, or unavailable and the trained judge decided."""

    def __init__(self) -> None:
        super().__init__()
        self.decided = self.fell_back = 0

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = json.loads(record.getMessage())
        except ValueError:
            return
        who = str(line.get("judged_by") or "") if line.get("node") == "score_confidence" else ""
        self.decided += who.startswith(("local judge decided", "local gate decided"))
        self.fell_back += who.startswith("local judge unavailable")


def rates(rows: Sequence[Graded]) -> dict[str, Any]:
    answerable = [r for r in rows if r.kind == "answerable"]
    near = [r for r in rows if r.note == "near_miss"]
    out_of_kb = [r for r in rows if r.kind == "out_of_kb"]
    other = [r for r in rows if r.kind != "answerable"]
    said = ("answered", "answered_with_caveat", "partial")
    return {
        "questions": len(rows),
        "correct": sum(r.outcome == "correct" for r in answerable) / max(1, len(answerable)),
        "wrong": (sum(r.outcome in ("wrong", "hallucinated") for r in answerable)
                  / max(1, len(answerable))),  # as benchmarks/results/evaluation.md counts it
        "abstained_unanswerable": sum(r.status not in said for r in other) / max(1, len(other)),
        "near_miss": len(near),
        "near_miss_abstained": (sum(r.status not in said for r in near) / len(near)
                                if near else None),
        "out_of_kb_abstained": (sum(r.status not in said for r in out_of_kb) / len(out_of_kb)
                                if out_of_kb else None),
    }


async def agent(args: argparse.Namespace, url: str) -> dict[str, Any]:
    from grounded_agent.graph.builder import build_graph

    ways: dict[str, dict[str, Any]] = {"none": {"judge_veto": 0.0, "judge_margin": 1.0}, "shipped": {},
            "local": {"local_judge_url": url, "local_judge_rule": args.rule}}
    squad = load_eval_set(cal.SQUAD / "questions.jsonl", cal.SQUAD / "kb_corpus.jsonl")
    sets: list[tuple[str, EvalSet, list[EvalQuestion]]] = [
        (f"squad (test articles, {args.squad_per_kind} per kind, seed {args.seed})", squad,
         stratified_sample(select(squad.questions, "test"), args.squad_per_kind, args.seed))
    ] if args.squad_per_kind > 0 else []
    for kb_dir in sorted(p for p in KBS.iterdir() if (p / "questions.jsonl").is_file()
                         and (not args.kb or p.name in args.kb)):
        kb = load_kb_dir(kb_dir)
        sets.append((kb_dir.name, kb, [q for q in kb.questions if kb_half(q.id) == "test"]))
    out: dict[str, Any] = {}
    seconds: list[float] = []
    counter = JudgedBy()
    logging.getLogger("grounded_agent.decisions").addHandler(counter)
    logging.getLogger("grounded_agent.decisions").setLevel(logging.INFO)
    print("| set | questions | no judge: correct / wrong / near-miss (or out-of-KB) abstained "
          "| shipped | local | local judge decided / fell back |")
    print("|---|---|---|---|---|---|")
    for name, eval_set, questions in sets:
        async with ingested(eval_set) as store:
            graph = build_graph(chat_model=None, store=store)
            res: dict[str, Any] = {}
            for way, extra in ways.items():
                ctx = Context(sources=["knowledge_base"], **extra)
                counter.decided = counter.fell_back = 0
                run = await arun_sample(questions, store=store, graph=graph, ctx=ctx,
                                        systems=("full_graph",), concurrency=1, progress=False)
                res[way] = rates(run.rows)
                if way == "local":
                    seconds += [r.latency_ms / 1000 for r in run.rows]
                    res["local_decided"], res["fell_back"] = counter.decided, counter.fell_back
        out[name] = res
        cells = []
        for way in ways:
            r = res[way]
            held = (r["near_miss_abstained"] if r["near_miss_abstained"] is not None
                    else r["out_of_kb_abstained"])
            near = "-" if held is None else f"{held:.0%}"
            cells.append(f"{r['correct']:.1%} / {r['wrong']:.1%} / {near}")
        print(f"| {name} | {res['local']['questions']} | " + " | ".join(cells)
              + f" | {res['local_decided']} / {res['fell_back']} |", flush=True)
    seconds.sort()
    out["seconds_per_question"] = {"questions": len(seconds), "p50": statistics.median(seconds),
                                   "p95": seconds[int(0.95 * (len(seconds) - 1))]}
    print(f"with the local judge, seconds per question (all sets, concurrency 1): p50 "
          f"{out['seconds_per_question']['p50']:.2f}, p95 {out['seconds_per_question']['p95']:.2f}"
          f" ({len(seconds)} questions)")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="part", required=True)
    p_replay = sub.add_parser("replay", help="cut-offs on tuning data, AUC on held-out data")
    p_replay.add_argument("--tune-per-kind", type=int, default=60)
    p_replay.add_argument("--test-per-kind", type=int, default=80)
    p_replay.add_argument("--write", action="store_true", help="store the cut-offs")
    p_replay.add_argument("--resume", type=Path, default=None,
                          help="keep the sets of a run cut short (its --out FILE.partial)")
    p_replay.add_argument("--refresh", action="store_true",
                          help="with --resume from a run before quoted-first reading: read "
                          "again only the answers whose quoted sentences went unread")
    p_replay.add_argument("--squad-seeds", type=lambda v: [int(x) for x in v.split(",")],
                          default=[], help="test articles as `python -m evals` samples them "
                          "(--test-per-kind per kind for each seed, e.g. 0,1,2) instead of seed 7")
    p_agent = sub.add_parser("agent", help="the offline graph with no, shipped and local judge")
    p_agent.add_argument("--squad-per-kind", type=int, default=100)
    p_agent.add_argument("--seed", type=int, default=0)
    p_agent.add_argument("--rule", choices=LOCAL_JUDGE_RULES, default="gate",
                         help="how the local judge decides (Context.local_judge_rule)")
    p_agent.add_argument("--kb", action="append", default=[],
                         help="only this project KB (repeatable; --squad-per-kind 0: no SQuAD)")
    p_pass = sub.add_parser("passages", help="whole passages read instead of sentences")
    p_pass.add_argument("--resume", type=Path, required=True, help="a replay --out file")
    p_pass.add_argument("--sets", type=lambda v: v.split(","), default=["squad-s0"],
                        help="held-out SQuAD sets to read (the KBs' halves always)")
    for p in (p_replay, p_agent, p_pass):
        p.add_argument("--url", default=None, help="a running llama-server (else one is started)")
        p.add_argument("--out", type=Path, default=None, help="also write the numbers here")
    p_table = sub.add_parser("table", help="the held-out table from a replay --out file")
    p_table.add_argument("--load", type=Path, required=True)
    args = parser.parse_args()
    if args.part == "table":
        table(args)
        return 0
    with judge_server(args.url) as (url, memory):
        parts = {"replay": replay, "agent": agent, "passages": passages}
        report = asyncio.run(parts[args.part](args, url))
    if memory:
        report["server_memory_kb"] = memory
        print(f"llama-server resident memory: {memory.get('VmRSS', 0) / 1024:.0f} MB now, peak "
              f"{memory.get('VmHWM', 0) / 1024:.0f} MB")
    if args.out:
        args.out.write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
