"""Query-term coverage (momoka.methods.standard.coverage): a hand-computed re-rank, a slow reference on random
rankings, the hybrid retriever putting a comparison question's second company in its top, and its held terms
read from the BM25 postings ranking exactly as tokenising every candidate does (tests/_oracles/coverage.py)."""

from __future__ import annotations

import itertools
import random

import pytest

from momoka.errors import InputError
from momoka.methods.standard.coverage import cover_held, cover_terms

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


def test_cover_held_equals_the_plain_loop_to_the_bit():
    """The vectorised greedy picks the items, and gives the values, of the plain per-item loop exactly (==, not
    approx), on long lists with many ties (equal scores, equal term sets) and idf weights that do not sum
    exactly."""
    from _oracles.coverage import cover_held_loop

    rng = random.Random(11)
    vocab = [f"w{i}" for i in range(12)]
    for _ in range(300):
        n = rng.randint(1, 90)
        levels = [rng.random() for _ in range(rng.randint(1, 6))]
        scores = sorted((rng.choice(levels) for _ in range(n)), reverse=True)
        ranking = list(zip(range(n), scores))
        q = set(rng.sample(vocab, rng.randint(1, 9)))
        held = [set(rng.sample(sorted(q), rng.randint(0, len(q)))) for _ in range(n)]
        w = {t: rng.choice([0.1, 1 / 3, 2 / 7, 1.7, 0.0, 12.345678]) for t in vocab}
        weight, k = rng.choice([0.5, 1.5, 3.0, 1e-6]), rng.randint(1, n + 3)
        assert cover_held(ranking, q, held, w.get, weight, k) == cover_held_loop(ranking, q, held, w.get, weight, k)


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
        # title links off: the question names the document "Globex" by its title, which links it in too
        plain = [h.doc_id for h in ix.search(q, k=3, retriever="hybrid", coverage=0, links=0)]
        covered = ix.search(q, k=3, retriever="hybrid", links=0)
        assert "globex" not in plain  # every Acme chunk matches the question better
        assert "globex" in [h.doc_id for h in covered[:2]]  # the uncovered term "globex" brings it up
        assert covered[0].provenance["coverage"] > 0


# --- the native held-terms path against the tokenising reference -------------------------------------------

_WORDS = ("acme globex initech umbrella hooli dividend share price river bridge castle battle war treaty "
          "novel author poem film director album singer band league season player coach election party "
          "senate governor city village county population census founded built opened closed rebuilt").split()


def _corpus(rng):
    """Documents of random sentences over a small vocabulary (terms shared widely), titled, and a few
    very short ones (fewer distinct terms than a query has, where ``&`` walks the chunk's own set)."""
    docs = []
    for i in range(40):
        paras = []
        for _ in range(rng.randint(1, 4)):
            paras.append(". ".join(" ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 12)))
                                   for _ in range(rng.randint(1, 5))) + ".")
        docs.append({"doc_id": f"d{i}", "title": f"{rng.choice(_WORDS).title()} {rng.choice(_WORDS).title()} {i}",
                     "text": "\n\n".join(paras)})
    for i in range(8):
        docs.append({"doc_id": f"short{i}", "title": f"Short {i}", "text": f"{rng.choice(_WORDS)} {rng.choice(_WORDS)}."})
    return docs


def _queries(rng, docs):
    out = []
    for _ in range(30):
        out.append(" ".join(rng.choice(_WORDS) for _ in range(rng.randint(2, 12))))
    titles = [d["title"] for d in docs]
    for _ in range(10):  # naming two documents: the named-documents step ranks sub-queries too
        a, b = rng.sample(titles, 2)
        out.append(f"Which was first, the {rng.choice(_WORDS)} of {a} or the {rng.choice(_WORDS)} of {b}?")
    return out


def _hits(ix, qs, **kw):
    return [[(h.doc_id, h.start, h.end, h.score) for h in r]
            for r in ix.search_batch(qs, retriever="hybrid", **kw)]


