"""Evaluation data: the SQuAD-derived JSON Lines set (as given, or with its roles swapped), an
official SQuAD 2.0 file converted here, or a project knowledge base (a Markdown folder with its
questions.jsonl).

Three kinds of question, each with what the agent should do:
answerable (answer from `gold_doc_id`), unanswerable_in_kb_topic and out_of_kb (abstain).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Kind = Literal["answerable", "unanswerable_in_kb_topic", "out_of_kb"]
KINDS: tuple[Kind, ...] = ("answerable", "unanswerable_in_kb_topic", "out_of_kb")

DATA_HINT = (
    "the project ships no SQuAD data. Point --data (or $GROUNDED_AGENT_EVAL_DATA) at the folder of "
    "the SQuAD-derived JSON Lines files (questions.jsonl, kb_corpus.jsonl), or download the official SQuAD 2.0 dev set "
    "(dev-v2.0.json from https://rajpurkar.github.io/SQuAD-explorer/) and pass it as --questions; "
    "see benchmarks/README.md"
)


NOTES: tuple[str, ...] = ("direct", "paraphrase", "version", "stale", "near_miss", "off_topic")
"""What a project-KB question tests (questions.jsonl `note`); reported one by one."""


class EvalDataError(ValueError):
    """Evaluation data that is missing or malformed; the message says what to do."""


@dataclass(frozen=True)
class EvalQuestion:
    id: str
    question: str
    kind: Kind
    answers: tuple[str, ...] = ()
    gold_doc_id: str | None = None
    gold_version: str | None = None
    """When set, only a citation of `gold_doc_id` at this version is the gold citation."""
    note: str | None = None
    """What the question tests (project KBs): one of NOTES, or None."""

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
    """An existing JSON Lines KB file, or a folder of documents; None when `kb_docs` must be
    written out first."""
    sampled: bool = True
    """True: `--sample` questions per kind are drawn (SQuAD); False: every question is asked."""
    info: dict[str, Any] = field(default_factory=dict)
    """Facts about how the set was built (dropped questions, source files), for the report."""
    warnings: list[str] = field(default_factory=list)
    """Problems in the data that do not stop the run (shown on stderr, kept in the report)."""

    def corpus_digest(self) -> str:
        """Fingerprint of the knowledge base's content: same corpus, same table, reused."""
        h = hashlib.sha256()
        if self.kb_path is not None and self.kb_path.is_dir():
            for path in sorted(p for p in self.kb_path.rglob("*") if p.is_file()):
                h.update(path.relative_to(self.kb_path).as_posix().encode())
                h.update(b"\0")
                h.update(path.read_bytes())
                h.update(b"\1")
            return h.hexdigest()
        for doc in self.iter_kb():
            h.update(str(doc.get("doc_id")).encode())
            h.update(b"\0")
            h.update(str(doc.get("text")).encode())
            h.update(b"\1")
        return h.hexdigest()

    def iter_kb(self) -> Iterable[dict[str, Any]]:
        if self.kb_docs:
            yield from self.kb_docs
        elif self.kb_path is not None and self.kb_path.is_dir():
            yield from read_kb_dir_docs(self.kb_path)
        elif self.kb_path is not None:
            yield from read_jsonl(self.kb_path)



_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)


def normalise(text: str) -> str:
    """Lower case, accents folded, every run of punctuation or whitespace one space."""
    folded = unicodedata.normalize("NFKD", text)
    folded = "".join(c for c in folded if not unicodedata.combining(c))
    return " ".join(_NON_WORD.sub(" ", folded.lower()).split())

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
    raw_answers = obj.get("answers") or []
    if not isinstance(raw_answers, list):
        raise EvalDataError(f"{where}: answers must be a list of strings")
    answers = tuple(str(a) for a in raw_answers if str(a).strip())
    if kind == "answerable" and (not answers or not obj.get("gold_doc_id")):
        raise EvalDataError(f"{where}: an answerable question needs answers and gold_doc_id")
    note = obj.get("note")
    return EvalQuestion(
        id=str(obj.get("id") or where),
        question=obj["question"].strip(),
        kind=kind,
        answers=answers,
        gold_doc_id=str(obj["gold_doc_id"]) if obj.get("gold_doc_id") else None,
        gold_version=(str(obj["gold_version"]).strip() or None) if obj.get("gold_version") else None,
        note=(str(note).strip() or None) if note else None,
    )


