"""Which SQuAD questions an evaluation may score: never those of the articles the offline judge
was trained on. The judge's manifest lists its train and tune articles; its threshold was chosen
on the tune articles, so the default report is on the rest (`test`)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Literal

from evals.data import EvalQuestion

Split = Literal["test", "tune", "untrained", "all"]
SPLITS: tuple[Split, ...] = ("test", "tune", "untrained", "all")


def article_of(doc_id: str | None) -> str | None:
    """SQuAD doc ids are "<Article>#<paragraph>"; other sets have no articles."""
    if not doc_id or "#" not in doc_id:
        return None
    return doc_id.rsplit("#", 1)[0]


def judge_articles() -> tuple[frozenset[str], frozenset[str]]:
    """(train, tune) articles of the shipped judge."""
    from grounded_agent.grounding.judge import Manifest

    manifest = Manifest.read()
    return manifest.train_articles, manifest.tune_articles


def select(questions: Sequence[EvalQuestion], split: Split) -> list[EvalQuestion]:
    """The questions of `split`; a question with no article (a project KB's) is always kept."""
    if split == "all":
        return list(questions)
    train, tune = judge_articles()
    out = []
    for q in questions:
        article = article_of(q.gold_doc_id)
        if article is None:
            out.append(q)
        elif split == "tune":
            if article in tune:
                out.append(q)
        elif article not in train and (split == "untrained" or article not in tune):
            out.append(q)
    return out


def kb_half(question_id: str) -> Literal["tune", "test"]:
    """A project KB's split: by the digest of the question id, so it holds however the file is
    ordered or grows."""
    digest = hashlib.sha256(question_id.encode("utf-8")).digest()
    return "tune" if int.from_bytes(digest, "big") % 2 == 0 else "test"
