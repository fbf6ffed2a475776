"""Grounding evaluation: +1 correct and cited, 0 abstained, -1 unfounded; baselines beside it."""
