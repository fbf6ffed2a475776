"""PNG plots of an evaluation run (matplotlib, the dev extra): outcomes, score distributions and
the reliability of the relevance score."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evals.baselines import SYSTEMS
from evals.data import KINDS
from evals.grading import OUTCOMES, Graded

COLOURS = {"correct": "#2e7d32", "abstained": "#9e9e9e", "wrong": "#ef6c00", "hallucinated": "#c62828"}
RELIABILITY_BINS = 10
MIN_BIN = 5
"""Fewest questions of a kind a knowledge base needs for its line in `write_relevance_by_kb`."""


def _pyplot() -> Any:
    """matplotlib's pyplot on the file-only Agg backend, or None without the dev extra."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def reliability_bins(
    points: Sequence[tuple[float | None, bool, bool]], n_bins: int = RELIABILITY_BINS
) -> list[dict[str, Any]]:
    """Reliability of the relevance score: equal-width bins of [0, 1] over the best passage's
    calibrated relevance in each question's top-k search, and per bin the share of questions that
    are answerable with the gold document retrieved (in the top k; `share_gold_top1`: ranked
    first). A score that means the same on every KB gives the same curve on every KB.

    `points`: (best relevance or None when the search failed, answerable and gold in top k,
    answerable and gold top-1) per question; questions without a score are left out.
    """
    return _binned(points, [i / n_bins for i in range(n_bins + 1)], "{:.1f}-{:.1f}")


def _binned(
    points: Sequence[tuple[float | None, bool, bool]], edges: Sequence[float], label: str
) -> list[dict[str, Any]]:
    n_bins = len(edges) - 1
    counts = [[0, 0, 0] for _ in range(n_bins)]
    for score, retrieved, top1 in points:
        if score is None:
            continue
        i = next((j for j in range(n_bins - 1) if score < edges[j + 1]), n_bins - 1)
        counts[i][0] += 1
        counts[i][1] += bool(retrieved)
        counts[i][2] += bool(top1)
    bins: list[dict[str, Any]] = []
    for i, (n, hit, top) in enumerate(counts):
        lo, hi = edges[i], edges[i + 1]
        bins.append({
            "bin": label.format(lo, hi),
            "lo": round(lo, 4), "hi": round(hi, 4), "n": n,
            "share": round(hit / n, 4) if n else None,
            "share_gold_top1": round(top / n, 4) if n else None,
        })
    return bins


