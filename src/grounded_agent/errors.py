"""The errors a caller may catch, beneath every other module so that any of them can raise one."""

from __future__ import annotations


class InvalidQuestion(ValueError):
    """Input the agent refuses before any model or tool call; the message is safe to show."""
