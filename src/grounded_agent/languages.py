"""Language names and codes: whether an answer must be written in another language than its
sources (then it is written and checked in theirs, and translated afterwards)."""

from __future__ import annotations

from collections.abc import Iterable

NAMES = {
    "english": "en", "german": "de", "deutsch": "de", "french": "fr", "français": "fr",
    "spanish": "es", "español": "es", "italian": "it", "italiano": "it", "dutch": "nl",
    "nederlands": "nl", "portuguese": "pt", "russian": "ru", "русский": "ru", "polish": "pl",
    "polski": "pl", "swedish": "sv", "danish": "da", "norwegian": "no", "finnish": "fi",
    "czech": "cs", "turkish": "tr", "ukrainian": "uk", "japanese": "ja", "chinese": "zh",
    "korean": "ko", "arabic": "ar", "greek": "el", "hungarian": "hu", "romanian": "ro",
}
"""The answer languages a caller is likely to name, as ISO 639-1 codes."""

CODE_NAMES = {code: name.title() for name, code in reversed(NAMES.items())}
"""Each code's English name (NAMES lists the English name of a language before its own)."""


def code_of(language: str | None) -> str | None:
    """"ru", "RU", "ru-RU", "Russian" -> "ru"; None for what is not recognised."""
    if not language:
        return None
    raw = language.strip().lower()
    base = raw.replace("_", "-").split("-")[0]
    if len(base) == 2 and base.isalpha():
        return base
    return NAMES.get(raw)


def name_of(code: str) -> str:
    return CODE_NAMES.get(code, code)


def translation_needed(answer_language: str | None, source_languages: Iterable[str | None]) -> str | None:
    """The sources' one language when the answer is asked for in another, recognised language:
    the answer is then written (and its citations checked) in the sources' language first. None
    when no translation is needed or it cannot be told (sources in several or unknown languages,
    an answer language not recognised): the answer is then written as asked."""
    target = code_of(answer_language)
    codes = {code_of(s) for s in source_languages}
    if target is None or len(codes) != 1 or None in codes:
        return None
    (source,) = codes
    return None if source == target else source
