"""The document prior of the hybrid ranking (momoka.methods.standard.fusion.document_prior): hand-computed
scores, a slow reference on random rankings, and the hybrid retriever ranking a chunk of the document the
query is about above a slightly closer chunk of another."""

from __future__ import annotations

import random

import pytest

from momoka.methods.standard.fusion import document_prior

DOCS = {1: "a", 2: "b", 3: "a", 4: "c", 5: "b"}


def test_hand_computed():
    ranking = [(1, 1.0), (2, 0.6), (4, 0.55), (3, 0.5), (5, 0.2)]
    # document scores: a 1.0, b 0.6, c 0.55; with weight 0.3:
    # 1: 1.0 + 0.3 = 1.3; 2: 0.6 + 0.18 = 0.78; 4: 0.55 + 0.165 = 0.715; 3: 0.5 + 0.3 = 0.8; 5: 0.2 + 0.18 = 0.38
    got = document_prior(ranking, DOCS.__getitem__, 0.3)
    assert [c for c, _ in got] == [1, 3, 2, 4, 5]
    assert [s for _, s in got] == pytest.approx([1.3, 0.8, 0.78, 0.715, 0.38])
    # weight 0 or an empty ranking: unchanged
    assert document_prior(ranking, DOCS.__getitem__, 0.0) == ranking
    assert document_prior([], DOCS.__getitem__, 0.3) == []
    # one document: every item gains the same, the order stays
    same = [(1, 0.9), (3, 0.4)]
    assert [c for c, _ in document_prior(same, DOCS.__getitem__, 2.0)] == [1, 3]


def test_ties_keep_the_ranking_order():
    # 2 (b): 0.5 + 0.5 * 0.5 = 0.75; 3 (a): 0.25 + 0.5 * 1.0 = 0.75: equal, so 2 stays before 3
    got = document_prior([(1, 1.0), (2, 0.5), (3, 0.25)], DOCS.__getitem__, 0.5)
    assert [c for c, _ in got] == [1, 2, 3]
    assert got[1][1] == got[2][1]


def _reference(ranking, doc_of, weight):
    """Slow transcription: each item's document score by a scan of the whole ranking, then a sort by
    (new score, position)."""
    out = []
    for pos, (c, s) in enumerate(ranking):
        best = max(s2 for c2, s2 in ranking if doc_of(c2) == doc_of(c))
        out.append((-(s + weight * best), pos, c, s + weight * best))
    return [(c, v) for _, _, c, v in sorted(out)]


def test_against_a_slow_reference_on_random_rankings():
    rng = random.Random(11)
    for _ in range(300):
        n = rng.randint(1, 15)
        scores = sorted((rng.choice([rng.random(), 0.5, 0.25]) for _ in range(n)), reverse=True)
        ranking = list(zip(range(100, 100 + n), scores))
        docs = {c: rng.choice("abcd") for c, _ in ranking}
        weight = rng.choice([0.1, 0.3, 1.0, 2.5])
        got = document_prior(ranking, docs.__getitem__, weight)
        want = _reference(ranking, docs.__getitem__, weight)
        assert [c for c, _ in got] == [c for c, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want])


def test_hybrid_prefers_the_document_the_query_is_about(tmp_path):
    import momoka
    from tests.store.conftest import HashEmbedder

    # The question is about the lighthouse report; one chunk of an unrelated document repeats its words.
    report = [
        "The lighthouse keepers of Skerry Point kept a log of every storm and every ship that passed.",
        "In 1921 the keepers installed a new lamp, and the light of the lighthouse reached twenty miles.",
        "Supplies came by boat once a month; in winter the keepers stored coal for the lighthouse lamp.",
        "The last keepers left in 1987, when the lighthouse was automated and its lamp run from the shore.",
    ]
    other = [
        "The museum keepers install a new lamp each year; one lamp of 1921 came from a shop.",
        "The museum also keeps old maps of the coast, a ship's bell and a collection of buttons.",
    ]
    docs = [{"doc_id": "report", "title": "Skerry Point", "text": "\n\n".join(report)},
            {"doc_id": "museum", "title": "Town museum", "text": "\n\n".join(other)}]
    q = "When did the lighthouse keepers install the new lamp of 1921?"
    with momoka.Index.build(docs, store=tmp_path / "s", embedder=HashEmbedder(), size=24, progress=False) as ix:
        opts = {"coverage": 0, "links": 0, "named_documents": 0, "depth": 50}
        plain = ix.search(q, k=50, retriever="hybrid", document_weight=0, **opts)
        got = ix.search(q, k=50, retriever="hybrid", document_weight=2.0, **opts)
        # the reference: the plain fused list re-scored by the definition, chunk by chunk
        doc = {h.chunk_id: h.doc_id for h in plain}
        best = {}
        for h in plain:
            best[h.doc_id] = max(best.get(h.doc_id, float("-inf")), h.score)
        want = sorted(((-(h.score + 2.0 * best[h.doc_id]), i, h.chunk_id) for i, h in enumerate(plain)))
        assert [h.chunk_id for h in got] == [c for _, _, c in want]
        assert got[0].provenance["document_weight"] == 2.0
        assert [doc[h.chunk_id] for h in plain[:3]] == ["report", "museum", "report"]  # the museum chunk is close
        top3 = [h.doc_id for h in got[:3]]
        assert top3 == ["report"] * 3  # with the prior, the report's own chunks come first
        with pytest.raises(momoka.errors.ConfigError, match="document_weight"):
            ix.search(q, k=2, retriever="hybrid", document_weight=-1)
