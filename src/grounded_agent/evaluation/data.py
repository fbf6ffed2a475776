"""Evaluation data: the SQuAD-derived JSON Lines set, or an official SQuAD 2.0 file converted here.

Three kinds of question, each with what the agent should do:
answerable (answer from `gold_doc_id`), unanswerable_in_kb_topic and out_of_kb (abstain).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Kind = Literal["answerable", "unanswerable_in_kb_topic", "out_of_kb"]
KINDS: tuple[Kind, ...] = ("answerable", "unanswerable_in_kb_topic", "out_of_kb")

DATA_HINT = (
    "the project ships no evaluation data. Point --questions/--kb at the SQuAD-derived JSON Lines "
    "files (questions.jsonl, kb_corpus.jsonl), or download the official SQuAD 2.0 dev set "
    "(dev-v2.0.json from https://rajpurkar.github.io/SQuAD-explorer/) and pass it as --questions; "
    "see benchmarks/README.md"
)


class EvalDataError(ValueError):
    """Evaluation data that is missing or malformed; the message says what to do."""


@dataclass(frozen=True)
class EvalQuestion:
    id: str
    question: str
    kind: Kind
    answers: tuple[str, ...] = ()
    gold_doc_id: str | None = None

    @property
    def should_answer(self) -> bool:
        return self.kind == "answerable"


@dataclass
class EvalSet:
    """Questions and the knowledge base they are asked against (documents as JSON-able dicts)."""

    name: str
    questions: list[EvalQuestion]
    kb_docs: list[dict[str, Any]] = field(default_factory=list)
    kb_path: Path | None = None
    """An existing JSON Lines KB file; None when `kb_docs` must be written out first."""

    def corpus_digest(self) -> str:
        """Fingerprint of the knowledge base's content: same corpus, same table, reused."""
        h = hashlib.sha256()
        for doc in self.iter_kb():
            h.update(str(doc.get("doc_id")).encode())
            h.update(b"\0")
            h.update(str(doc.get("text")).encode())
            h.update(b"\1")
        return h.hexdigest()

    def iter_kb(self) -> Iterable[dict[str, Any]]:
        if self.kb_docs:
            yield from self.kb_docs
        elif self.kb_path is not None:
            yield from read_jsonl(self.kb_path)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    out = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise EvalDataError(f"{path}:{lineno}: invalid JSON ({exc.msg})") from None
            if not isinstance(obj, dict):
                raise EvalDataError(f"{path}:{lineno}: a record must be a JSON object")
            out.append(obj)
    return out


def question_from(obj: dict[str, Any], where: str) -> EvalQuestion:
    kind = obj.get("kind")
    if kind not in KINDS:
        raise EvalDataError(f"{where}: kind must be one of {', '.join(KINDS)}, not {kind!r}")
    if not isinstance(obj.get("question"), str) or not obj["question"].strip():
        raise EvalDataError(f"{where}: no question text")
    answers = tuple(str(a) for a in obj.get("answers") or [] if str(a).strip())
    if kind == "answerable" and (not answers or not obj.get("gold_doc_id")):
        raise EvalDataError(f"{where}: an answerable question needs answers and gold_doc_id")
    return EvalQuestion(
        id=str(obj.get("id") or where),
        question=obj["question"].strip(),
        kind=kind,
        answers=answers,
        gold_doc_id=str(obj["gold_doc_id"]) if obj.get("gold_doc_id") else None,
    )


def load_jsonl_set(questions: Path, kb: Path) -> EvalSet:
    """The SQuAD-derived set: questions.jsonl (kind, answers, gold_doc_id) and kb_corpus.jsonl."""
    for p, what in ((questions, "questions"), (kb, "knowledge base")):
        if not p.exists():
            raise EvalDataError(f"{what} file {p} not found: {DATA_HINT}")
    qs = [question_from(o, f"{questions}:{i}") for i, o in enumerate(read_jsonl(questions), 1)]
    return EvalSet(name=kb.stem, questions=qs, kb_path=kb)


def is_official_squad(path: Path) -> bool:
    """An official SQuAD file is one JSON object with `data` (and usually `version`)."""
    if path.suffix.lower() != ".json":
        return False
    with path.open(encoding="utf-8") as fh:
        head = fh.read(512).lstrip()
    return head.startswith("{")


