"""MC-indexing: the sections chunker, the offline view back-ends and the union of views.

References are hand-made documents with known sections, hand-computed unions
and slow plain-Python re-implementations (MMR, centroid summary).
"""

from __future__ import annotations

import numpy as np
import pytest

from momoka.errors import ConfigError
from momoka import registry
from momoka.methods.mcindex import SectionsChunker, detect_sections, per_view_k, round_robin_union
from momoka.methods.mcindex import offline
from momoka.text import Document

NQ_LIKE = ("Title - wikipedia <H1> Title </H1> <P> Lead text about the topic . </P> "
           "<H2> Contents </H2> <Ul> <Li> 1 History </Li> </Ul> "
           "<H2> History ( edit ) </H2> <P> Founded in 1900 by people . </P> "
           "<H3> Early years ( edit ) </H3> <P> Small at first . </P> "
           "<H2> References ( edit ) </H2> <P> Ref one . </P> <H3> Books </H3> <P> A book . </P> "
           "<H2> </H2> <P> navbox links </P>")


def _texts(chunks):
    return [c.text for c in chunks]


def test_html_headings_in_raw_text_give_sections_with_exact_offsets_and_drops():
    # NQ-style tokenised HTML: headings found in the unchanged text; Contents (TOC) and References with its
    # sub-section "Books" dropped; the untitled <H2> is no division (its text joins References: dropped too)
    doc = Document.from_text(NQ_LIKE, doc_id="d")
    chunks = SectionsChunker()(doc)
    assert all(NQ_LIKE[c.start:c.end] == c.text for c in chunks)
    heads = [c.section[-1] if c.section else "" for c in chunks]
    assert heads == ["", "Title", "History", "Early years"]
    joined = " ".join(_texts(chunks))
    for gone in ("Ref one", "A book", "navbox", "1 History"):
        assert gone not in joined
    assert "Founded in 1900" in joined and "Small at first" in joined


def test_drop_rule_can_be_changed_or_switched_off():
    keep_all = SectionsChunker(drop="", drop_toc=False)(Document.from_text(NQ_LIKE))
    assert any("Ref one" in t for t in _texts(keep_all)) and any("1 History" in t for t in _texts(keep_all))
    only_history = SectionsChunker(drop="history")(Document.from_text(NQ_LIKE))
    joined = " ".join(_texts(only_history))
    assert "Founded" not in joined and "Small at first" not in joined and "Ref one" in joined
    with pytest.raises(ConfigError):
        SectionsChunker(drop="(unclosed")
    with pytest.raises(ConfigError):
        SectionsChunker(headings="toc")


def test_plain_heading_lines_markdown_and_paragraph_fallback():
    plain = "Introduction\nWe study cats in detail here.\nMethod\nWe count the cats one by one.\n"
    secs = detect_sections(plain)
    assert [s.title for s in secs] == ["Introduction", "Method"]
    assert _texts(SectionsChunker()(Document.from_text(plain))) == [
        "Introduction\nWe study cats in detail here.", "Method\nWe count the cats one by one."]
    md = "# A\n\nText a.\n\n## B\n\nText b.\n\n## See also\n\n- x\n"
    assert [s.title for s in detect_sections(md)] == ["A", "B", "See also"]
    assert _texts(SectionsChunker()(Document.from_text(md))) == ["# A\n\nText a.", "## B\n\nText b."]
    # a parsed Markdown document keeps its own sections
    parsed = Document.from_markdown(md)
    assert [c.section for c in SectionsChunker()(parsed)] == [("A",), ("A", "B")]
    # no headings at all: paragraphs are the smallest division
    paras = "First paragraph is long enough to be one.\n\nSecond paragraph, also prose."
    assert _texts(SectionsChunker()(Document.from_text(paras))) == [
        "First paragraph is long enough to be one.", "Second paragraph, also prose."]


def test_long_section_stays_whole_unless_max_size():
    body = " ".join(f"w{i}" for i in range(1000))
    doc = Document.from_text(f"Intro\n{body}\n")
    assert len(SectionsChunker()(doc)) == 1
    parts = SectionsChunker(max_size=300)(doc)  # FLC within sections: 1001 tokens -> 300+300+300+101
    assert [len(c.text.split()) for c in parts] == [300, 300, 300, 101]
    assert registry.create("chunker", "sections", size=300).max_size == 300


def test_per_view_k_and_round_robin_union_by_hand():
    assert [per_view_k(k) for k in (1, 2, 3, 5, 10)] == [1, 1, 2, 3, 7]
    raw = [(4, .9), (7, .8), (1, .7)]
    kw = [(7, .5), (2, .4), (9, .3)]
    summ = [(4, .6), (3, .5), (2, .1)]
    u = round_robin_union([raw, kw, summ])
    # rank 1: 4 (raw), 7 (kw), 4 dup; rank 2: 7 dup, 2 (kw), 3 (summary); rank 3: 1 (raw), 9 (kw), 2 dup
    assert [(c, v, r) for c, v, r, _ in u] == [(4, 0, 1), (7, 1, 1), (2, 1, 2), (3, 2, 2), (1, 0, 3), (9, 1, 3)]
    assert dict((c, f) for c, _, _, f in u)[2] == [1, 2]


def _mmr_reference(doc, cands, n, div):
    def cos(a, b):
        return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))
    picked = [max(range(len(cands)), key=lambda i: cos(cands[i], doc))]
    while len(picked) < min(n, len(cands)):
        best, score = None, -1e9
        for i in range(len(cands)):
            if i in picked:
                continue
            s = (1 - div) * cos(cands[i], doc) - div * max(cos(cands[i], cands[j]) for j in picked)
            if s > score:
                best, score = i, s
        picked.append(best)
    return picked


def test_mmr_matches_a_plain_reference():
    rng = np.random.default_rng(3)
    doc = rng.normal(size=8)
    cands = rng.normal(size=(12, 8))
    for div in (0.0, 0.5, 0.9):
        assert offline.mmr(doc, cands, 5, div) == _mmr_reference(doc, cands, 5, div)


def test_candidates_skip_stop_words_and_markup():
    c = offline.candidates(offline.clean("<P> The rocket engine of the rocket </P> <Li> and the engine </Li>"))
    assert "rocket engine" in c and "rocket" in c
    assert not any(w.split()[0].lower() in offline.STOPWORDS or w.split()[-1].lower() in offline.STOPWORDS
                   for w in c)
    assert not any(t in c for t in ("P", "Li"))


def test_extractive_summary_keeps_budget_and_document_order():
    # a fake embedder: a sentence's vector is its bag of topic words; the off-topic sentence is least central
    topics = ["cat", "dog", "fish", "quantum"]

    def embed(texts):
        return np.asarray([[t.lower().count(w) + 0.01 for w in topics] for t in texts], dtype=np.float32)

    text = ("The cat and the dog play. A fish watches the cat. The dog chases the cat and the fish. "
            "Quantum chromodynamics is unrelated.")
    sents = offline.sentences(text)
    vec = embed(sents)
    u = vec / np.linalg.norm(vec, axis=1, keepdims=True)
    c = u.mean(0) / np.linalg.norm(u.mean(0))
    order = list(np.argsort(-(u @ c), kind="stable"))
    want, words = [], 0
    for i in order:  # plain reference of the greedy budget
        w = len(sents[i].split())
        if want and words + w > 14:
            continue
        want.append(i)
        words += w
    got = offline.extractive_summary([text], embed, max_words=14)[0]
    assert got == " ".join(sents[i] for i in sorted(want))
    assert "Quantum" not in got and len(got.split()) <= 14
