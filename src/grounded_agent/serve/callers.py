"""Who an X-API-Key names, for the endpoint and for LangGraph Server alike (one rule, two doors).

GROUNDED_AGENT_KEYS_FILE names principals and their groups (`grounded_agent.principals`);
GROUNDED_AGENT_API_KEY is one principal who sees everything; with neither set, every caller is
`ANYONE`, who sees everything too (a single-user server, on loopback by default).
"""

from __future__ import annotations

import hmac
import os
from pathlib import Path

from grounded_agent.principals import KeyRing, Principal

SHARED_KEY = Principal(name="shared-key", sees_all=True)
"""GROUNDED_AGENT_API_KEY's caller: one principal who sees everything."""
ANYONE = Principal(name="anyone", sees_all=True)
"""The caller of a server that asks for no key (on loopback, by default)."""


class Callers:
    """The keys a server accepts. The keys file is read now (a broken one fails the start, not a
    request) and again whenever it changes."""

    def __init__(self, api_key: str | None = None, keys_file: Path | None = None) -> None:
        self.api_key = api_key or None
        self.keys = KeyRing(keys_file) if keys_file is not None else None

    @classmethod
    def from_env(cls) -> Callers:
        """From GROUNDED_AGENT_API_KEY and GROUNDED_AGENT_KEYS_FILE."""
        keys_file = os.environ.get("GROUNDED_AGENT_KEYS_FILE", "").strip()
        return cls(os.environ.get("GROUNDED_AGENT_API_KEY") or None,
                   Path(keys_file).expanduser() if keys_file else None)

    @property
    def open(self) -> bool:
        """No key asked for: every caller is ANYONE."""
        return self.api_key is None and self.keys is None

    def principal(self, given: bytes) -> Principal | None:
        """Who sent `given` as X-API-Key: the shared key's principal (sees everything), one of
        the keys file's, anyone where neither is set; None: nobody (401)."""
        if self.api_key is not None and given and hmac.compare_digest(
            given, self.api_key.encode("utf-8")
        ):
            return SHARED_KEY
        if self.keys is not None:
            return self.keys.principal_for(given)
        return ANYONE if self.api_key is None else None
