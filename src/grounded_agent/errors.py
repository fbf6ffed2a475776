"""The errors a caller may catch, beneath every other module so that any of them can raise one."""

from __future__ import annotations


class InvalidQuestion(ValueError):
    """Input the agent refuses before any model or tool call; the message is safe to show."""


class ModelSetupError(ValueError):
    """A chat model that cannot be built as configured (a provider's package missing, a name the
    provider refuses); the message is one line a user can act on, and holds no key."""
