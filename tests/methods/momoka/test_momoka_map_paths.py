"""Momoka-Map paths: eq. 4 wiring against hand-computed values, planted partners, bounds and bad input."""

from __future__ import annotations

import hashlib
import time

import numpy as np
import pytest
from momoka.errors import ConfigError, InputError
from momoka.methods.momoka import (
    EmbeddingReferee,
    MomokaMap,
    PathRelator,
    topm_graph,
    window_graph,
)
from momoka.mcts import MCTS
from momoka.text import Document, make_chunks


def _doc(paragraphs: list[str], doc_id: str = "d") -> Document:
    return Document.from_text("\n\n".join(paragraphs), doc_id=doc_id)


def _sentence_chunks(doc: Document):
    return make_chunks(doc, doc.sentences)


class TableReferee:
    """A referee answering from a table keyed by (a_text, b_text); records every pair it saw."""

    name = "table"

    def __init__(self, ones: set[tuple[str, str]]):
        self.ones = ones
        self.seen: list[tuple[str, str]] = []

    def __call__(self, pairs):
        self.seen.extend(pairs)
        return np.array([1.0 if p in self.ones else 0.0 for p in pairs])


def test_eq4_step_reward_uses_chunk_paragraph_and_sentence():
    # Three paragraphs: sentences 0,1 | 2 | 3,4. Hand-computed eq. 4 with alpha=3, beta=2, gamma=delta=1,
    # normalised by r_max = 1 + 3 + 2 = 6.
    doc = _doc(["A one. A two.", "B one.", "C one. C two."])
    cs = _sentence_chunks(doc)
    assert [(c.paragraph, c.sentence) for c in cs] == [(0, 0), (0, 1), (1, 2), (2, 3), (2, 4)]
    mm = MomokaMap(referee=TableReferee(set()), preset="paper")  # eq. 4 with the paper's weights
    kw, rec = mm._engine_kwargs(cs, None)
    assert rec["p_is_s"] is False
    e = MCTS(len(cs), **kw)
    # root 0, cand 4: |dp| = 2, |ds| = 4  ->  (1 + 3/3 + 2/5) / 6
    assert e.step_reward(0, 4, 1.0) == pytest.approx((1 + 3 / 3 + 2 / 5) / 6)
    # root 1, cand 2: |dp| = 1, |ds| = 1, I = 0  ->  (0 + 3/2 + 2/2) / 6
    assert e.step_reward(1, 2, 0.0) == pytest.approx((3 / 2 + 2 / 2) / 6)
    assert e.r_max == pytest.approx(6.0)
    # no normalisation: the raw eq. 4 value
    paper = MomokaMap(referee=TableReferee(set()), preset="paper", normalize=False)
    e2 = MCTS(len(cs), **paper._engine_kwargs(cs, None)[0])
    assert e2.step_reward(0, 3, 1.0) == pytest.approx(1 + 3 / 3 + 2 / 4)


def test_paragraph_free_chunks_use_p_equal_s():
    # One paragraph only (a chunker that ignores paragraphs): p_i := s_i as the paper does for Meta-Chunking.
    doc = Document.from_text("One. Two. Three. Four.", doc_id="x")
    cs = _sentence_chunks(doc)
    mm = MomokaMap(referee=TableReferee(set()), preset="paper")  # eq. 4 with the paper's weights
    kw, rec = mm._engine_kwargs(cs, None)
    assert rec["p_is_s"] is True
    e = MCTS(len(cs), **kw)
    # root 0, cand 3: |dp| = |ds| = 3  ->  (0 + 3/4 + 2/4) / 6
    assert e.step_reward(0, 3, 0.0) == pytest.approx((3 / 4 + 2 / 4) / 6)


