"""Exceptions of the knowledge store: a failed read must never look like an empty one."""

from __future__ import annotations


class StoreError(Exception):
    """Base class of knowledge-store failures."""


class StoreUnavailable(StoreError):
    """The database cannot be reached or started (embedded server, DATABASE_URL, credentials)."""


class StoreTimeout(StoreError, TimeoutError):
    """A store operation took longer than its timeout; a subclass of TimeoutError on purpose."""
