"""A store opened for reading is a read-only Snapshot: every change through it is a ReadOnlyError.

Before, a ``Store`` opened for reading upgraded itself to the writer on its first change, so a write
through ``corpus.store`` of an index opened for reading silently took the writer lock.
"""

from __future__ import annotations

import numpy as np
import pytest

from momoka import Index
from momoka.errors import ReadOnlyError, StoreError, StoreLockedError
from momoka.store import Delta, Snapshot, Store, StoreWriter
from momoka.text.model import Chunk

from .conftest import HashEmbedder


@pytest.fixture
def built(tmp_path, docs):
    Index.build(docs, store=tmp_path / "s", embedder=HashEmbedder(), chunker="paragraph", progress=False).close()
    return tmp_path / "s"


def _writes(st) -> dict:
    """Every way to change a store: its own write calls and changes through its artifacts and documents."""
    doc = next(iter(st.documents))
    cid = int(st.chunks.ids()[0])
    return {
        "add_documents": lambda: st.add_documents([{"doc_id": "new", "length": 3}],
                                                  [[Chunk("new", 0, 3, "new", 0, 0, 0, (), {}, None)]]),
        "delete": lambda: st.delete([doc]),
        "apply": lambda: st.apply(Delta()),
        "save": lambda: st.save(),
        "merge": lambda: st.merge(),
        "mark_dirty": lambda: st.mark_dirty(),
        "add_vector_view": lambda: st.add_vector_view("v2", embedder={"model_id": "m", "checksum": "c", "dim": 2}),
        "add_bm25_view": lambda: st.add_bm25_view("b2"),
        "add_relation": lambda: st.add_relation("r2"),
        "add_node_table": lambda: st.add_node_table("n2"),
        "remove_artifact": lambda: st.remove_artifact("bm25", "raw"),
        "vector tombstones": lambda: st.vector_view("raw").delete([cid]),
        "bm25 tombstones": lambda: st.bm25_view("raw").delete([cid]),
        "chunk rows": lambda: st.chunks.append([(doc, Chunk("x", 0, 1, doc, 0, 0, 0, (), {}, None))]),
        "chunk metadata": lambda: st.chunks.set_metadata(cid, "k", 1),
        "document metadata": lambda: st.documents[doc].metadata.__setitem__("k", 1),
        "document metadata update": lambda: st.documents[doc].metadata.update(k=1),
    }


def test_a_snapshot_refuses_every_change_and_takes_no_lock(built):
    snap = Store.open(built)
    assert isinstance(snap, Snapshot) and not isinstance(snap, StoreWriter) and not snap.writable
    before = {d: dict(e.metadata) for d, e in snap.documents.items()}
    n_chunks, n_vectors = snap.n_chunks, len(snap.vector_view("raw").ids())
    for what, change in _writes(snap).items():
        with pytest.raises(ReadOnlyError, match="open for reading"):
            change()
        # no write took the lock: a writer (another object, as another process would) opens now
        w = Store.open(built, writable=True)
        assert isinstance(w, StoreWriter), what
        w.close()
    assert {d: dict(e.metadata) for d, e in snap.documents.items()} == before
    assert snap.n_chunks == n_chunks and len(snap.vector_view("raw").ids()) == n_vectors and not snap.dirty
    # the read API only: a snapshot has no write methods at all
    assert not hasattr(snap, "save") and not hasattr(snap, "add_vector_view") and not hasattr(snap, "apply")
    with pytest.raises(StoreError):  # a StoreError too, for callers that catch those
        snap.save()
    snap.close()


def test_the_corpus_of_an_index_opened_for_reading_cannot_write(built):
    ix = Index.open(built, embedder=HashEmbedder())
    corpus = ix.corpus  # what a retriever is given
    assert isinstance(corpus.store, Snapshot)
    for what, change in _writes(corpus.store).items():
        with pytest.raises(ReadOnlyError):
            change()
    other = Index.open(built, embedder=HashEmbedder(), writable=True)  # no lock was taken by those writes
    other.close()
    assert ix.search("apple harvest", k=1)[0].doc_id == "apples"  # and the reader still reads
    ix.close()


def test_the_index_facade_becomes_the_writer_of_its_snapshot_on_its_first_change(built):
    ix = Index.open(built, embedder=HashEmbedder())
    snap = ix.store
    gen = snap.manifest["generation"]
    ix.delete("chess")  # the index, not the snapshot, decides to write: it adopts the snapshot's generation
    assert isinstance(ix.store, StoreWriter) and ix.store.writable and "chess" not in ix.store.documents
    assert not snap.documents  # the snapshot gave its state away
    with pytest.raises(StoreLockedError):
        Store.open(built, writable=True)
    ix.save()
    ix.close()
    again = Store.open(built)
    assert "chess" not in again.documents and again.manifest["generation"] == gen + 1
    again.close()


def test_adopting_a_snapshot_is_refused_after_another_commit_and_leaves_it_intact(built):
    snap = Store.open(built)
    w = Store.open(built, writable=True)
    w.delete(["chess"])
    w.save()
    with pytest.raises(StoreLockedError):  # the writer holds the lock
        StoreWriter.adopt(snap)
    w.close()
    with pytest.raises(StoreError, match="changed by another writer"):
        StoreWriter.adopt(snap)
    assert "chess" in snap.documents and isinstance(snap, Snapshot)  # unchanged, still reading
    w2 = Store.open(built, writable=True)  # and the refused adoption left no lock behind
    w2.close()
    newer = snap.refresh()
    writer = StoreWriter.adopt(newer)
    assert "chess" not in writer.documents and writer.writable
    writer.close()
    snap.close()
