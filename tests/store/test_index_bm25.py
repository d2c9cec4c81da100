"""BM25: the native index against a plain-Python reference and rank_bm25."""

from __future__ import annotations

import math
import re
import threading
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from momoka.errors import ConfigError, EmptyInputError, InputError, StoreError
from momoka.store import BM25
from momoka.store.bm25 import tokenize


def ref_scores(docs: list[list[str]], query: list[str], k1=1.5, b=0.75, eps=0.25) -> list[float]:
    """Okapi BM25 as written in Robertson & Zaragoza, with BM25Okapi's idf floor."""
    n = len(docs)
    avgdl = sum(len(d) for d in docs) / n
    df = Counter(t for d in docs for t in set(d))
    idf = {t: math.log(n - f + 0.5) - math.log(f + 0.5) for t, f in df.items()}
    floor = eps * sum(idf.values()) / len(idf)
    idf = {t: (floor if v < 0 else v) for t, v in idf.items()}
    out = []
    for d in docs:
        tf = Counter(d)
        s = 0.0
        for t in query:
            if t in tf:
                s += idf[t] * tf[t] * (k1 + 1) / (tf[t] + k1 * (1 - b + b * len(d) / avgdl))
        out.append(s)
    return out


WORDS = ["apple", "banana", "cherry", "date", "elder", "fig", "grape", "honeydew", "kiwi", "lemon", "mango", "nut", "olive", "pear", "quince"]
doc_st = st.lists(st.sampled_from(WORDS), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(st.lists(doc_st, min_size=1, max_size=25), st.lists(st.sampled_from(WORDS + ["zzz"]), min_size=1, max_size=6),
       st.floats(0.1, 3.0), st.floats(0.0, 1.0))
def test_scores_match_plain_python_reference(docs, query, k1, b):
    ix = BM25(k1=k1, b=b)
    ix.add([" ".join(d) for d in docs])
    got = ix.get_scores(" ".join(query))
    want = ref_scores(docs, query, k1, b)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    # top-k: the documents with a positive-contribution term, ordered by score then id
    ids, scores = ix.search(" ".join(query), k=5)
    touched = [i for i, d in enumerate(docs) if set(d) & set(query)]
    order = sorted(touched, key=lambda i: (-want[i], i))[:5]
    np.testing.assert_allclose(scores, [want[i] for i in order], rtol=1e-9, atol=1e-9)
    # ties may order differently only when scores are equal
    assert [round(want[i], 9) for i in ids] == [round(want[i], 9) for i in order]


@settings(max_examples=40, deadline=None)
@given(st.lists(doc_st, min_size=2, max_size=20), st.data())
def test_delete_equals_rebuild_without_the_document(docs, data):
    """Postings updated in place give the same scores as an index built from the survivors."""
    drop = data.draw(st.sets(st.integers(0, len(docs) - 1), max_size=len(docs) - 1))
    ix = BM25()
    ix.add([" ".join(d) for d in docs])
    ix.delete(sorted(drop))
    keep = [i for i in range(len(docs)) if i not in drop]
    fresh = BM25()
    fresh.add([" ".join(docs[i]) for i in keep])
    query = " ".join(data.draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=5)))
    got = ix.get_scores(query)
    np.testing.assert_allclose(got[keep], fresh.get_scores(query), rtol=1e-9, atol=1e-12)
    assert not got[sorted(drop)].any()
    assert ix.n_docs == len(keep) and ix.n_slots == len(docs)
    # adding after deletes keeps ids growing
    new = ix.add(["apple apple"])
    assert new.tolist() == [len(docs)]


def test_agrees_with_rank_bm25_on_real_text(shared_data):
    rank_bm25 = pytest.importorskip("rank_bm25")
    import json

    folder = shared_data / "squad_v1_dev_half_a"
    docs = [json.loads(line)["text"] for line in (folder / "documents.jsonl").read_text().splitlines()]
    paras = [p for d in docs[:8] for p in d.split("\n\n")]
    questions = [json.loads(line)["question"] for line in (folder / "questions.jsonl").read_text().splitlines()][:100]
    ix = BM25()
    ix.add(paras)
    ref = rank_bm25.BM25Okapi([ix.tokenize(p) for p in paras])
    for q in questions:
        np.testing.assert_allclose(ix.get_scores(q), ref.get_scores(ix.tokenize(q)), rtol=1e-9, atol=1e-9)


