"""Files that must not stop or swell an ingest (issue 46), read by the real loaders: YAML alias
bombs and oversized front matter, words thousands of letters long, a 10 MB line, FIFOs and
devices, symbolic links out of the folder, metadata outside its rules. Each limit has a control
showing the input is what it claims (the bomb does expand under plain YAML; the FIFO would
block a plain read)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grounded_agent.inputs import MAX_DOC_ID_CHARS, doc_id_problem, safe_doc_id
from grounded_agent.loaders import iter_files, load_file, read_regular
from grounded_agent.loaders.base import (
    MAX_ALIASES,
    MAX_TOKEN_CHARS,
    IngestError,
    parse_front_matter,
)
from grounded_agent.store.ingest import MAX_CHARS, MIN_CHARS, to_record

BOMB = """---
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
---
# Bomb

Text.
"""


def _count(value: object) -> int:
    if isinstance(value, list):
        return sum(_count(v) for v in value)
    return 1


def test_an_alias_bomb_is_refused_at_once() -> None:
    # control: plain YAML expands it to 9^7 = 4.8 million strings
    tree = yaml.load(BOMB.split("---")[1], Loader=yaml.BaseLoader)
    assert _count(tree["g"]) == 9**7
    started = time.perf_counter()
    with pytest.raises(IngestError, match="aliases"):
        parse_front_matter(BOMB)
    assert time.perf_counter() - started < 1.0


@settings(max_examples=60, deadline=None, database=None)
@given(width=st.integers(2, 30), depth=st.integers(1, 6))
def test_any_alias_tree_is_bounded(width: int, depth: int) -> None:
    """Nested aliases of any width and depth: refused past MAX_ALIASES aliases or 64 KB once
    expanded; what is accepted is small."""
    lines = ['l0: &l0 "' + "x" * 200 + '"']
    lines += [f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * width) + "]" for i in range(1, depth + 1)]
    text = "---\n" + "\n".join(lines) + "\n---\nbody\n"
    aliases = width * depth
    try:
        meta, _ = parse_front_matter(text)
    except IngestError as exc:
        assert "aliases" in str(exc) or "KB" in str(exc), exc
        return
    assert aliases <= MAX_ALIASES
    assert len(repr(meta)) < 200_000


def test_front_matter_too_large_or_unclosed(tmp_path: Path) -> None:
    big = "---\n" + "".join(f"k{i}: {'v' * 60}\n" for i in range(2_000)) + "---\nbody\n"
    with pytest.raises(IngestError, match="larger than 64 KB"):
        parse_front_matter(big)
    with pytest.raises(IngestError, match="closing"):
        parse_front_matter("---\ntitle: x\nbody without an end\n")


def _md(tmp: Path, name: str, text: str) -> Path:
    path = tmp / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_word_of_3000_letters_is_left_out_and_reported(tmp_path: Path) -> None:
    path = _md(tmp_path, "long.md", "# Long\n\nThe Pro plan costs 49 EUR. " + "a" * 3_000
               + " The end.\n")
    [doc], _ = load_file(path)
    assert doc.notes and str(MAX_TOKEN_CHARS) in doc.notes[0]
    record = to_record(doc)
    assert all(len(w) <= MAX_TOKEN_CHARS for c in record.chunks for w in c.content.split())
    assert "49 EUR" in record.chunks[0].content


def test_a_10_mb_line_makes_no_giant_chunk(tmp_path: Path) -> None:
    path = _md(tmp_path, "line.txt", "x" * 10_000_000)
    started = time.perf_counter()
    with pytest.raises(IngestError, match=r"empty document.*left out"):
        load_file(path)
    words = _md(tmp_path, "words.txt", "word " * 400_000)  # 2 MB on one line, of real words
    [doc], _ = load_file(words)
    chunks = to_record(doc).chunks
    assert max(len(c.content) for c in chunks) <= MAX_CHARS + MIN_CHARS
    many = _md(tmp_path, "many.txt", "word " * 2_000_000)  # 10 MB of words: minutes to embed
    with pytest.raises(IngestError, match="larger than the limit"):
        load_file(many)
    assert time.perf_counter() - started < 20


def test_a_fifo_is_skipped_without_blocking(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    os.mkfifo(kb / "pipe.md")
    (kb / "link.md").symlink_to(kb / "pipe.md")
    _md(kb, "good.md", "# Good\n\nText.\n")
    # control: a plain open of the FIFO blocks (here until a writer comes)
    opened = threading.Event()
    threading.Thread(target=lambda: (open(kb / "pipe.md", "rb").close(), opened.set()),
                     daemon=True).start()
    assert not opened.wait(0.3)
    found = dict(iter_files([kb]))
    assert found[kb / "good.md"] is None
    assert "FIFO" in (found[kb / "pipe.md"] or "")
    assert "FIFO" in (found[kb / "link.md"] or "")
    started = time.perf_counter()
    with pytest.raises(IngestError, match="FIFO"):
        read_regular(kb / "pipe.md")
    assert time.perf_counter() - started < 1.0
    assert "FIFO" in (dict(iter_files([kb / "link.md"]))[kb / "link.md"] or "")
    with open(kb / "pipe.md", "wb"):  # release the control's reader
        pass


def test_links_out_of_the_folder_are_not_followed(tmp_path: Path) -> None:
    kb, outside = tmp_path / "kb", tmp_path / "secret"
    kb.mkdir()
    outside.mkdir()
    _md(outside, "os-release.txt", "NAME=secret\n")
    _md(kb, "inside.md", "# Inside\n\nText.\n")
    (kb / "b.txt").symlink_to(outside / "os-release.txt")
    (kb / "c.md").symlink_to(kb / "inside.md")
    (kb / "dev.txt").symlink_to("/dev/null")
    (kb / "dangling.md").symlink_to(tmp_path / "nothing.md")
    (kb / "sub").symlink_to(outside, target_is_directory=True)
    found = dict(iter_files([kb]))
    assert "outside" in (found[kb / "b.txt"] or "")
    assert found[kb / "c.md"] is None and found[kb / "inside.md"] is None
    assert found[kb / "dev.txt"] is not None
    assert "nothing" in (found[kb / "dangling.md"] or "")
    assert not any("sub" in p.parts for p in found)  # a linked folder is not entered
    followed = dict(iter_files([kb], follow_links=True))
    assert followed[kb / "b.txt"] is None
    assert "device" in (followed[kb / "dev.txt"] or "")


@pytest.mark.parametrize(("field", "value", "needle"), [
    ("id", "x" * 5_000, "longer than"),
    ("id", "<img src=x onerror=alert(1)>", "may hold only"),
    ("id", "doc [77]", "may hold only"),
    ("version", "<script>", "may hold only"),
    ("version", "v" * 65, "longer than"),
    ("language", "<img src=x>", "ISO code"),
    ("source_url", "javascript:alert(1)", "http"),
    ("source_url", "//evil.example/x", "http"),
    ("source_url", "https://ok.example/a b", "http"),
])
def test_metadata_outside_its_rules_is_refused_without_quoting_it(
    tmp_path: Path, field: str, value: str, needle: str
) -> None:
    path = _md(tmp_path, "m.md", f"---\n{field}: '{value}'\n---\n# T\n\nText.\n")
    with pytest.raises(IngestError) as exc:
        load_file(path)
    assert needle in str(exc.value) and field in str(exc.value)
    assert value not in str(exc.value)


def test_good_metadata_passes(tmp_path: Path) -> None:
    path = _md(tmp_path, "m.md", "---\nid: faq/billing-2026 (EU)\nversion: 2026.10-rc1\n"
               "language: pt-BR\nsource_url: https://example.com/a?b=1#c\n---\n# T\n\nText.\n")
    [doc], _ = load_file(path)
    assert (doc.doc_id, doc.version, doc.language, doc.source_url) == (
        "faq/billing-2026 (EU)", "2026.10-rc1", "pt-br", "https://example.com/a?b=1#c")


@settings(max_examples=200, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(name=st.text(min_size=1, max_size=400))
def test_an_id_from_any_file_name_is_valid(name: str) -> None:
    """A file's name becomes its id when the file declares none: made valid, whatever it is."""
    made = safe_doc_id(name.replace("\ud800", ""))
    assert doc_id_problem(made) is None, (name, made)
    assert len(made) <= MAX_DOC_ID_CHARS


