"""The command line: ask, ingest, demo, serve, eval."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any

from grounded_agent.schemas import AgentResult, InvalidQuestion

log = logging.getLogger("grounded_agent.cli")

STATUS_LABEL = {
    "answered": "Answered",
    "answered_with_caveat": "Answered, with a caveat",
    "partial": "Partial answer (a source could not be searched)",
    "not_found": "Not found",
    "unavailable": "Unavailable (a source could not be searched)",
}


class _OneLineFormatter(logging.Formatter):
    """Without -v a log record is one line: tracebacks are for -v."""

    def format(self, record: logging.LogRecord) -> str:
        saved = record.exc_info, record.exc_text, record.stack_info
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        try:
            return super().format(record).splitlines()[0][:300]
        finally:
            record.exc_info, record.exc_text, record.stack_info = saved


def _setup_logging(verbose: bool) -> None:
    # a source failure is already in the answer's report; its technical detail is for -v
    level = logging.INFO if verbose else logging.ERROR
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
        if verbose
        else _OneLineFormatter("grounded-agent: %(levelname)s %(name)s: %(message)s")
    )
    logging.basicConfig(level=level, handlers=[handler])
    for noisy in ("httpx", "httpcore", "urllib3", "sentence_transformers", "transformers"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


def render(result: AgentResult) -> str:
    """Human-readable answer: status, text, numbered sources, source reports, warnings."""
    lines = [f"[{STATUS_LABEL.get(result.status, result.status)}]", "", result.answer, ""]
    if result.citations:
        lines.append("Sources:")
        for c in result.citations:
            section = c.section or ""
            if section.startswith(c.title):  # heading paths start with the document's own title
                section = section[len(c.title) :].lstrip(" >")
            where = " > ".join(x for x in (c.title, section) if x)
            meta = ", ".join(
                x
                for x in (
                    f"version {c.version}" if c.version else "",
                    f"dated {c.document_date}" if c.document_date else "",
                    c.url or "",
                    f"id {c.source_id}",
                    f"relevance {c.score:.2f}",
                )
                if x
            )
            lines.append(f"  [{c.n}] {where} ({c.source}; {meta})")
        lines.append("")
    lines.append("Searched:")
    for s in result.sources:
        state = s.status if s.status != "error" else f"error: {s.error_kind}"
        count = f", {s.finding_count} result(s)" if s.finding_count is not None else ""
        lines.append(f"  {s.source}: {state} (coverage {s.coverage}{count})")
    lines.append(f"  queries: {'; '.join(result.queries)}  (attempts {result.attempts}/2)")
    if result.warnings:
        lines.append("Warnings:")
        lines.extend(f"  - {w.kind}: {w.detail}" for w in result.warnings)
    return "\n".join(lines)


def _progress(node: str, update: dict[str, Any]) -> None:
    for entry in update.get("trail") or []:
        if isinstance(entry, dict):
            detail = f": {entry['detail']}" if entry.get("detail") else ""
            print(
                f"  · {entry['node']} [{entry['attempt']}/2] {entry['decision']}{detail}",
                file=sys.stderr,
                flush=True,
            )


def cmd_ask(args: argparse.Namespace) -> int:
    from grounded_agent.api import _inputs, arun
    from grounded_agent.deps import llm_configured

    try:
        _inputs(args.question, args.sources, args.language)
    except InvalidQuestion as exc:
        print(f"grounded-agent: invalid input: {exc}", file=sys.stderr)
        return 2
    if not llm_configured():
        print(
            "grounded-agent: no OPENAI_API_KEY or OPENAI_BASE_URL set: offline mode "
            "(local scoring, extractive answers)",
            file=sys.stderr,
        )
    show = (not args.json and sys.stderr.isatty()) or args.progress
    try:
        result = asyncio.run(
            arun(
                args.question,
                sources=args.sources,
                language=args.language,
                on_step=_progress if show else None,
                thread_id=args.thread,
            )
        )
    except InvalidQuestion as exc:
        print(f"grounded-agent: invalid input: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.model_dump(mode="json"), ensure_ascii=False, indent=2))
    else:
        print(render(result))
    _hint_if_empty(result)
    return 0


def _hint_if_empty(result: AgentResult) -> None:
    """A first-time user who asks before ingesting learns why nothing was found."""
    kb = next((s for s in result.sources if s.source == "knowledge_base"), None)
    if kb is None or kb.finding_count != 0:
        return
    try:
        from grounded_agent.graph.agent import default_deps

        if default_deps.get_store().counts()[1] == 0:
            print(
                "grounded-agent: the knowledge base is empty; add documents with "
                "'grounded-agent ingest PATH...'",
                file=sys.stderr,
            )
    except Exception:  # only a hint: never fail the command over it
        log.debug("could not count the knowledge base", exc_info=True)


def cmd_ingest(args: argparse.Namespace) -> int:
    from grounded_agent.store import open_store
    from grounded_agent.store.ingest import ingest_paths

    paths = [Path(p) for p in args.paths]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        print(f"grounded-agent: no such file or directory: {', '.join(missing)}", file=sys.stderr)
        return 2
    store = open_store()
    report = ingest_paths(paths, store, progress=not args.json and sys.stderr.isatty())
    if args.json:
        print(report.model_dump_json(indent=2))
    else:
        print(
            f"documents: {report.documents}, chunks: {report.chunks}, skipped: {report.skipped}, "
            f"replaced: {report.replaced}, deactivated: {report.deactivated}, "
            f"errors: {len(report.errors)}"
        )
        for err in report.errors:
            print(f"  error: {err.file}: {err.reason}", file=sys.stderr)
    return 1 if report.errors and not report.documents else 0


_DEMO_SOURCES = re.compile(r"\[sources:\s*([a-z_, ]+)\]")


def parse_demo_questions(text: str) -> list[tuple[str, str, list[str] | None]]:
    """Lines "expected | question (note) [sources: a,b]"; the note is not asked."""
    cases: list[tuple[str, str, list[str] | None]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        expected, _, question = line.rpartition("|") if "|" in line else ("", "", line)
        sources = None
        match = _DEMO_SOURCES.search(question)
        if match:
            sources = [s.strip() for s in match.group(1).split(",") if s.strip()]
            question = question[: match.start()]
        question = question.strip()
        if question.endswith(")") and "?" in question:
            question = question[: question.rindex("?") + 1]
        cases.append((expected.strip() or "any", question, sources))
    return cases


def cmd_demo(args: argparse.Namespace) -> int:
    from grounded_agent.api import arun
    from grounded_agent.store import open_store
    from grounded_agent.store.ingest import ingest_paths

    kb = Path(args.kb)
    report = ingest_paths([kb], open_store(), progress=sys.stderr.isatty())
    print(
        f"Knowledge base {kb}: {report.documents} documents, {report.chunks} chunks "
        f"({report.skipped} unchanged, {len(report.errors)} errors)\n"
    )
    cases = parse_demo_questions(Path(args.questions).read_text(encoding="utf-8"))
    tally: dict[str, int] = {}
    for expected, question, sources in cases:
        print("=" * 78)
        where = f", sources: {', '.join(sources)}" if sources else ""
        print(f"Q: {question}\n   (demo case: {expected}{where})")
        result = asyncio.run(arun(question, sources=sources))
        tally[result.status] = tally.get(result.status, 0) + 1
        print(render(result))
        print()
    print("Statuses: " + ", ".join(f"{k} {v}" for k, v in sorted(tally.items())))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        from grounded_agent.serve.app import run
    except ImportError as exc:
        print(
            f"grounded-agent: the endpoint needs the 'serve' extra "
            f"(pip install 'grounded-agent[serve]'): {exc}",
            file=sys.stderr,
        )
        return 2
    run(host=args.host, port=args.port)
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from grounded_agent.evaluation.cli import run_eval

    return run_eval(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grounded-agent", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log each node decision")
    sub = parser.add_subparsers(dest="command", required=True)

    ask = sub.add_parser("ask", help="answer a question from the configured sources")
    ask.add_argument("question")
    ask.add_argument("--json", action="store_true", help="print the result object as JSON")
    ask.add_argument("--sources", help="comma-separated: knowledge_base,wikipedia,web")
    ask.add_argument("--language", help="language of the answer")
    ask.add_argument("--thread", help="conversation thread id (follow-up questions)")
    ask.add_argument("--progress", action="store_true", help="show node progress even when piped")
    ask.set_defaults(func=cmd_ask)

    ingest = sub.add_parser("ingest", help="add Markdown, text or JSON Lines documents")
    ingest.add_argument("paths", nargs="+")
    ingest.add_argument("--json", action="store_true", help="print the report as JSON")
    ingest.set_defaults(func=cmd_ingest)

    demo = sub.add_parser("demo", help="ingest the sample knowledge base and ask its questions")
    root = Path(__file__).resolve().parents[2]
    demo.add_argument("--kb", default=str(root / "data" / "sample_kb"))
    demo.add_argument("--questions", default=str(root / "data" / "sample_questions.txt"))
    demo.set_defaults(func=cmd_demo)

    serve = sub.add_parser("serve", help="run the LangServe endpoint")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.set_defaults(func=cmd_serve)

    ev = sub.add_parser("eval", help="grounding evaluation on SQuAD-derived data")
    from grounded_agent.evaluation.cli import add_arguments

    add_arguments(ev)
    ev.set_defaults(func=cmd_eval)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _setup_logging(args.verbose)
    if getattr(args, "sources", None) and args.command == "ask":
        args.sources = [s.strip() for s in args.sources.split(",") if s.strip()]
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the user gets one line; the details go to the log
        from grounded_agent.redaction import redacted_traceback

        print(
            f"grounded-agent: {args.command} failed: {type(exc).__name__}. "
            "Run with -v for details.",
            file=sys.stderr,
        )
        if args.verbose:
            log.error("details: %s", redacted_traceback(exc))
        return 1


if __name__ == "__main__":
    sys.exit(main())