def test_lucene_idf_variant():
    docs = [["a", "b"], ["a"], ["c", "c", "a"]]
    ix = BM25(idf="lucene", k1=1.2, b=0.5)
    ix.add_tokens(docs)
    n, avgdl = 3, 2.0
    def idf(df):
        return math.log(1 + (n - df + 0.5) / (df + 0.5))
    # doc 2 for query "a c": a (df 3, tf 1), c (df 1, tf 2), |d| = 3
    norm = 1.2 * (1 - 0.5 + 0.5 * 3 / avgdl)
    want = idf(3) * 1 * 2.2 / (1 + norm) + idf(1) * 2 * 2.2 / (2 + norm)
    assert ix.get_scores("a c")[2] == pytest.approx(want, rel=1e-12)


def test_term_weight_by_hand():
    ix = BM25()  # okapi scoring: the weight is Lucene's positive idf all the same
    ix.add_tokens([["a", "b"], ["a"], ["c", "c", "a"], ["d"]])
    assert ix.term_weight("a") == pytest.approx(math.log(1 + 1.5 / 3.5), rel=1e-12)   # df 3 of 4
    assert ix.term_weight("c") == pytest.approx(math.log(1 + 3.5 / 1.5), rel=1e-12)   # df 1
    assert ix.term_weight("zz") == pytest.approx(math.log(1 + 4.5 / 0.5), rel=1e-12)  # df 0
    ix.delete([0])                                                                   # live documents only
    assert ix.term_weight("b") == pytest.approx(math.log(1 + 3.5 / 0.5), rel=1e-12)


def test_batch_threads_and_mask_agree_with_single_queries():
    rng = np.random.default_rng(0)
    docs = [" ".join(rng.choice(WORDS, size=rng.integers(3, 40))) for _ in range(300)]
    ix = BM25(stem=True, stopwords="english")
    ix.add(docs, n_threads=2)
    queries = [" ".join(rng.choice(WORDS, size=3)) for _ in range(50)]
    ids, scores = ix.search_batch(queries, k=7, n_threads=3)
    for i, q in enumerate(queries):
        sid, ssc = ix.search(q, k=7)
        assert ids[i, : len(sid)].tolist() == sid.tolist()
        np.testing.assert_allclose(scores[i, : len(sid)], ssc)
        assert (ids[i, len(sid):] == -1).all()
    mask = np.zeros(ix.n_slots, bool)
    mask[::3] = True
    mid, _ = ix.search(queries[0], k=300, mask=mask)
    assert len(mid) and all(i % 3 == 0 for i in mid)
    full = ix.get_scores(queries[0])
    expect = sorted((i for i in range(0, 300, 3) if full[i] != 0 or i in set(mid.tolist())), key=lambda i: (-full[i], i))
    assert mid.tolist() == expect


def test_concurrent_queries_from_python_threads():
    ix = BM25()
    ix.add([f"{w} {w} common" for w in WORDS] * 20)
    want = {w: ix.search(w, 5)[0].tolist() for w in WORDS}
    errors = []

    def run():
        for _ in range(200):
            for w in WORDS:
                if ix.search(w, 5)[0].tolist() != want[w]:
                    errors.append(w)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_serialisation_round_trip(tmp_path):
    ix = BM25(k1=1.2, b=0.6, stem=True, stopwords=["the"])
    ix.add(["the running dogs", "a cat runs", "dogs and cats", "unrelated words"])
    ix.delete([1])
    for other in (BM25.from_bytes(ix.to_bytes()), _saved(ix, tmp_path)):
        assert other.params == ix.params
        assert other.n_docs == 3 and other.n_slots == 4 and not other.is_alive(1)
        np.testing.assert_array_equal(other.get_scores("dog run"), ix.get_scores("dog run"))
        assert other.tokenize("The Running") == ["run"]
    import pickle

    again = pickle.loads(pickle.dumps(ix))
    np.testing.assert_array_equal(again.get_scores("cats"), ix.get_scores("cats"))


def _saved(ix, tmp_path):
    ix.save(tmp_path / "bm25.bin")
    return BM25.load(tmp_path / "bm25.bin")