def test_two_and_three_chunk_paths_by_hand():
    # Two chunks: each path is the other chunk.
    doc = _doc(["First thing here.", "Second thing here."])
    cs = _sentence_chunks(doc)
    assert MomokaMap(referee=TableReferee(set())).paths_for_chunks(cs) == [[1], [0]]
    # Three chunks, no structural prior (alpha = beta = 0), rollout 1 (a rollout scores its leaf only), the
    # referee links 0 -> 2 only: root 0's child 2 always returns 1, child 1 always 0, so UCT visits 2 more
    # and the best path is [2] (path_cap = rollout = 1).
    doc = _doc(["Alpha.", "Beta.", "Gamma."])
    cs = _sentence_chunks(doc)
    ref = TableReferee({("Alpha.", "Gamma.")})
    mm = MomokaMap(referee=ref, alpha=0, beta=0, rollout=1)
    paths = mm.paths_for_chunks(cs)
    assert paths[0] == [2]
    assert all(len(p) == 1 and i not in p for i, p in enumerate(paths))
    # With rollout 5 the tree path [child, next] is scored against the root (eq. 4 scores the root pair),
    # so both children of root 0 see mean reward 1/2: the order is left to visit ties, but the path holds 2.
    ref.seen.clear()
    paths = MomokaMap(referee=ref, alpha=0, beta=0).paths_for_chunks(cs)
    assert sorted(paths[0]) == [1, 2]
    # pair mode asks each ordered pair at most once (memo): 3 roots x 2 candidates
    assert len(ref.seen) == len(set(ref.seen)) <= 6


def test_one_chunk_document_gets_an_empty_path():
    # bad input: a document of a single chunk has no path (and no referee call)
    doc = Document.from_text("Only one sentence here.", doc_id="one")
    cs = _sentence_chunks(doc)
    ref = TableReferee(set())
    mm = MomokaMap(referee=ref)
    assert mm.paths_for_chunks(cs) == [[]]
    assert ref.seen == [] and mm.stats.single_chunk_documents == 1
    assert mm.paths_for_chunks([]) == []


def test_bad_options_and_inputs():
    with pytest.raises(ConfigError):
        MomokaMap(reward="tree")  # no such reward mode
    with pytest.raises(ConfigError):
        MomokaMap(iterations=0)  # no search at all
    with pytest.raises(ConfigError):
        MomokaMap(long_docs="bigger")  # unknown remedy
    with pytest.raises(ConfigError):
        MomokaMap(referee="oracle")  # unknown referee name
    with pytest.raises(ConfigError):
        PathRelator(referee="oracle")  # the relator validates the name too
    with pytest.raises(ConfigError):
        PathRelator(title="none")  # title is True/False (whether the referee sees T_D); T_D comes from the enricher
    with pytest.raises(ConfigError):
        PathRelator(iterations=0)
    with pytest.raises(InputError):
        MomokaMap(referee=TableReferee(set())).paths_for_chunks(["a", "b"])  # not chunks

    class Short:
        name = "short"

        def __call__(self, pairs):
            return np.zeros(max(0, len(pairs) - 1))  # one value missing

    doc = _doc(["A.", "B.", "C."])
    with pytest.raises(InputError):
        MomokaMap(referee=Short()).paths_for_chunks(_sentence_chunks(doc))


class HashEmbedder:
    """A deterministic bag-of-words embedder (content words hashed to 256 dimensions)."""

    model_id = "hash-256"
    STOP = {"the", "and", "of", "a", "an", "to", "its", "by", "was", "were", "after", "from", "with", "into", "each"}

    def embed(self, texts):
        out = np.zeros((len(texts), 256), np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().replace(".", " ").split():
                if w not in self.STOP:
                    out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % 256] += 1.0
        return out


TOPICS = [
    "The volcano erupted and lava covered the village near the volcano crater.",
    "Lava from the volcano crater cooled into black rock after the eruption.",
    "The orchestra rehearsed the symphony with violins and cellos.",
    "Violins and cellos of the orchestra played the symphony finale.",
    "The bakery sold fresh bread and croissants every morning.",
    "Croissants and bread from the bakery were baked before dawn.",
    "The satellite orbited the planet and photographed its moons.",
    "Photographs of the moons were sent by the satellite orbiting the planet.",
    "The football team won the championship after extra time.",
    "After extra time the championship went to the football team.",
    "Glaciers melted quickly as the climate warmed each decade.",
    "Each decade of warming climate made the glaciers melt faster.",
]


