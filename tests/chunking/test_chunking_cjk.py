"""Chinese text without spaces is chunked by sentence terminators and token budgets, like any other text.

The text is real Chinese vocabulary (jieba's dictionary, as the kernel benchmarks
use it); sizes are checked against an independent count (one token per
character whose Unicode name says CJK ideograph, plus runs of other characters).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from momoka.cli import main
from momoka import registry
from momoka.text import Document

from _oracles.chunking import words as ref_words

pytest.importorskip("jieba")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "micro"))
from _kernels_data import chinese_text  # noqa: E402

TERMINATORS = "。！？；…"
TEXT = chinese_text(21_600, seed=3)


@pytest.mark.parametrize("name,size", [("fixed", 256), ("recursive", 200), ("structure", 300)])
def test_every_size_chunker_cuts_chinese_within_its_budget(name, size):
    chunks = registry.create("chunker", name, size=size)(Document.from_text(TEXT, doc_id="zh"))
    assert len(chunks) >= len(TEXT) // size  # not one chunk [0:21600]
    assert chunks[0].start == 0 and chunks[-1].end == len(TEXT)
    for a, b in zip(chunks, chunks[1:]):
        assert a.end <= b.start or name == "fixed"
    for c in chunks:
        assert len(ref_words(c.text)) <= size  # tokens: one per CJK character (Unicode names), runs otherwise
        assert TEXT[c.start : c.end] == c.text
    if name in ("recursive", "structure"):  # cut at sentence terminators (the text has them every few words)
        ends = [c.text[-1] for c in chunks[:-1]]
        assert sum(e in TERMINATORS + "，" for e in ends) >= 0.9 * len(ends)
        assert sum(e in TERMINATORS for e in ends) >= 0.8 * len(ends)


def test_sentence_chunker_ends_chinese_sentences_at_terminators():
    import re

    chunks = registry.create("chunker", "sentence", n=1)(Document.from_text(TEXT, doc_id="zh"))
    # reference: a sentence ends at each run of 。！？； and at each ellipsis run between Chinese characters
    ends = re.compile(r"[。！？；]+|(?<=[\u4e00-\u9fff])…+(?=[\u4e00-\u9fff])")
    n_sent = len(ends.findall(TEXT))
    assert abs(len(chunks) - n_sent) <= 1
    assert all(c.text[-1] in "。！？；…" for c in chunks[:-1])


def test_momoka_chunk_cli_on_a_chinese_file(tmp_path, capsys):
    f = tmp_path / "zh.txt"
    f.write_text(TEXT, encoding="utf-8")
    # tried: `momoka chunk` on a 21,600-character Chinese document without spaces
    assert main(["chunk", str(f), "--json"]) == 0
    rows = [json.loads(ln) for ln in capsys.readouterr().out.splitlines() if ln.strip()]
    assert len(rows) > 50 and max(r["end"] - r["start"] for r in rows) < 1000