def test_corrupted_bytes_are_refused(tmp_path):
    ix = BM25()
    ix.add(["some text here", "more text"])
    blob = ix.to_bytes()
    # tried: random bytes, a truncated blob, a flipped magic, an empty file
    for bad in (b"garbage" * 10, blob[: len(blob) // 2], b"X" + blob[1:], b""):
        with pytest.raises(StoreError):
            BM25.from_bytes(bad)
    (tmp_path / "x.bin").write_bytes(blob[:-3])
    with pytest.raises(StoreError):
        BM25.load(tmp_path / "x.bin")
    with pytest.raises(StoreError):
        BM25.load(tmp_path / "missing.bin")


def test_tokenizer_ascii_matches_regex_reference():
    @settings(max_examples=80, deadline=None)
    @given(st.text(alphabet=st.characters(max_codepoint=127), max_size=200))
    def check(text):
        assert tokenize(text) == re.findall(r"[a-z0-9]+", text.lower())

    check()


def test_tokenizer_scripts():
    assert tokenize("Ünïcode CAFÉ, naïve-ΣΊΣΥΦΟΣ") == ["ünïcode", "café", "naïve", "σίσυφοσ"]
    assert tokenize("東京タワーは高い", tokenizer_version=1) == ["東", "京", "タ", "ワ", "ー", "は", "高", "い"]
    assert tokenize("東京タワーは高い") == ["東", "東京", "京", "京タ", "タ", "タワ", "ワ", "ワー", "ー", "ーは", "は",
                                     "は高", "高", "高い", "い"]  # rule 2: characters and bigrams
    assert tokenize("Привет, МИР! ＡＢＣ１２３") == ["привет", "мир", "abc123"]
    assert tokenize("emoji 🙂 and\u00a0nbsp — dash") == ["emoji", "and", "nbsp", "dash"]
    assert tokenize("Running quickly", stem=True) == ["run", "quickli"]
    assert tokenize("the cat and the hat", stopwords="english") == ["cat", "hat"]
    assert tokenize("The CAT", lowercase=False) == ["The", "CAT"]


def test_porter_stemmer_against_nltk():
    nltk_porter = pytest.importorskip("nltk.stem.porter")
    from momoka import _core

    ref = nltk_porter.PorterStemmer(mode=nltk_porter.PorterStemmer.MARTIN_EXTENSIONS)
    words = ["caresses", "ponies", "ties", "caress", "cats", "feed", "agreed", "plastered", "bled", "motoring", "sing", "conflated", "troubled", "sized", "hopping", "tanned", "falling", "hissing", "fizzed", "failing", "filing", "happy", "sky", "relational", "conditional", "rational", "valenci", "hesitanci", "digitizer", "conformabli", "radicalli", "differentli", "vileli", "analogousli", "vietnamization", "predication", "operator", "feudalism", "decisiveness", "hopefulness", "callousness", "formaliti", "sensitiviti", "sensibiliti", "triplicate", "formative", "formalize", "electriciti", "electrical", "hopeful", "goodness", "revival", "allowance", "inference", "airliner", "gyroscopic", "adjustable", "defensible", "irritant", "replacement", "adjustment", "dependent", "adoption", "homologou", "communism", "activate", "angulariti", "homologous", "effective", "bowdlerize", "probate", "rate", "cease", "controll", "roll", "generalizations", "oscillators", "archaeology"]
    for w in words:
        assert _core.porter_stem(w) == ref.stem(w), w


def test_bad_input():
    ix = BM25()
    ix.add(["hello world"])
    # tried: empty and whitespace-only queries, a non-str query, k = 0
    for q in ("", "   \n"):
        with pytest.raises(EmptyInputError):
            ix.search(q)
    with pytest.raises(InputError):
        ix.search(b"hello")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        ix.search("hello", k=0)
    # tried: deleting an unknown id, deleting twice
    with pytest.raises(InputError):
        ix.delete([5])
    ix.delete([0])
    with pytest.raises(InputError):
        ix.delete([0])
    # tried: a non-str document, bad parameters
    with pytest.raises(InputError):
        ix.add([3])  # type: ignore[list-item]
    for kw in ({"b": 1.5}, {"k1": -1}, {"idf": "nope"}, {"stopwords": "klingon"}):
        with pytest.raises(ConfigError):
            BM25(**kw)
    # a 100,000-character query works (every token is scored)
    ix2 = BM25()
    ix2.add(["alpha beta", "gamma"])
    ids, _ = ix2.search("gamma " * 20_000, k=2)
    assert ids.tolist() == [1]
