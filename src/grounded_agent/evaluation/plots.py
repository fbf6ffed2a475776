"""PNG plots of an evaluation run (matplotlib, the dev extra): outcomes and score distributions."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from grounded_agent.evaluation.baselines import SYSTEMS
from grounded_agent.evaluation.data import KINDS
from grounded_agent.evaluation.grading import OUTCOMES, Graded

COLOURS = {"correct": "#2e7d32", "abstained": "#9e9e9e", "wrong": "#ef6c00", "hallucinated": "#c62828"}


def write_plots(rows: Sequence[Graded], directory: Path) -> list[Path]:
    """outcomes.png, scores.png and relevance.png; [] when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
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