def load_jsonl_set(questions: Path, kb: Path) -> EvalSet:
    """The SQuAD-derived set: questions.jsonl (kind, answers, gold_doc_id) and kb_corpus.jsonl."""
    for p, what in ((questions, "questions"), (kb, "knowledge base")):
        if not p.exists():
            raise EvalDataError(f"{what} file {p} not found: {DATA_HINT}")
    qs = [question_from(o, f"{questions}:{i}") for i, o in enumerate(read_jsonl(questions), 1)]
    return EvalSet(name=kb.stem, questions=qs, kb_path=kb)


def _contains(text_norm: str, answer: str) -> bool:

    needle = normalise(answer)
    return bool(needle) and f" {needle} " in text_norm


def load_swapped_set(data_dir: Path) -> EvalSet:
    """The SQuAD-derived set with its roles swapped: the held-out paragraphs are the knowledge base.

    From the same three files: `heldout_corpus.jsonl` (856 paragraphs of 13 articles) is ingested;
    the questions about those articles (`out_of_kb` in questions.jsonl) become `answerable`; the
    answerable questions about the 35 KB articles become `out_of_kb`. SQuAD 2.0's adversarial
    no-answer questions (`unanswerable_in_kb_topic`) are dropped: they were written against
    paragraphs that are not in this KB, so they would only be more out_of_kb questions (the same
    rule `convert_squad` applies to a held-out article's impossible questions). The swapped set
    thus has two kinds.

    Gold of the new answerable questions: questions.jsonl keeps, for every out_of_kb question,
    its SQuAD 1.1 answers and the held-out paragraph they were taken from (`gold_doc_id`, an id of
    heldout_corpus.jsonl). That mapping is used only after it is checked: the paragraph must exist
    in heldout_corpus.jsonl and contain an answer string (normalised, whole words); answers not
    found in it are dropped from the question. A question without a usable `gold_doc_id` gets the
    one held-out paragraph that contains one of its answers, when exactly one does; questions left
    without a checked gold paragraph are dropped and counted in `info` (none in the shipped data:
    all 4,557 map, every answer verbatim in its paragraph).
    """
    questions, heldout = data_dir / "questions.jsonl", data_dir / "heldout_corpus.jsonl"
    for p, what in ((questions, "questions"), (heldout, "held-out corpus")):
        if not p.exists():
            raise EvalDataError(f"{what} file {p} not found: the swapped set is built from "
                                f"questions.jsonl and heldout_corpus.jsonl in {data_dir}")

    paragraphs = {str(d.get("doc_id")): f" {normalise(str(d.get('text') or ''))} "
                  for d in read_jsonl(heldout)}
    out: list[EvalQuestion] = []
    counts = {"answerable_from_heldout": 0, "out_of_kb_from_kb_articles": 0,
              "dropped_in_topic_unanswerable": 0, "gold_found_by_answer_search": 0,
              "dropped_no_checked_gold": 0, "answers_dropped_not_in_gold": 0}
    for i, obj in enumerate(read_jsonl(questions), 1):
        q = question_from(obj, f"{questions}:{i}")
        if q.kind == "unanswerable_in_kb_topic":
            counts["dropped_in_topic_unanswerable"] += 1
        elif q.kind == "answerable":
            out.append(EvalQuestion(q.id, q.question, "out_of_kb", q.answers, q.gold_doc_id))
            counts["out_of_kb_from_kb_articles"] += 1
        else:
            gold = q.gold_doc_id if q.gold_doc_id in paragraphs else None
            if gold is None:
                hits = [d for d, t in paragraphs.items() if any(_contains(t, a) for a in q.answers)]
                gold = hits[0] if len(hits) == 1 else None
                counts["gold_found_by_answer_search"] += gold is not None
            answers = tuple(a for a in q.answers if gold and _contains(paragraphs[gold], a))
            if gold is None or not answers:
                counts["dropped_no_checked_gold"] += 1
                continue
            counts["answers_dropped_not_in_gold"] += len(q.answers) - len(answers)
            out.append(EvalQuestion(q.id, q.question, "answerable", answers, gold))
            counts["answerable_from_heldout"] += 1
    return EvalSet(name="squad-swapped", questions=out, kb_path=heldout,
                   info={"built_from": str(data_dir), **counts})


