"""The command line: ask, search, ingest, docs, db, demo, eval, serve."""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any

from grounded_agent.blocking import run_blocking
from grounded_agent.documents import DocumentQuery
from grounded_agent.errors import ModelSetupError
from grounded_agent.sample import SAMPLE_KB, SAMPLE_QUESTIONS
from grounded_agent.schemas import AgentResult, InvalidQuestion

log = logging.getLogger("grounded_agent.cli")

STATUS_LABEL = {
    "answered": "Answered",
    "answered_with_caveat": "Answered, with a caveat",
    "partial": "Partial answer (a source could not be searched)",
    "not_found": "Not found",
    "unavailable": "Unavailable (a source could not be searched)",
}


SEARCH_LABEL = {
    "answered": "Documents found",
    "not_found": "No matching documents",
    "unavailable": "Unavailable (the knowledge base could not be searched)",
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
        # an HTTP client's retry notes ("Retrying ... after connection broken by ...") repeat
        # the outage the answer already reports once: for -v only
        logging.getLogger(noisy).setLevel(logging.WARNING if verbose else logging.ERROR)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


SERVE_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def serve_logging(verbose: bool, stream: Any = None) -> logging.Handler:
    """`serve` is an operator's process: WARNING by default (one line per shed or cancelled
    request, the whole redacted traceback of a 500 under its incident id), INFO with -v; a
    record is never cut to its first line. Returns the handler added to the root logger."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter(SERVE_LOG_FORMAT))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    for noisy in ("httpx", "httpcore", "urllib3", "sentence_transformers", "transformers"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return handler


def render_documents(result: AgentResult) -> list[str]:
    """The page of documents of a search or combined result, and how to get the next one."""
    docs, query = result.documents, result.search
    if docs is None or query is None:
        return []
    lines = [f"Documents ({docs.total_items} matched; page {docs.page} of {docs.total_pages}):"]
    first = (docs.page - 1) * docs.page_size
    for n, item in enumerate(docs.items, start=first + 1):
        meta = ", ".join(
            x for x in (
                f"version {item.version}" if item.version else "",
                f"dated {item.document_date}" if item.document_date else "",
                item.language or "", item.source_url or "", f"id {item.doc_id}",
            ) if x
        )
        lines.append(f"  {n}. {item.title} ({meta})")
        if item.snippet:
            lines.append(f"     {item.snippet}")
    if docs.page < docs.total_pages:
        lines.append(f"Next page: grounded-agent search {search_args(query, docs.page + 1)}")
    lines.append("")
    return lines


def search_args(query: DocumentQuery, page: int) -> str:
    """The command-line arguments that ask for `page` of the same search."""
    import shlex

    parts = [shlex.quote(query.text)] if query.text else []
    for flag, value in (("--language", query.language), ("--from", query.date_from),
                        ("--to", query.date_to), ("--sort", query.sort)):
        if value:
            parts += [flag, str(value)]
    if query.page_size != 20:
        parts += ["--page-size", str(query.page_size)]
    return " ".join([*parts, "--page", str(page)])


def _where(title: str, section: str | None, page: int | None) -> str:
    """Title > section (the heading path without the title it starts with), p. N."""
    section = section or ""
    if section.startswith(title):  # heading paths start with the document's own title
        section = section[len(title) :].lstrip(" >")
    where = " > ".join(x for x in (title, section) if x)
    return where + (f", p. {page}" if page is not None else "")


def _source_state(s: Any, answer_status: str) -> str:
    """One source's line in words that agree with the headline: a source can find passages
    of which none answers the question (status found, answer not found)."""
    n = s.finding_count
    found = _plural(n, "passage") if n is not None else "passages"
    if s.status == "error":
        return f"could not be searched (error: {s.error_kind})"
    if s.status == "not_found":  # a read can return passages, every one below the low threshold
        return f"{found} found, none relevant" if n else "nothing found"
    if s.status == "low_relevance":
        return f"{found} found, none relevant enough"
    if answer_status == "not_found":
        return f"{found} found, none answers the question"
    return f"{found} found"


def _headline(result: AgentResult) -> str:
    label = STATUS_LABEL.get(result.status, result.status)
    if result.status == "not_found":
        seen = sum(s.finding_count or 0 for s in result.sources if s.status != "error")
        if seen:
            label += f": {_plural(seen, 'passage')} found, none answers the question"
    return f"[{label}]"


def render(result: AgentResult, streamed: str = "") -> str:
    """Human-readable answer: status, text, numbered sources, source reports, warnings.
    `streamed`: the answer's sentences already printed as they came (left out here)."""
    label = _headline(result)
    if result.result_type == "search":
        label = f"[{SEARCH_LABEL.get(result.status, label)}]"
        body = render_documents(result) if result.documents and result.documents.items else []
        return "\n".join([label, "", *(body or [result.answer])]).rstrip()
    answer = result.answer
    if streamed and answer.startswith(streamed):
        answer = answer[len(streamed):].strip()
    lines = [label, "", answer, ""] if answer else [label, ""]
    if result.coverage_limited:
        lines += ["(coverage limited: the answer rests on part of the matching documents)", ""]
    lines += render_documents(result)
    if result.citations:
        lines.append("Sources:")
        for c in result.citations:
            where = _where(c.title, c.section, c.page)
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
    if result.closest:
        lines.append("Closest passages (none was judged to answer; check them yourself):")
        for p in result.closest:
            lines.append(f"  - {_where(p.title, p.section, p.page)} "
                         f"({p.source}; id {p.source_id}, relevance {p.score:.2f})")
        lines.append("")
    lines.append("Searched:")
    for s in result.sources:
        lines.append(f"  {s.source}: {_source_state(s, result.status)} (coverage {s.coverage})")
    lines.append(f"  queries: {'; '.join(result.queries)}  (attempts {result.attempts})")
    if result.warnings:
        lines.append("Warnings:")
        lines.extend(f"  - {w.kind}: {w.detail}" for w in result.warnings)
    return "\n".join(lines)


def _progress(node: str, update: dict[str, Any]) -> None:
    for entry in update.get("trail") or []:
        if isinstance(entry, dict):
            detail = f": {entry['detail']}" if entry.get("detail") else ""
            print(
                f"  · {entry['node']} [attempt {entry['attempt']}] {entry['decision']}{detail}",
                file=sys.stderr,
                flush=True,
            )


def cmd_ask(args: argparse.Namespace) -> int:
    from grounded_agent.api import arun
    from grounded_agent.deps import llm_configured

    show = (not args.json and sys.stderr.isatty()) or args.progress
    offline = not llm_configured()

    def on_step(node: str, update: dict[str, Any]) -> None:
        nonlocal offline
        if offline:  # said once the input is accepted, before the first progress line
            offline = False
            print(
                "grounded-agent: no OPENAI_API_KEY or OPENAI_BASE_URL set: offline mode "
                "(local scoring, extractive answers)",
                file=sys.stderr,
            )
        if show:
            _progress(node, update)

    live = not args.json and (args.stream or sys.stdout.isatty())
    printed: list[str] = []

    def on_event(event: dict[str, Any]) -> None:
        """Each checked sentence printed as it arrives (the label and sources follow)."""
        if live and event.get("event") == "sentence":
            print((" " if printed else "") + str(event["text"]), end="", flush=True)
            printed.append(str(event["text"]))

    try:
        result = run_blocking(
            arun(
                args.question,
                sources=args.sources,
                language=args.language,
                on_step=on_step,
                on_event=on_event,
                thread_id=args.thread,
                groups=args.as_groups,
            )
        )
    except InvalidQuestion as exc:
        print(f"grounded-agent: invalid input: {exc}", file=sys.stderr)
        return 2
    if printed:
        print("\n")
    if args.json:
        print(json.dumps(result.model_dump(mode="json"), ensure_ascii=False, indent=2))
    else:
        print(render(result, " ".join(printed)))
    _hint_if_empty(result)
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    """A page of documents, straight from the store: no model, also in LLM mode."""
    from grounded_agent.documents import parse_query
    from grounded_agent.search_api import asearch

    try:
        query = parse_query(
            {"text": args.text}, language=args.language, date_from=args.date_from,
            date_to=args.date_to, sort=args.sort, page=args.page, page_size=args.page_size,
        )
    except InvalidQuestion as exc:
        print(f"grounded-agent: invalid search: {exc}", file=sys.stderr)
        return 2
    try:
        result = run_blocking(asearch(query, groups=args.as_groups))
    except InvalidQuestion as exc:
        print(f"grounded-agent: invalid search: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.model_dump(mode="json"), ensure_ascii=False, indent=2))
    else:
        print(render(result))
    if result.documents is not None and result.documents.total_items == 0:
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
    from grounded_agent.store.ingest import ingest_paths

    paths = [Path(p) for p in args.paths]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        print(f"grounded-agent: no such file or directory: {', '.join(missing)}", file=sys.stderr)
        return 2
    if args.sync and not any(p.is_dir() for p in paths):
        print("grounded-agent: --sync needs a directory", file=sys.stderr)
        return 2
    access = None
    if args.access is not None:
        from grounded_agent.loaders.base import IngestError, parse_access

        try:
            access = parse_access(args.access, "--access")
        except IngestError as exc:
            print(f"grounded-agent: {exc}", file=sys.stderr)
            return 2
    store = _command_store()
    try:
        report = ingest_paths(
            paths, store, progress=not args.json and sys.stderr.isatty(), sync=args.sync,
            access=access,
        )
    except ValueError as exc:  # a malformed GROUNDED_AGENT_DEFAULT_ACCESS
        print(f"grounded-agent: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(report.model_dump_json(indent=2))
    else:
        extra = f", restored: {report.restored}" if report.restored else ""
        if report.access_changed:
            extra += f", access changed: {report.access_changed}"
        if args.sync:
            extra += f", removed (file gone): {report.removed}"
        if report.flagged:
            extra += f", flagged: {len(report.flagged)}"
        print(
            f"documents: {report.documents}, chunks: {report.chunks}, skipped: {report.skipped}, "
            f"replaced: {report.replaced}, deactivated: {report.deactivated}{extra}, "
            f"errors: {len(report.errors)}"
        )
        for err in report.errors:
            print(f"  error: {err.file}: {err.reason}", file=sys.stderr)
        for note in report.warnings:
            print(f"  warning: {note.file}: {note.reason}", file=sys.stderr)
        for flag in report.flagged:
            print(f"  flagged: {flag.file} ({flag.doc_id}): {'; '.join(flag.reasons)}",
                  file=sys.stderr)
        if report.flagged:
            print(f"{len(report.flagged)} document(s) flagged as holding instruction-like content:"
                  " kept out of answers (GROUNDED_AGENT_FLAGGED_DOCUMENTS=include searches them)",
                  file=sys.stderr)
    return 1 if report.errors and not report.documents else 0


def _plural(n: int, word: str) -> str:
    """`1 chunk`, `2 chunks`, `0 chunks`."""
    return f"{n} {word}{'' if n == 1 else 's'}"


LIST_HEADER = ["DOCUMENT", "VERSION", "STATUS", "DATE", "CHUNKS", "PAGES", "FORMAT", "TITLE"]


def _version_cols(v: Any) -> list[str]:
    """One version's columns (LIST_HEADER): id, version, status, date, chunks, pages, format,
    title (neutralised: display.py)."""
    from grounded_agent.untrusted.display import UNTITLED, neutral_field

    return [
        neutral_field(v.doc_id, fallback="-"),
        neutral_field(v.version, fallback="-"),
        v.status + (" FLAGGED" if v.flagged else ""),
        str(v.document_date or "-"),
        _plural(v.chunks, "chunk"),
        _plural(v.pages, "page") if v.pages else "-",
        v.format or "-",
        neutral_field(v.title, fallback=UNTITLED),
    ]


def _version_line(v: Any) -> str:
    """One version on one line (`docs show`)."""
    return "  ".join(c for c in _version_cols(v) if c and c != "-")


def _version_table(versions: list[Any]) -> list[str]:
    """`docs list`: a header, then one aligned row per version (the title last, unpadded)."""
    rows = [LIST_HEADER, *(_version_cols(v) for v in versions)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(LIST_HEADER) - 1)]
    return ["  ".join([*(c.ljust(w) for c, w in zip(r, widths, strict=False)), r[-1]]).rstrip()
            for r in rows]


def _shown_version(v: Any) -> dict[str, Any]:
    """A version as `docs ... --json` prints it: its title neutralised (display.py)."""
    from grounded_agent.inputs import is_web_url
    from grounded_agent.untrusted.display import UNTITLED, neutral_field

    data = v.model_dump(mode="json")
    return {
        **data,
        **{k: neutral_field(data[k], fallback="-") for k in ("doc_id", "version", "language")
           if isinstance(data.get(k), str)},
        "title": neutral_field(v.title, fallback=UNTITLED),
        "source_url": data.get("source_url") if is_web_url(data.get("source_url")) else None,
    }


def cmd_docs(args: argparse.Namespace) -> int:
    from grounded_agent.inputs import is_web_url
    from grounded_agent.untrusted.display import neutral_field

    viewer = None
    if getattr(args, "as_groups", None) is not None:
        from grounded_agent.principals import Viewer, parse_groups

        try:
            viewer = Viewer(parse_groups(args.as_groups) or ())
        except ValueError as exc:
            print(f"grounded-agent: invalid --as-groups: {exc}", file=sys.stderr)
            return 2
    if args.docs_command == "access":
        return _set_access(args)
    if args.docs_command in ("show", "remove"):
        from grounded_agent.api import MAX_DOC_ID_CHARS
        from grounded_agent.schemas import validate_text_id

        ids = [args.doc_id] if args.docs_command == "show" else args.doc_ids
        if args.docs_command == "remove" and bool(ids) == bool(args.all):
            print("grounded-agent: invalid arguments: docs remove takes document ids or --all "
                  "(not both)",
                  file=sys.stderr)
            return 2
        try:  # invalid UTF-8 arrives as lone surrogates: named here, not a database error
            for doc_id in ids:
                validate_text_id(doc_id, "document id", MAX_DOC_ID_CHARS)
        except InvalidQuestion as exc:
            print(f"grounded-agent: invalid input: {exc}", file=sys.stderr)
            return 2
    store = _command_store()
    if args.docs_command == "list":
        versions = store.list_documents(all_versions=args.all_versions, viewer=viewer)
        if args.json:
            print(json.dumps([_shown_version(v) for v in versions], indent=2))
        elif not versions:
            print("no documents: add some with 'grounded-agent ingest PATH...'")
        else:
            print(*_version_table(versions), sep="\n")
        return 0
    if args.docs_command == "show":
        detail = store.get_document(args.doc_id, viewer=viewer)
        if detail is None:
            print(f"grounded-agent: no document with id {args.doc_id!r}", file=sys.stderr)
            return 1
        if args.json:
            data = detail.model_dump(mode="json")
            data["versions"] = [_shown_version(v) for v in detail.versions]
            for c in data["chunks"]:
                c["section"] = neutral_field(c["section"]) or None
                c["preview"] = neutral_field(c["preview"])
            print(json.dumps(data, indent=2))
            return 0
        for v in detail.versions:
            print(_version_line(v))
            for label, value in (
                ("file", v.source_path),
                ("url", v.source_url if is_web_url(v.source_url) else None),
                ("language", neutral_field(v.language)),
                ("indexed", v.indexed_at),
                ("flagged", "; ".join(v.flagged)),
                ("access", _access_text(v.access)),
            ):
                if value:
                    print(f"    {label}: {value}")
        shown = next((v for v in detail.versions if v.status == "active"), detail.versions[0])
        print(f"\nchunks of version {shown.version or '-'}:")
        for c in detail.chunks:
            if c.version == shown.version:
                page = f"p. {c.page}  " if c.page is not None else ""
                section, preview = neutral_field(c.section), neutral_field(c.preview)
                print(f"  {c.chunk_index:>3}  {page}{section or '-'}: {preview[:70]}")
        return 0
    return _remove_documents(store, args, viewer)


def _access_text(access: list[str] | None) -> str:
    if access is None:
        return "public"
    return ", ".join(access) if access else "private (principals who see everything)"


def _set_access(args: argparse.Namespace) -> int:
    """`docs access ID ACCESS`: who may read a document, changed in place."""
    from grounded_agent.api import set_access

    try:
        changed = set_access(args.doc_id, args.groups, store=_command_store())
    except InvalidQuestion as exc:
        print(f"grounded-agent: invalid input: {exc}", file=sys.stderr)
        return 2
    if not changed:
        print(f"grounded-agent: no document with id {args.doc_id!r}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"doc_id": args.doc_id, "access": args.groups, "chunks": changed}))
    else:
        print(f"{args.doc_id}: access {args.groups} ({_plural(changed, 'chunk')}, every version)")
    return 0


def _remove_documents(store: Any, args: argparse.Namespace, viewer: Any = None) -> int:
    """`docs remove ID...` or `docs remove --all`: each document stops being searched at once.
    Exit 1 when a named id is unknown (the others are still removed)."""
    ids = ([v.doc_id for v in store.list_documents(viewer=viewer)] if args.all
           else list(dict.fromkeys(args.doc_ids)))
    removals, unknown = [], []
    for doc_id in ids:
        removal = store.remove_document(doc_id, viewer=viewer)
        if removal is None:
            unknown.append(doc_id)
        else:
            removals.append(removal)
    for doc_id in unknown:
        print(f"grounded-agent: no document with id {doc_id!r}", file=sys.stderr)
    if args.json:
        data = [r.model_dump(mode="json") for r in removals]
        print(json.dumps(data if args.all or len(ids) > 1 else (data[0] if data else None), indent=2))
    else:
        for r in removals:
            print(f"removed {r.doc_id}: {_plural(r.versions, 'version')}, "
                  f"{_plural(r.chunks, 'chunk')} no longer searched")
        if args.all and not removals:
            print("no documents to remove")
        elif removals:
            print("(ingest a file again to bring its document back)")
    return 1 if unknown else 0


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 1024:.0f} KiB"


def _embedded_counts(store: Any) -> tuple[int | None, int | None]:
    """(documents, chunks) of the knowledge base, without creating its table when there is
    none yet (a status command writes nothing): 0 and 0 then."""
    import psycopg

    try:
        with psycopg.connect(store.database_url(), connect_timeout=5) as conn:
            row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (store.table_name,)).fetchone()
    except psycopg.Error:
        return None, None
    if not row or not row[0]:
        return 0, 0
    health = store.healthcheck()
    return health.documents, health.chunks


def cmd_db(args: argparse.Namespace) -> int:
    """The database's life cycle: `db status` (never starts a server) and `db stop`."""
    from grounded_agent.store import StoreSettings, open_store
    from grounded_agent.store.server import (
        embedded_status,
        postmasters_of,
        stop_embedded_server,
    )
    from grounded_agent.store.settings import redact_url

    settings = StoreSettings.from_env()
    if not settings.embedded:
        where = redact_url(settings.database_url or "")
        if args.db_command == "stop":
            print(f"grounded-agent: DATABASE_URL names an external server ({where}); "
                  "grounded-agent does not manage it, stop it with its own tools",
                  file=sys.stderr)
            return 2
        health = open_store(settings).healthcheck()
        info: dict[str, Any] = {"backend": "external", "database": where, "running": health.ok,
                                "documents": health.documents, "chunks": health.chunks}
        if args.json:
            print(json.dumps(info, indent=2))
        else:
            state = "reachable" if health.ok else "not reachable"
            print(f"external PostgreSQL: {state} ({where}; managed outside grounded-agent)")
            if health.ok:
                print(f"documents: {health.documents} ({health.chunks} chunks)")
        return 0
    if args.db_command == "stop":
        stopped = stop_embedded_server(settings.home)
        left = postmasters_of(settings.pgdata)
        if left:
            print(f"grounded-agent: the embedded PostgreSQL under {settings.home} is still "
                  f"running (pid {', '.join(map(str, left))})", file=sys.stderr)
            return 1
        if stopped:
            print(f"stopped the embedded PostgreSQL under {settings.home} "
                  f"(pid {', '.join(map(str, stopped))}); the next command starts it again")
        else:
            print(f"the embedded PostgreSQL under {settings.home} was not running")
        return 0
    status = embedded_status(settings.home)
    documents = chunks = None
    if status.running:
        documents, chunks = _embedded_counts(open_store(settings))
    socket = (status.socket_dir / f".s.PGSQL.{status.port}"
              if status.socket_dir and status.port else None)
    info = {"backend": "embedded", "running": status.running, "pid": status.pid,
            "home": str(status.home), "pgdata": str(status.pgdata), "port": status.port,
            "socket": str(socket) if socket else None, "started_at": status.started_at,
            "size_bytes": status.size_bytes, "documents": documents, "chunks": chunks}
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    state = (f"running (pid {status.pid}, since {status.started_at})" if status.running
             and status.started_at else "running" if status.running else "not running")
    print(f"embedded PostgreSQL: {state}")
    print(f"data home: {status.home}")
    if socket:
        print(f"port: {status.port}, on the Unix socket {socket} (no TCP listener)")
    print(f"size: {_size(status.size_bytes)} ({status.pgdata})")
    if documents is not None:
        print(f"documents: {documents} ({chunks} chunks)")
    if status.running:
        print("it stays up between commands (each then starts in milliseconds, not seconds); "
              "stop it with 'grounded-agent db stop'")
    return 0


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


DEMO_TABLE_SUFFIX = "_demo"


def demo_table() -> str:
    """The demo's own table beside the knowledge base's, so the user's documents and the
    sample's never mix (the demo neither adds to nor removes from the user's)."""
    from grounded_agent.store.embeddings import make_embeddings, table_name_for
    from grounded_agent.store.settings import StoreSettings

    settings = StoreSettings.from_env()
    base = settings.table_name or table_name_for(make_embeddings(settings)[1])
    return base[: 50 - len(DEMO_TABLE_SUFFIX)] + DEMO_TABLE_SUFFIX


def cmd_demo(args: argparse.Namespace) -> int:
    from grounded_agent.api import arun
    from grounded_agent.store.ingest import ingest_paths

    # before anything opens a store: the agent's default store reads this too
    os.environ["GROUNDED_AGENT_KB_TABLE"] = table = demo_table()
    kb = Path(args.kb)
    report = ingest_paths([kb], _command_store(), progress=sys.stderr.isatty())
    print(
        f"Knowledge base {kb}: {_plural(report.documents, 'document')}, "
        f"{_plural(report.chunks, 'chunk')} ({report.skipped} unchanged, "
        f"{_plural(len(report.errors), 'error')}), in the demo's own table {table}: your own "
        "knowledge base is left as it was\n"
    )
    cases = parse_demo_questions(Path(args.questions).read_text(encoding="utf-8"))
    tally: dict[str, int] = {}
    misses: list[str] = []
    for expected, question, sources in cases:
        print("=" * 78)
        where = f", sources: {', '.join(sources)}" if sources else ""
        print(f"Q: {question}\n   (demo case: {expected}{where})")
        result = run_blocking(arun(question, sources=sources))
        tally[result.status] = tally.get(result.status, 0) + 1
        if result.status not in DEMO_EXPECTED.get(expected, {result.status}):
            misses.append(f"  - {question} (expected {expected}, got {result.status})")
        print(render(result))
        print()
    print("Statuses: " + ", ".join(f"{k} {v}" for k, v in sorted(tally.items())))
    # the demo says where the agent is wrong, not only where it is right
    print(
        f"Differing from the expected case: {len(misses)} of {len(cases)} (each question was "
        "written for one outcome; these ended in another: the agent's mistakes on this sample, "
        "listed rather than hidden)",
        *misses,
        sep="\n",
    )
    return 0


DEMO_EXPECTED: dict[str, set[str]] = {
    "answered": {"answered"},
    "outdated_version": {"answered"},
    "stale_source": {"answered", "answered_with_caveat"},
    "answered_with_caveat": {"answered_with_caveat"},
    "not_found": {"not_found"},
    "partial": {"partial"},
    "unavailable": {"unavailable"},
}
"""Statuses each kind of demo case may end in; a case outside these is reported at the end."""


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
    try:
        run(host=args.host, port=args.port, verbose=args.verbose, graph=args.graph,
            keys=args.keys)
    except (ValueError, OSError) as exc:  # a --graph that names no graph, a keys file unusable
        print(f"grounded-agent: serve: {exc}", file=sys.stderr)
        return 2
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    """The evaluation harness is part of the checkout, not the wheel (it reads data a user's
    install has no use for): `grounded-agent eval` runs it from the root of a clone."""
    import importlib

    root = Path.cwd()
    if not (root / "evals" / "cli.py").is_file():
        print(
            "grounded-agent: eval runs the evaluation harness in evals/ of a grounded-agent "
            "checkout; run it from the root of a clone (or `python -m evals` there).",
            file=sys.stderr,
        )
        return 2
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    evals_cli = importlib.import_module("evals.cli")
    return int(evals_cli.main(list(args.eval_args)))


AS_GROUPS_HELP = ("read as a principal of these groups would (comma-separated): public documents "
                  "and those of the groups only; default: every document")


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
    ask.add_argument("--stream", action="store_true",
                     help="print the answer's sentences as they are checked even when piped")
    ask.add_argument("--as-groups", metavar="GROUPS", help=AS_GROUPS_HELP)
    ask.set_defaults(func=cmd_ask)

    search = sub.add_parser(
        "search", help="list documents by words, language and date (no model call)"
    )
    search.add_argument("text", nargs="?", default=None, help="words to find (all must occur)")
    search.add_argument("--language", help="only documents in this language (ISO code)")
    search.add_argument("--from", dest="date_from", metavar="DATE",
                        help="documents dated on or after (YYYY-MM-DD)")
    search.add_argument("--to", dest="date_to", metavar="DATE",
                        help="documents dated on or before (YYYY-MM-DD, inclusive)")
    search.add_argument("--sort", help="newest, oldest or relevance (default: relevance with "
                        "text, newest without)")
    search.add_argument("--page", type=int, default=None, help="page number, from 1")
    search.add_argument("--page-size", type=int, default=None, help="1 to 50 (default 20)")
    search.add_argument("--json", action="store_true", help="print the result object as JSON")
    search.add_argument("--as-groups", metavar="GROUPS", help=AS_GROUPS_HELP)
    search.set_defaults(func=cmd_search)

    ingest = sub.add_parser(
        "ingest", help="add documents: Markdown, text, JSON Lines, PDF, Word (.docx), HTML"
    )
    ingest.add_argument("paths", nargs="+")
    ingest.add_argument("--json", action="store_true", help="print the report as JSON")
    ingest.add_argument(
        "--sync",
        action="store_true",
        help="remove documents ingested earlier from a given directory whose files are gone",
    )
    ingest.add_argument(
        "--access",
        metavar="GROUPS",
        help="who may read the documents that declare no 'access' of their own: groups "
        "(comma-separated), public or private (default: GROUNDED_AGENT_DEFAULT_ACCESS, else public)",
    )
    ingest.set_defaults(func=cmd_ingest)

    docs = sub.add_parser("docs", help="list, show or remove documents of the knowledge base")
    docs_sub = docs.add_subparsers(dest="docs_command", required=True)
    docs_list = docs_sub.add_parser("list", help="the searched documents, one line each")
    docs_list.add_argument("--json", action="store_true", help="print them as JSON")
    docs_list.add_argument(
        "--all-versions",
        action="store_true",
        help="every version: superseded, declared inactive and removed ones too",
    )
    docs_show = docs_sub.add_parser("show", help="a document's versions and chunks")
    docs_show.add_argument("doc_id")
    docs_show.add_argument("--json", action="store_true", help="print it as JSON")
    docs_remove = docs_sub.add_parser(
        "remove", help="stop searching documents, at once: the ones named, or --all"
    )
    docs_remove.add_argument("doc_ids", nargs="*", metavar="DOC_ID")
    docs_remove.add_argument("--all", action="store_true", help="every document of the knowledge base")
    docs_remove.add_argument("--json", action="store_true", help="print the result as JSON")
    for sub_parser in (docs_list, docs_show, docs_remove):
        sub_parser.add_argument("--as-groups", metavar="GROUPS", help=AS_GROUPS_HELP)
    docs_access = docs_sub.add_parser(
        "access", help="change who may read a document (no re-embedding)"
    )
    docs_access.add_argument("doc_id")
    docs_access.add_argument(
        "groups", metavar="ACCESS",
        help="groups (comma-separated), public (everyone) or private (only principals who see "
        "everything)",
    )
    docs_access.add_argument("--json", action="store_true", help="print the result as JSON")
    docs.set_defaults(func=cmd_docs)

    db = sub.add_parser("db", help="the embedded PostgreSQL: status, stop")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    db_status = db_sub.add_parser(
        "status", help="running or not, data home, port, size, documents (starts nothing)"
    )
    db_status.add_argument("--json", action="store_true", help="print it as JSON")
    db_sub.add_parser("stop", help="stop the embedded server of this data home")
    db.set_defaults(func=cmd_db)

    demo = sub.add_parser("demo", help="ingest the sample knowledge base and ask its questions")
    demo.add_argument("--kb", default=str(SAMPLE_KB), help="folder of documents to ingest")
    demo.add_argument("--questions", default=str(SAMPLE_QUESTIONS), help="demo questions file")
    demo.set_defaults(func=cmd_demo)

    ev = sub.add_parser(
        "eval",
        help="run the grounding evaluation (from a clone: python -m evals; --help for options)",
        add_help=False,
    )
    ev.add_argument("eval_args", nargs=argparse.REMAINDER)
    ev.set_defaults(func=cmd_eval)

    serve = sub.add_parser("serve", help="run the LangServe endpoint")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument(
        "--keys", metavar="FILE",
        help="API keys of several principals (TOML: principal, sha256 of the key, groups; read "
        "again when it changes); each caller's conversation threads are its own "
        "(default: GROUNDED_AGENT_KEYS_FILE)",
    )
    serve.add_argument(
        "--graph", metavar="MODULE:ATTRIBUTE",
        help="serve your own compiled graph (from build_graph, as in langgraph.json) instead of "
        "the default agent; the module is imported from the working directory",
    )
    serve.set_defaults(func=cmd_serve)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    raw = list(sys.argv[1:] if argv is None else argv)
    args, extra = parser.parse_known_args(raw)
    if args.command == "eval":  # every option after "eval" is the harness's own
        args.eval_args = raw[raw.index("eval") + 1 :]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command == "serve":
        serve_logging(args.verbose)
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    else:
        _setup_logging(args.verbose)
    if getattr(args, "sources", None) and args.command == "ask":
        args.sources = [s.strip() for s in args.sources.split(",") if s.strip()]
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = TerminalSafe(sys.stdout), TerminalSafe(sys.stderr, keep_cr=True)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130
    except ModelSetupError as exc:  # a setup the user can fix: the message says how
        print(f"grounded-agent: {args.command}: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader (`| head`) has what it wanted: stop quietly
        _quiet_stdout(streams[0])
        return 0
    except Exception as exc:  # the user gets one line; the details go to the log
        from grounded_agent.redaction import redacted_traceback
        from grounded_agent.store.errors import StoreBusy, StoreUnavailable

        print(
            f"grounded-agent: {args.command} failed: {type(exc).__name__}. "
            "Run with -v for details.",
            file=sys.stderr,
        )
        if isinstance(exc, StoreBusy):  # running, but refusing connections: say so
            print(f"The knowledge base's database is busy: {str(exc).partition(': ')[2]}.",
                  file=sys.stderr)
        elif isinstance(exc, StoreUnavailable):  # what a user can do about it
            if os.environ.get("DATABASE_URL"):
                todo = ("The knowledge base's database (DATABASE_URL) could not be reached: "
                        "check that the server runs and the URL is right.")
            else:
                todo = ("The knowledge base's database could not be started: 'grounded-agent db "
                        "status' shows what runs on its data directory, 'grounded-agent db stop' "
                        "ends it.")
            print(todo, file=sys.stderr)
        if args.verbose:
            log.error("details: %s", redacted_traceback(exc))
        return 1
    finally:
        _close_command_stores()
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            _quiet_stdout(streams[0])
        sys.stdout, sys.stderr = streams


_COMMAND_STORES: list[Any] = []


def _command_store() -> Any:
    """The knowledge store of one command, closed when it ends (`main`): CLI commands run in a
    loop in one process must not each leave a pool of connections open (they exhausted the
    server's connection limit)."""
    from grounded_agent.store import open_store

    _COMMAND_STORES.append(open_store())
    return _COMMAND_STORES[-1]


def _close_command_stores() -> None:
    while _COMMAND_STORES:
        store = _COMMAND_STORES.pop()
        try:
            store.run_sync(store.aclose())
        except Exception:  # closing is best effort: the process may be ending anyway
            log.debug("could not close the store", exc_info=True)


class TerminalSafe:
    """A text stream that prints what it is given without terminal control sequences or
    control characters (inputs.terminal_safe): a document's heading holding ESC[2J or an OSC 8
    link is printed as text, whatever command prints it."""

    def __init__(self, stream: Any, *, keep_cr: bool = False) -> None:
        self._stream = stream
        self._keep_cr = keep_cr

    def write(self, text: str) -> int:
        from grounded_agent.inputs import terminal_safe

        if self._keep_cr and "\r" in text:
            safe = "\r".join(terminal_safe(part) for part in text.split("\r"))
        else:
            safe = terminal_safe(text)
        self._stream.write(safe)
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _quiet_stdout(stream: Any) -> None:
    """Points stdout at /dev/null, so the interpreter's last flush finds no closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (a test's capture)
        pass


if __name__ == "__main__":
    sys.exit(main())