@pytest.mark.models
def test_planted_partners_recovered_by_the_embedding_referee():
    # Twelve sentences, six topics; each topic's two sentences are placed far apart (positions i and i + 6),
    # so the structural prior cannot find them. With the real default embedder as referee and no structural
    # prior, each chunk's path must start with its planted partner.
    pytest.importorskip("onnxruntime")
    try:
        from momoka.models import Embedder

        emb = Embedder.default()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"default embedder not installed: {exc}")
    order = [0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11]
    doc = _doc([TOPICS[k] for k in order], "planted")
    cs = make_chunks(doc, doc.paragraphs)
    partner = {i: order.index(order[i] ^ 1) for i in range(12)}
    ref = EmbeddingReferee(emb, threshold=0.45)
    mm = MomokaMap(referee=ref, alpha=0, beta=0)
    paths = mm.paths_for_chunks(cs)
    assert mm.stats.native_documents == 1
    hits = sum(paths[i][0] == partner[i] for i in range(12))
    assert hits == 12, paths
    # Independent check of the thresholded matrix against plain numpy cosines.
    v = emb.embed([c.text for c in cs])
    v = v / np.linalg.norm(v, axis=1, keepdims=True)
    cos = v @ v.T
    data, idx, ptr = ref.matrix(v)
    for i in range(12):
        want = sorted(j for j in range(12) if j != i and cos[i, j] > 0.45)
        assert idx[ptr[i] : ptr[i + 1]].tolist() == want


def test_planted_partners_with_a_hashing_embedder_and_path_mode():
    # The same planted layout with a deterministic bag-of-words embedder (no model): pair mode runs natively;
    # path mode (eq. 7) goes through ask/tell with the path text as context.
    order = [0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11]
    doc = _doc([TOPICS[k] for k in order], "planted")
    cs = make_chunks(doc, doc.paragraphs)
    partner = {i: order.index(order[i] ^ 1) for i in range(12)}
    ref = EmbeddingReferee(HashEmbedder(), threshold=0.3)
    v = ref.embed([c.text for c in cs])
    cos = v @ v.T
    np.fill_diagonal(cos, -1)
    assert all(cos[i].argmax() == partner[i] for i in range(12))  # the planted layout is what we think
    paths = MomokaMap(referee=ref, alpha=0, beta=0).paths_for_chunks(cs)
    assert sum(paths[i][0] == partner[i] for i in range(12)) == 12
    # the named referee with threshold= and an embedder gives the same referee, hence the same paths
    named = MomokaMap(referee="embedding", threshold=0.3, embedder=HashEmbedder(), alpha=0, beta=0)
    assert named.paths_for_chunks(cs) == paths
    assert isinstance(named.referee, EmbeddingReferee) and named.referee.threshold == 0.3
    d = named.describe()
    assert d["referee"]["name"] == "embedding" and d["referee"]["threshold"] == 0.3
    assert d["stats"]["documents"] == 1 and d["stats"]["chunks"] == 12 and d["stats"]["native_documents"] == 1
    assert sum(d["stats"]["path_lengths"].values()) == 12
    with pytest.raises(ConfigError):
        named.use_embedder(HashEmbedder())  # the referee is built: too late to change its embedder
    mm = MomokaMap(referee=ref, alpha=0, beta=0, reward="path")
    paths = mm.paths_for_chunks(cs)
    assert mm.stats.native_documents == 0 and mm.stats.referee_requests > 0
    # eq. 7 judges later steps against the whole path text, which dilutes the signal: far above chance (1/11
    # per root, about 1 of 12) but not perfect.
    assert sum(paths[i][0] == partner[i] for i in range(12)) >= 8


def test_graphs_match_plain_python():
    ptr, idx = window_graph(6, 2)
    for i in range(6):
        assert idx[ptr[i] : ptr[i + 1]].tolist() == [j for j in range(6) if j != i and abs(i - j) <= 2]
    rng = np.random.default_rng(3)
    v = rng.normal(size=(20, 8)).astype(np.float32)
    ptr, idx = topm_graph(v, 5)
    u = v / np.linalg.norm(v, axis=1, keepdims=True)
    for i in range(20):
        sims = [(-(float(u[i] @ u[j])), j) for j in range(20) if j != i]
        assert sorted(idx[ptr[i] : ptr[i + 1]].tolist()) == sorted(j for _, j in sorted(sims)[:5])


