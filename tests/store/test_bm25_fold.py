"""Compatibility folding for BM25: a typed "first" finds "ﬁrst", the stored text keeps its ligature.

References: rank_bm25 over the same corpus with its ligatures written out by hand, Unicode's own NFKC
(``unicodedata``) for what a character folds to, and the native tokeniser called directly for text that
needs no folding (ASCII, and NFKC-normal text of other scripts), whose tokens must not change.
"""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from momoka import Index, _core
from momoka.store import BM25
from momoka.store.bm25 import ENGLISH_STOPWORDS, fold_compatibility, tokenize
from momoka.text import Document

LIGATURE_CORPUS = [
    "The \ufb01rst \ufb02ow of the river \ufb01lls the basin.",  # ﬁrst, ﬂow, ﬁlls
    "A second document about mountains and rivers.",
    "Efficient ways to cross a river in spring.",
    "Nothing here matches the query at all.",
]
# the same corpus as a reader types it: each ligature written out by hand
TYPED_CORPUS = [
    "The first flow of the river fills the basin.",
    "A second document about mountains and rivers.",
    "Efficient ways to cross a river in spring.",
    "Nothing here matches the query at all.",
]


def _words(text: str) -> list[str]:
    """A plain reference tokeniser for ASCII prose: lowercased runs of letters and digits."""
    out, cur = [], []
    for ch in text.lower():
        if ch.isascii() and ch.isalnum():
            cur.append(ch)
        elif cur:
            out.append("".join(cur))
            cur = []
    if cur:
        out.append("".join(cur))
    return out


def test_typed_query_finds_ligatures_with_rank_bm25_scores():
    rank_bm25 = pytest.importorskip("rank_bm25")
    ix = BM25()
    ix.add(LIGATURE_CORPUS)
    ref = rank_bm25.BM25Okapi([_words(t) for t in TYPED_CORPUS])
    for query in ("first flow", "fills", "the \ufb01rst \ufb02ow"):  # typed, and with ligatures in the query
        want = ref.get_scores(_words(unicodedata.normalize("NFKC", query)))
        np.testing.assert_allclose(ix.get_scores(query), want, rtol=1e-12, atol=1e-12)
    ids, scores = ix.search("first flow", k=2)
    assert ids[0] == 0 and scores[0] > 0
    assert ix.tokenize(LIGATURE_CORPUS[0])[:3] == ["the", "first", "flow"]


def test_index_finds_ligature_text_and_keeps_it_with_exact_offsets():
    text = ("Chapter one\n\nThe \ufb01rst \ufb02ow of water reached the valley at dawn.\n\n"
            "Later the farmers opened the gates and the fields were green again.")
    other = "A page about something else entirely: trains, timetables and stations."
    docs = [Document.from_text(text, doc_id="river"), Document.from_text(other, doc_id="trains")]
    ix = Index.build(docs, embedder=None, progress=False, chunker="paragraph")
    hits = ix.search("first flow", k=3, retriever="bm25", assemble=False)
    assert hits and hits[0].doc_id == "river"
    top = hits[0]
    assert text[top.start : top.end] == top.text  # exact offsets into the stored text
    assert "\ufb01rst \ufb02ow" in top.text  # the stored text keeps the ligatures
    stored = ix.corpus.document("river").text  # rebuilt from the stored chunks (whitespace between them as spaces)
    assert stored.split() == text.split() and len(stored) == len(text)
    ix.close()


def test_fold_is_nfkc_for_letters_marks_and_digits_only():
    assert fold_compatibility("\ufb01rst \ufb02ow \ufb00 \ufb03 \ufb04") == "first flow ff ffi ffl"
    assert fold_compatibility("\uff26\uff55\uff4c\uff4c") == "Full"  # fullwidth
    assert fold_compatibility("\U0001d400\U0001d401") == "AB"  # mathematical bold capitals
    assert fold_compatibility("cafe\u0301") == "caf\u00e9"  # composed, as NFC composes it
    # symbols and other numbers stay: they were separators and stay separators
    for s in ("Acme\u2122", "x\u00b2", "\u00bd cup", "\u2460 one"):
        assert fold_compatibility(s) == s
        assert tokenize(s) == _core.bm25_tokenize(s, True, False, [])
    assert tokenize("Acme\u2122 rocket") == ["acme", "rocket"]
    # every letter or digit folded is NFKC's own answer for that character
    for cp in list(range(0xFB00, 0xFB07)) + list(range(0xFF21, 0xFF3B)) + [0x017F, 0x00B5, 0x2113, 0x0132]:
        ch = chr(cp)
        assert fold_compatibility(ch) == unicodedata.normalize("NFKC", ch)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=200))
def test_ascii_tokens_are_unchanged(text):
    assert fold_compatibility(text) is text
    for stem, stop in ((False, None), (True, "english")):
        stops = list(ENGLISH_STOPWORDS) if stop else []
        assert tokenize(text, stem=stem, stopwords=stop) == _core.bm25_tokenize(text, True, stem, stops)


def test_nfkc_normal_text_of_other_scripts_is_unchanged():
    texts = ["Über die Brücke gehen wir morgen früh.", "Москва — столица России.", "東京は日本の首都です。",
             "Ελληνικά κείμενα με τόνους.", "naïve café façade", "한국어 문장입니다"]
    for t in texts:
        assert fold_compatibility(t) is t
        for version in (1, 2):  # either tokeniser rule: folding leaves the text to it
            assert tokenize(t, tokenizer_version=version) == _core.bm25_tokenize(t, True, False, [], version)
