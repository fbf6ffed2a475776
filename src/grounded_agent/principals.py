"""Who is calling: API keys, held only as SHA-256 digests, mapped to principals and their groups.

The keys file is TOML (`grounded-agent serve --keys FILE` or GROUNDED_AGENT_KEYS_FILE):

    [[keys]]
    principal = "alice"
    sha256 = "<hex digest of the key>"
    groups = ["legal"]

It is read again when it changes (its modification time and size are looked at on each request,
no restart or signal needed). A file that no longer parses keeps the keys last read and logs an
error: a typo in an edit must not open the server, nor lock every caller out.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
import tomllib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}$")
_DIGEST = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Principal:
    """A caller: a name, its groups, and whether it sees everything (the single shared key)."""

    name: str
    groups: tuple[str, ...] = ()
    sees_all: bool = False

    @property
    def namespace(self) -> str:
        """What this principal's conversation threads are stored under: another principal's
        thread of the same id is another thread, so for anyone else a thread does not exist."""
        return "p-" + hashlib.sha256(self.name.encode("utf-8")).hexdigest()[:20]

    def thread(self, thread_id: str) -> str:
        """`thread_id` as this principal's own thread."""
        return f"{self.namespace}:{thread_id}"


def principal_named(name: str) -> Principal:
    """The principal an application authenticated, by name; ValueError for a malformed name."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError("principal must be a name of letters, digits and _ . @ - (at most 128)")
    return Principal(name=name)


class KeysFileError(ValueError):
    """A keys file that cannot be used; the message names the entry and the rule, never a key."""


def digest(key: str | bytes) -> str:
    """The SHA-256 hex digest a keys file holds for `key`."""
    raw = key.encode("utf-8") if isinstance(key, str) else key
    return hashlib.sha256(raw).hexdigest()


def parse_keys(text: str, where: str = "keys file") -> dict[str, Principal]:
    """Digest -> principal from the TOML text; raises KeysFileError naming what is wrong."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise KeysFileError(f"{where} is not valid TOML: {exc}") from None
    entries = data.get("keys")
    if not isinstance(entries, list) or not entries:
        raise KeysFileError(f"{where} has no [[keys]] entries")
    ring: dict[str, Principal] = {}
    for n, entry in enumerate(entries, 1):
        if not isinstance(entry, dict):
            raise KeysFileError(f"{where}: entry {n} is not a table")
        unknown = sorted(set(entry) - {"principal", "sha256", "groups"})
        if unknown:
            raise KeysFileError(f"{where}: entry {n} has unknown field(s) {', '.join(unknown)}")
        name, hexdigest, groups = entry.get("principal"), entry.get("sha256"), entry.get("groups", [])
        if not isinstance(name, str) or not _NAME.match(name):
            raise KeysFileError(f"{where}: entry {n}: principal must be a name of letters, digits "
                                "and _ . @ - (at most 128)")
        if not isinstance(hexdigest, str) or not _DIGEST.match(hexdigest.lower()):
            raise KeysFileError(f"{where}: entry {n} ({name}): sha256 must be 64 hex digits, the "
                                "digest of the key, never the key itself")
        if not isinstance(groups, list) or not all(isinstance(g, str) and _NAME.match(g)
                                                   for g in groups):
            raise KeysFileError(f"{where}: entry {n} ({name}): groups must be a list of names")
        if hexdigest.lower() in ring:
            raise KeysFileError(f"{where}: entry {n} ({name}): this key is listed twice")
        ring[hexdigest.lower()] = Principal(name=name, groups=tuple(dict.fromkeys(groups)))
    return ring


class KeyRing:
    """The keys file's principals, read again when the file changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._seen: tuple[int, int] | None = None
        self._ring = parse_keys(path.read_text("utf-8"), str(path))  # at start: fail loudly
        self._seen = self._stamp()

    def _stamp(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def _current(self) -> dict[str, Principal]:
        stamp = self._stamp()
        with self._lock:
            if stamp is not None and stamp != self._seen:
                self._seen = stamp
                try:
                    self._ring = parse_keys(self.path.read_text("utf-8"), str(self.path))
                    log.warning("keys file %s read again: %d key(s)", self.path, len(self._ring))
                except (OSError, UnicodeDecodeError, KeysFileError) as exc:
                    log.error("keys file %s not used, the keys read before stay: %s",
                              self.path, exc)
            return self._ring

    def principal_for(self, key: bytes) -> Principal | None:
        """The principal whose key this is, or None. Only digests are compared: the file holds
        no key, and a dictionary lookup of a digest reveals nothing of the others."""
        if not key:
            return None
        return self._current().get(digest(key))


@dataclass(frozen=True)
class Viewer:
    """Which documents a read may return. `groups` None: every document (the operator at the
    command line, the shared key, an application that names no principal); otherwise the public
    documents (no access list) and those whose access list shares a group with `groups`."""

    groups: tuple[str, ...] | None = None
    principal: str | None = field(default=None, compare=False)
    """Who reads, where known: a source brought by the user may filter by it (its own owners)."""

    @property
    def sees_all(self) -> bool:
        return self.groups is None

    def sees(self, access: Sequence[str] | None) -> bool:
        """Whether a document with this access list is visible (None: public)."""
        if self.groups is None or access is None:
            return True
        return bool(set(access) & set(self.groups))


EVERYONE = Viewer()
"""The viewer who sees every document."""

_VIEWER: ContextVar[Viewer] = ContextVar("grounded_agent_viewer", default=EVERYONE)


def viewer_for(principal: Principal) -> Viewer:
    return EVERYONE if principal.sees_all else Viewer(principal.groups, principal.name)


def current_viewer() -> Viewer:
    """The viewer of the read in progress (set by the graph around its source calls, so a source
    brought by the user can filter by it too); everyone outside a run."""
    return _VIEWER.get()


@contextmanager
def reading_as(viewer: Viewer) -> Iterator[Viewer]:
    """Runs the block's reads (and the tasks it starts) as `viewer`."""
    token = _VIEWER.set(viewer)
    try:
        yield viewer
    finally:
        _VIEWER.reset(token)


def parse_groups(value: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """Groups from a comma-separated text or a list; ValueError naming the rule for a bad name."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise ValueError("groups must be names")
        name = item.strip()
        if not name:
            continue
        if not _NAME.match(name):
            raise ValueError("a group must be a name of letters, digits and _ . @ - (at most 128)")
        out.append(name)
    return tuple(dict.fromkeys(out))