def test_appendix_h_topm_expansion_stays_in_the_candidate_pool():
    # expansion="topm": every path step is among the top-5 most similar chunks of the previous node.
    rng = np.random.default_rng(0)
    n = 30
    v = rng.normal(size=(n, 16)).astype(np.float32)
    doc = Document.from_text(" ".join(f"Sentence number {i}." for i in range(n)), doc_id="h")
    cs = _sentence_chunks(doc)
    assert len(cs) == n
    ref = EmbeddingReferee(HashEmbedder(), threshold=0.2)
    mm = MomokaMap(referee=ref, expansion="topm", top_m=5)
    paths = mm.paths_for_chunks(cs, vectors=v)
    ptr, idx = topm_graph(v, 5)
    for i, p in enumerate(paths):
        prev = i
        for x in p:
            assert x in idx[ptr[prev] : ptr[prev + 1]].tolist()
            prev = x
    assert mm.settings()["top_m"] == 5 and mm.settings()["expansion"] == "topm"


def test_five_thousand_chunks_stay_bounded():
    # bad input: a document of 5,000 chunks. Native embedding referee: the matrix keeps at most max_edges
    # entries per row; the window remedy bounds an ask/tell referee to 2 * window pairs per root.
    n = 5000
    words = ["volcano", "lava", "bread", "bakery", "orbit", "moon", "team", "goal", "glacier", "climate"]
    text = " ".join(f"The {words[i % 10]} item {i} and {words[(i * 7) % 10]} again." for i in range(n))
    doc = Document.from_text(text, doc_id="long")
    cs = _sentence_chunks(doc)
    assert len(cs) == n
    ref = EmbeddingReferee(HashEmbedder(), threshold=0.6, max_edges=16)
    t0 = time.monotonic()
    mm = MomokaMap(referee=ref)
    paths = mm.paths_for_chunks(cs)
    native_s = time.monotonic() - t0
    assert len(paths) == n and all(len(p) <= 5 and i not in p for i, p in enumerate(paths))
    data, idx, ptr = ref.matrix(ref.embed([c.text for c in cs]))
    assert np.diff(ptr).max() <= 16

    class Counting:
        name = "counting"

        def __init__(self):
            self.per_root: dict[str, set] = {}

        def __call__(self, pairs):
            for a, b in pairs:
                self.per_root.setdefault(a, set()).add(b)
            return np.array([float(a.split()[1] == b.split()[1]) for a, b in pairs])

    def pos(t):  # "The <word> item <i> and ..." -> i
        return int(t.split()[3])


    counting = Counting()
    t0 = time.monotonic()
    mm = MomokaMap(referee=counting, long_docs="window", window=8)
    paths = mm.paths_for_chunks(cs)
    window_s = time.monotonic() - t0
    assert mm.stats.long_documents == 1
    # candidate window: at most 3 * window - 1 candidates per root, all within 2 * window positions
    assert len(counting.per_root) == n
    assert max(len(s) for s in counting.per_root.values()) <= 23
    assert all(abs(pos(a) - pos(b)) <= 16 for a, s in counting.per_root.items() for b in s)
    assert mm.stats.referee_requests <= n * 23
    assert all(len(p) <= 5 and all(abs(x - i) <= 16 for x in p) for i, p in enumerate(paths))
    print(f"5,000 chunks: native embedding referee {native_s:.1f}s, window ask/tell {window_s:.1f}s")


def test_same_seed_same_paths_and_valid_paths_under_every_remedy():
    # Determinism (same seed, same answers -> same paths) and path validity for every option combination,
    # against a random but fixed table referee.
    rng = np.random.default_rng(7)
    n = 40
    doc = Document.from_text(" ".join(f"Item {i} text." for i in range(n)), doc_id="r")
    cs = _sentence_chunks(doc)
    ones = {(cs[i].text, cs[j].text) for i in range(n) for j in range(n) if i != j and rng.random() < 0.15}
    for kw in ({}, {"reward": "path"}, {"long_docs": "window", "window": 6}, {"long_docs": "widening"},
               {"long_docs": "scale", "max_iterations": 120}, {"long_docs": "window", "window": 5, "reward": "path"}):
        kw = dict(kw, iterations=min(30, kw.get("max_iterations", 30)))  # n - 1 > iterations: remedies apply
        a = MomokaMap(referee=TableReferee(ones), **kw).paths_for_chunks(cs)
        b = MomokaMap(referee=TableReferee(ones), **kw).paths_for_chunks(cs)
        assert a == b, kw
        for i, p in enumerate(a):
            assert 1 <= len(p) <= 5 and i not in p and len(set(p)) == len(p) and all(0 <= x < n for x in p), kw
            if kw.get("long_docs") == "window":
                assert all(abs(x - i) <= 2 * kw["window"] for x in p), kw
