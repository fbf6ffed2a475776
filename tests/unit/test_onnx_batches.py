"""How the ONNX backend cuts texts (sorted longest first) into batches: by padded tokens."""

from __future__ import annotations

from grounded_agent.store.onnx_embeddings import batches


def test_long_texts_go_alone_short_ones_share_a_batch() -> None:
    lengths = [300, 256, 200, 120, 120, 60, 60, 60, 12, 12, 12, 12]
    parts = batches(lengths, max_texts=32, max_tokens=256)
    # 4 x 60 padded tokens: the first 12-token text still fits with the 60-token ones
    assert parts == [[0], [1], [2], [3, 4], [5, 6, 7, 8], [9, 10, 11]]
    for part in parts:  # every position once, in order; padded size within the budget
        assert len(part) == 1 or len(part) * lengths[part[0]] <= 256
    assert [p for part in parts for p in part] == list(range(len(lengths)))


def test_at_most_max_texts_per_batch() -> None:
    assert batches([3] * 10, max_texts=4, max_tokens=256) == [
        [0, 1, 2, 3],
        [4, 5, 6, 7],
        [8, 9],
    ]
    assert batches([3] * 3, max_texts=1, max_tokens=256) == [[0], [1], [2]]
    assert batches([], max_texts=4, max_tokens=256) == []