def read_kb_dir_docs(docs_dir: Path) -> list[dict[str, Any]]:
    """The documents of a Markdown folder as the project's ingester reads them (one dict per
    document version: doc_id, title, version, document_date, text, file)."""
    from grounded_agent.store.ingest import IngestError, iter_files, load_file

    out: list[dict[str, Any]] = []
    problems: list[str] = []
    for path, problem in iter_files([docs_dir]):
        if problem is not None:
            problems.append(f"{path}: {problem}")
            continue
        try:
            docs, errors = load_file(path)
        except IngestError as exc:
            problems.append(f"{path}: {exc}")
            continue
        problems.extend(f"{e.file}: {e.reason}" for e in errors)
        out.extend({"doc_id": d.doc_id, "title": d.title, "version": d.version,
                    "document_date": d.document_date, "text": d.text, "file": str(path)}
                   for d in docs)
    if problems:
        raise EvalDataError(f"{docs_dir}: {len(problems)} document(s) cannot be ingested, first: "
                            f"{problems[0]}")
    return out


def active_versions(docs: Iterable[dict[str, Any]]) -> dict[str, str | None]:
    """doc_id -> the version the store searches: the newest document_date (as the ingester
    decides; an undated version loses to a dated one)."""
    best: dict[str, tuple[Any, str | None]] = {}
    for d in docs:
        key = (d.get("document_date") is not None, d.get("document_date") or "")
        cur = best.get(d["doc_id"])
        if cur is None or key >= cur[0]:  # equal dates: the last file read, as ingested
            best[d["doc_id"]] = (key, d.get("version"))
    return {k: v for k, (_, v) in best.items()}


