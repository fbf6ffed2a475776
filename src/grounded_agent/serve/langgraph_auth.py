"""LangGraph Studio and Server enforce the endpoint's rules: `langgraph.json`'s `auth` entry.

Authentication takes the same keys as `grounded-agent serve` (serve/callers.py): X-API-Key
against GROUNDED_AGENT_KEYS_FILE (read again when it changes) and GROUNDED_AGENT_API_KEY (one
principal who sees everything); no key or an unknown one is 401. With neither set, every caller
is `anyone`, who sees everything: a single-user dev server, as without this file.

The caller reaches the graph as `config["configurable"]["langgraph_auth_user"]`, the user dict
`authenticate` returns wrapped by the server: read it with `user["groups"]`, `user["sees_all"]`
(or `.get`); it is no `dict` instance.

Authorization: threads (and so their runs, state and history), assistants, crons and store
items belong to the principal that made them (`owner` in their metadata, set here, never by the
client); anyone else gets the server's "not found" or an empty search, never their content. A
principal that sees everything (`sees_all`) sees them all. The assistants the server makes from
`langgraph.json` (`created_by: system`) are everyone's to read and run; only `sees_all` changes
them. Studio's own login is switched off in `langgraph.json` (`disable_studio_auth`): on
`langgraph dev` it would let any request that says it comes from Studio in without a key. A
Studio user that arrives anyway is a principal of its own, seeing only what it made.
"""

from __future__ import annotations

from typing import Any, cast

from langgraph_sdk import Auth

from grounded_agent.principals import Principal
from grounded_agent.serve.callers import Callers

OWNER = "owner"
"""The metadata key that names the principal a thread, run, assistant or cron belongs to."""


def user_dict(principal: Principal) -> Auth.types.MinimalUserDict:
    """What `authenticate` returns and the graph reads as `langgraph_auth_user`."""
    return {  # type: ignore[typeddict-unknown-key]
        "identity": principal.name,
        "display_name": principal.name,
        "groups": list(principal.groups),
        "sees_all": principal.sees_all,
    }


def authenticator(callers: Callers) -> Any:
    """The `@auth.authenticate` handler for these keys."""

    async def authenticate(headers: dict[bytes, bytes]) -> Auth.types.MinimalUserDict:
        principal = callers.principal(headers.get(b"x-api-key", b""))
        if principal is None:
            raise Auth.exceptions.HTTPException(
                status_code=401, detail="missing or wrong X-API-Key header"
            )
        return user_dict(principal)

    return authenticate


def _claim(user: Any, name: str) -> Any:
    getter = getattr(user, "get", None)
    return getter(name) if callable(getter) else getattr(user, name, None)


def sees_all(user: Any) -> bool:
    """Whether the caller sees everything; False for a user this module did not authenticate
    (a Studio user), so such a caller sees only what it made."""
    return _claim(user, "sees_all") is True


def _stamp_owner(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> None:
    """Whatever the client sent, the new thing belongs to the caller."""
    metadata = value.get("metadata")
    if metadata is None:
        metadata = value["metadata"] = {}
    if isinstance(metadata, dict):
        metadata[OWNER] = ctx.user.identity


def _own(ctx: Auth.types.AuthContext) -> Auth.types.FilterType | None:
    """Only the caller's own, unless it sees everything."""
    return None if sees_all(ctx.user) else {OWNER: ctx.user.identity}


async def own_threads(ctx: Auth.types.AuthContext, value: Any) -> Auth.types.FilterType | None:
    """Threads, and everything on them (runs, state, history, streams): the creator's alone.
    A run that creates its thread stamps it through the run's metadata."""
    if ctx.action in ("create", "create_run"):
        _stamp_owner(ctx, value)
    elif ctx.action == "update" and isinstance(value.get("metadata"), dict):
        value["metadata"].pop(OWNER, None)  # a thread is not given away by a metadata update
    return _own(ctx)


async def own_crons(ctx: Auth.types.AuthContext, value: Any) -> Auth.types.FilterType | None:
    """Crons: the creator's alone (a cron on a thread also needs the thread, the server checks)."""
    if ctx.action == "create":
        _stamp_owner(ctx, value)
    return _own(ctx)


async def own_assistants(
    ctx: Auth.types.AuthContext, value: Any
) -> Auth.types.FilterType | None:
    """Assistants: the creator's; the server's own (from langgraph.json) everyone's to read and
    run, changed only by a principal that sees everything."""
    if ctx.action == "create":
        _stamp_owner(ctx, value)
    if sees_all(ctx.user):
        return None
    if ctx.action in ("read", "search"):
        # `$or` is served by langgraph-runtime-inmem and the server's gRPC ops; the SDK's
        # FilterType does not list it yet
        return cast("Auth.types.FilterType",
                    {"$or": [{OWNER: ctx.user.identity}, {"created_by": "system"}]})
    return {OWNER: ctx.user.identity}


async def own_store(ctx: Auth.types.AuthContext, value: Any) -> None:
    """Store items: under the caller's name as the first part of every namespace."""
    if sees_all(ctx.user):
        return
    namespace = tuple(value.get("namespace") or ())
    if not namespace or namespace[0] != ctx.user.identity:
        namespace = (ctx.user.identity, *namespace)
    value["namespace"] = namespace


async def refuse(ctx: Auth.types.AuthContext, value: Any) -> bool:
    """Anything not named above (a resource a later server adds): refused until it is."""
    return False


def build_auth(callers: Callers) -> Auth:
    """The Auth object for these keys."""
    built = Auth()
    built.authenticate(authenticator(callers))
    built.on(refuse)
    built.on.threads(own_threads)
    built.on.crons(own_crons)
    built.on.assistants(own_assistants)
    built.on.store(own_store)
    return built


auth = build_auth(Callers.from_env())
"""What `langgraph.json` names; the keys are those of the server's environment at its start."""
