"""``momoka chunk``: output with offsets, JSON lines, and one-line errors with exit code 2."""

from __future__ import annotations

import json

import pytest

from momoka.cli import main

TEXT = "One two three. Four five!\n\nSix seven eight nine. Ten.\n"


@pytest.fixture
def txt(tmp_path):
    p = tmp_path / "doc.txt"
    p.write_text(TEXT, encoding="utf-8")
    return p


def test_json_lines_have_exact_offsets(txt, capsys):
    assert main(["chunk", str(txt), "--chunker", "fixed", "--size", "4", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["start"], r["end"]) for r in rows] == [(0, 19), (20, 42), (43, 53)]  # hand-computed
    for r in rows:
        assert TEXT[r["start"] : r["end"]] == r["text"]
    assert [r["index"] for r in rows] == [0, 1, 2] and rows[0]["doc_id"] == "doc"


def test_human_output_lists_offsets(txt, capsys):
    assert main(["chunk", str(txt), "--chunker", "paragraph"]) == 0
    out = capsys.readouterr().out
    assert "[0] 0:25" in out and "[1] 27:53" in out and "Six seven eight nine. Ten." in out


def test_overlap_and_unit_are_passed(txt, capsys):
    assert main(["chunk", str(txt), "--chunker", "fixed", "--size", "20", "--unit", "chars", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["start"], r["end"]) for r in rows] == [(0, 19), (20, 40), (40, 53)]
    assert main(["chunk", str(txt), "--chunker", "sentence", "--size", "3", "--overlap", "1", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["start"], r["end"]) for r in rows] == [(0, 48), (27, 53)]


def test_markdown_sections_in_output(tmp_path, capsys):
    p = tmp_path / "d.md"
    p.write_text("# Title\n\nIntro here.\n\n## Part\n\nBody here.\n", encoding="utf-8")
    assert main(["chunk", str(p), "--chunker", "structure", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["section"] for r in rows] == [["Title"], ["Title", "Part"]]


@pytest.mark.parametrize(
    "content, args",
    [
        (None, []),  # the file does not exist
        (b"", []),  # empty file
        (b"  \n\t \n", []),  # whitespace only
        (b"\x00\x01\x02binary\x00\xff" * 20, []),  # binary data
        (TEXT.encode(), ["--size", "0"]),  # size must be positive
        (TEXT.encode(), ["--chunker", "recursive", "--overlap", "2"]),  # recursive takes no overlap
        (TEXT.encode(), ["--chunker", "fixed", "--size", "4", "--overlap", "4"]),  # overlap >= size
    ],
)
def test_errors_give_one_line_and_exit_2(tmp_path, capsys, content, args):
    p = tmp_path / "in.txt"
    if content is not None:
        p.write_bytes(content)
    assert main(["chunk", str(p), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("momoka: error:") and "\n" not in err


def test_undeclared_non_utf8_text_is_read_with_a_warning_naming_the_guess(tmp_path, capsys):
    p = tmp_path / "in.txt"
    p.write_bytes(b"ok text \xff\xfe bad utf-8")  # not UTF-8, no declared encoding
    assert main(["chunk", str(p)]) == 0
    cap = capsys.readouterr()
    assert "ok text \u00ff\u00fe bad utf-8" in cap.out  # bytes FF FE in windows-1252: y with diaeresis, thorn
    assert cap.err.startswith("momoka: warning:") and "cp1252" in cap.err and "charset-normalizer" in cap.err


def test_tokenizer_file(tmp_path, txt, capsys, wordlevel_tokenizer):
    tj = tmp_path / "tok.json"
    wordlevel_tokenizer.save(str(tj))
    assert main(["chunk", str(txt), "--chunker", "fixed", "--size", "3", "--tokenizer", str(tj), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    for r in rows:
        assert TEXT[r["start"] : r["end"]] == r["text"]
        assert len(wordlevel_tokenizer.encode(r["text"], add_special_tokens=False).ids) <= 3 or " " not in r["text"]
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    for args in (
        ["--tokenizer", str(bad)],  # malformed tokenizer file
        ["--tokenizer", str(tmp_path / "missing.json")],  # missing tokenizer file
        ["--tokenizer", str(tj), "--unit", "chars"],  # a tokenizer makes no sense with chars
        ["--tokenizer", str(tj), "--chunker", "sentence"],  # the sentence chunker counts sentences
    ):
        assert main(["chunk", str(txt), *args]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("momoka: error:") and "\n" not in err


def test_unknown_chunker_is_one_line_naming_the_known_ones(txt, capsys):
    # checked by the registry (so --help need not import every method package): one line, exit 2
    assert main(["chunk", str(txt), "--chunker", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("momoka: error: unknown chunker 'nope'")
    assert all(n in err[0] for n in ("fixed", "recursive", "sentence", "ppl", "sections"))
