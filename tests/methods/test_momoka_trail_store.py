"""Momoka-Trail over a real store: exact spans, one reranking batch, titles, truncation count, missing paths."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest
from momoka.chunking import get_chunker
from momoka.errors import ConfigError, InputError, PathsMissingError, StoreError
from momoka.index import Store
from momoka.methods.momoka.ablation import Corpus, attach_paths
from momoka.methods.momoka.trail import (
    PATH_KEY,
    StorePaths,
    TrailRetriever,
    store_has_paths,
    write_store_paths,
)


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


def make_index(docs, embedder, with_paths=True):
    corpus = Corpus(docs, get_chunker("paragraph"), embedder)
    ix = corpus.index(with_titles=True)
    if with_paths:
        # hand-made paths (positions within each document): orchard 0 -> [1, 3], 1 -> [0]; rocket 0 -> [2]
        paths = [[[1, 3], [0], [], []], [[2], [], []]]
        attach_paths(ix, corpus, paths, {"test": True})
    return corpus, ix


def test_spans_are_exact_and_text_is_members(tiny_docs, word_embedder):
    _, ix = make_index(tiny_docs, word_embedder)
    tr = TrailRetriever(ix, reranker=Recorder())
    by_id = {d.doc_id: d for d in tiny_docs}
    seen_composite = False
    for query in ("apples orchard harvest", "rocket engine thrust", "bees spring cider"):
        res = tr.retrieve(query, k=5)
        assert [r.rank for r in res] == list(range(1, len(res) + 1))
        assert [r.score for r in res] == sorted((r.score for r in res), reverse=True)
        for r in res:
            parts = [by_id[d].text[s:e] for d, s, e in r.spans]
            assert parts == [ix.store.chunks[c]["text"] for c in r.chunk_ids]
            assert r.text == "\n\n".join(parts)
            assert len(r.spans) == len(r.chunk_ids) and len({d for d, _, _ in r.spans}) == 1
            seen_composite |= r.composite
    assert seen_composite


def test_paths_map_to_store_ids(tiny_docs, word_embedder):
    _, ix = make_index(tiny_docs, word_embedder)
    sp = StorePaths(ix.store)
    o = ix.store.documents["orchard"].chunk_ids
    r = ix.store.documents["rocket"].chunk_ids
    assert sp(o[0]) == [o[1], o[3]] and sp(o[1]) == [o[0]] and sp(o[2]) == []
    assert sp(r[0]) == [r[2]]
    assert sp.title("orchard") == "Orchard"


def test_one_batch_title_for_reranking_only(tiny_docs, word_embedder):
    _, ix = make_index(tiny_docs, word_embedder)
    rec = Recorder()
    tr = TrailRetriever(ix, reranker=rec, retriever=lambda q, n: ix.store.documents["orchard"].chunk_ids[:1])
    res = tr.retrieve("apples in the orchard", k=3)
    assert len(rec.calls) == 1  # every candidate scored in one call
    texts = rec.calls[0][1]
    o = ix.store.documents["orchard"].chunk_ids
    ch = lambda i: ix.store.chunks[o[i]]["text"]
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
    # titles off: the raw texts
    rec2 = Recorder()
    TrailRetriever(ix, reranker=rec2, titles=False,
                   retriever=lambda q, n: o[:1]).retrieve("apples", k=2)
    assert rec2.calls[0][1][0] == ch(0)


def test_truncated_composites_counted(tiny_docs, word_embedder):
    _, ix = make_index(tiny_docs, word_embedder)
    o = ix.store.documents["orchard"].chunk_ids
    lens = {i: len(ix.store.chunks[o[i]]["text"]) for i in range(4)}
    limit = len("Orchard\n\n") + lens[0] + 2 + lens[1]  # (0,1) fits exactly; (0,1,3) and (0,3) (if longer) do not
    rec = Recorder(max_passage_chars=limit)
    tr = TrailRetriever(ix, reranker=rec, retriever=lambda q, n: o[:1])
    res = tr.retrieve("apples", k=6)
    composites = {(0, 1, 3): 2 + lens[1] + 2 + lens[3], (0, 1): 2 + lens[1], (0, 3): 2 + lens[3]}
    expect = sum(1 for extra in composites.values() if len("Orchard\n\n") + lens[0] + extra > limit)
    assert tr.last_stats["truncated"] == expect == tr.truncated
    assert sum(r.truncated for r in res) == expect


def test_store_without_paths_is_refused(tiny_docs, word_embedder):
    # an index built with no Momoka-Map paths, queried with the Trail retriever
    _, ix = make_index(tiny_docs, word_embedder, with_paths=False)
    assert not store_has_paths(ix.store)
    with pytest.raises(PathsMissingError, match="no Momoka-Map paths"):
        TrailRetriever(ix, reranker=Recorder())
    assert issubclass(PathsMissingError, StoreError)
    # explicit paths work without a stored map
    o = ix.store.documents["orchard"].chunk_ids
    res = TrailRetriever(ix, reranker=Recorder(), paths={o[0]: [o[2]]},
                         retriever=lambda q, n: o[:1]).retrieve("cider market apples", k=1)
    assert res[0].chunk_ids == (o[0], o[2])


def test_paths_survive_save_and_open(tmp_path, tiny_docs, word_embedder):
    _, ix = make_index(tiny_docs, word_embedder)
    ix.store.save(tmp_path / "st")
    ix.store.close()
    st = Store.open(tmp_path / "st")
    o = st.documents["orchard"].chunk_ids
    assert StorePaths(st)(o[0]) == [o[1], o[3]]
    assert st.chunks[o[0]]["metadata"][PATH_KEY] == [1, 3]
    st.close()


def test_bad_arguments(tiny_docs, word_embedder):
    _, ix = make_index(tiny_docs, word_embedder)
    o = ix.store.documents["orchard"].chunk_ids
    r = ix.store.documents["rocket"].chunk_ids
    with pytest.raises(InputError, match="leaves its document"):  # a path into another document
        write_store_paths(ix.store, {o[0]: [r[0]]})
    with pytest.raises(ConfigError):  # unknown first-stage retriever
        TrailRetriever(ix, reranker=Recorder(), retriever="sparse")
    tr = TrailRetriever(ix, reranker=Recorder())
    with pytest.raises(ConfigError):  # k must be a positive int
        tr.retrieve("apples", k=0)
    with pytest.raises(InputError):  # a bare string where a list of queries is expected
        tr.retrieve_batch("apples", k=1)


def test_keys_agree_with_momoka_map():
    # the Trail retriever reads what Momoka-Map writes
    from momoka.methods.momoka import map as mmap
    from momoka.methods.momoka import trail

    assert (trail.PATH_KEY, trail.TITLE_KEY, trail.SEPARATOR) == (mmap.PATH_KEY, mmap.TITLE_KEY, mmap.PATH_SEPARATOR)


def test_trail_reads_an_index_built_by_momoka_map(word_embedder):
    # an index built by MomokaMap (the index's enrich hook) is usable by the Trail retriever as is
    from momoka.methods.momoka import MomokaMap
    from momoka.models import CosineReranker

    paras = ["Apples grow on trees in the orchard.", "Rockets burn fuel.", "The apple harvest is in autumn.",
             "Violins have strings.", "Cider is made from apples pressed in autumn.", "Chess has kings.",
             "Bees like blossoms."]
    docs = [{"doc_id": "a", "title": "Apples", "text": "\n\n".join(paras)}]
    ix = MomokaMap(referee="embedding", title="document", embedder=word_embedder).build(
        docs, chunker="paragraph", embedder=word_embedder)
    tr = TrailRetriever(ix, reranker=CosineReranker(word_embedder))
    ids = ix.store.documents["a"].chunk_ids
    for pos, cid in enumerate(ids):  # the stored positions, mapped to store ids
        assert tr.path(cid) == [ids[j] for j in ix.store.chunks[cid]["metadata"][PATH_KEY]]
    assert any(tr.path(c) for c in ids)
    assert tr.title("a") == "Apples"
    res = tr.retrieve("apple harvest autumn", k=3)
    assert len(res) == 3 and all(r.doc_id == "a" for r in res)
