"""When an answer must be translated: only for a recognised answer language that differs from
the one language all its sources share."""

from __future__ import annotations

import pytest

from grounded_agent.languages import code_of, translation_needed


@pytest.mark.parametrize(
    ("raw", "code"),
    [("ru", "ru"), ("RU", "ru"), ("ru-RU", "ru"), ("Russian", "ru"), ("Deutsch", "de"),
     ("pt_BR", "pt"), ("Klingon", None), ("", None), (None, None)],
)
def test_language_codes(raw: str | None, code: str | None) -> None:
    assert code_of(raw) == code


def test_translation_needed_only_where_it_can_be_told() -> None:
    assert translation_needed("ru", ["de", "de"]) == "de"
    assert translation_needed("Russian", ["de"]) == "de"
    assert translation_needed("de", ["de"]) is None  # same language: written as asked
    assert translation_needed("German", ["DE"]) is None
    assert translation_needed(None, ["de"]) is None  # no language asked for
    assert translation_needed("ru", ["de", "en"]) is None  # several: written as asked
    assert translation_needed("ru", ["de", None]) is None  # unknown source language
    assert translation_needed("Klingon", ["de"]) is None