def write_reliability_plot(
    bins: Sequence[dict[str, Any]], path: Path, title: str = "",
    thresholds: Sequence[float] = (),
) -> Path | None:
    """reliability.png: share answerable-and-gold-retrieved per relevance bin, with the number of
    questions per bin beneath; None when matplotlib is not installed or there are no points."""
    if not any(b["n"] for b in bins):
        return None
    plt = _pyplot()
    if plt is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    mids = [(b["lo"] + b["hi"]) / 2 for b in bins]
    width = (bins[0]["hi"] - bins[0]["lo"]) * 0.9
    fig, (ax, axn) = plt.subplots(2, 1, figsize=(6.5, 5.2), sharex=True,
                                  gridspec_kw={"height_ratios": [3, 1]})
    ax.plot([0, 1], [0, 1], color="#bdbdbd", linestyle=":", label="identity")
    pts = [(m, b["share"]) for m, b in zip(mids, bins, strict=True) if b["share"] is not None]
    top = [(m, b["share_gold_top1"]) for m, b in zip(mids, bins, strict=True)
           if b["share_gold_top1"] is not None]
    ax.plot([m for m, _ in pts], [v for _, v in pts], marker="o", color="#1565c0",
            label="answerable, gold in top k")
    ax.plot([m for m, _ in top], [v for _, v in top], marker=".", color="#90caf9",
            linestyle="--", label="answerable, gold top-1")
    for t in thresholds:
        ax.axvline(t, color="#c62828", linestyle="--", linewidth=0.8)
        axn.axvline(t, color="#c62828", linestyle="--", linewidth=0.8)
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel("share of questions in bin")
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(f"Relevance reliability{f': {title}' if title else ''}")
    axn.bar(mids, [b["n"] for b in bins], width=width, color="#9e9e9e")
    axn.set_ylabel("questions")
    axn.set_xlabel("best calibrated relevance of the top-k search")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_relevance_by_kb(
    bands: Mapping[str, Mapping[str, Any]], path: Path, group_labels: Mapping[str, str],
) -> Path | None:
    """relevance_by_kb.png: one panel per kind of question, one line per knowledge base: the
    share of that kind's questions whose best relevance is below x. A score that means the same
    on any KB draws the same line for every KB in each panel; the cut-offs are the red lines.
    None without matplotlib or without two knowledge bases."""
    with_hist = {kb: b for kb, b in bands.items() if b.get("hist")}
    if len(with_hist) < 2:
        return None
    plt = _pyplot()
    if plt is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    groups = [g for g in group_labels if any(g in b["hist"] for b in with_hist.values())]
    fig, axes = plt.subplots(1, len(groups), figsize=(4.2 * len(groups), 4), sharey=True,
                             squeeze=False)
    colours = {kb: plt.get_cmap("tab10")(i % 10) for i, kb in enumerate(with_hist)}
    for ax, group in zip(axes[0], groups, strict=True):
        for kb, b in with_hist.items():
            counts = b["hist"].get(group)
            if not counts or sum(counts) < MIN_BIN:
                continue
            total, run, xs, ys = sum(counts), 0, [0.0], [0.0]
            for i, c in enumerate(counts):
                run += c
                xs.append((i + 1) / len(counts))
                ys.append(run / total)
            ax.plot(xs, ys, drawstyle="steps-post", color=colours[kb], label=f"{kb} ({total})")
        for t in next(iter(with_hist.values()))["cuts"]:
            ax.axvline(t, color="#c62828", linestyle="--", linewidth=0.8)
        ax.set_xlim(0, 1)
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(group_labels[group], fontsize=10)
        ax.set_xlabel("best calibrated relevance")
        ax.legend(fontsize=6, loc="upper left")
    axes[0][0].set_ylabel("share of the kind's questions below x")
    fig.suptitle("Where each kind of question falls, per knowledge base")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_plots(rows: Sequence[Graded], directory: Path) -> list[Path]:
    """outcomes.png, scores.png and relevance.png; [] when matplotlib is not installed.
    (reliability.png is `write_reliability_plot`'s, from the report's bins.)"""
    plt = _pyplot()
    if plt is None:
        return []
    directory.mkdir(parents=True, exist_ok=True)
    systems = [s for s in SYSTEMS if any(r.system == s for r in rows)]
    kinds = [k for k in KINDS if any(r.kind == k for r in rows)]
    written: list[Path] = []

    # outcome shares, stacked, one panel per kind, one bar per system
    fig, axes = plt.subplots(1, len(kinds), figsize=(4.2 * len(kinds), 4), sharey=True, squeeze=False)
    for ax, kind in zip(axes[0], kinds, strict=True):
        bottoms = [0.0] * len(systems)
        for outcome in OUTCOMES:
            shares = []
            for s in systems:
                sel = [r for r in rows if r.system == s and r.kind == kind]
                shares.append(sum(1 for r in sel if r.outcome == outcome) / len(sel) if sel else 0.0)
            ax.bar(systems, shares, bottom=bottoms, color=COLOURS[outcome], label=outcome)
            bottoms = [b + x for b, x in zip(bottoms, shares, strict=True)]
        ax.set_title(kind)
        ax.set_ylim(0, 1)
        ax.tick_params(axis="x", rotation=20)
    axes[0][0].set_ylabel("share of questions")
    axes[0][-1].legend(loc="upper right", fontsize=8)
    fig.suptitle("Outcome per kind and system")
    fig.tight_layout()
    written.append(directory / "outcomes.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)

    # score distribution (-1 / 0 / +1) per kind, grouped by system
    fig, axes = plt.subplots(1, len(kinds), figsize=(4.2 * len(kinds), 4), sharey=True, squeeze=False)
    width = 0.8 / max(1, len(systems))
    for ax, kind in zip(axes[0], kinds, strict=True):
        for i, s in enumerate(systems):
            sel = [r for r in rows if r.system == s and r.kind == kind]
            counts = [sum(1 for r in sel if r.score == v) / max(1, len(sel)) for v in (-1, 0, 1)]
            ax.bar([x + (i - (len(systems) - 1) / 2) * width for x in (-1, 0, 1)], counts,
                   width=width, label=s)
        ax.set_xticks([-1, 0, 1])
        ax.set_title(kind)
        ax.set_xlabel("score")
    axes[0][0].set_ylabel("share of questions")
    axes[0][-1].legend(fontsize=8)
    fig.suptitle("Score distribution per kind")
    fig.tight_layout()
    written.append(directory / "scores.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)

    # best calibrated relevance of the shared search, per kind: how far thresholds can separate
    base = "thresholds_only" if "thresholds_only" in systems else None
    if base:
        fig, ax = plt.subplots(figsize=(6.5, 4))
        for kind in kinds:
            vals = [r.best_score for r in rows if r.system == base and r.kind == kind
                    and r.best_score is not None]
            if vals:
                ax.hist(vals, bins=20, range=(0, 1), alpha=0.5, label=kind)
        ax.set_xlabel("best calibrated relevance of the top-k search")
        ax.set_ylabel("questions")
        ax.legend(fontsize=8)
        ax.set_title("Relevance score distribution per kind")
        fig.tight_layout()
        written.append(directory / "relevance.png")
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)
    return written
