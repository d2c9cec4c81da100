"""ETS candidate sentences: exact spans, document order, the embedder pre-filter, bad input.

The reference ranks sentences by a plain loop over cosines of separately embedded
texts and takes the whole-document segmentation as the sentence inventory.
"""

from __future__ import annotations

import numpy as np
import pytest

from momoka.errors import ConfigError, InputError
from momoka.methods.base import Item, Member, Result
from momoka.methods.ets import Sentence, candidate_sentences
from momoka.text import Document

DOC_A = ("Marie Curie was born in Warsaw in 1867. She moved to Paris to study physics. "
         "In Paris she met Pierre Curie. They discovered polonium and radium. "
         "She won two Nobel Prizes. Her daughter Irene also won a Nobel Prize.")
DOC_B = ("The Eiffel Tower stands in Paris. It was finished in 1889 for a world fair. "
         "Gustave Eiffel's company built it.")


def _docs():
    return [Document(DOC_A, doc_id="a"), Document(DOC_B, doc_id="b")]


def _reference(query, docs, embedder, n):
    rows = []
    for d in docs:
        for s, e in d.sentences.tolist():
            rows.append((d.doc_id, s, e, d.text[s:e]))
    q = embedder.embed([query])[0].astype(np.float64)
    q /= np.linalg.norm(q)
    scored = []
    for i, r in enumerate(rows):
        v = embedder.embed([r[3]])[0].astype(np.float64)
        scored.append((-(v @ q) / np.linalg.norm(v), i))
    keep = sorted(i for _, i in sorted(scored)[:n])
    return [rows[i][:3] for i in keep]


def test_documents_top_n_in_document_order_matches_a_plain_reference(embedder):
    # tried: 9 sentences of two documents, keep 4 by cosine to a question about Curie's birthplace
    q = "Where was Marie Curie born?"
    got = candidate_sentences(q, documents=_docs(), embedder=embedder, n=4)
    assert [s.span for s in got] == _reference(q, _docs(), embedder, 4)
    texts = {"a": DOC_A, "b": DOC_B}
    for s in got:
        assert isinstance(s, Sentence) and texts[s.doc_id][s.start:s.end] == s.text
    assert got[0].text.startswith("Marie Curie was born in Warsaw")
    # n larger than the inventory: every sentence, document order
    every = candidate_sentences(q, documents=_docs(), embedder=embedder, n=100)
    assert [s.span for s in every] == _reference(q, _docs(), embedder, 100)
    assert len(every) == 9


def test_result_members_overlapping_chunks_give_each_sentence_once(embedder):
    # tried: doc b ranked first (sentence 0), then two overlapping chunks of doc a (sentences 1-3 and 2-4)
    a, b = _docs()
    sa, sb = a.sentences.tolist(), b.sentences.tolist()

    def member(doc, lo, hi):
        return Member(-1, doc.doc_id, lo, hi, doc.text[lo:hi])

    items = (
        Item((member(b, sb[0][0], sb[0][1]),), 3.0, 0),
        Item((member(a, sa[1][0], sa[3][1]),), 2.0, 1),
        Item((member(a, sa[2][0], sa[4][1]),), 1.0, 2),
    )
    res = Result("q", items, "test")
    got = candidate_sentences("Who discovered radium?", result=res, embedder=embedder, n=30)
    want = [("b", *sb[0])] + [("a", *sa[k]) for k in (1, 2, 3, 4)]
    assert [s.span for s in got] == [tuple(w) for w in want]  # doc b first: first seen in rank order
    for s in got:
        assert (a if s.doc_id == "a" else b).text[s.start:s.end] == s.text
    # the pre-filter keeps the radium sentence among the top 1
    top = candidate_sentences("Who discovered radium?", result=res, embedder=embedder, n=1)
    assert [s.text for s in top] == ["They discovered polonium and radium."]


def test_index_embedder_is_used_when_none_is_given(embedder):
    # tried: an object with only an .embedder attribute standing in for an Index
    class Ix:
        pass

    ix = Ix()
    ix.embedder = embedder
    got = candidate_sentences("Eiffel Tower", documents=_docs(), index=ix, n=2)
    assert all(s.doc_id == "b" for s in got)


def test_bad_input_is_refused(embedder):
    docs = _docs()
    with pytest.raises(InputError):  # empty query
        candidate_sentences("  ", documents=docs, embedder=embedder)
    with pytest.raises(InputError):  # neither source
        candidate_sentences("q", embedder=embedder)
    with pytest.raises(InputError):  # both sources
        candidate_sentences("q", documents=docs, result=Result("q", (), "t"), embedder=embedder)
    with pytest.raises(ConfigError):  # n < 1
        candidate_sentences("q", documents=docs, embedder=embedder, n=0)
    with pytest.raises(InputError):  # no embedder
        candidate_sentences("q", documents=docs)
    with pytest.raises(InputError):  # not a Document
        candidate_sentences("q", documents=["plain text"], embedder=embedder)
    bad = Result("q", (Item((Member(-1, "a", 0, 10, "short"),), 1.0, 0),), "t")
    with pytest.raises(InputError):  # member text does not fill its span
        candidate_sentences("q", result=bad, embedder=embedder)
    assert candidate_sentences("q", result=Result("q", (), "t"), embedder=embedder) == []
