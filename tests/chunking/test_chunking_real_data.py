"""Every chunker on real shared documents (plain text, and Markdown/HTML built from them)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from momoka.chunking import available_chunkers, get_chunker
from momoka.text import Document

pytestmark = pytest.mark.data

SETS = ["squad_v1_dev_half_a", "leval_qasper", "hotpotqa_dev500_long", "quality_leval"]


def first_doc(shared_data, name: str) -> str:
    with open(shared_data / name / "documents.jsonl", encoding="utf-8") as f:
        return json.loads(f.readline())["text"]


def check_tiling_fast(text: str, spans: np.ndarray, overlap: bool = False) -> None:
    """Vectorised coverage check: every non-whitespace character covered once (at least once with overlap)."""
    n = len(text)
    delta = np.zeros(n + 1, dtype=np.int64)
    np.add.at(delta, spans[:, 0], 1)
    np.add.at(delta, spans[:, 1], -1)
    cover = np.cumsum(delta)[:n]
    nonws = np.array([not ch.isspace() for ch in text], dtype=bool)
    assert (cover[nonws] >= 1).all()
    if not overlap:
        assert (cover[nonws] == 1).all()
        assert (spans[1:, 0] >= spans[:-1, 1]).all()
    assert (spans[1:, 0] > spans[:-1, 0]).all()
    assert nonws[spans[:, 0]].all() and nonws[spans[:, 1] - 1].all()


@pytest.mark.parametrize("dataset", SETS)
@pytest.mark.parametrize("name", available_chunkers())
def test_every_chunker_on_real_text(shared_data, dataset, name):
    text = first_doc(shared_data, dataset)
    doc = Document.from_text(text)
    for params in ({}, {"size": 64}, {"size": 300, "unit": "chars"} if name != "sentence" else {"size": 2}):
        ch = get_chunker(name, **params)
        chunks = ch(doc)
        spans = np.array([(c.start, c.end) for c in chunks], dtype=np.int64)
        check_tiling_fast(doc.text, spans)
        assert all(doc.text[c.start : c.end] == c.text for c in chunks)
    over = get_chunker("fixed", size=100, overlap=20)
    check_tiling_fast(doc.text, over.spans(doc), overlap=True)


def test_structure_on_markdown_and_html_from_real_text(shared_data):
    paras = [p for p in first_doc(shared_data, "squad_v1_dev_half_a").split("\n") if p.strip()][:12]
    md = "\n\n".join(f"## Part {i}\n\n{p}" if i % 3 == 0 else p for i, p in enumerate(paras))
    html = "<html><body>" + "".join(
        f"<h2>Part {i}</h2><p>{p}</p>" if i % 3 == 0 else f"<p>{p}</p>" for i, p in enumerate(paras)
    ) + "</body></html>"
    for doc in (Document.from_markdown(md), Document.from_html(html)):
        assert len(doc.sections) == 4
        chunks = get_chunker("structure", size=80)(doc)
        check_tiling_fast(doc.text, np.array([(c.start, c.end) for c in chunks], dtype=np.int64))
        # no chunk crosses a section start
        for s in doc.sections:
            assert not any(c.start < s.start < c.end for c in chunks)
        assert {c.section for c in chunks} == {s.path for s in doc.sections}
