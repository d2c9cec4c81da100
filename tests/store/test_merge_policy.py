"""The injectable MergePolicy: the log rule of the segments module and a tombstone-share trigger.

The expected runs are worked out by hand from the rule: level-0 runs of ``factor`` segments, higher
levels by ``max(2, factor // 2)``, the oldest long-enough run first; then (only when that asks for
nothing) the oldest segment whose deleted share of the rows live when it was written reaches
``deleted_share``, with every newer segment (they hold its tombstones).
"""

from __future__ import annotations

import numpy as np
import pytest

from momoka import Index
from momoka.errors import ConfigError
from momoka.store import Store
from momoka.store.segments import MergePolicy, SegmentStats

from .conftest import HashEmbedder


def _segs(*specs):
    """``(level, rows, deleted)`` triples as SegmentStats."""
    return [SegmentStats(level=lv, rows=r, deleted=d) for lv, r, d in specs]


def test_log_rule_by_hand():
    p = MergePolicy(factor=3)
    assert p.next_merge(_segs((1, 9, 0), (0, 3, 0), (0, 3, 0))) is None  # two level-0 segments: fewer than 3
    assert p.next_merge(_segs((1, 9, 0), (0, 3, 0), (0, 3, 0), (0, 3, 0))) == (1, 4)
    assert p.next_merge(_segs((2, 9, 0), (1, 3, 0), (1, 3, 0), (0, 1, 0))) == (1, 3)  # level 1: max(2, 3 // 2) = 2
    assert MergePolicy(factor=4).next_merge(_segs((1, 9, 0), (1, 9, 0), (0, 3, 0))) == (0, 2)  # 4 // 2 = 2
    assert p.next_merge([]) is None


def test_tombstone_share_by_hand():
    p = MergePolicy(factor=3, deleted_share=0.5)
    # shares 2/10 = 0.2, 5/10 = 0.5 (the first at the threshold), 4/4 = 1.0: the oldest at or over 0.5 goes,
    # with the segments after it
    assert p.next_merge(_segs((2, 10, 2), (1, 10, 5), (0, 4, 4))) == (1, 3)
    assert p.next_merge(_segs((2, 10, 2), (1, 10, 4), (0, 4, 3))) == (2, 3)  # 3/4: the newest, alone
    # 4/10 = 0.4 < 0.5 everywhere; a segment without rows (deletions only) has no share
    assert p.next_merge(_segs((1, 10, 4), (0, 0, 0), (0, 10, 4))) is None
    # the log rule comes first: three level-0 segments merge, whatever their tombstones
    assert p.next_merge(_segs((1, 10, 9), (0, 2, 0), (0, 2, 0), (0, 2, 0))) == (1, 4)
    # off (the default): tombstones never trigger a merge
    assert MergePolicy(factor=3).next_merge(_segs((1, 10, 10))) is None
    assert SegmentStats(rows=8, deleted=2).deleted_share == 0.25 and SegmentStats().deleted_share == 0.0


@pytest.mark.parametrize("bad", [{"factor": 1}, {"factor": 2.5}, {"factor": True}, {"deleted_share": 0},
                                 {"deleted_share": 1.5}, {"deleted_share": "half"}])
def test_bad_settings_are_config_errors(bad):
    with pytest.raises(ConfigError):
        MergePolicy(**bad)


def test_the_writer_takes_an_injected_policy_and_expunges_deleted_rows(tmp_path, monkeypatch):
    monkeypatch.setenv("MOMOKA_MERGE_BACKGROUND", "0")
    emb = HashEmbedder()
    docs = [{"doc_id": f"d{i}", "text": f"Paragraph one of doc {i} about topic{i}.\n\nParagraph two, word{i}."}
            for i in range(8)]
    ix = Index.build(docs[:4], store=tmp_path / "s", embedder=emb, chunker="paragraph", progress=False)
    ix.add(docs[4:])  # a second segment
    ix.save()
    st = ix.store
    st.merge_policy = MergePolicy(factor=10, deleted_share=0.5)
    assert [(s.level, s.rows, s.deleted) for s in st.segment_stats()] == [(0, 8, 0), (0, 8, 0)]
    first = st.segments[0]["name"]
    ix.delete(["d0", "d1"])  # 4 of the first segment's 8 rows: share 0.5, the threshold
    ix.save()
    # the save's policy merged the first segment with the two after it (the second, and the commit holding
    # the tombstones) into one of level 1: of its 16 rows 12 were live when it was written
    names = [sg["name"] for sg in st.segments]
    assert first not in names and len(names) == 1
    assert [sg["level"] for sg in st.segments] == [1]
    assert [(s.rows, s.deleted) for s in st.segment_stats()] == [(12, 0)]
    merged = tmp_path / "s" / names[0] / "chunks" / "text.bin"
    assert b"doc 0" not in merged.read_bytes() and b"doc 2" in merged.read_bytes()  # the dead texts left
    ix.save()  # nothing more to do: no merge loop
    assert [sg["name"] for sg in st.segments] == names
    ix.close()
    again = Store.open(tmp_path / "s")
    assert sorted(again.documents) == [f"d{i}" for i in range(2, 8)]
    assert not np.isin(again.vector_view("raw").ids(), again.chunks.ids(), invert=True).any()
    again.close()


def test_merge_factor_attribute_is_the_policys(tmp_path):
    w = Store.create(tmp_path / "a")
    w.merge_factor = 4
    assert w.merge_policy == MergePolicy(factor=4)
    w.merge_policy = MergePolicy(factor=6, deleted_share=0.3)
    assert w.merge_factor == 6
    w.close()
