"""Crash safety and the writer lock, across processes."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import momoka

import pytest
from momoka.errors import StoreLockedError
from momoka import Index
from momoka.store import Store
from momoka.store._verify import verify_store
import numpy as np

from .conftest import HashEmbedder

CHILD = Path(__file__).with_name("_writer_child.py")
# The folder holding the momoka package this test imports (installed or in-tree), so child
# processes import the same build.
REPO_PY = Path(momoka.__file__).resolve().parents[1]


def _env(merge_factor=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_PY) + os.pathsep + env.get("PYTHONPATH", "")
    if merge_factor:
        env["MOMOKA_MERGE_FACTOR"] = str(merge_factor)
    return env


def _spawn(store, start, count, *extra, merge_factor=None):
    return subprocess.Popen([sys.executable, str(CHILD), str(store), str(start), str(count), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(merge_factor))


def expected_docs(last: int) -> set[str]:
    """Documents present after the child saved step ``last`` (mirrors _writer_child.main)."""
    present = {"seed"}
    for i in range(last + 1):
        present.add(f"d{i}")
        if i % 3 == 2:
            present.discard(f"d{i - 1}")
    return present


def _check_consistent(path) -> set[str]:
    st = Store.open(path)
    m = json.loads((Path(path) / "manifest.json").read_text())
    assert m["counts"]["documents"] == len(st.documents)
    assert len(st.bm25_view("raw")) == st.n_chunks == m["counts"]["chunks"]
    assert st.vector_view("raw").ids().tolist() == st.chunks.ids().tolist()
    for e in st.documents.values():
        assert all(c in st.chunks and st.chunks.doc_id(c) == e.doc_id for c in e.chunk_ids)
    ix = Index(st, embedder=HashEmbedder())
    assert ix.search("document topic", k=3, retriever="hybrid")
    return set(st.documents)


def _seed(store):
    Index.build([{"doc_id": "seed", "text": "seed document text"}], store=store, embedder=HashEmbedder(),
                chunker="paragraph", progress=False).close()


def _kill_and_check(store, p, trial, step) -> int:
    """Kill the child ``p``, check the store holds a saved state of it, return the step to go on from."""
    p.send_signal(signal.SIGKILL)
    out = p.communicate()[0].split()
    done = [int(x) for x in out if x.isdigit()]
    present = _check_consistent(store)
    last = done[-1] if done else step - 1
    # the saved state is the one after the last reported step, or one step later
    # (killed after the manifest was replaced but before the child printed)
    assert present in (expected_docs(last), expected_docs(last + 1)), (trial, last)
    return max(int(d[1:]) for d in present if d != "seed") + 1 if len(present) > 1 else 0


@pytest.mark.parametrize("merge_factor,trials", [(None, 5), (2, 8)])
def test_kill_during_add_leaves_last_good_state(tmp_path, merge_factor, trials):
    # merge factor 2: almost every commit is followed by a merge, so kills land in merges too
    store = tmp_path / "s"
    _seed(store)
    rng = random.Random(1234)
    step = 0
    for trial in range(trials):
        p = _spawn(store, step, 10_000, merge_factor=merge_factor)
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
        time.sleep(rng.uniform(0.05, 0.8))  # kill somewhere in add / delete / save
        step = _kill_and_check(store, p, trial, step)
    _after_crashes(store)


def test_kill_during_background_merges(tmp_path):
    # every second commit starts a background merge (factor 2) that reports when it starts writing; the
    # writer is killed while 1 to 3 merges have started, until 10 kills left a merge half-written
    store = tmp_path / "s"
    _seed(store)
    rng = random.Random(4321)
    step = in_merge = 0
    for trial in range(40):
        p = _spawn(store, step, 10_000, "slowmerge", merge_factor=2)
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
        for _ in range(rng.randint(1, 3)):
            while (line := p.stderr.readline()) and line.strip() != "merging":
                pass
            assert line, "the writer ended before a merge started"
        time.sleep(rng.uniform(0.0, 0.1))
        p.send_signal(signal.SIGKILL)
        p.wait()
        in_merge += any(".tmp-merge-" in q.name for q in store.iterdir())
        step = _kill_and_check(store, p, trial, step)
        if in_merge >= 10:
            break
    assert in_merge >= 10, in_merge
    _after_crashes(store)


def test_a_writer_that_adds_nothing_still_removes_a_dead_writers_leftovers(tmp_path):
    # a resumed build whose documents were all committed before the kill saves nothing; the half-written
    # merge and save folders of the killed writer must still go when it takes the lock, not at a later save
    store = tmp_path / "s"
    _seed(store)
    left = [store / "seg-000009.tmp-merge-99999", store / "gen-000009.tmp-99999", store / "manifest.json.tmp-99999"]
    left[0].mkdir()
    left[1].mkdir()
    left[2].write_text("{}")
    Index.open(store, embedder=HashEmbedder()).close()  # a reader deletes nothing
    assert all(p.exists() for p in left)
    ix = Index.open(store, embedder=HashEmbedder(), writable=True)
    assert not [p for p in store.iterdir() if ".tmp-" in p.name]
    ix.add([{"doc_id": "seed", "text": "seed document text"}], existing="skip")  # nothing new, nothing saved
    ix.close()
    assert not [p for p in store.iterdir() if ".tmp-" in p.name]


def _after_crashes(store):
    # after the crashes a new writer takes over (the dead writers' lock is not stale) and cleans leftovers
    ix = Index.open(store, embedder=HashEmbedder(), writable=True)
    ix.add([{"doc_id": "after", "text": "written after the crashes"}])
    ix.save()
    ix.close()
    assert not [p for p in store.iterdir() if ".tmp-" in p.name]
    present = _check_consistent(store)
    assert "after" in present
    assert verify_store(store)["damaged"] == []
    # the store answers as a clean build of the same documents does (BM25 bit for bit)
    from ._writer_child import doc

    texts = {"seed": "seed document text", "after": "written after the crashes"}
    got = Index.open(store, embedder=HashEmbedder())
    order = sorted(present, key=lambda d: got.store.documents[d].chunk_ids[0])  # ties go by chunk id: same order
    docs = [{"doc_id": d, "text": texts.get(d) or doc(int(d[1:]))["text"]} for d in order]
    clean = Index.build(docs, embedder=HashEmbedder(), chunker="paragraph", progress=False)
    for q in ("document topic3 item", "word5 word17", "seed"):
        for r in ("bm25", "dense", "hybrid"):
            a = [(h.doc_id, h.start, h.end, h.score) for h in got.search(q, k=8, retriever=r)]
            b = [(h.doc_id, h.start, h.end, h.score) for h in clean.search(q, k=8, retriever=r)]
            if r == "bm25":
                assert a == b, (q, r)
            else:
                assert [x[:3] for x in a] == [x[:3] for x in b] and np.allclose([x[3] for x in a],
                                                                                [x[3] for x in b]), (q, r)


def test_two_processes_writing(tmp_path):
    store = tmp_path / "s"
    _seed(store)
    p = _spawn(store, 0, 0, "hold")
    try:
        assert p.stdout.readline().strip() == "locked"
        # tried: a second process opening the store for writing while the first holds it
        with pytest.raises(StoreLockedError, match=f"process {p.pid}"):
            Index.open(store, writable=True)
        # a reader is fine meanwhile
        assert Index.open(store).search("seed", k=1, retriever="bm25")[0].doc_id == "seed"
    finally:
        p.kill()
        p.communicate()
    # the holder died: its lock goes with it
    ix = Index.open(store, writable=True)
    ix.close()
    # tried: a lock file left with the pid of a dead process (no flock held): taken over
    (store / ".lock").write_text("999999")
    ix = Index.open(store, writable=True)
    assert (store / ".lock").read_text() == str(os.getpid())
    ix.close()