def convert_squad(raw: dict[str, Any], holdout_articles: int, seed: int = 0) -> EvalSet:
    """An official SQuAD 2.0 file (dev-v2.0.json layout) as an evaluation set.

    `holdout_articles` articles, chosen with `seed`, are left out of the knowledge base; their
    answerable questions become out_of_kb. The other articles' paragraphs are the knowledge base
    (doc_id "<title>#<paragraph index>"): their answerable questions are answerable with that
    paragraph as gold, their is_impossible questions are unanswerable_in_kb_topic.
    """
    articles = raw.get("data")
    if not isinstance(articles, list) or not articles:
        raise EvalDataError("not a SQuAD file: no 'data' list of articles")
    titles = [str(a.get("title") or f"article_{i}") for i, a in enumerate(articles)]
    if holdout_articles < 0 or holdout_articles >= len(articles):
        raise EvalDataError(
            f"--holdout-articles must be between 0 and {len(articles) - 1} for this file"
        )
    held = set(random.Random(seed).sample(range(len(articles)), holdout_articles))
    kb_docs: list[dict[str, Any]] = []
    questions: list[EvalQuestion] = []
    for a_i, article in enumerate(articles):
        title = titles[a_i].replace("_", " ")
        for p_i, para in enumerate(article.get("paragraphs") or []):
            doc_id = f"{titles[a_i]}#{p_i}"
            context = str(para.get("context") or "")
            if a_i not in held:
                kb_docs.append({"doc_id": doc_id, "title": title, "article": titles[a_i],
                                "paragraph_index": p_i, "text": context})
            for q_i, qa in enumerate(para.get("qas") or []):
                text = str(qa.get("question") or "").strip()
                if not text:
                    continue
                impossible = bool(qa.get("is_impossible"))
                answers = tuple(dict.fromkeys(
                    str(x.get("text")) for x in qa.get("answers") or [] if str(x.get("text") or "").strip()
                ))
                qid = str(qa.get("id") or f"{doc_id}:{q_i}")
                if a_i in held:
                    if impossible:
                        continue  # about a held-out article and unanswerable even there: adds nothing
                    questions.append(EvalQuestion(qid, text, "out_of_kb", answers, None))
                elif impossible:
                    questions.append(EvalQuestion(qid, text, "unanswerable_in_kb_topic", (), doc_id))
                elif answers:
                    questions.append(EvalQuestion(qid, text, "answerable", answers, doc_id))
    version = str(raw.get("version") or "squad")
    return EvalSet(name=f"squad-{version}-holdout{holdout_articles}-seed{seed}",
                   questions=questions, kb_docs=kb_docs)


def load_squad_json(path: Path, holdout_articles: int, seed: int = 0) -> EvalSet:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise EvalDataError(f"{path}: invalid JSON ({exc.msg})") from None
    if not isinstance(raw, dict):
        raise EvalDataError(f"{path}: not a SQuAD file (top level is not an object)")
    return convert_squad(raw, holdout_articles, seed)


def load_eval_set(
    questions: Path, kb: Path | None, *, holdout_articles: int = 5, holdout_seed: int = 0
) -> EvalSet:
    """JSON Lines questions with a JSON Lines KB, or one official SQuAD JSON file."""
    if not questions.exists():
        raise EvalDataError(f"questions file {questions} not found: {DATA_HINT}")
    if is_official_squad(questions):
        return load_squad_json(questions, holdout_articles, holdout_seed)
    if kb is None:
        raise EvalDataError("JSON Lines questions need --kb (the knowledge base JSON Lines file)")
    return load_jsonl_set(questions, kb)


def stratified_sample(
    questions: Sequence[EvalQuestion], per_kind: int, seed: int, kinds: Sequence[Kind] = KINDS
) -> list[EvalQuestion]:
    """`per_kind` questions of each kind (all of a kind that has fewer), reproducible by seed.

    Each kind is drawn from its own generator, so adding a kind does not change the others.
    """
    by_kind: dict[str, list[EvalQuestion]] = defaultdict(list)
    for q in questions:
        by_kind[q.kind].append(q)
    out: list[EvalQuestion] = []
    for kind in kinds:
        pool = sorted(by_kind.get(kind, []), key=lambda q: q.id)
        rng = random.Random(f"{seed}:{kind}")
        out.extend(pool if len(pool) <= per_kind else rng.sample(pool, per_kind))
    return out
