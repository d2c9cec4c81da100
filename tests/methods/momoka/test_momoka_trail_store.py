"""Momoka-Trail over a real store: exact spans, one reranking batch, titles, truncation count, missing paths."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest
from momoka.errors import ConfigError, InputError, PathsMissingError, StoreError
from momoka import Index
from momoka.store import Store
from momoka.methods.base import Result
from momoka.methods.momoka import EmbeddingReferee, MomokaMap
from momoka.methods.momoka.trail import TrailRetriever


class WordHashEmbedder:
    """A deterministic bag-of-words embedder (hashed words, L2-normalised), no model files."""

    def __init__(self, dim: int = 64):
        self.dim = dim
        self.model_id = "test/word-hash"
        self.checksum = hashlib.sha256(f"word-hash:{dim}".encode()).hexdigest()

    def embed(self, texts):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"[a-z0-9]+", t.lower()):
                out[i, int.from_bytes(hashlib.md5(w.encode()).digest()[:4], "little") % self.dim] += 1.0
            n = np.linalg.norm(out[i])
            out[i] = out[i] / n if n else out[i]
        return out


PARAS = {
    "orchard": ["Apples grow on trees in the orchard.", "The harvest of apples happens in autumn.",
                "Farmers sell cider at the market.", "Bees pollinate the blossoms in spring."],
    "rocket": ["Rockets burn fuel to reach orbit.", "The engine produces thrust at launch.",
               "Engineers test the engine on a stand."],
}
# hand-made paths (positions within each document): orchard 0 -> [1, 3], 1 -> [0]; rocket 0 -> [2]
HAND_PATHS = {"orchard": [[1, 3], [0], [], []], "rocket": [[2], [], []]}


@pytest.fixture
def word_embedder():
    return WordHashEmbedder()


@pytest.fixture
def tiny_docs():
    from momoka.text import Document

    return [Document.from_text("\n\n".join(ps), title=name.title(), doc_id=name) for name, ps in PARAS.items()]


class Recorder:
    """A reranker that records its calls and scores by word overlap with the query."""

    name = "recorder"

    def __init__(self, max_passage_chars=None):
        self.calls = []
        if max_passage_chars is not None:
            self.max_passage_chars = max_passage_chars

    def score(self, query, passages):
        self.calls.append((query, list(passages)))
        qw = set(query.lower().split())
        return np.array([len(qw & set(p.lower().split())) + len(p) * 1e-6 for p in passages], dtype=np.float32)


class HandPaths:
    """A relator writing :data:`HAND_PATHS` into the ordered relation ``paths`` (positions -> store chunk ids)."""

    name = "hand-paths"

    def relate(self, index, doc_ids):
        st = index.store
        if not st.has_relation("paths"):
            st.add_relation("paths", ordered=True, source={"by": self.name})
        for d in doc_ids:
            ids = st.documents[d].chunk_ids
            for cid, p in zip(ids, HAND_PATHS[d]):
                st.relation("paths").set(cid, [ids[j] for j in p])

    def describe(self):
        return {}


def make_index(docs, embedder, with_paths=True, store=None):
    return Index.build(docs, store=store, chunker="paragraph", embedder=embedder,
                       enrich=[("title", {"mode": "document"})], relate=[HandPaths()] if with_paths else [],
                       progress=False)


def test_spans_are_exact_and_text_is_members(tiny_docs, word_embedder):
    ix = make_index(tiny_docs, word_embedder)
    tr = TrailRetriever(ix.corpus, reranker=Recorder())
    by_id = {d.doc_id: d for d in tiny_docs}
    seen_composite = False
    for query in ("apples orchard harvest", "rocket engine thrust", "bees spring cider"):
        res = tr.retrieve(query, k=5)
        assert isinstance(res, Result) and res.retriever == "trail" and len(res) == 5
        assert [r.rank for r in res] == list(range(1, len(res) + 1))
        assert [r.score for r in res] == sorted((r.score for r in res), reverse=True)
        for r in res:
            parts = [by_id[d].text[s:e] for d, s, e in r.spans]
            assert parts == [ix.store.chunks.text(c) for c in r.chunk_ids] == [m.text for m in r.members]
            assert r.text == "\n\n".join(parts)
            assert len(r.spans) == len(r.chunk_ids) and len({d for d, _, _ in r.spans}) == 1
            assert r.provenance["retriever"] == "trail" and r.provenance["first_stage"] == "mm"
            assert r.provenance["source"] == r.chunk_ids[0] or r.provenance["kind"] == "node"
            seen_composite |= r.composite
    assert seen_composite


def test_paths_map_to_store_ids(tiny_docs, word_embedder):
    ix = make_index(tiny_docs, word_embedder)
    tr = TrailRetriever(ix.corpus, reranker=Recorder())
    o = ix.store.documents["orchard"].chunk_ids
    r = ix.store.documents["rocket"].chunk_ids
    assert tr.path(o[0]) == [o[1], o[3]] and tr.path(o[1]) == [o[0]] and tr.path(o[2]) == []
    assert tr.path(r[0]) == [r[2]]
    assert tr.title("orchard") == "Orchard"
    assert TrailRetriever(ix.corpus, reranker=Recorder(), titles={"orchard": "Fruit"}).title("orchard") == "Fruit"
    assert TrailRetriever(ix.corpus, reranker=Recorder(), titles=False).title("orchard") is None


def test_one_batch_title_for_reranking_only(tiny_docs, word_embedder):
    ix = make_index(tiny_docs, word_embedder)
    rec = Recorder()
    o = ix.store.documents["orchard"].chunk_ids
    tr = TrailRetriever(ix.corpus, reranker=rec, first_stage=lambda q, n: o[:1])
    res = tr.retrieve("apples in the orchard", k=3)
    assert len(rec.calls) == 1  # every candidate scored in one call
    texts = rec.calls[0][1]
    ch = lambda i: ix.store.chunks.text(o[i])
    # retrieved chunk 0 with path [1, 3]: (0), (0,1,3), (1), (0,1), (3), (0,3); title once, in front
    assert texts == [
        "Orchard\n\n" + ch(0),
        "Orchard\n\n" + "\n\n".join([ch(0), ch(1), ch(3)]),
        "Orchard\n\n" + ch(1),
        "Orchard\n\n" + ch(0) + "\n\n" + ch(1),
        "Orchard\n\n" + ch(3),
        "Orchard\n\n" + ch(0) + "\n\n" + ch(3),
    ]
    assert all("Orchard" not in r.text for r in res)
    assert tr.last_stats["candidates"] == 6 and tr.last_stats["composites"] == 3
    assert res.stats == {"candidates": 6, "composites": 3, "truncated": 0}
    # titles off: the raw texts
    rec2 = Recorder()
    TrailRetriever(ix.corpus, reranker=rec2, titles=False, first_stage=lambda q, n: o[:1]).retrieve("apples", k=2)
    assert rec2.calls[0][1][0] == ch(0)


def test_truncated_composites_counted(tiny_docs, word_embedder):
    ix = make_index(tiny_docs, word_embedder)
    o = ix.store.documents["orchard"].chunk_ids
    lens = {i: len(ix.store.chunks.text(o[i])) for i in range(4)}
    limit = len("Orchard\n\n") + lens[0] + 2 + lens[1]  # (0,1) fits exactly; (0,1,3) and (0,3) (if longer) do not
    rec = Recorder(max_passage_chars=limit)
    tr = TrailRetriever(ix.corpus, reranker=rec, first_stage=lambda q, n: o[:1])
    res = tr.retrieve("apples", k=6)
    composites = {(0, 1, 3): 2 + lens[1] + 2 + lens[3], (0, 1): 2 + lens[1], (0, 3): 2 + lens[3]}
    expect = sum(1 for extra in composites.values() if len("Orchard\n\n") + lens[0] + extra > limit)
    assert expect >= 1
    assert tr.last_stats["truncated"] == expect == tr.truncated == res.stats["truncated"]
    assert sum(r.provenance["truncated"] for r in res) == expect
    # the count accumulates over calls
    tr.retrieve("apples", k=6)
    assert tr.truncated == 2 * expect


def test_store_without_paths_is_refused(tiny_docs, word_embedder):
    # an index built with no Momoka-Map paths, queried with the Trail retriever
    ix = make_index(tiny_docs, word_embedder, with_paths=False)
    assert not ix.store.has_relation("paths")
    with pytest.raises(PathsMissingError, match="no Momoka-Map paths"):
        TrailRetriever(ix.corpus, reranker=Recorder())
    assert issubclass(PathsMissingError, StoreError)
    # explicit paths work without a stored map
    o = ix.store.documents["orchard"].chunk_ids
    res = TrailRetriever(ix.corpus, reranker=Recorder(), paths={o[0]: [o[2]]},
                         first_stage=lambda q, n: o[:1]).retrieve("cider market apples", k=1)
    assert res[0].chunk_ids == (o[0], o[2])


def test_relation_written_by_hand_survives_save_and_open(tmp_path, tiny_docs, word_embedder):
    # paths written by hand through the public relation API, read back from disk through the public store
    # API and by the Trail retriever of a reopened index
    ix = make_index(tiny_docs, word_embedder, with_paths=False)
    st = ix.store
    o, r = st.documents["orchard"].chunk_ids, st.documents["rocket"].chunk_ids
    written = {o[0]: [o[3], o[1]], o[2]: [o[0]], r[1]: [r[2], r[0]]}  # order matters: the relation is ordered
    st.add_relation("paths", ordered=True, source={"by": "test"})
    for c, p in written.items():
        st.relation("paths").set(c, p)
    ix.save(tmp_path / "st")
    ix.close()
    st = Store.open(tmp_path / "st")
    assert st.has_relation("paths")
    for c in st.chunks.ids():
        assert st.relation("paths").get(c).tolist() == written.get(c, [])
    st.close()
    ix = Index.open(tmp_path / "st", embedder=word_embedder)
    tr = TrailRetriever(ix.corpus, reranker=Recorder())
    assert {c: tr.path(c) for c in ix.store.chunks.ids() if tr.path(c)} == written
    ix.close()


def test_bad_arguments(tiny_docs, word_embedder):
    ix = make_index(tiny_docs, word_embedder)
    with pytest.raises(InputError, match="not live chunk ids"):  # a path to a chunk that does not exist
        ix.store.relation("paths").set(ix.store.documents["orchard"].chunk_ids[0], [999])
    with pytest.raises(ConfigError):  # unknown first-stage retriever
        TrailRetriever(ix.corpus, reranker=Recorder(), first_stage="sparse")
    with pytest.raises(ConfigError):  # neither a name nor a callable
        TrailRetriever(ix.corpus, reranker=Recorder(), first_stage=3)
    with pytest.raises(ConfigError):  # the first stage depth factor must be a positive int
        TrailRetriever(ix.corpus, reranker=Recorder(), expand=0)
    tr = TrailRetriever(ix.corpus, reranker=Recorder())
    with pytest.raises(ConfigError):  # k must be a positive int
        tr.retrieve("apples", k=0)
    with pytest.raises(InputError):  # a bare string where a list of queries is expected
        tr.retrieve_batch("apples", k=1)


def test_trail_reads_what_the_pipeline_wrote_after_a_reopen(tmp_path, word_embedder):
    # Paths from the paths relator and titles from the title enricher, saved and reopened, are what the
    # Trail retriever uses: checked against hand-computed paths, a title taken from the text here and
    # reranking texts written out by hand (title, blank line, members separated by blank lines).
    # rollout 1 and no structural prior: the best child is the only one the referee links (planted pairs).
    docs = [{"doc_id": "p", "text": "Volcano lava flowed.\n\nBakery bread rose.\n\nVolcano lava cooled.\n\n"
                                    "Bakery bread sold."}]
    ix = Index.build(docs, store=tmp_path / "s", chunker="paragraph", embedder=word_embedder,
                     enrich=[("title", {"mode": "document"})],
                     relate=[("paths", {"referee": "embedding", "threshold": 0.5, "alpha": 0, "beta": 0,
                                        "rollout": 1})], progress=False)
    ix.close()
    ix = Index.open(tmp_path / "s", embedder=word_embedder)
    ids = ix.store.documents["p"].chunk_ids
    rec = Recorder()
    tr = TrailRetriever(ix.corpus, reranker=rec, first_stage=lambda q, n: [ids[1]])
    assert [tr.path(c) for c in ids] == [[ids[2]], [ids[3]], [ids[0]], [ids[1]]]
    assert tr.title("p") == "Volcano lava flowed."  # the document has no title: its first sentence
    tr.retrieve("bakery bread", k=4)
    t = "Volcano lava flowed."
    assert rec.calls[0][1] == [f"{t}\n\nBakery bread rose.", f"{t}\n\nBakery bread rose.\n\nBakery bread sold.",
                               f"{t}\n\nBakery bread sold."]
    ix.close()


def test_trail_reads_an_index_built_with_the_paths_relator(word_embedder):
    # an index built with the title enricher and the paths relator is usable by the Trail retriever as is,
    # and its paths are those Momoka-Map computes on the same chunks (positions mapped to store ids)
    from momoka.models import CosineReranker

    paras = ["Apples grow on trees in the orchard.", "Rockets burn fuel.", "The apple harvest is in autumn.",
             "Violins have strings.", "Cider is made from apples pressed in autumn.", "Chess has kings.",
             "Bees like blossoms."]
    docs = [{"doc_id": "a", "title": "Apples", "text": "\n\n".join(paras)}]
    ix = Index.build(docs, chunker="paragraph", embedder=word_embedder, enrich=["title"],
                     relate=[("paths", {"referee": "embedding"})], progress=False)
    tr = TrailRetriever(ix.corpus, reranker=CosineReranker(word_embedder))
    ids = ix.store.documents["a"].chunk_ids
    chunks = [ix.store.chunks.get(c) for c in ids]
    assert [c.text for c in chunks] == paras
    # eq. 2: the referee judges T_D + chunk ("Apples" is the document's own title)
    from dataclasses import replace

    titled = [replace(c, text=f"Apples\n{c.text}") for c in chunks]
    want = MomokaMap(referee=EmbeddingReferee(word_embedder)).paths_for_chunks(titled)
    assert [tr.path(c) for c in ids] == [[ids[j] for j in p] for p in want]
    assert any(tr.path(c) for c in ids)
    assert tr.title("a") == "Apples"
    res = tr.retrieve("apple harvest autumn", k=3)
    assert len(res) == 3 and all(r.doc_id == "a" for r in res)
    assert ix.search("apple harvest autumn", k=3, retriever="momoka").to_dict()["items"] == res.to_dict()["items"]


def test_member_scoring_and_dedup_by_hand(tiny_docs, word_embedder):
    ix = make_index(tiny_docs, word_embedder)
    o = ix.store.documents["orchard"].chunk_ids
    q = "apples harvest autumn"
    first = lambda q, n: o[:1]  # noqa: E731  retrieved: orchard 0, whose path is [1, 3]
    # Candidates: (0,), (0,1,3), (1,), (0,1), (3,), (0,3). Word-overlap scores of single chunks (title
    # "Orchard" first): 0 -> {apples} 1, 1 -> {harvest, apples, autumn} 3, 3 -> 0 (plus 1e-6 x length).
    rec = Recorder()
    single = {c: rec.score(q, ["Orchard\n\n" + ix.store.chunks.text(c)])[0] for c in (o[0], o[1], o[3])}
    cands = [(o[0],), (o[0], o[1], o[3]), (o[1],), (o[0], o[1]), (o[3],), (o[0], o[3])]
    for scoring, combine in (("max", max), ("mean", lambda xs: sum(xs) / len(xs))):
        rec = Recorder()
        tr = TrailRetriever(ix.corpus, reranker=rec, first_stage=first, scoring=scoring)
        res = tr.retrieve(q, k=6)
        want = {c: combine([single[x] for x in c]) for c in cands}
        assert {it.chunk_ids: it.score for it in res} == pytest.approx(want, rel=1e-5)
        # one batch of the three distinct chunks, each alone: nothing joined, nothing truncated
        assert len(rec.calls) == 1 and len(rec.calls[0][1]) == 3
        assert all(not it.provenance["truncated"] and it.provenance["scoring"] == scoring for it in res)
    # max: (1,) and its composites tie at 3 and the earliest candidate wins ties: (0,1,3) first. With dedup,
    # (0,1) and (1,) add no chunk after (0,1,3), so the next items are the ones that still add one (none).
    tr = TrailRetriever(ix.corpus, reranker=Recorder(), first_stage=first, scoring="max", dedup=True)
    res = tr.retrieve(q, k=3)
    assert [it.chunk_ids for it in res] == [(o[0], o[1], o[3])]
    tr = TrailRetriever(ix.corpus, reranker=Recorder(), first_stage=first, scoring="mean", dedup=True)
    # mean: (1,) 3 > (0,1) 2 > (0,1,3) 4/3 > (0,) 1 > (0,3) 0.5 > (3,) 0; dedup keeps (1,), (0,1) adds 0,
    # (0,1,3) adds 3; the rest add nothing.
    assert [it.chunk_ids for it in tr.retrieve(q, k=5)] == [(o[1],), (o[0], o[1]), (o[0], o[1], o[3])]
    # flatten (the "budget" preset: mean scoring, flattened; the explicit first stage wins over the preset's):
    # the distinct chunks in the order they first appear: 1 (from (1,), 3), 0 (from (0,1), 2), 3 (from (0,1,3)).
    tr = TrailRetriever(ix.corpus, reranker=Recorder(), first_stage=first, preset="budget")
    res = tr.retrieve(q, k=5)
    assert [it.chunk_ids for it in res] == [(o[1],), (o[0],), (o[3],)]
    assert [it.score for it in res] == pytest.approx([single[o[1]], (single[o[0]] + single[o[1]]) / 2,
                                                      (single[o[0]] + single[o[1]] + single[o[3]]) / 3])
    assert all(it.provenance["flattened"] and it.provenance["preset"] == "budget" for it in res)
    assert [it.rank for it in res] == [1, 2, 3] and len(tr.retrieve(q, k=2)) == 2
    with pytest.raises(ConfigError):
        TrailRetriever(ix.corpus, reranker=Recorder(), scoring="sum")
    with pytest.raises(ConfigError):
        TrailRetriever(ix.corpus, reranker=Recorder(), preset="best")


class TableReranker:
    """Scores each passage by the chunk text it ends with (the title comes first); records its calls."""

    name = "table"

    def __init__(self, by_text):
        self.by_text, self.calls = by_text, []

    def score(self, query, passages):
        self.calls.append(list(passages))
        return np.array([next(v for t, v in self.by_text.items() if p.endswith(t)) for p in passages])


def _guarded_reference(init, paths, score, k):
    """Plain-Python guarded expansion: the base order; a path node goes in only when it beats the next base chunk."""
    out = []
    init = list(dict.fromkeys(init))
    for i, c in enumerate(init):
        if len(out) >= k:
            break
        if c in out:
            continue
        out.append(c)
        rest = [b for b in init[i + 1:] if b not in out]
        for p in dict.fromkeys(paths.get(c, [])):
            if len(out) < k and p != c and p not in out and (not rest or score[p] > score[rest[0]]):
                out.append(p)
    return out


def test_guarded_expansion_by_hand_and_against_a_reference(tiny_docs, word_embedder):
    ix = make_index(tiny_docs, word_embedder)
    o, r = ix.store.documents["orchard"].chunk_ids, ix.store.documents["rocket"].chunk_ids
    text = ix.store.chunks.text
    # Hand case: scores o0 5, o1 4, o2 1, o3 .5, r0 3, r1 2, r2 3.5; first stage o0, r0, o2, r1; paths
    # o0 -> [o1, o3], r0 -> [r2]. o1 (4) beats the next base chunk r0 (3): inserted; o3 (.5) is not.
    # r2 (3.5) beats o2 (1): inserted. Then o2, r1.
    sc = {o[0]: 5, o[1]: 4, o[2]: 1, o[3]: 0.5, r[0]: 3, r[1]: 2, r[2]: 3.5}
    rr = TableReranker({text(c): v for c, v in sc.items()})
    paths = {o[0]: [o[1], o[3]], r[0]: [r[2]]}
    tr = TrailRetriever(ix.corpus, reranker=rr, first_stage=lambda q, n: [o[0], r[0], o[2], r[1]][:n], paths=paths,
                        preset="guarded")
    res = tr.retrieve("anything", k=6)
    assert [it.chunk_ids for it in res] == [(o[0],), (o[1],), (r[0],), (r[2],), (o[2],), (r[1],)]
    assert [it.provenance["kind"] for it in res] == ["chunk", "node", "chunk", "node", "chunk", "chunk"]
    assert [it.score for it in res] == [5, 4, 3, 3.5, 1, 2] and [it.rank for it in res] == [1, 2, 3, 4, 5, 6]
    assert len(rr.calls) == 1 and len(rr.calls[0]) == 7  # every distinct chunk once, in one call
    assert all(ix.corpus.document(m.doc_id).text[m.start:m.end] == m.text for it in res for m in it.members)
    assert [it.chunk_ids for it in tr.retrieve("anything", k=3)] == [(o[0],), (o[1],), (r[0],)]
    # Tried: 200 random first stages, paths and scores over the 7 chunks, against the plain reference.
    rng = np.random.default_rng(7)
    ids = list(o) + list(r)
    for _ in range(200):
        init = [int(x) for x in rng.choice(ids, size=rng.integers(1, 12), replace=True)]
        paths = {c: [int(x) for x in rng.choice(ids, size=rng.integers(0, 4), replace=False)] for c in ids}
        sc = {c: float(rng.integers(0, 5)) for c in ids}  # ties on purpose: the partner must beat, not equal
        k = int(rng.integers(1, 8))
        tr = TrailRetriever(ix.corpus, reranker=TableReranker({text(c): v for c, v in sc.items()}),
                            first_stage=lambda q, n, init=init: init, paths=paths, guard=True)
        got = [it.chunk_ids[0] for it in tr.retrieve("q", k=k)]
        assert got == _guarded_reference(init[:2 * k], paths, sc, k)  # the first stage is asked for 2k
    with pytest.raises(ConfigError):
        TrailRetriever(ix.corpus, reranker=Recorder(), guard="yes")
