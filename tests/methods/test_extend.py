"""``Index.extend`` goes through the changeset path: components run on a scratch copy of the stored
documents, their :class:`~momoka.store.delta.Delta` is applied by ``Store.apply``.

References: the state of the store before the extend (a failing extend must leave it so, in memory
and reopened from disk), values computed here by hand (the toy relator's rows), and a build from
scratch with the same components (an extend must give the same stored artifacts and the same
retrieval results, with the real default embedder on real documents).
"""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from _oracles.embedders import HashEmbedder
from momoka import Index, registry
from momoka.errors import InputError
from momoka.store.delta import Delta

from .conftest import OFFLINE_OPTIONS, builtin_components, offline_spec


class HalfwayRelator:
    """Relation "next" (each chunk -> the next of its document) and a metadata mark per document; raises
    (after writing the first documents' rows) when it reaches ``stop_at``."""

    name = "toy-halfway"

    def __init__(self, stop_at=None):
        self.stop_at = stop_at

    def relate(self, batch, doc_ids):
        st = batch.store
        if not st.has_relation("next"):
            st.add_relation("next", ordered=True, source={"by": self.name})
        for d in doc_ids:
            if d == self.stop_at:
                raise RuntimeError(f"relator failed at {d}")
            ids = st.documents[d].chunk_ids
            for a, b in zip(ids, ids[1:]):
                st.relation("next").set(a, [b])
            st.documents[d].metadata["halfway"] = len(ids)
            st.chunks.set_metadata(ids[0], "first", True)

    def describe(self):
        return {}


class Titler:
    """An enricher writing a metadata key and vector view "upper" (the chunks upper-cased)."""

    name = "toy-titler"

    def enrich(self, batch, doc_ids):
        st = batch.store
        if not st.has_vector_view("upper"):
            st.add_vector_view("upper", embedder=st.vector_view("raw").info["embedder"], source={"by": self.name})
        ids = [c for d in doc_ids for c in st.documents[d].chunk_ids]
        st.vector_view("upper").add(ids, batch.embed([st.chunks.text(c).upper() for c in ids], view="upper"))
        for d in doc_ids:
            st.documents[d].metadata["titler"] = d.upper()

    def describe(self):
        return {}


DOCS = [{"doc_id": f"d{i}", "title": f"Doc {i}",
         "text": "\n\n".join(f"Paragraph {j} of document {i} talks about topic {i * 7 + j}." for j in range(3))}
        for i in range(4)]


def _state(st) -> dict:
    """Everything a test compares of a store: manifest artifacts and pipeline, documents, chunk metadata, rows."""
    m = st.manifest
    out = {"artifacts": sorted(f"{k}/{n}" for k in st._artifacts for n in st._artifacts[k]),
           "pipeline": json.dumps(m.get("pipeline"), sort_keys=True),
           "documents": {d: (e.title, list(e.chunk_ids), json.dumps(dict(e.metadata), sort_keys=True))
                         for d, e in st.documents.items()},
           "chunk_meta": {int(c): json.dumps(st.chunks.metadata(c), sort_keys=True) for c in st.chunks.ids()}}
    for name in st.vector_views:
        ids = st.vector_view(name).ids()
        out[f"vectors/{name}"] = (sorted(int(i) for i in ids), np.asarray(st.vector_view(name).get(sorted(ids))).tobytes())
    for name in st.relations:
        rel = st.relation(name)
        out[f"relation/{name}"] = {int(c): np.asarray(rel.get(c)).tolist() for c in rel.rows()}
    return out


