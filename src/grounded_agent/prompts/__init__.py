"""Prompts as data: one module per prompt, UPPER_SNAKE constants with XML-tagged slots."""
