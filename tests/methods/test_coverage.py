"""Query-term coverage (momoka.methods.standard.coverage): a hand-computed re-rank, a slow reference on random
rankings, and the hybrid retriever putting a comparison question's second company in its top."""

from __future__ import annotations

import itertools
import random

import pytest

from momoka.methods.standard.coverage import cover_terms

TERMS = {1: {"alpha"}, 2: {"alpha"}, 3: {"beta"}, 4: {"alpha", "beta"}}


def test_hand_computed():
    ranking = [(1, 1.0), (2, 0.9), (3, 0.5), (4, 0.0)]
    idf = {"alpha": 1.0, "beta": 1.0}.get
    # base = min-max scores 1.0, 0.9, 0.5, 0.0; a term adds weight * 1/2.
    # step 1: 1.5, 1.4, 1.0, 1.0 -> item 1 (covers alpha); step 2: 0.9, 1.0, 0.5 -> item 3; then 2 (0.9), 4 (0.0)
    got = cover_terms(ranking, {"alpha", "beta"}, TERMS.get, idf, 1.0, 4)
    assert [c for c, _ in got] == [1, 3, 2, 4]
    assert [s for _, s in got] == pytest.approx([1.5, 1.0, 0.9, 0.0])
    assert cover_terms(ranking, {"alpha", "beta"}, TERMS.get, idf, 1.0, 2) == got[:2]
    # no weight, no query term any item holds, no query terms: the order as it was
    assert cover_terms(ranking, {"alpha", "beta"}, TERMS.get, idf, 0.0, 3) == ranking[:3]
    assert [c for c, _ in cover_terms(ranking, {"gamma"}, TERMS.get, lambda t: 1.0, 1.0, 4)] == [1, 2, 3, 4]
    assert cover_terms(ranking, set(), TERMS.get, idf, 1.0, 4) == ranking
    assert cover_terms([], {"alpha"}, TERMS.get, idf, 1.0, 4) == []


def _reference(ranking, q, terms, idf, weight, k):
    """Slow transcription: at each step score every remaining item from scratch; first best in rank order."""
    vals = [s for _, s in ranking]
    lo, hi = min(vals), max(vals)
    norm = {c: ((s - lo) / (hi - lo) if hi > lo else 1.0) for c, s in ranking}
    total = sum(idf(t) for t in q)
    chosen: list = []
    while len(chosen) < min(k, len(ranking)):
        covered = set(itertools.chain.from_iterable(terms(c) & q for c, _ in chosen))
        cands = [(norm[c] + weight * sum(idf(t) for t in (terms(c) & q) - covered) / total, -r, c)
                 for r, (c, _) in enumerate(ranking) if c not in {x for x, _ in chosen}]
        val, _, c = max(cands)
        chosen.append((c, val))
    return chosen


def test_against_a_slow_reference_on_random_rankings():
    rng = random.Random(7)
    vocab = [f"t{i}" for i in range(8)]
    for _ in range(300):
        n = rng.randint(1, 12)
        scores = sorted((rng.choice([rng.random(), 0.5]) for _ in range(n)), reverse=True)
        ranking = list(zip(range(100, 100 + n), scores))
        terms = {c: set(rng.sample(vocab, rng.randint(0, 4))) for c, _ in ranking}
        q = set(rng.sample(vocab, rng.randint(1, 5)))
        w = {t: rng.choice([0.5, 1.0, 2.0]) for t in vocab}
        weight, k = rng.choice([0.5, 1.5, 3.0]), rng.randint(1, n)
        got = cover_terms(ranking, q, terms.get, w.get, weight, k)
        want = _reference(ranking, q, terms.get, w.get, weight, k)
        assert [c for c, _ in got] == [c for c, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want])
        assert all(a >= b - 1e-12 for (_, a), (_, b) in zip(got, got[1:]))  # never increasing


def test_hybrid_puts_the_second_company_of_a_comparison_in_its_top(tmp_path):
    import momoka
    from tests.store.conftest import HashEmbedder

    docs = [{"doc_id": f"acme{i}", "title": "Acme Corporation",
             "text": f"Acme paid a dividend of {i + 1} dollars per share in {2010 + i}. The dividend of Acme rose."}
            for i in range(6)]
    docs.append({"doc_id": "globex", "title": "Globex",
                 "text": "Globex paid its shareholders 4 dollars per share that year."})
    q = "dividend per share of Acme and Globex"
    with momoka.Index.build(docs, store=tmp_path / "s", embedder=HashEmbedder(), progress=False) as ix:
        plain = [h.doc_id for h in ix.search(q, k=3, retriever="hybrid", coverage=0)]
        covered = ix.search(q, k=3, retriever="hybrid")
        assert "globex" not in plain  # every Acme chunk matches the question better
        assert "globex" in [h.doc_id for h in covered[:2]]  # the uncovered term "globex" brings it up
        assert covered[0].provenance["coverage"] > 0
