"""ETS offline (methods/ets/offline.py and the ``ets`` refiner's default policy) on a planted two-hop corpus.

The corpus: the question asks where the author of a novel was born. One sentence
names the author (the bridge entity, a made-up name the question does not
contain); the author's birth sentence shares only ``born`` with the question, as
do four distractor birth sentences. So the second hop is reachable only through
the first sentence. The embedder is the hashed bag of words of ``_oracles``, so
cosines and BM25 are recomputed here in plain Python (Okapi BM25 from its
formula, min-max fusion by hand).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from _oracles.embedders import HashEmbedder
from momoka import Index, registry
from momoka.errors import ConfigError
from momoka.methods.ets.beam import run_beam
from momoka.methods.ets.offline import CoverageValue, OfflinePolicy, reformulate
from momoka.methods.ets.refiner import ETSRefiner
from momoka.store.bm25 import tokenize
from momoka.text import Document

QUESTION = "Where was the author of the novel Amber Harbor born?"
BRIDGE = "Quillon Vexmarsh wrote the novel Amber Harbor in a single winter."
HOP2 = "Quillon Vexmarsh was born in Tarsa Bay beside the cold sea."
DOCS = {
    "amber": BRIDGE + " Critics praised the quiet ending.",
    "vex": HOP2 + " He later moved inland to teach.",
    "lark": "Morwen Lark was born in Ostby near the hills. She painted ships.",
    "pell": "Dara Pell was born in Kettering during a storm. He sold maps.",
    "oaks": "Ivo Oaks was born in Lune. He built clocks for the town hall.",
    "rue": "Selma Rue was born in Brack on a farm. She kept bees.",
    "film": "Amber Harbor became a film with a long harbor scene. The film was shot in spring.",
}


@pytest.fixture(scope="module")
def index():
    docs = [Document.from_text(t, doc_id=d, title=d) for d, t in DOCS.items()]
    ix = Index.build(docs, embedder=HashEmbedder(dim=512), chunker="paragraph", progress=False)
    yield ix
    ix.close()


def _chunk_of(ix, doc_id):
    (cid,) = ix.store.documents[doc_id].chunk_ids
    return int(cid)


def _terms(text):
    return tokenize(text, stem=True, stopwords="english")


def _bm25_reference(query_terms, texts, k1=1.5, b=0.75):
    """Okapi BM25 from its formula (rank_bm25's BM25Okapi; every query term here has a positive idf)."""
    docs = [_terms(t) for t in texts]
    n, avg = len(docs), sum(map(len, docs)) / len(docs)
    out = []
    for d in docs:
        s = 0.0
        for t in query_terms:
            df = sum(t in x for x in docs)
            if not df:
                continue
            idf = math.log(n - df + 0.5) - math.log(df + 0.5)
            assert idf > 0
            tf = d.count(t)
            s += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / avg))
        out.append(s)
    return out


def _minmax(values):
    lo, hi = min(values), max(values)
    return [(v - lo) / (hi - lo) if hi > lo else 1.0 for v in values]


def test_expansion_scores_equal_a_plain_python_reference(index):
    """Every candidate's score after a one-sentence path: 0.3 x min-max cosine(question + path, sentence) +
    0.7 x min-max BM25 of the terms in the question or the path but not both (zero where no term matches).
    Candidates: sentences of every chunk (chunks=50 reaches them all), less the path's and those adding nothing."""
    pol = OfflinePolicy(index.corpus, chunks=50, dense_weight=0.3)
    got = pol.expand(QUESTION, [BRIDGE], {("amber", 0, len(BRIDGE))}, [], 100)
    emb = HashEmbedder(dim=512)
    query = QUESTION + " " + BRIDGE
    known = set(_terms(QUESTION)) | set(_terms(BRIDGE))
    cands = [s for text in DOCS.values() for s in _sentences(text)
             if s != BRIDGE and not set(_terms(s)) <= known]
    assert sorted(t for _, _, t, _ in got) == sorted(cands)
    qv = emb.embed([query])[0]
    cos = [float(emb.embed([c])[0] @ qv) for c in cands]
    terms = sorted(set(_terms(QUESTION)) ^ set(_terms(BRIDGE)))
    bm = _bm25_reference(terms, cands)
    matched = [i for i, v in enumerate(bm) if v > 0]
    bm_norm = dict(zip(matched, _minmax([bm[i] for i in matched])))
    ref = {c: 0.3 * d + 0.7 * bm_norm.get(i, 0.0) for i, (c, d) in enumerate(zip(cands, _minmax(cos)))}
    for _span, score, text, _cid in got:
        assert score == pytest.approx(ref[text], abs=1e-6), text
    assert [t for _, _, t, _ in got][0] == HOP2
    assert [s for _, s, _, _ in got] == sorted((s for _, s, _, _ in got), reverse=True)


def _sentences(text):
    parts = [p.strip() for p in text.replace(". ", ".\n").split("\n")]
    return [p for p in parts if p]


