"""Background merges: a commit does not wait for a merge; deletions committed while a merge of their
segments runs are kept; close() waits for the merge; readers keep one point-in-time set. Checked against
a clean build of the same documents (same hits for BM25, dense and hybrid, same live chunks)."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from momoka import Index
from momoka.errors import ConfigError
from momoka.store import Store, _merger
from momoka.store._verify import verify_store
from momoka.store.segments import next_merge

from .conftest import HashEmbedder

QUERIES = ["item3 topic1", "document about topic4", "item7 and item12", "topic2"]


def _docs(n: int) -> list[dict]:
    return [{"doc_id": f"d{i}", "text": f"Document {i} is about item{i} and topic{i % 5}.\n\n"
             f"A second paragraph on item{i} and word{(i * 7) % 11}."} for i in range(n)]


def _build(path, docs, emb):
    return Index.build(docs, store=path, embedder=emb, chunker="paragraph", commit_docs=1, progress=False)


def _hits(ix, q, r):
    return [(h.doc_id, h.start, h.end, h.score) for h in ix.search(q, k=8, retriever=r)]


def _same_answers(got, want):
    for q in QUERIES:
        for r in ("bm25", "dense", "hybrid"):
            a, b = _hits(got, q, r), _hits(want, q, r)
            if r == "bm25":
                assert a == b, (q, r)  # bit for bit: global statistics, whatever the segments
            else:
                assert [x[:3] for x in a] == [x[:3] for x in b], (q, r)
                assert np.allclose([x[3] for x in a], [x[3] for x in b]), (q, r)


def _live(st):
    return [(st.chunks.doc_id(c), st.chunks.text(c)) for c in st.chunks.ids().tolist()]


class _Pause:
    """A merge hook: the merging thread reports that it started, then waits until the test lets it go."""

    def __init__(self):
        self.started, self.go, self.threads = threading.Event(), threading.Event(), []

    def __call__(self, job):
        self.threads.append(threading.current_thread())
        self.started.set()
        assert self.go.wait(60), "the test never let the merge go"


@pytest.fixture
def paused(monkeypatch):
    monkeypatch.setenv("MOMOKA_MERGE_FACTOR", "3")
    monkeypatch.setenv("MOMOKA_MERGE_BACKGROUND", "1")
    pause = _Pause()
    monkeypatch.setattr(_merger, "before_write", pause)
    yield pause
    pause.go.set()


def test_deletes_during_a_merge_are_kept(tmp_path, paused):
    emb = HashEmbedder()
    docs = _docs(7)
    root = tmp_path / "s"
    ix = _build(root, docs[:3], emb)  # three commits: the third starts a merge of all three in the background
    assert paused.started.wait(60)
    assert paused.threads[0] is not threading.main_thread()
    st = ix.store
    run = [sg["name"] for sg in st.segments]
    assert len(run) == 3 and all(sg["level"] == 0 for sg in st.segments)  # the build returned before it
    # while the merge reads them: delete documents whose chunks are in the segments it merges, commit
    ix.delete(["d0"])
    ix.add(docs[3:5])
    ix.save()
    assert [sg["name"] for sg in st.segments][:3] == run  # committed without waiting for the merge
    # a reader opened now sees this commit, before the merge
    reader = Index.open(root, embedder=emb)
    reader_live = _live(reader.store)
    reader_hits = {q: _hits(reader, q, "hybrid") for q in QUERIES}
    paused.go.set()
    st._merger.wait()  # the merge is written, not committed
    assert [sg["name"] for sg in st.segments][:3] == run
    # deleted after the merge was written, in the same merged segments, then one save commits both
    ix.delete(["d2"])
    ix.add(docs[5:7])
    ix.delete(["d6"])
    ix.save()
    names = [sg["name"] for sg in st.segments]
    assert not set(run) & set(names) and st.segments[0]["level"] == 1  # the merged segment replaced them
    assert st.segments[0]["base"] == 0 and all(sg["level"] == 0 for sg in st.segments[1:])
    st.wait_merges()  # whatever the policy started meanwhile
    gone = {"d0", "d2", "d6"}
    clean = Index.build([d for d in docs if d["doc_id"] not in gone], embedder=emb, chunker="paragraph",
                        progress=False)
    assert set(st.documents) == {d["doc_id"] for d in docs} - gone
    assert _live(st) == _live(clean.store)
    _same_answers(ix, clean)
    # the reader still answers from its generation (its segments were kept for it), then moves on
    assert _live(reader.store) == reader_live
    assert {q: _hits(reader, q, "hybrid") for q in QUERIES} == reader_hits
    assert reader.refresh()
    _same_answers(reader, clean)
    reader.close()
    ix.close()
    assert not [p.name for p in root.iterdir() if ".tmp-" in p.name]
    again = Index.open(root, embedder=emb)
    assert _live(again.store) == _live(clean.store)
    _same_answers(again, clean)
    again.close()
    assert verify_store(root)["damaged"] == []


def test_close_waits_for_the_merge_and_commits_it(tmp_path, paused):
    emb = HashEmbedder()
    root = tmp_path / "s"
    ix = _build(root, _docs(3), emb)
    assert paused.started.wait(60)
    assert len(ix.store.segments) == 3
    paused.go.set()
    ix.close()
    m = json.loads((root / "manifest.json").read_text())
    assert [sg["level"] for sg in m["segments"]] == [1]
    assert not [p.name for p in root.iterdir() if ".tmp-" in p.name]
    again = Index.open(root, embedder=emb)
    _same_answers(again, Index.build(_docs(3), embedder=emb, chunker="paragraph", progress=False))
    again.close()


def test_unsaved_changes_at_close_drop_the_merge(tmp_path, paused):
    emb = HashEmbedder()
    root = tmp_path / "s"
    ix = _build(root, _docs(3), emb)
    assert paused.started.wait(60)
    ix.add(_docs(4)[3:], commit=False)
    before = json.loads((root / "manifest.json").read_text())
    paused.go.set()
    ix.close()
    # the manifest is the one before: the merge result was dropped (its folder removed), not half-committed
    assert json.loads((root / "manifest.json").read_text()) == before
    assert not [p.name for p in root.iterdir() if ".tmp-" in p.name]
    assert sorted(p.name for p in root.glob("seg-*")) == sorted(sg["name"] for sg in before["segments"])
    # the next writer's policy merges them again
    w = Store.open(root, writable=True)
    assert w.merge(everything=False) and [sg["level"] for sg in w.segments] == [1]
    w.close()


def test_many_commits_with_background_merges_answer_as_a_clean_build(tmp_path, monkeypatch):
    monkeypatch.setenv("MOMOKA_MERGE_FACTOR", "3")
    monkeypatch.setenv("MOMOKA_MERGE_BACKGROUND", "1")
    emb = HashEmbedder()
    docs = _docs(30)
    ix = _build(tmp_path / "s", docs, emb)
    ix.delete(["d4", "d11", "d25"])
    ix.save()
    st = ix.store
    st.merge(everything=False)
    # after the policy ran to the end no run of one level is long enough to merge
    assert next_merge(st.segments, 3) is None
    assert sum(sg["end"] - sg["base"] for sg in st.segments) == st.n_slots
    assert all(a["end"] == b["base"] for a, b in zip(st.segments, st.segments[1:]))
    clean = Index.build([d for d in docs if d["doc_id"] not in {"d4", "d11", "d25"}], embedder=emb,
                        chunker="paragraph", progress=False)
    assert _live(st) == _live(clean.store)
    _same_answers(ix, clean)
    ix.close()
    assert verify_store(tmp_path / "s")["damaged"] == []


def test_policy_picks_the_oldest_run_that_is_long_enough():
    def segs(levels):
        return [{"level": lv} for lv in levels]

    # merged after each commit only the newest can form a run; merged in the background, commits that
    # landed meanwhile make longer runs, and their oldest segments go first
    assert next_merge(segs([1, 0, 0]), 3) is None
    assert next_merge(segs([1, 0, 0, 0]), 3) == (1, 4)
    assert next_merge(segs([1, 0, 0, 0, 0, 0]), 3) == (1, 4)
    assert next_merge(segs([2, 1, 1, 0, 0]), 3) == (1, 3)  # level >= 1 merges by max(2, 3 // 2) = 2
    assert next_merge(segs([2, 1, 0, 1, 0]), 3) is None
    assert next_merge([], 3) is None


def test_background_flag_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("MOMOKA_MERGE_BACKGROUND", "0")
    assert Store.create(tmp_path / "a").merge_background is False
    monkeypatch.delenv("MOMOKA_MERGE_BACKGROUND")
    assert Store.create(tmp_path / "b").merge_background is True
    monkeypatch.setenv("MOMOKA_MERGE_BACKGROUND", "off")
    assert Store.create(tmp_path / "d").merge_background is False
    for bad in ("2", "-1", "sometimes"):
        monkeypatch.setenv("MOMOKA_MERGE_BACKGROUND", bad)
        with pytest.raises(ConfigError, match="MOMOKA_MERGE_BACKGROUND must be"):
            Store.create(tmp_path / f"c{bad}")
