"""The streaming benchmark's own arithmetic: its drafts and its leak count (the numbers it prints
are only as good as these)."""

from __future__ import annotations

from tests.support.benchmarks import load_benchmark

BENCH = load_benchmark("bench_streaming")
QUOTES, UNSUPPORTED, drafts, leaks = BENCH.QUOTES, BENCH.UNSUPPORTED, BENCH.drafts, BENCH.leaks


def test_unsupported_sentences_come_in_every_position() -> None:
    positions: set[tuple[int, int]] = set()
    for draft, bad in drafts(200, seed=0):
        assert len(bad) <= 2 and all(b in UNSUPPORTED for b in bad)
        for b in bad:
            positions.add((draft.index(b) == 0, draft.endswith(b)))
    assert positions >= {(True, False), (False, False), (False, True)}  # first, middle, last


def test_the_leak_count_sees_a_raw_draft_and_not_a_checked_answer() -> None:
    """Negative control: the count that must stay 0 is not 0 when the raw draft is shown."""
    bad = [UNSUPPORTED[0], UNSUPPORTED[3]]
    kept = QUOTES[:2]
    raw = " ".join([QUOTES[0], *bad, QUOTES[1]])
    assert leaks(bad, kept, [raw]) == 2
    assert leaks(bad, kept, [" ".join(kept)]) == 0
    # a kept sentence with the same words as a removed one is no leak (renumbered markers)
    assert leaks(["Annual billing gives two months free [2]."], [QUOTES[2]], [QUOTES[2]]) == 0