def test_second_hop_is_found_only_through_the_bridge(index):
    """From the question alone the author's birth sentence is not among the best three (it shares only "born"
    with the question, like four distractors); after the bridge sentence it is the best next sentence, and the
    search, given a first stage holding only the novel's chunk, returns exactly the two hops."""
    pol = OfflinePolicy(index.corpus)
    first = [t for _, _, t, _ in pol.expand(QUESTION, [], set(), [_chunk_of(index, "amber")], 3)]
    assert HOP2 not in first and BRIDGE in first
    second = pol.expand(QUESTION, [BRIDGE], set(), [_chunk_of(index, "amber")], 1)
    assert second[0][2] == HOP2
    value = CoverageValue(pol.vectors, pol.query_vector)
    found, seen = pol.search(QUESTION, [_chunk_of(index, "amber")], value, expansion=3, beam=3, max_depth=5)
    assert [seen[sp][0] for sp in found.path] == [BRIDGE, HOP2]
    assert [sp[0] for sp in found.path] == ["amber", "vex"] and seen[found.path[1]][1] == _chunk_of(index, "vex")


def test_coverage_value_by_hand():
    """value = 0.5 x (share of the question's content stems the evidence holds) + 0.5 x max cosine."""
    emb = HashEmbedder(dim=512)
    vecs = lambda texts: emb.embed(list(texts))  # noqa: E731  (unit vectors already)
    val = CoverageValue(vecs, lambda q: emb.embed([q])[0])
    q_terms = set(_terms(QUESTION))  # author, novel, amber, harbor, born
    assert q_terms == {"author", "novel", "amber", "harbor", "born"}
    ev = [BRIDGE, HOP2]
    covered = {"novel", "amber", "harbor", "born"}
    sim = max(float(emb.embed([e])[0] @ emb.embed([QUESTION])[0]) for e in ev)
    assert val(QUESTION, ev) == pytest.approx(0.5 * len(covered) / 5 + 0.5 * sim)
    assert val(QUESTION, []) == 0.0
    assert val(QUESTION, ev) > val(QUESTION, [BRIDGE])  # the second hop covers "born"


def test_beam_stops_when_nothing_is_left_and_ties_keep_the_shorter_path():
    """run_beam: a node without children ends the search before max_depth (two candidates: depth 2 at most);
    a value that never rises keeps the one-sentence path; children are scored once per evidence set."""
    calls = []

    def children(path, state):
        return [(c, state) for c in ("a", "b") if c not in path]

    def value(ev):
        calls.append(ev)
        return 1.0

    res = run_beam(None, children, value, beam=5, max_depth=5)
    assert res.path == ("a",) and res.value == 1.0
    assert sorted(calls) == [("a",), ("a", "b"), ("b",)]  # {a, b} reached twice, scored once
    assert run_beam(None, lambda p, s: [], value, beam=2, max_depth=3).path == ()


def test_refiner_end_to_end_fills_the_budget_after_the_evidence(index):
    """Offline (the default without an endpoint): the two evidence paragraphs come first, then the first stage's
    chunks, assembled within the budget; every member an exact span. With budget None: the two sentences."""
    first = index.search(QUESTION, k=2, retriever="bm25")
    ref = registry.create("refiner", "ets", corpus=index.corpus, budget=300, progress=False)
    assert ref.policy_name == "offline" and ref.describe()["policy"] == "offline"
    out = ref.refine(QUESTION, first)
    assert out.retriever == "bm25+ets"
    assert [it.doc_id for it in out][:2] == ["amber", "vex"]
    assert [it.provenance["kind"] for it in out][:2] == ["evidence", "evidence"]
    assert out[0].provenance["evidence"] == [["amber", 0, len(BRIDGE)]]
    assert sum(it.n_chars for it in out) <= 300
    for it in out:
        for m in it.members:
            assert DOCS[m.doc_id][m.start:m.end] == m.text
    fill = [it.doc_id for it in out][2:]
    assert fill and set(fill) <= {it.doc_id for it in first} - {"amber", "vex"}
    bare = ETSRefiner(corpus=index.corpus, budget=None, progress=False).refine(QUESTION, first)
    assert [it.text for it in bare] == [BRIDGE, HOP2] and all(it.members[0].chunk_id == -1 for it in bare)


def test_policy_choice_and_bad_options(index, monkeypatch):
    """auto: offline without an endpoint, the LM policy with one; offline needs the index; bad options refused."""
    monkeypatch.delenv("MOMOKA_LLM_BASE_URL", raising=False)
    assert ETSRefiner().policy_name == "offline"
    with pytest.raises(ConfigError, match="corpus"):
        ETSRefiner().policy
    monkeypatch.setenv("MOMOKA_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    assert ETSRefiner(corpus=index.corpus).policy_name == "lm"
    assert ETSRefiner(policy="offline").policy_name == "offline"
    for bad in ({"policy": "mcts"}, {"budget": 0}, {"dense_weight": 1.5}, {"coverage_weight": -1}, {"chunks": 0},
                {"paragraph_cap": -1}, {"value": "likelihood"}):
        with pytest.raises(ConfigError):
            ETSRefiner(**bad)


def test_reformulate():
    assert reformulate(" Who  wrote it?", ["A wrote\nit.", "B"]) == "Who wrote it? A wrote it. B"
