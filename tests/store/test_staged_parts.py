"""Parts written by another process and adopted by the writer (what Ray workers do): a vector part written
with :func:`momoka.store.vectors.write_part` into the store's staging folder and staged with
:meth:`VectorView.stage` makes the same store as vectors added in the writer (same rows, same search hits,
the graph of a large part included); files not as recorded are refused; the staging folder is removed
when the writer lock is next taken, and readers and ``verify_store`` never see it."""

from __future__ import annotations

import numpy as np
import pytest

from momoka.errors import InputError, StoreError
from momoka.store import Store
from momoka.store._verify import verify_store
from momoka.store.vectors import GRAPH_ROWS, write_part
from momoka.text.model import Chunk

DIM = 8
EMB = {"model_id": "synthetic", "checksum": "0", "dim": DIM}


def _store(path):
    st = Store.create(path, chunker={"name": "paragraph", "params": {}})
    st.add_vector_view("raw", embedder=EMB)
    return st


def _add_docs(st, first: int, n: int, per_doc: int) -> list[int]:
    ids = []
    for i in range(first, first + n):
        chunks = [Chunk(t, 40 * j, 40 * j + len(t), f"d{i}", j, j, j)
                  for j, t in enumerate(f"doc {i} chunk {j}" for j in range(per_doc))]
        ids += st.add_documents([{"doc_id": f"d{i}", "title": None, "source": None, "length": 40 * per_doc}],
                                [chunks])[0]
    return ids


def _vecs(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.mark.parametrize("n_docs", [3, GRAPH_ROWS // 4 + 1])  # a small part, and one with its own HNSW graph
def test_staged_part_equals_vectors_added_in_the_writer(tmp_path, n_docs):
    """Tried: the same documents and vectors in two stores over two commits, the second commit's vectors
    added in the writer in one and written apart then staged in the other (4 chunks a document; the larger
    case's part holds at least GRAPH_ROWS vectors, so it has an HNSW graph, built by write_part with the
    store's ids as labels). Same rows by id, same top-10 for 5 random queries (exact and graph search alike),
    both verify; the staged files were moved (not copied) into the segment."""
    a, b = _store(tmp_path / "a"), _store(tmp_path / "b")
    for st in (a, b):
        ids0 = _add_docs(st, 0, 2, 4)
        st.vector_view("raw").add(ids0, _vecs(len(ids0), 1))
        st.save()
    ids_a, ids_b = _add_docs(a, 2, n_docs, 4), _add_docs(b, 2, n_docs, 4)
    assert ids_a == ids_b
    rows = _vecs(len(ids_a), 2)
    a.vector_view("raw").add(ids_a, rows)
    folder = b.staging() / "part"
    records = write_part(folder, "raw", {"embedder": EMB, "dtype": "float32", "source": {}}, ids_b, rows,
                         b.manifest.get("hnsw"))
    assert ("hnsw/raw.bin" in records) == (len(ids_b) >= GRAPH_ROWS)
    b.vector_view("raw").stage(folder, ids_b, records)
    assert b.dirty and not b.vector_view("raw").has(ids_b).any()  # not there before the commit
    a.save()
    b.save()
    assert not (folder / "vectors/raw.npy").exists()
    seg = b.segments[-1]
    assert {k: v["sha256"] for k, v in seg["parts"]["vectors/raw"].items()} == \
        {k: v["sha256"] for k, v in records.items()}
    all_ids = a.chunks.ids()
    np.testing.assert_array_equal(a.vector_view("raw").get(all_ids), b.vector_view("raw").get(all_ids))
    for q in _vecs(5, 3):
        assert a.vector_view("raw").search(q, 10) == b.vector_view("raw").search(q, 10)
    a.close()
    b.close()
    for p in ("a", "b"):
        assert verify_store(tmp_path / p)["damaged"] == []
    r = Store.open(tmp_path / "b")
    np.testing.assert_array_equal(r.vector_view("raw").get(all_ids), np.vstack([_vecs(8, 1), rows]))
    r.close()


def test_stage_refuses_what_it_cannot_adopt(tmp_path):
    """Tried: a staged file shorter than its record, ids of no chunk, ids that already have a vector, a file
    of another view, a second staged part before the save, and vectors added while one is staged."""
    st = _store(tmp_path / "s")
    ids = _add_docs(st, 0, 2, 3)
    st.vector_view("raw").add(ids[:2], _vecs(2, 0))
    st.save()
    info = {"embedder": EMB, "dtype": "float32", "source": {}}
    view = st.vector_view("raw")
    folder = st.staging() / "p"
    rec = write_part(folder, "raw", info, ids[2:], _vecs(4, 1))
    with (folder / "vectors/raw.npy").open("r+b") as f:
        f.truncate(100)  # a half-written file
    with pytest.raises(StoreError, match="missing or not as written"):
        view.stage(folder, ids[2:], rec)
    rec = write_part(folder, "raw", info, ids[2:], _vecs(4, 1))
    with pytest.raises(InputError, match="no live chunk"):
        view.stage(folder, [99, 100, 101, 102], rec)
    with pytest.raises(InputError, match="already has vectors"):
        view.stage(folder, ids[:4], rec)
    with pytest.raises(StoreError, match="not a file of its parts"):
        view.stage(folder, ids[2:], {**rec, "vectors/other.npy": rec["vectors/raw.npy"]})
    view.stage(folder, ids[2:], rec)
    with pytest.raises(StoreError, match="unsaved vectors"):
        view.stage(folder, ids[2:], rec)
    with pytest.raises(StoreError, match="waiting for the next save"):
        view.add([ids[2]], _vecs(1, 2))
    st.save()
    assert view.has(ids).all()
    st.close()
    assert verify_store(tmp_path / "s")["damaged"] == []


def test_staging_leftovers_go_when_the_writer_lock_is_taken(tmp_path):
    """Tried: a committed store with a killed run's staging folder (a complete part and a half-written one):
    a reader opens it unchanged and verify_store finds no damage; the next writer removes the folder when it
    takes the lock, and the store keeps its last commit."""
    st = _store(tmp_path / "s")
    ids = _add_docs(st, 0, 2, 3)
    st.vector_view("raw").add(ids, _vecs(len(ids), 0))
    st.save()
    info = {"embedder": EMB, "dtype": "float32", "source": {}}
    run = st.staging()
    write_part(run / "b000001-123-1", "raw", info, [6, 7], _vecs(2, 1))
    (run / "b000002.tmp-123" / "vectors").mkdir(parents=True)
    (run / "b000002.tmp-123" / "vectors" / "raw.npy").write_bytes(b"\x93NUMPY half")
    gen = st.manifest["generation"]
    st.close()
    r = Store.open(tmp_path / "s")
    assert r.n_chunks == len(ids) and r.vector_view("raw").n_rows == len(ids)
    r.close()
    assert verify_store(tmp_path / "s")["damaged"] == []
    w = Store.open(tmp_path / "s", writable=True)
    assert not (tmp_path / "s" / "staging").exists()
    assert w.manifest["generation"] == gen and w.vector_view("raw").n_rows == len(ids)
    w.close()
    assert verify_store(tmp_path / "s")["damaged"] == []
