"""A replace is atomic as a reader sees it: every document is in its old or its new version after any
failure or kill, never missing (Lucene's ``updateDocument``: the deletion and the new version land in one
commit). The expected versions are known by construction: batch ``i`` holds document ``d{i}``.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import momoka.methods.index_writer as writer_mod
from momoka import Index
from momoka.errors import StoreError
from momoka.store import Store
from momoka.store.writer import StoreWriter as StoreClass

from ._replace_child import text
from .conftest import HashEmbedder

N = 4
CHILD = Path(__file__).with_name("_replace_child.py")


def _versions(store: Path) -> dict[str, int]:
    """Each stored document's version, read from a fresh reader (every chunk of a document agrees)."""
    st = Store.open(store)
    try:
        out = {}
        for d, e in st.documents.items():
            found = {int(v) for c in e.chunk_ids for v in re.findall(r"\bv(\d+)\b", st.chunk(c).text)}
            assert len(found) == 1, (d, found)
            out[d] = found.pop()
        return out
    finally:
        st.close()


def _build(store: Path, version: int = 0) -> None:
    Index.build([{"doc_id": f"d{i}", "text": text(i, version)} for i in range(N)], store=store,
                embedder=HashEmbedder(), chunker="paragraph", progress=False).close()


def _fail(monkeypatch, store: Path, stage: str, fail_at: int) -> None:
    """Make batch ``fail_at`` (0-based) of the next replace fail at ``stage``: while it is indexed, while the
    store applies it (after its deletions, before its documents are added), or while it is committed (after
    its segment was written, before the manifest names it)."""
    calls = {"n": 0}
    if stage == "index":
        real_run = writer_mod.Indexer.run

        def run(self, *a, **k):
            calls["n"] += 1
            if calls["n"] == fail_at + 1:
                raise RuntimeError("injected failure")
            return real_run(self, *a, **k)

        monkeypatch.setattr(writer_mod.Indexer, "run", run)
    elif stage == "apply":
        real_add = StoreClass.add_documents

        def add_documents(self, *a, **k):
            if self.path is not None and Path(self.path) == store:  # (not the batches' scratch stores)
                calls["n"] += 1
                if calls["n"] == fail_at + 1:
                    raise OSError("injected failure")
            return real_add(self, *a, **k)

        monkeypatch.setattr(StoreClass, "add_documents", add_documents)
    else:
        real_commit = StoreClass._commit

        def commit(self, root, tmps, new, segments):
            if new is not None:  # a commit of a batch (not of a merge)
                calls["n"] += 1
                if calls["n"] == fail_at + 1:
                    raise OSError("injected failure")
            return real_commit(self, root, tmps, new, segments)

        monkeypatch.setattr(StoreClass, "_commit", commit)


@pytest.mark.parametrize("stage", ["index", "apply", "commit"])
@pytest.mark.parametrize("fail_at", range(N))
def test_a_failure_in_any_batch_keeps_every_document(tmp_path, monkeypatch, stage, fail_at):
    store = tmp_path / "s"
    _build(store)
    seen_by_readers = []
    real_save = StoreClass.save

    def save(self, *a, **k):  # after every commit, a reader opened now must find every document
        out = real_save(self, *a, **k)
        seen_by_readers.append(_versions(store))
        return out

    monkeypatch.setattr(StoreClass, "save", save)
    _fail(monkeypatch, store, stage, fail_at)
    ix = Index.open(store, embedder=HashEmbedder(), writable=True)
    ix.writer.commit_docs = 1
    with pytest.raises((RuntimeError, OSError, StoreError), match="injected"):
        ix.add([{"doc_id": f"d{i}", "text": text(i, 1)} for i in range(N)], existing="replace", commit=True, progress=False)
    if stage == "apply":  # the failed batch's deletion is in memory without its new version: never committed
        with pytest.raises(StoreError, match="failed half-way"):
            ix.save()
    ix.close()
    # batches before the failure were replaced and committed; the rest keep their old version
    assert _versions(store) == {f"d{i}": (1 if i < fail_at else 0) for i in range(N)}
    assert len(seen_by_readers) == fail_at  # one commit per batch applied
    assert seen_by_readers == [{f"d{i}": (1 if i <= k else 0) for i in range(N)} for k in range(fail_at)]
    # and the next writer replaces what is left
    ix = Index.open(store, embedder=HashEmbedder(), writable=True)
    ix.add([{"doc_id": f"d{i}", "text": text(i, 2)} for i in range(N)], existing="replace", commit=True, progress=False)
    ix.close()
    assert _versions(store) == {f"d{i}": 2 for i in range(N)}


def test_a_skipped_new_version_keeps_the_old_one_and_is_not_reported_replaced(tmp_path):
    store = tmp_path / "s"
    _build(store)
    src = tmp_path / "in"
    src.mkdir()
    ix = Index.open(store, embedder=HashEmbedder(), writable=True)
    docs = [{"doc_id": "d0", "text": text(0, 1)}, {"doc_id": "d1", "text": ""}]  # d1's new version is empty
    ix.add(docs, existing="replace", on_error="skip", commit=True, progress=False)
    assert ix.report.replaced == ["d0"]
    ix.close()
    assert _versions(store) == {"d0": 1, "d1": 0, "d2": 0, "d3": 0}


def test_kills_during_a_replace_never_lose_a_document(tmp_path):
    """Ten replaces killed at random points: after each, and for every reader opened while it ran, every
    document is there, in its old version or in the new one."""
    store = tmp_path / "s"
    _build(store)
    rng = random.Random(48)
    before = _versions(store)
    reads = 0
    for trial in range(1, 11):
        p = subprocess.Popen([sys.executable, str(CHILD), str(store), str(N), str(trial)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
        deadline = time.monotonic() + rng.uniform(0.02, 0.5)  # somewhere in a batch, an apply, a commit or a merge
        while time.monotonic() < deadline:  # readers opened during the replace
            seen = _versions(store)
            reads += 1
            assert set(seen) == {f"d{i}" for i in range(N)}, (trial, seen)
            assert all(seen[d] in (before[d], trial) for d in seen), (trial, before, seen)
        p.kill()
        p.communicate()
        now = _versions(store)
        assert set(now) == {f"d{i}" for i in range(N)}, (trial, now)
        assert all(now[d] in (before[d], trial) for d in now), (trial, before, now)
        before = now
    assert reads >= 10
    # a last run that is not killed replaces everything
    subprocess.run([sys.executable, str(CHILD), str(store), str(N), "99"], check=True, capture_output=True)
    assert _versions(store) == {f"d{i}": 99 for i in range(N)}
