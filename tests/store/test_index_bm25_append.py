"""BM25.append: pieces built over consecutive ranges of a corpus and appended
must give exactly the index that adds the whole corpus in order.

The reference is independent of append: one index that adds every text in
order and deletes the same documents. Scores are compared bit for bit.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from momoka import _core
from momoka.errors import ConfigError, InputError
from momoka.store.bm25 import BM25

# A small corpus whose words repeat a lot, so that many terms have df > N/2
# (negative Okapi idf, floored by epsilon * mean idf) and some appear in one
# document only.
_COMMON = ["cat", "dog", "the", "runs", "fast", "park", "and"]
_RARE = ["zebra", "quokka", "lemur", "okapi", "tapir", "gecko", "ibis", "yak", "narwhal", "axolotl"]


def _hand_corpus() -> list[str]:
    rng = random.Random(7)
    docs = [
        "The cat runs fast in the park",
        "A dog and a cat",
        "zebra",  # a term of one document: deleted below in some tests
        "the the the dog dog runs",
        "",  # an empty document
        "Okapi BM25 ranks the cat and the dog",
    ]
    for i in range(40):
        words = [rng.choice(_COMMON) for _ in range(rng.randint(1, 12))]
        if i % 3 == 0:
            words.append(rng.choice(_RARE))
        if i % 11 == 5:
            words += [f"uniq{i}"] * rng.randint(1, 3)
        docs.append(" ".join(words))
    return docs


_HAND_QUERIES = [
    "cat", "the dog", "cat cat dog", "zebra", "quokka lemur", "the park and the cat", "runs fast",
    "okapi bm25", "uniq5 uniq16 cat", "narwhal axolotl yak", "nothing matches this", "dog and cat and park",
    "gecko the", "ibis tapir fast",
]

# Deleted slots of the hand corpus: the one-document term "zebra" (slot 2),
# the empty document, and a spread of others.
_HAND_DELETED = [2, 4, 7, 12, 13, 20, 31, 44]


def _pieces(n: int, cuts: list[int]) -> list[tuple[int, int]]:
    bounds = [0, *cuts, n]
    return list(zip(bounds[:-1], bounds[1:]))


def _reference(texts, deleted, **params) -> BM25:
    ix = BM25(**params)
    ix.add(texts)
    if deleted:
        ix.delete(deleted)
    return ix


def _appended(texts, ranges, deleted, tmp_path, *, when: str, roundtrip: bool, start_empty: bool = True,
              **params) -> BM25:
    """Builds one piece per range, deletes before or after appending, optionally saves and reloads pieces."""
    pieces = []
    for i, (lo, hi) in enumerate(ranges):
        p = BM25(**params)
        p.add(texts[lo:hi])
        if when == "before":
            mine = [d - lo for d in deleted if lo <= d < hi]
            if mine:
                p.delete(mine)
            if i % 2:
                p.get_scores("cat")  # some pieces compacted before appending, others with deletions pending
        if roundtrip:
            path = tmp_path / f"piece-{i}.bm25"
            p.save(path)
            p = BM25.load(path)
        pieces.append(p)
    if start_empty:
        out = BM25(**params)
        todo = list(zip(ranges, pieces))
    else:
        out = pieces[0]
        todo = list(zip(ranges, pieces))[1:]
    for (lo, hi), p in todo:
        before = p.get_scores("cat dog the").copy() if p.n_slots else None
        ids = out.append(p)
        assert ids.dtype == np.int64 and ids.tolist() == list(range(lo, hi))
        if before is not None:  # the appended piece is left as it was
            assert np.array_equal(p.get_scores("cat dog the"), before)
    if when == "after" and deleted:
        out.delete(deleted)
    return out


def _assert_same(ref: BM25, got: BM25, queries, terms) -> None:
    assert got.n_docs == ref.n_docs
    assert got.n_slots == ref.n_slots
    assert got.vocab_size == ref.vocab_size
    assert [got.is_alive(d) for d in range(ref.n_slots)] == [ref.is_alive(d) for d in range(ref.n_slots)]
    assert got._ix.avgdl == ref._ix.avgdl
    assert [got._ix.doc_len(d) for d in range(ref.n_slots)] == [ref._ix.doc_len(d) for d in range(ref.n_slots)]
    for t in terms:
        assert got.doc_freq(t) == ref.doc_freq(t), t
    for q in queries:
        if not q.strip():
            continue
        assert np.array_equal(got.get_scores(q), ref.get_scores(q)), q
        for k in (1, 5, 20):
            gi, gs = got.search(q, k=k)
            ri, rs = ref.search(q, k=k)
            assert np.array_equal(gi, ri) and np.array_equal(gs, rs), (q, k)
    gi, gs = got.search_batch(queries[:40], k=10, n_threads=2)
    ri, rs = ref.search_batch(queries[:40], k=10, n_threads=2)
    assert np.array_equal(gi, ri) and np.array_equal(gs, rs)


def _hand_terms(ix: BM25) -> list[str]:
    return sorted({t for d in _hand_corpus() for t in ix.tokenize(d)} | {"absent"})


# --- the hand-made corpus (always runs) ----------------------------------------


@pytest.mark.parametrize("idf", ["okapi", "lucene"])
@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("roundtrip", [False, True])
@pytest.mark.parametrize("cuts", [[3, 17, 30], [10, 10, 25, 40], [1, 2, 45]])
def test_hand_corpus_pieces_equal_sequential_adds(tmp_path, idf, when, roundtrip, cuts):
    texts = _hand_corpus()
    params = {"idf": idf, "k1": 1.2, "b": 0.7}
    ref = _reference(texts, _HAND_DELETED, **params)
    got = _appended(texts, _pieces(len(texts), cuts), _HAND_DELETED, tmp_path, when=when, roundtrip=roundtrip,
                    **params)
    # the corpus really exercises the epsilon floor of negative Okapi idf
    assert ref.doc_freq("cat") > ref.n_docs / 2
    _assert_same(ref, got, _HAND_QUERIES, _hand_terms(ref))


def test_saved_pieces_that_dropped_terms_of_deleted_documents(tmp_path):
    # Each piece's first document is deleted before the piece is saved, and
    # it holds many words seen again only in later pieces: a saved piece keeps
    # no trace of them, so the appended vocabulary meets those words in
    # another order than sequential adds did. Scores (with many negative,
    # epsilon-floored okapi idf values) must not depend on that order.
    rng = random.Random(11)
    words = [f"w{i}" for i in range(300)]
    texts, deleted = [], []
    for piece in range(5):
        for j in range(12):
            if j == 0:
                deleted.append(len(texts))
                texts.append(" ".join(words[piece * 60:(piece + 1) * 60]))
            else:
                common = [w for w in ("c0", "c1", "c2", "c3") if rng.random() < 0.8]
                texts.append(" ".join(common + rng.sample(words, rng.randint(3, 25))))
    ref = _reference(texts, deleted)
    got = _appended(texts, _pieces(len(texts), [12, 24, 36, 48]), deleted, tmp_path, when="before", roundtrip=True)
    queries = ["c0 c1", "c2 w5 w77", "c0 c1 c2 c3 w299", *(" ".join(rng.sample(words, 4) + ["c3"]) for _ in range(30))]
    assert ref.doc_freq("c0") > ref.n_docs / 2
    _assert_same(ref, got, queries, ["c0", "c1", "c2", "c3", *words])


def test_hand_corpus_appending_onto_the_first_piece(tmp_path):
    texts = _hand_corpus()
    ref = _reference(texts, _HAND_DELETED)
    got = _appended(texts, _pieces(len(texts), [9, 21, 33]), _HAND_DELETED, tmp_path, when="after",
                    roundtrip=False, start_empty=False)
    _assert_same(ref, got, _HAND_QUERIES, _hand_terms(ref))


def test_a_fully_deleted_piece_and_empty_pieces(tmp_path):
    texts = _hand_corpus()
    deleted = list(range(10, 20)) + [30]  # piece [10, 20) entirely deleted
    ref = _reference(texts, deleted)
    for when in ("before", "after"):
        got = _appended(texts, _pieces(len(texts), [0, 10, 20, 20, len(texts)]), deleted, tmp_path, when=when,
                        roundtrip=when == "before")
        _assert_same(ref, got, _HAND_QUERIES, _hand_terms(ref))


def test_append_then_keep_adding_and_deleting():
    texts = _hand_corpus()
    ref = _reference(texts, [])
    a = BM25()
    a.add(texts[:20])
    b = BM25()
    b.add(texts[20:40])
    assert a.append(b).tolist() == list(range(20, 40))
    assert a.add(texts[40:]).tolist() == list(range(40, len(texts)))  # ids keep growing after an append
    a.delete([3, 25])
    ref.delete([3, 25])
    _assert_same(ref, a, _HAND_QUERIES, _hand_terms(ref))


def test_hand_computed_scores_after_append():
    # Two one-document pieces: "a b" and "a a c". N = 2, avgdl = 2.5, lucene idf.
    x = BM25(idf="lucene", k1=1.5, b=0.75)
    x.add_tokens([["a", "b"]])
    y = BM25(idf="lucene", k1=1.5, b=0.75)
    y.add_tokens([["a", "a", "c"]])
    x.append(y)
    n, avgdl, k1, b = 2, 2.5, 1.5, 0.75

    def idf(df):
        return np.log(1 + (n - df + 0.5) / (df + 0.5))

    def part(tf, dl):
        return tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))

    want = [idf(2) * part(1, 2) + idf(1) * part(0, 2), idf(2) * part(2, 3) + idf(1) * part(1, 3)]
    np.testing.assert_allclose(x.get_scores("a c"), want, rtol=1e-12)
    assert x.doc_freq("a") == 2 and x.doc_freq("c") == 1 and x.vocab_size == 3


# --- real text ---------------------------------------------------------------


def _real_corpus(shared_data):
    paras, queries = [], []
    for docs_file in sorted(shared_data.glob("*/documents.jsonl")):
        lines = docs_file.read_text(encoding="utf-8").splitlines()[:3]
        for line in lines:
            paras += [p for p in json.loads(line)["text"].split("\n\n") if p.strip()][:80]
        qf = docs_file.with_name("questions.jsonl")
        if qf.is_file():
            queries += [json.loads(line)["question"] for line in qf.read_text(encoding="utf-8").splitlines()[:25]]
    if len(paras) < 50:
        pytest.skip("too little shared text")
    return paras, queries


@pytest.mark.parametrize(
    "params",
    [{}, {"idf": "lucene", "k1": 0.9, "b": 0.4}, {"stopwords": "english", "stem": True}],
    ids=["okapi", "lucene", "stem-stopwords"],
)
@pytest.mark.parametrize("when", ["before", "after"])
def test_real_text_pieces_equal_sequential_adds(shared_data, tmp_path, params, when):
    paras, queries = _real_corpus(shared_data)
    n = len(paras)
    deleted = sorted({d for d in range(0, n, 7)} | {1, n - 1})
    cuts = [n // 5, n // 2, n // 2 + 3, (4 * n) // 5]
    ref = _reference(paras, deleted, **params)
    queries = queries + paras[5:200:13]  # passages as queries: long, many repeated terms
    terms = sorted({t for q in queries for t in ref.tokenize(q)})
    for roundtrip in (False, True):
        got = _appended(paras, _pieces(n, cuts), deleted, tmp_path, when=when, roundtrip=roundtrip, **params)
        _assert_same(ref, got, queries, terms)


# --- bad input ----------------------------------------------------------------


@pytest.mark.parametrize(
    "other",
    [{"k1": 1.2}, {"b": 0.5}, {"epsilon": 0.1}, {"idf": "lucene"}, {"stem": True}, {"stopwords": "english"},
     {"stopwords": ["cat"]}, {"lowercase": False}],
)
def test_different_settings_are_a_config_error_and_change_nothing(other):
    a = BM25()
    a.add(["cat dog", "dog"])
    b = BM25(**other)
    b.add(["cat"])
    before = a.get_scores("cat dog")
    with pytest.raises(ConfigError):
        a.append(b)
    assert a.n_slots == 2 and a.vocab_size == 2 and np.array_equal(a.get_scores("cat dog"), before)


def test_native_append_checks_settings_itself():
    a = BM25()
    a.add(["cat"])
    with pytest.raises(ValueError, match="tokeniser"):
        a._ix.append(BM25(stem=True)._ix)
    with pytest.raises(ValueError, match="parameters"):
        a._ix.append(BM25(k1=2.0)._ix)
    with pytest.raises(ValueError, match="itself"):
        a._ix.append(a._ix)
    assert a.n_slots == 1


def test_appending_a_non_index_or_itself_is_an_input_error():
    a = BM25()
    a.add(["cat"])
    with pytest.raises(InputError):
        a.append(_core.BM25Index())  # the native object, not a BM25
    with pytest.raises(InputError):
        a.append("cat")
    with pytest.raises(InputError):
        a.append(a)
    with pytest.raises(InputError):
        a.append(BM25(_native=a._ix))
    assert a.n_slots == 1


def test_appending_empty_indexes():
    a = BM25()
    assert a.append(BM25()).tolist() == []
    assert a.n_slots == 0 and a.n_docs == 0 and a.vocab_size == 0
    a.add(["cat dog"])
    assert a.append(BM25()).tolist() == []
    e = BM25()
    assert e.append(a).tolist() == [0]
    assert np.array_equal(e.get_scores("cat"), a.get_scores("cat"))