def test_a_file_with_control_characters_in_its_name(tmp_path: Path) -> None:
    path = _md(tmp_path, "a\x1b[2Jb <img>.md", "# T\n\nText.\n")
    [doc], _ = load_file(path)
    assert doc_id_problem(doc.doc_id) is None and "\x1b" not in doc.doc_id


def test_a_files_own_bad_properties_are_left_out_not_fatal(tmp_path: Path) -> None:
    """HTML head values that break a rule are dropped (nobody declared them); the same value
    in a sidecar, declared for this knowledge base, is refused."""
    page = tmp_path / "p.html"
    page.write_text('<html lang="en"><head><title>T</title><link rel="canonical" '
                    'href="https://ok.example/a b"><meta name="version" content="<b>2</b>">'
                    "</head><body><h1>T</h1><p>Text.</p></body></html>", encoding="utf-8")
    [doc], _ = load_file(page)
    assert doc.source_url is None and doc.title == "T"
    (tmp_path / "p.html.meta.yaml").write_text("source_url: 'javascript:alert(1)'\n")
    with pytest.raises(IngestError, match="source_url"):
        load_file(page)


def test_deep_nesting_is_one_files_or_one_lines_error(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match=r"nests too deep|invalid YAML"):
        parse_front_matter("---\nk: " + "[" * 20_000 + "]" * 20_000 + "\n---\nbody\n")
    lines = tmp_path / "deep.jsonl"
    lines.write_text('{"id": "a", "text": "Fine."}\n' + '{"x": ' * 50_000 + "1" + "}" * 50_000
                     + '\n{"id": "b", "text": "Also fine."}\n', encoding="utf-8")
    docs, errors = load_file(lines)
    assert [d.doc_id for d in docs] == ["a", "b"]
    assert len(errors) == 1 and "nests too deep" in errors[0].reason


def test_a_sidecar_linked_out_of_the_folder_is_not_read(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    kb, outside = tmp_path / "kb", tmp_path / "outside"
    kb.mkdir()
    outside.mkdir()
    (outside / "secrets.yaml").write_text("api_key: s3cr3t\n")
    doc = _md(kb, "a.md", "# A\n\nText.\n")
    (kb / "a.md.meta.yaml").symlink_to(outside / "secrets.yaml")
    with pytest.raises(IngestError, match="out of its folder"):
        load_file(doc)
    monkeypatch.setenv("GROUNDED_AGENT_FOLLOW_SYMLINKS", "1")  # the setting that allows it
    [read], _ = load_file(doc)
    assert read.extra == {"api_key": "s3cr3t"}