@pytest.mark.parametrize("headers", [True, False])
def test_held_terms_rank_exactly_as_tokenising_over_segments_and_deletes(tmp_path, monkeypatch, headers):
    """The hybrid retriever's coverage re-rank, reading held terms from the postings, gives the rankings and
    scores (bit for bit) of the reference that tokenises every candidate's text: over many segments, after
    deletes, after adding more, and at several depths."""
    import momoka
    from momoka.methods.standard.retrievers import HybridRetriever
    from momoka.store.bm25 import tokenize
    from tests._oracles.coverage import cover_by_tokenising
    from tests.store.conftest import HashEmbedder

    monkeypatch.setenv("MOMOKA_MERGE_FACTOR", "1000")  # keep every commit's segment
    rng = random.Random(7 + headers)
    docs = _corpus(rng)
    qs = _queries(rng, docs)
    path = tmp_path / "s"
    ix = momoka.Index.build(docs[:30], store=path, embedder=HashEmbedder(), chunker="recursive", size=80,
                            commit_docs=6, progress=False, headers=headers)
    ix.delete([d["doc_id"] for d in docs[3:30:5]])
    ix.save()
    ix.add(docs[30:], progress=False)
    ix.delete(["d31", "short2"])
    ix.save()
    ix.close()
    ix = momoka.Index.open(path, embedder=HashEmbedder())
    assert len(ix.store.segments) >= 5

    # the fallback for chunks with fewer distinct terms than the query is exercised
    st = ix.store
    sizes = [len(set(tokenize(st.chunks.text(c), stem=True, stopwords="english"))) for c in st.chunks.ids().tolist()]
    assert min(sizes) <= 2 and max(len(set(tokenize(q, stem=True, stopwords="english"))) for q in qs) > 4

    for kw in ({"k": 5}, {"k": 12}, {"budget": 600}):
        got = _hits(ix, qs, **kw)
        with monkeypatch.context() as m:
            m.setattr(HybridRetriever, "_cover", cover_by_tokenising)
            want = _hits(ix, qs, **kw)
        assert got == want
    ix.close()


def test_bm25_holds_against_token_sets(tmp_path):
    """``BM25.holds`` against the token sets of the texts: after deletes, appends, saving and loading, for
    unknown ids and terms, and for a term in most documents (read through its dense row)."""
    from momoka.store import BM25

    rng = random.Random(3)
    texts = [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(0, 15))) + (" common" if i % 2 else "")
             for i in range(700)]
    params = {"stem": True, "stopwords": "english"}
    ix = BM25(**params)
    ix.add(texts[:300])
    ix.delete(range(0, 300, 7))
    piece = BM25(**params)
    piece.add(texts[300:600])
    piece.delete([1, 2, 3])
    ix.append(piece)
    terms = ["common", "acme", "river", "rebuilt", "absent", "dividend"]
    dead = set(range(0, 300, 7)) | {301, 302, 303}

    def check(ix, n):
        ids = list(range(-1, n + 2))
        held, n_terms = ix.holds(ids, terms)
        assert held.shape == (len(ids), len(terms)) and held.dtype == bool
        for i, d in enumerate(ids):
            toks = set(ix.tokenize(texts[d])) if 0 <= d < n and d not in dead else set()
            assert held[i].tolist() == [t in toks for t in terms], d
            assert int(n_terms[i]) == len(toks), d

    check(ix, 600)
    ix.add(texts[600:])  # counted on from the last call
    check(ix, 700)
    ix.save(tmp_path / "b.bin")
    check(BM25.load(tmp_path / "b.bin"), 700)
    held, n_terms = ix.holds([], terms)
    assert held.shape == (0, len(terms)) and n_terms.shape == (0,)
    assert ix.holds([5, 6], [])[0].shape == (2, 0)
    with pytest.raises(InputError):
        ix.holds([1], [3])


def test_held_terms_are_the_intersection_in_its_order():
    """``held_terms`` gives, per document, the set ``set(tokens) & query_terms`` gives, iterating in the same
    order (so ``cover_held``'s sums round alike): documents with fewer distinct terms than the query
    included, where ``&`` walks the document's set rather than the query's."""
    from momoka.methods.standard.coverage import held_terms
    from momoka.store import BM25

    rng = random.Random(11)
    texts = [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 20))) for _ in range(300)]
    ix = BM25(stem=True, stopwords="english")
    ix.add(texts)
    ix.delete([5, 6])
    sets = {i: set(ix.tokenize(t)) for i, t in enumerate(texts) if i not in (5, 6)}
    sets[5] = sets[6] = set(ix.tokenize("acme river castle war novel"))  # deleted: the tokens are used
    ids = list(range(len(texts)))
    for _ in range(200):
        q = set(ix.tokenize(" ".join(rng.sample(_WORDS, rng.randint(1, 16)))))
        got = held_terms(ix, ids, q, sets.__getitem__)
        assert [list(s) for s in got] == [list(sets[i] & q) for i in ids]
