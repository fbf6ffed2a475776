"""The LangServe endpoint: /agent (invoke, batch, stream, schemas, playground) and /healthz.

Limits and auth sit in one ASGI middleware in front of everything, so a refused request costs
nothing: no body parsing, no graph run. Settings come from the environment (`ServeSettings`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from grounded_agent.context import CLIENT_CONFIGURABLE, checked_sources, context_from_config
from grounded_agent.graph.builder import RECURSION_LIMIT
from grounded_agent.inputs import text_problem
from grounded_agent.principals import KeyRing, Principal
from grounded_agent.redaction import describe, redacted_traceback
from grounded_agent.schemas import InvalidQuestion
from grounded_agent.serve.callers import Callers
from grounded_agent.serve.runnable import AgentRunnable, Graph, ThreadGraphs
from grounded_agent.serve.schemas import ALLOWED_CONFIGURABLE, error_body
from grounded_agent.store.errors import StoreError

if TYPE_CHECKING:
    from grounded_agent.store import KnowledgeStore

log = logging.getLogger("grounded_agent.serve")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

OPEN_PATHS = frozenset({"/healthz"})

"""Reachable without an API key: a load balancer's probe carries none."""


def _int_env(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    try:
        value = int(raw) if raw else default
    except ValueError:
        raise ValueError(f"{name} must be a whole number, not {raw!r}") from None
    if value < 1:
        raise ValueError(f"{name} must be at least 1")
    return value


@dataclass(frozen=True, kw_only=True)
class ServeSettings:
    """Endpoint limits; `from_env()` reads GROUNDED_AGENT_API_KEY, _MAX_BODY, _MAX_CONCURRENCY."""

    api_key: str | None = field(default=None, repr=False)
    keys_file: Path | None = None
    """API keys of several principals (serve/principals.py); with it, each caller's threads are
    its own. GROUNDED_AGENT_API_KEY may stand beside it, as one principal who sees everything."""
    max_body: int = 64 * 1024
    max_concurrency: int = 64
    retry_after_s: int = 2
    db_watch_s: float | None = None
    """How often `serve` checks the embedded PostgreSQL it started and starts it again when it
    died; None: not watched (an app built for tests, an external database)."""

    @classmethod
    def from_env(cls) -> ServeSettings:
        watch = os.environ.get("GROUNDED_AGENT_DB_WATCH_S", "").strip()
        try:
            every = float(watch) if watch else 1.0
        except ValueError:
            raise ValueError(f"GROUNDED_AGENT_DB_WATCH_S must be seconds, not {watch!r}") from None
        return cls(
            api_key=os.environ.get("GROUNDED_AGENT_API_KEY") or None,
            keys_file=Path(os.environ["GROUNDED_AGENT_KEYS_FILE"]).expanduser()
            if os.environ.get("GROUNDED_AGENT_KEYS_FILE") else None,
            max_body=_int_env("GROUNDED_AGENT_MAX_BODY", 64 * 1024),
            max_concurrency=_int_env("GROUNDED_AGENT_MAX_CONCURRENCY", 64),
            db_watch_s=every if every > 0 else None,
        )


@dataclass
class DatabaseWatch:
    """What /healthz reports of the embedded server `serve` keeps alive."""

    state: str = "up"
    restarts: int = 0


async def watch_embedded_server(store: KnowledgeStore, watch: DatabaseWatch, every_s: float) -> None:
    """Starts the embedded PostgreSQL again when it dies under `serve` (killed, stopped by
    hand, crashed), within a second or two: requests recover without restarting `serve`. Only
    a server this process started or attached to is watched; `grounded-agent db stop` from
    another shell therefore brings it back too, as a supervisor would (stop `serve` first)."""
    from grounded_agent.store.server import (
        embedded_running,
        owns_embedded_server,
        restart_embedded_server,
    )

    home = store.settings.home
    owned = False  # kept once seen: a failed restart leaves the server unowned until it works
    while True:
        await asyncio.sleep(every_s)
        owned = owned or owns_embedded_server(home)
        if not owned:
            continue  # not started yet: the first request starts it
        if await asyncio.to_thread(embedded_running, home):
            watch.state = "up"
            continue
        watch.state = "restarting"
        log.warning("the embedded PostgreSQL under %s is not running; starting it again", home)
        started = time.monotonic()
        try:
            await asyncio.to_thread(restart_embedded_server, home)
        except Exception as exc:  # e.g. the dead server's children still hold its memory
            watch.state = "down"
            log.warning("could not start the embedded PostgreSQL yet (%s); retrying in %.0fs",
                        describe(exc), every_s)
            continue
        watch.restarts += 1
        watch.state = "up"
        log.warning("embedded PostgreSQL started again in %.1fs (restart %d of this serve)",
                    time.monotonic() - started, watch.restarts)


class _JSON(JSONResponse):
    """JSON with non-ASCII escaped: an error that echoes a client's lone surrogate still
    renders (UTF-8 cannot encode one, an escape can)."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False).encode("ascii")


async def _send_json(
    scope: Scope, send: Send, status: int, body: dict[str, Any], headers: dict[str, str]
) -> None:
    response = _JSON(body, status_code=status, headers=headers)
    await response(scope, _no_receive, send)


async def _no_receive() -> Message:
    return {"type": "http.disconnect"}


class GuardMiddleware:
    """API key (401), body size (413) and concurrency (503 + Retry-After), in that order.

    Pure ASGI rather than BaseHTTPMiddleware, so streamed responses pass through untouched and a
    concurrency slot stays held until the last event of a stream is sent.
    """

    def __init__(self, app: ASGIApp, settings: ServeSettings) -> None:
        self.app = app
        self.settings = settings
        self.active = 0
        self.callers = Callers(settings.api_key, settings.keys_file)

    def principal(self, given: bytes) -> Principal | None:
        """Who sent `given` as X-API-Key (serve/callers.py); None: nobody (401)."""
        return self.callers.principal(given)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v for k, v in scope.get("headers", [])}
        principal = self.principal(headers.get("x-api-key", b""))
        if principal is None:
            await _send_json(
                scope, send, 401, error_body("unauthorized", "missing or wrong X-API-Key header"), {}
            )
            return
        scope.setdefault("state", {})["principal"] = principal
        scope["state"]["private_threads"] = self.callers.keys is not None
        if scope["method"] not in ("POST", "PUT", "PATCH"):
            await self._run(scope, receive, send)
            return
        too_big = error_body(
            "request_too_large", f"the request body is larger than {self.settings.max_body} bytes"
        )
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.settings.max_body):
            await _send_json(scope, send, 413, too_big, {"Connection": "close"})
            return
        # read the body (at most the limit, chunked or not), check it, then replay it
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return
            body += message.get("body", b"")
            more = bool(message.get("more_body"))
            if len(body) > self.settings.max_body:
                await _send_json(scope, send, 413, too_big, {"Connection": "close"})
                return
        connection, receive = receive, _replay(body, receive)
        problem = body_problem(body, scope["path"].rstrip("/").rpartition("/")[2])
        if problem is not None:
            # a client error, answered on the same keep-alive connection
            await _send_json(scope, send, 422, error_body("invalid_input", problem), {})
            return
        if self.active >= self.settings.max_concurrency:
            log.warning(
                "request shed (503): %s %s, %d requests running, the limit",
                scope["method"], scope["path"], self.active,
            )
            await _send_json(
                scope,
                send,
                503,
                error_body(
                    "overloaded",
                    f"{self.active} requests are running, the limit; retry shortly",
                ),
                {"Retry-After": str(self.settings.retry_after_s)},
            )
            return
        self.active += 1
        try:
            if scope["path"].rstrip("/").endswith(STREAMING_ROUTES):
                # a stream watches its own connection: the run logs and stops on a hang-up
                await self._run(scope, receive, send)
            else:
                await self._run_watched(scope, receive, connection, send)
        finally:
            self.active -= 1

    async def _run_watched(
        self, scope: Scope, receive: Receive, connection: Receive, send: Send
    ) -> None:
        """Runs a request whose response is sent in one piece (invoke, batch) while watching
        its connection: a client that hangs up first cancels the run (no more model calls for
        an answer nobody reads), and the operator gets one WARNING line saying so."""
        started = time.monotonic()
        run = asyncio.ensure_future(self._run(scope, receive, send))
        hangup = asyncio.ensure_future(_disconnected(connection))
        try:
            await asyncio.wait({run, hangup}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not run.done() and not hangup.done():  # this request itself was cancelled
                run.cancel()
            hangup.cancel()
        if run.done():
            run.result()
            return
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run
        log.warning(
            "request cancelled: the client hung up %.1fs into %s %s, before the response",
            time.monotonic() - started, scope["method"], scope["path"],
        )

    async def _run(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Runs the app; an error after the response started (a failing stream, which has
        already sent its `error` event) ends the body cleanly instead of cutting the connection."""
        started = ended = False

        async def tracking_send(message: Message) -> None:
            nonlocal started, ended
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                ended = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:
            incident = uuid.uuid4().hex[:12]
            if not started:
                # answered here rather than by Starlette's outermost handler, which would log
                # the traceback as an ASGI crash and drop the keep-alive connection
                log.error(
                    "request failed (incident %s): %s", incident, redacted_traceback(exc)
                )
                await _send_json(scope, send, 500, _internal_body(incident), {})
                return
            log.error("stream failed (incident %s): %s", incident, redacted_traceback(exc))
            if not ended:
                await send({"type": "http.response.body", "body": b"", "more_body": False})


STREAMING_ROUTES = ("/stream", "/stream_log", "/stream_events")
"""Routes whose response is a stream: the stream itself notices a client that goes away."""


async def _disconnected(receive: Receive) -> None:
    """Returns when the client has gone away (the server reports `http.disconnect`)."""
    while (await receive())["type"] != "http.disconnect":
        pass


MAX_JSON_DEPTH = 32
"""Nesting a request body may have; the input and config need five levels."""

MAX_INT_DIGITS = 4300
"""Digits an integer literal may have: Python's own limit for converting text to int, past
which the parser raises ValueError (the body's fault, not the server's)."""

_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


class _HugeNumber(ValueError):
    """An integer literal longer than MAX_INT_DIGITS."""


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _HugeNumber(f"a number in the request body has more than {MAX_INT_DIGITS} digits")
    return int(text)


def body_problem(body: bytes, route: str | None = None) -> str | None:
    """Why a request body cannot be read as JSON text safely, or None.

    Checked before LangServe parses it: invalid UTF-8, a byte order mark or a raw NUL byte
    (from which the JSON parser would guess UTF-16 or UTF-32), deep nesting (which makes the JSON
    decoder recurse until RecursionError), integers too long to convert, text PostgreSQL cannot
    store (NUL) or nothing can encode (lone surrogates), and, for `route` (invoke, batch,
    stream, stream_log), an envelope LangServe would fail on rather than refuse (`"config":
    null`, batch `"inputs"` that is not a list) are the client's errors, not the server's.
    Malformed JSON itself is left to the parser, which reports it as a 422.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"the request body is not valid UTF-8 (byte {exc.start + 1})"
    if body.startswith(b"\xef\xbb\xbf"):
        return "the request body starts with a byte order mark: send UTF-8 JSON without one"
    nul = body.find(b"\x00")
    if nul >= 0:  # JSON escapes NUL; a raw one is UTF-16 or UTF-32, which the parser would guess
        return (f"the request body holds a NUL byte (byte {nul + 1}): send UTF-8 JSON, not "
                "UTF-16 or UTF-32")
    brackets = _JSON_STRING.sub(b"", body).translate(None, _NOT_BRACKETS)
    depth = deepest = 0
    for byte in brackets:
        depth += 1 if byte in (0x5B, 0x7B) else -1
        if depth > deepest:
            deepest = depth
            if deepest > MAX_JSON_DEPTH:
                return f"the request body nests deeper than {MAX_JSON_DEPTH} levels"
    try:
        value = json.loads(text, parse_int=_bounded_int)
    except _HugeNumber as exc:
        return str(exc)
    except ValueError:
        return None  # malformed JSON: the parser's own 422
    return _unencodable(value, []) or _envelope_problem(value, route)


def _envelope_problem(value: Any, route: str | None) -> str | None:
    """What LangServe would fail on (a 500) in the request envelope of `route`."""
    if route not in ("invoke", "batch", "stream", "stream_log"):
        return None
    if not isinstance(value, dict):
        return f"the request body must be a JSON object, not {_json_type(value)}"
    config = value.get("config", {})
    if route == "batch":
        if not isinstance(value.get("inputs"), list):
            return f"inputs must be a list of inputs, not {_json_type(value.get('inputs'))}"
        configs = config if isinstance(config, list) else [config]
        if not all(isinstance(c, dict) for c in configs):
            return "config must be an object or a list of objects, one per input"
    elif not isinstance(config, dict):
        return f"config must be an object, not {_json_type(config)}"
    return None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    for kind, name in ((bool, "a boolean"), (int, "a number"), (float, "a number"),
                       (str, "a string"), (list, "a list"), (dict, "an object")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _unencodable(value: Any, path: list[str]) -> str | None:
    """Where the parsed body holds text that cannot travel (a lone surrogate from an unpaired
    \\ud800 escape, or a NUL), as a sentence naming the field; such text can neither be
    validated nor echoed nor stored."""
    if isinstance(value, str):
        problem = text_problem(value)
        if problem is not None:
            return f"{'.'.join(path) or 'the body'} {problem}"
    elif isinstance(value, dict):
        for key, item in value.items():
            if text_problem(key) is not None:
                return f"a field name in {'.'.join(path) or 'the body'} is not valid text"
            found = _unencodable(item, [*path, key])
            if found:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = _unencodable(item, [*path, str(i)])
            if found:
                return found
    return None


def _replay(body: bytes, then: Receive) -> Receive:
    """The body already read, then the connection's own messages: a streaming response waits
    on them to learn that the client went away."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return await then()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


def _config_modifier(
    max_concurrency: int, threads: bool, sources: Sequence[str] | None = None
) -> Callable[[dict[str, Any], Request], Awaitable[dict[str, Any]]]:
    """Builds each run's config from what the client may set; anything else is a 400."""

    async def modify(config: dict[str, Any], request: Request) -> dict[str, Any]:
        # LangServe's config model drops unknown keys silently; the raw body still shows them
        raw = await _raw_configurable(request)
        sent = {k: v for k, v in (config.get("configurable") or {}).items() if v is not None}
        unknown = sorted((set(raw) | set(sent)) - ALLOWED_CONFIGURABLE)
        if unknown:
            raise HTTPException(
                400,
                error_body(
                    "config_not_allowed",
                    f"configurable key(s) not accepted: {', '.join(unknown)}",
                    allowed=sorted(ALLOWED_CONFIGURABLE),
                ),
            )
        for name, value in sent.items():
            problem = text_problem(value) if isinstance(value, str) else None
            if problem is not None:
                raise HTTPException(400, error_body("invalid_config", f"{name} {problem}"))
        if sent.get("thread_id") and not threads:
            raise HTTPException(
                400, error_body("threads_disabled", "this server keeps no conversation threads")
            )
        principal = getattr(request.state, "principal", None)
        if sent.get("thread_id") and principal is not None and getattr(
            request.state, "private_threads", False
        ):
            # each caller's threads are its own: the same id from another principal is another
            # thread, so theirs is never continued nor read
            sent["thread_id"] = principal.thread(sent["thread_id"])
        try:  # the same checks the graph would make, but before anything runs
            ctx = context_from_config(sent, allowed=CLIENT_CONFIGURABLE)
            if sources is not None:
                checked_sources(ctx.sources, sources)
        except (TypeError, ValueError) as exc:
            raise HTTPException(400, error_body("invalid_config", str(exc))) from None
        if principal is not None and not principal.sees_all:
            # who reads: set here, after the client's keys were checked (a client that sends
            # principal or groups got a 400 above), and read by the graph (nodes.viewer_of)
            sent["principal"] = principal.name
            sent["groups"] = list(principal.groups)
        return {
            **{k: v for k, v in config.items() if k != "configurable"},
            "configurable": sent,
            "recursion_limit": RECURSION_LIMIT,
            "max_concurrency": max_concurrency,
        }

    return modify


async def _raw_configurable(request: Request) -> dict[str, Any]:
    """config.configurable as the client sent it in the JSON body (Starlette caches the body)."""
    try:
        body = await request.json()
    except ValueError:
        return {}
    config = body.get("config") if isinstance(body, dict) else None
    configurable = config.get("configurable") if isinstance(config, dict) else None
    return configurable if isinstance(configurable, dict) else {}


def _validation_message(errors: Any) -> tuple[str, list[dict[str, Any]]]:
    """Pydantic errors as one sentence plus a list without echoed objects."""
    items: list[dict[str, Any]] = []
    for err in errors or []:
        if isinstance(err, dict):
            msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
            loc = [str(x) for x in err.get("loc", ()) if x not in ("body",)]
            items.append({"loc": loc, "msg": msg})
        else:
            items.append({"loc": [], "msg": str(err)})
    sentence = "; ".join(
        f"{'.'.join(i['loc'])}: {i['msg']}" if i["loc"] else i["msg"] for i in items
    )
    return sentence or "invalid request", items


def _install_error_handlers(app: FastAPI) -> None:
    """Every error is JSON with a code and a sentence; no stack traces, no internals."""

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> _JSON:
        sentence, items = _validation_message(exc.errors())
        return _JSON(error_body("invalid_input", sentence, errors=items), status_code=422)

    @app.exception_handler(ValidationError)
    async def _invalid_item(request: Request, exc: ValidationError) -> _JSON:
        # raised inside a run (a batch item, a config value): the caller's input, not our fault
        sentence, items = _validation_message(exc.errors(include_input=False))
        return _JSON(error_body("invalid_input", sentence, errors=items), status_code=422)

    @app.exception_handler(InvalidQuestion)
    async def _invalid_question(request: Request, exc: InvalidQuestion) -> _JSON:
        return _JSON(error_body("invalid_input", str(exc)), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> _JSON:
        body = exc.detail if isinstance(exc.detail, dict) else error_body(
            "http_error", str(exc.detail)
        )
        return _JSON(body, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(StoreError)
    async def _store(request: Request, exc: StoreError) -> _JSON:
        log.warning("database unavailable: %s", exc)
        return _JSON(
            error_body("unavailable", "the database is unavailable; retry later"),
            status_code=503,
            headers={"Retry-After": "5"},
        )

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> _JSON:
        incident = uuid.uuid4().hex[:12]
        log.error("request failed (incident %s): %s", incident, redacted_traceback(exc))
        return _JSON(_internal_body(incident), status_code=500)


def _internal_body(incident: str) -> dict[str, Any]:
    return error_body(
        "internal_error",
        "the agent failed on this request; the server log has the details",
        incident=incident,
    )


def create_app(
    graph: Graph | None = None,
    *,
    store: KnowledgeStore | None = None,
    settings: ServeSettings | None = None,
    threads: bool = True,
    database_url: str | None = None,
) -> FastAPI:
    """The FastAPI app. Tests inject a graph built from scripted parts and a store on their own
    database; by default the graph and /healthz share the configured knowledge store.

    threads=True keeps conversation threads in PostgreSQL (database_url, else the store's).
    """
    from langserve import add_routes

    settings = settings or ServeSettings.from_env()
    if store is None:
        from grounded_agent.store import open_store

        store = open_store()
    if graph is None:
        from grounded_agent.graph.builder import build_graph

        graph = build_graph(store=store)
    thread_graphs = ThreadGraphs(store, database_url) if threads else None

    watch = DatabaseWatch() if settings.db_watch_s and store.settings.embedded else None

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        watcher = None
        if watch is not None and settings.db_watch_s:
            watcher = asyncio.ensure_future(
                watch_embedded_server(store, watch, settings.db_watch_s)
            )
        try:
            yield
        finally:
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
            if thread_graphs is not None:
                await thread_graphs.aclose()

    app = FastAPI(
        title="grounded-agent",
        version="0.1.0",
        description="Answers only from evidence it retrieved, and cites it.",
        lifespan=lifespan,
    )
    _install_error_handlers(app)

    @app.get("/healthz")
    async def healthz() -> _JSON:
        """200 when the knowledge-base database answers, 503 with the reason when it does not."""
        health = await store.ahealthcheck()
        # open without a key: counts only; where the database lives and why it failed go to the log
        public = {
            k: v
            for k, v in health.model_dump(mode="json", exclude_none=True).items()
            if k in ("ok", "backend", "documents", "chunks", "active_chunks")
        }
        database: dict[str, Any] = {"database": "up" if health.ok else "down"}
        if watch is not None:  # the embedded server this serve keeps alive
            database = {"database": "restarting" if watch.state == "restarting"
                        else database["database"], "database_restarts": watch.restarts}
        if health.ok:
            return _JSON({"status": "ok", **database, **public})
        log.warning("health check failed: %s", health.detail)
        return _JSON(
            {"status": "unavailable", "error": "database_unavailable", **database, **public},
            status_code=503,
        )

    runnable = AgentRunnable(graph, thread_graphs, store)
    add_routes(
        app,
        runnable,
        path="/agent",
        enabled_endpoints=(
            "invoke",
            "batch",
            "stream",
            "stream_log",
            "input_schema",
            "output_schema",
            "config_schema",
            "playground",
        ),
        per_req_config_modifier=_config_modifier(
            settings.max_concurrency, threads, runnable.sources
        ),
    )
    app.add_middleware(GuardMiddleware, settings=settings)
    app.state.settings = settings
    app.state.store = store
    app.state.database_watch = watch
    return app


def load_graph(spec: str) -> Graph:
    """`module:attribute` (as in langgraph.json) to a compiled graph: the attribute itself, or
    what it returns when it is a factory taking no arguments. The module is looked up from the
    working directory first. Raises ValueError with a message a user can act on."""
    import importlib
    import os
    import sys

    from langgraph.graph.state import CompiledStateGraph
    from langgraph.pregel import Pregel

    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"--graph takes module:attribute (my_app.graphs:agent), not {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name.removesuffix(".py").replace("/", "."))
    except ImportError as exc:
        raise ValueError(f"--graph: cannot import {module_name!r}: {exc}") from exc
    value = getattr(module, attribute, None)
    if value is None:
        raise ValueError(f"--graph: {module_name!r} has no attribute {attribute!r}")
    if callable(value) and not isinstance(value, Pregel):
        try:
            value = value()
        except TypeError as exc:
            raise ValueError(f"--graph: {spec} is neither a graph nor a factory taking no "
                             f"arguments ({exc})") from exc
    if not isinstance(value, CompiledStateGraph):
        raise ValueError(
            f"--graph: {spec} is a {type(value).__name__}, not a compiled LangGraph graph "
            "(build_graph(...) or StateGraph(...).compile())"
        )
    return value


def run(
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    verbose: bool = False,
    graph: str | None = None,
    keys: str | None = None,
) -> None:
    """`grounded-agent serve`: the endpoint under uvicorn until Ctrl-C. Logs warnings (each
    shed, cancelled or failed request); -v adds uvicorn's access log and the agent's INFO."""
    import sys

    import uvicorn

    settings = ServeSettings.from_env()
    if keys:
        settings = dataclasses.replace(settings, keys_file=Path(keys).expanduser())
    if settings.keys_file is not None:  # read now: a broken file stops the start, not a request
        KeyRing(settings.keys_file)
    if settings.api_key is None and settings.keys_file is None and host not in (
        "127.0.0.1", "localhost", "::1"
    ):
        log.warning(
            "serving on %s without GROUNDED_AGENT_API_KEY: anyone who can reach it can use it",
            host,
        )
    app = create_app(load_graph(graph) if graph else None, settings=settings)
    print(f"grounded-agent: serving on http://{host}:{port} (Ctrl-C to stop)", file=sys.stderr)
    uvicorn.run(app, host=host, port=port, log_level="info" if verbose else "warning")