def load_kb_dir(kb_dir: Path) -> EvalSet:
    """A project knowledge base: `<kb_dir>/docs/` (Markdown with YAML front matter: id, title,
    version, document_date, language, source_url) and `<kb_dir>/questions.jsonl` (id, question,
    kind, answers, gold_doc_id, optional gold_version, note).

    Every question is asked (no sampling). Broken references (an answerable question whose
    gold_doc_id or gold_version is not in docs/, duplicate ids) stop the load; questions that
    cannot be graded as meant (no answer string in the gold document, a gold_version the store
    does not search because a newer version exists) are kept and listed in `warnings`.
    """
    docs_dir, questions = kb_dir / "docs", kb_dir / "questions.jsonl"
    if not kb_dir.is_dir():
        raise EvalDataError(f"knowledge-base folder {kb_dir} not found")
    for p, what in ((docs_dir, "documents folder"), (questions, "questions file")):
        if not p.exists():
            raise EvalDataError(f"{what} {p} not found: a project KB folder holds docs/*.md and "
                                "questions.jsonl (see benchmarks/README.md)")

    docs = read_kb_dir_docs(docs_dir)
    if not docs:
        raise EvalDataError(f"{docs_dir}: no Markdown or text documents")
    versions: dict[str, dict[str | None, str]] = defaultdict(dict)
    for d in docs:
        versions[d["doc_id"]][d.get("version")] = f" {normalise(d['title'] + ' ' + d['text'])} "
    active = active_versions(docs)
    qs: list[EvalQuestion] = []
    errors: list[str] = []
    warnings: list[str] = []
    seen: set[str] = set()
    for i, obj in enumerate(read_jsonl(questions), 1):
        where = f"{questions}:{i}"
        q = question_from(obj, where)
        if q.id in seen:
            errors.append(f"{where}: duplicate id {q.id!r}")
        seen.add(q.id)
        if q.note is not None and q.note not in NOTES:
            warnings.append(f"{q.id}: unknown note {q.note!r} (known: {', '.join(NOTES)})")
        if q.gold_doc_id is not None and q.gold_doc_id not in versions:
            if q.kind == "answerable":
                errors.append(f"{where}: gold_doc_id {q.gold_doc_id!r} is not a document id in docs/")
            else:
                warnings.append(f"{q.id}: gold_doc_id {q.gold_doc_id!r} is not a document id in docs/")
        elif q.gold_doc_id is not None and q.kind == "answerable":
            texts = versions[q.gold_doc_id]
            if q.gold_version is not None and q.gold_version not in texts:
                errors.append(f"{where}: {q.gold_doc_id!r} has no version {q.gold_version!r} "
                              f"(versions: {', '.join(str(v) for v in texts)})")
                continue
            if q.gold_version is not None and active.get(q.gold_doc_id) != q.gold_version:
                warnings.append(f"{q.id}: gold_version {q.gold_version!r} of {q.gold_doc_id!r} is not "
                                f"the active version ({active.get(q.gold_doc_id)!r}); the store "
                                "searches only the active one")
            text = texts[q.gold_version] if q.gold_version is not None else " ".join(texts.values())
            if not any(_contains(text, a) for a in q.answers):
                warnings.append(f"{q.id}: no answer string occurs in {q.gold_doc_id!r}: an "
                                "extractive answer can never be graded correct")
        qs.append(q)
    if errors:
        raise EvalDataError(f"{kb_dir}: {len(errors)} problem(s) in questions.jsonl, first: "
                            + "; ".join(errors[:3]))
    return EvalSet(
        name=kb_dir.name, questions=qs, kb_path=docs_dir, sampled=False,
        info={"built_from": str(kb_dir), "documents": len(active), "document_versions": len(docs)},
        warnings=warnings,
    )


def load_blind_kb(kb_dir: Path) -> EvalSet:
    """A small KB written blind (tests/data/blind_kb*: `docs/` and `questions.jsonl` with id,
    question, kind "answerable" or "unstated", asks_for, doc_id, answer) as an evaluation set: an
    unstated question is a near-miss (unanswerable_in_kb_topic, note near_miss: each was written
    next to a figure or name of the same kind stated for something else)."""
    docs_dir, questions = kb_dir / "docs", kb_dir / "questions.jsonl"
    if not docs_dir.is_dir() or not questions.is_file():
        raise EvalDataError(f"{kb_dir}: a blind KB folder holds docs/ and questions.jsonl")
    qs: list[EvalQuestion] = []
    for i, obj in enumerate(read_jsonl(questions), 1):
        if obj.get("kind") not in ("answerable", "unstated"):
            raise EvalDataError(f"{questions}:{i}: kind must be answerable or unstated")
        answerable = obj["kind"] == "answerable"
        qs.append(EvalQuestion(
            id=str(obj["id"]), question=str(obj["question"]),
            kind="answerable" if answerable else "unanswerable_in_kb_topic",
            answers=(str(obj["answer"]),) if answerable else (), gold_doc_id=str(obj["doc_id"]),
            note=None if answerable else "near_miss"))
    return EvalSet(name=kb_dir.name, questions=qs, kb_path=docs_dir, sampled=False,
                   info={"built_from": str(kb_dir)})


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