@pytest.mark.parametrize("commit", [False, True])
def test_a_failing_extend_leaves_the_store_as_it_was(tmp_path, commit):
    emb = HashEmbedder()
    Index.build(DOCS, store=tmp_path / "s", chunker="paragraph", embedder=emb, progress=False).close()
    ix = Index.open(tmp_path / "s", embedder=emb, writable=True)
    ix.writer.commit_docs = 10  # one batch: the failure is in the first one
    before = _state(ix.store)
    # the enricher runs first and succeeds; the relator writes d0's and d1's rows, then fails at d2
    with pytest.raises(RuntimeError, match="failed at d2"):
        ix.extend(enrich=[Titler()], relate=[HalfwayRelator(stop_at="d2")], commit=commit)
    assert _state(ix.store) == before
    assert not ix.store.dirty and ix.corpus.pipeline["enrich"] == [] and ix.corpus.pipeline["relate"] == []
    ix.save()
    ix.close()
    again = Index.open(tmp_path / "s", embedder=emb)
    assert _state(again.store) == before
    again.close()


def test_extend_writes_relations_and_metadata_over_the_stored_chunks(tmp_path):
    emb = HashEmbedder()
    ix = Index.build(DOCS, store=tmp_path / "s", chunker="paragraph", embedder=emb, progress=False)
    ix.writer.commit_docs = 3  # two committed batches: d0..d2, d3
    ix.extend(enrich=[Titler()], relate=[HalfwayRelator()], commit=True)
    ix.close()
    st = Index.open(tmp_path / "s", embedder=emb).store
    for d in st.documents:
        ids = st.documents[d].chunk_ids
        assert len(ids) == 3
        for a, b in zip(ids, ids[1:]):
            assert st.relation("next").get(a).tolist() == [b]   # by hand: each chunk -> the next one
        assert st.relation("next").get(ids[-1]).tolist() == []
        assert st.documents[d].metadata["halfway"] == 3 and st.documents[d].metadata["titler"] == d.upper()
        # the indexer's header (the document's title) stays beside what the enricher wrote
        assert st.chunks.metadata(ids[0]) == {"first": True, "header": f"Doc {d[1:]}"}
        assert st.chunks.metadata(ids[1]) == {"header": f"Doc {d[1:]}"}
    ids = sorted(int(c) for c in st.chunks.ids())
    np.testing.assert_allclose(st.vector_view("upper").get(ids),
                               emb.embed([st.chunks.text(c).upper() for c in ids]), atol=1e-6)
    assert st.documents["d0"].metadata["halfway"] == 3 and "pending" not in json.dumps(st.manifest["pipeline"])


def test_a_delta_over_stored_chunks_is_picklable_and_refused_after_a_delete(tmp_path):
    ix = Index.build(DOCS[:2], chunker="paragraph", embedder=None, progress=False)
    st = ix.store
    c0 = st.documents["d0"].chunk_ids
    delta = Delta(stored={0: c0[0], 1: c0[1]}, updates={"d0": {"k": 1}}, chunk_meta={1: {"m": "x"}},
                  relations={"r": {"ordered": True, "weighted": False, "target_table": None, "source": {},
                                   "rows": {0: (np.asarray([1]), None)}}})
    delta = pickle.loads(pickle.dumps(delta))
    assert st.apply(delta) == []
    assert st.relation("r").get(c0[0]).tolist() == [c0[1]]
    assert st.documents["d0"].metadata["k"] == 1 and st.chunks.metadata(c0[1]) == {"m": "x", "header": "Doc 0"}
    ix.delete("d0")
    with pytest.raises(InputError, match="no longer has"):
        st.apply(delta)


# ---------------------------------------------------------------------------------- real documents


@pytest.fixture(scope="module")
def real_docs(shared_data):
    d = shared_data / "squad_v1_dev_half_a"
    rows = sorted((json.loads(line) for line in open(d / "documents.jsonl", encoding="utf-8")),
                  key=lambda r: len(r["text"]))[:3]
    return [{"doc_id": r["doc_id"], "title": r.get("title") or "", "text": r["text"]} for r in rows]


