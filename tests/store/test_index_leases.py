"""Point-in-time readers: a reader keeps answering from its generation while writers commit, until refreshed.

Before leases only the newest and the previous generation were kept, so a
reader opened before two commits failed on its first lazy load (BM25, HNSW)
with "reopen the store".
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from momoka import Index
from momoka.store import Store

from .conftest import HashEmbedder

CHILD = Path(__file__).with_name("_writer_child.py")
QUERIES = ["apple harvest in autumn", "rocket engine thrust", "topic3 item3 word5", "violin strings and bow"]


def _build(tmp_path: Path, docs) -> Path:
    Index.build(docs, store=tmp_path / "s", embedder=HashEmbedder(), chunker="paragraph", progress=False).close()
    return tmp_path / "s"


def _answers(ix: Index) -> list:
    return [[(it.doc_id, it.start, it.end, round(it.score, 6)) for it in ix.search(q, k=4, retriever=r)]
            for q in QUERIES for r in ("bm25", "dense", "hybrid")]


def _gens(store: Path) -> list[str]:
    return sorted(p.name for p in store.iterdir() if p.name.startswith("gen-") and ".tmp-" not in p.name)


def _child_writes(store: Path, start: int, count: int) -> None:
    """``count`` commits by a writer in another process (adds d<start>..., deletes some)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, str(CHILD), str(store), str(start), str(count)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_reader_keeps_its_generation_across_commits_then_refreshes(tmp_path, docs):
    s = _build(tmp_path, docs)
    reference = Index.open(s, embedder=HashEmbedder())
    want = _answers(reference)  # read now, everything loaded, then let go
    reference.close()
    reader = Index.open(s, embedder=HashEmbedder())  # nothing lazy read yet: BM25 and HNSW come on first search
    first = reader.store.manifest["dir"]

    _child_writes(s, 0, 4)  # four commits in another process
    writer = Index.open(s, embedder=HashEmbedder(), writable=True)  # and one in this process
    writer.add([{"doc_id": "late", "text": "A late document about apple orchards and rocket launches."}])
    writer.save()
    writer.close()

    assert first in _gens(s) and len(_gens(s)) == 3  # the reader's, the previous and the newest; 3 between are gone
    assert _answers(reader) == want and sorted(reader.corpus.doc_ids) == sorted(d["doc_id"] for d in docs)

    assert reader.refresh() is True and reader.refresh() is False
    fresh = Index.open(s, embedder=HashEmbedder())
    assert sorted(reader.corpus.doc_ids) == sorted(fresh.corpus.doc_ids) and "late" in reader.corpus.doc_ids and "d3" in reader.corpus.doc_ids
    assert _answers(reader) == _answers(fresh) != want
    fresh.close()

    w = Index.open(s, embedder=HashEmbedder(), writable=True)  # the reader let its old generation go
    w.add([{"doc_id": "later", "text": "Volcano ash again."}])
    w.save()
    assert first not in _gens(s) and len(_gens(s)) == 2  # the refreshed reader's (the previous) and the newest
    reader.close()
    for i in range(2):
        w.add([{"doc_id": f"later{i}", "text": "Volcano ash again."}])
        w.save()
    w.close()
    assert len(_gens(s)) == 2  # closed: nothing leased, only the previous and the newest are kept


def test_lease_of_a_killed_reader_is_not_stale(tmp_path, docs):
    s = _build(tmp_path, docs)
    first = _gens(s)[0]
    code = ("import sys, time; from momoka.store import Store; st = Store.open(sys.argv[1]); "
            "print('open', flush=True); time.sleep(60)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    child = subprocess.Popen([sys.executable, "-c", code, str(s)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "open"
        _child_writes(s, 0, 2)
        assert first in _gens(s)  # leased by the child
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        _child_writes(s, 2, 1)
        assert len(_gens(s)) == 2 and first not in _gens(s)  # the kernel dropped the lease
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_store_refresh_is_atomic_and_a_writer_never_refreshes(tmp_path, docs):
    s = _build(tmp_path, docs)
    reader = Store.open(s)
    w = Store.open(s, writable=True)
    assert w.refresh() is w  # the writer is its own newest commit
    assert reader.refresh() is reader  # nothing committed since it was opened
    w.delete(["chess"])
    w.save()
    new = reader.refresh()  # a new snapshot of the newest commit; the old one is unchanged
    assert new is not reader and "chess" in reader.documents and "chess" not in new.documents
    assert new.n_chunks == w.n_chunks and new.manifest["generation"] == w.manifest["generation"]
    assert reader.manifest["generation"] == w.manifest["generation"] - 1
    reader.close()
    new.close()
    w.close()