def test_extend_equals_a_build_with_the_same_components(tmp_path, real_docs, embedder, monkeypatch):
    monkeypatch.delenv("MOMOKA_LLM_BASE_URL", raising=False)  # the title enricher takes the documents' titles
    comps = {"enrich": ["title"], "relate": [("paths", {"referee": "embedding", "iterations": 20})]}
    built = Index.build(real_docs, store=tmp_path / "built", embedder=embedder, progress=False, **comps)
    ext = Index.build(real_docs, store=tmp_path / "ext", embedder=embedder, progress=False)
    ext.extend(**comps)
    ext.save()
    a, b = _state(built.store), _state(ext.store)
    assert "vectors/titled" in a["artifacts"] and "relation/paths" in a["artifacts"]
    assert a["relation/paths"] and any(len(p) for p in a["relation/paths"].values())
    for key in ("artifacts", "documents", "chunk_meta", "vectors/raw", "vectors/titled", "relation/paths"):
        assert a[key] == b[key], key
    qs = [d["text"][:80] for d in real_docs] + ["when was it founded?", "who won the final?"]
    for retriever in ("mm", "trail", "hybrid"):
        for q in qs:
            ra, rb = built.search(q, k=5, retriever=retriever), ext.search(q, k=5, retriever=retriever)
            assert [(i.chunk_ids, round(i.score, 5)) for i in ra] == [(i.chunk_ids, round(i.score, 5)) for i in rb]
    built.close()
    ext.close()


# ---------------------------------------------------------------------------------- declared artifacts


class Nothing:
    """Declares vector view "nothing" (its ``prepare`` makes it) and writes no row for any document."""

    name = "toy-nothing"

    def prepare(self, batch):
        st = batch.store
        if not st.has_vector_view("nothing"):
            st.add_vector_view("nothing", embedder=st.vector_view("raw").info["embedder"], source={"by": self.name})

    def enrich(self, batch, doc_ids):
        pass

    def describe(self):
        return {}


@pytest.fixture(scope="module")
def nothing_registered():
    from momoka import registry

    registry.register("enricher", "toy-nothing", summary="test enricher writing nothing",
                      produces=("vectors/nothing",))(lambda **kw: Nothing())
    return True


def test_a_declared_artifact_exists_when_no_document_gave_it_a_row(tmp_path, nothing_registered):
    ix = Index.build(DOCS, store=tmp_path / "s", chunker="paragraph", embedder=HashEmbedder(), enrich=["toy-nothing"],
                     progress=False)
    ix.close()
    again = Index.open(tmp_path / "s", embedder=HashEmbedder())
    assert again.store.has_vector_view("nothing") and len(again.store.vector_view("nothing").ids()) == 0
    assert again.corpus.retriever("dense", view="nothing") is not None   # a retriever needing it opens
    again.close()


def test_extend_over_no_documents_still_makes_the_declared_artifacts(tmp_path, monkeypatch):
    # every enricher and relator momoka registers (listed from the registry), each with the options that let it
    # run here without a model or an endpoint
    monkeypatch.delenv("MOMOKA_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("MOMOKA_LLM_MODEL", raising=False)
    enrich, relate = builtin_components("enricher"), builtin_components("relator")
    assert {"title"} <= set(enrich) and {"paths", "jerr"} <= set(relate)
    ix = Index.build(DOCS[:2], store=tmp_path / "s", chunker="paragraph", embedder=HashEmbedder(), progress=False)
    ix.delete(["d0", "d1"])
    ix.extend(enrich=[offline_spec(n) for n in enrich], relate=[offline_spec(n) for n in relate])
    ix.save()
    ix.close()
    again = Index.open(tmp_path / "s", embedder=HashEmbedder())
    st = again.store
    # written by hand for the components named above, then what each registered one declares
    assert st.has_vector_view("titled") and st.has_relation("paths")
    assert st.has_node_table("jerr.entities") and st.has_relation("jerr.mentions")
    for kind, names in (("enricher", enrich), ("relator", relate)):
        for n in names:
            declared = registry.entry(kind, n).artifacts("produces", OFFLINE_OPTIONS.get(n))
            assert all(registry.has_artifact(st, key) for key in declared), (n, declared)
    # so every retriever momoka registers opens on it
    for name in builtin_components("retriever"):
        assert again.corpus.retriever(name) is not None, name
    again.close()
