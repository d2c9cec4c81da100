"""Chunk tails: the whitespace between a chunk and the next one, kept by the store so that context
assembly returns neighbouring chunks as one exact span.

References: tails computed here by scanning the document text (hand-written cases first), and a
store written by the format-3 code before tails were kept (tests/store/data/store-v3-notails).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from momoka import Index
from momoka.store.delta import Delta
from momoka.store.store import Store
from momoka.text import Document
from momoka.text.model import Chunk, with_tails

DATA = Path(__file__).parent / "data"


def _chunk(text: str, s: int, e: int, i: int = 0) -> Chunk:
    return Chunk(text[s:e], s, e, "d", i, 0, 0)


def test_with_tails_by_hand():
    text = "Ab cd.  Ef gh.\n\nIj kl. Mn."
    #       0123456789012345 6 7890123456
    a, b, c, d = _chunk(text, 0, 6), _chunk(text, 8, 14), _chunk(text, 16, 22), _chunk(text, 23, 26)
    got = with_tails(text, [c, a, d, b])                       # order kept; tails by position
    assert [x.start for x in got] == [16, 0, 23, 8]
    assert [x.tail for x in got] == [" ", "  ", None, "\n\n"]  # the last chunk has nothing to join
    over = with_tails(text, [_chunk(text, 0, 10), _chunk(text, 8, 14)])
    assert [x.tail for x in over] == ["", None]                # overlapping: nothing between them
    holey = with_tails(text, [_chunk(text, 0, 6), _chunk(text, 16, 22)])
    assert holey[0].tail is None                               # text left out of every chunk is not a tail
    assert with_tails(text, []) == []
    assert a.tail is None and got[1] == a                      # tails are not part of a chunk's identity


def _scan_tails(text: str, spans: list[tuple[int, int]]) -> list:
    """The tail of each span, by a scan: the text up to the next span's start when it is whitespace."""
    out = []
    for s, e in spans:
        nxt = min((s2 for s2, _ in spans if s2 > s), default=None)
        gap = None if nxt is None else text[e:nxt] if nxt >= e else ""
        out.append(gap if gap is not None and not gap.strip() else None)
    return out


DOCS = [Document.from_text(t, doc_id=f"d{i}") for i, t in enumerate([
    "First line of one.  Second sentence here.\n\nA new paragraph starts.\tTabbed on.\n\n\n\nLast words.",
    "Only one paragraph, with two sentences. And the second one is here.",
    "Alpha.\n\nBeta.\n\nGamma.\n\nDelta.",
])]


def _check(st: Store) -> None:
    texts = {d.doc_id: d.text for d in DOCS}
    for did, e in st.documents.items():
        spans = [st.chunks.span(c)[1:] for c in e.chunk_ids]
        assert [st.chunks.tail(c) for c in e.chunk_ids] == _scan_tails(texts[did], spans)
        assert [st.chunks.get(c).tail for c in e.chunk_ids] == _scan_tails(texts[did], spans)


def test_tails_survive_save_open_merge_and_a_delta(tmp_path):
    ix = Index.build(DOCS[:2], store=tmp_path / "s", embedder=None, progress=False, chunker="recursive", size=6)
    ix.add(DOCS[2:])
    ix.save()
    _check(ix.store)
    assert any(ix.store.chunks.tail(c) for c in ix.store.chunks.ids())
    ix.close()
    st = Store.open(tmp_path / "s")
    _check(st)
    st.close()
    w = Store.open(tmp_path / "s", writable=True)
    w.delete(["d1"])
    assert w.merge() and len(w.segments) == 1
    _check(w)
    w.close()
    again = Store.open(tmp_path / "s")
    _check(again)
    again.close()


def test_a_batch_built_apart_carries_its_tails(tmp_path):
    import pickle

    apart = Index.build([DOCS[0], DOCS[2]], embedder=None, progress=False, chunker="recursive", size=6)
    delta = pickle.loads(pickle.dumps(Delta.of_store(apart.store)))  # as a Ray worker ships it
    dst = Index.build(DOCS[1:2], store=tmp_path / "t", embedder=None, progress=False, chunker="recursive", size=6)
    dst.store.apply(delta)
    dst.save()
    dst.close()
    st = Store.open(tmp_path / "t")
    assert sorted(st.documents) == ["d0", "d1", "d2"]
    _check(st)
    st.close()


SALT = ("Salt dries on the wide flats in the summer sun.  The wind helps it dry faster every day.\n\n"
        "Workers rake the salt into long white rows.")


def test_a_store_written_before_tails_opens_with_tails_unknown(tmp_path):
    path = tmp_path / "old"
    shutil.copytree(DATA / "store-v3-notails", path)
    ix = Index.open(path)
    st = ix.store
    assert all(st.chunks.tail(c) is None for c in st.chunks.ids())
    # touching chunks still merge into one item, as two members (the whitespace between them is not known)
    res = ix.search("keeper climbs stairs lamp harbor light north pier", budget=200, retriever="bm25")
    top = res[0]
    assert [m.chunk_id for m in top.members][:2] == [0, 1] and top.members[0].end < top.members[1].start
    # documents added now get their tails; the old segments keep theirs unknown
    ix.add([Document.from_text(SALT, doc_id="salt")],
           progress=False)
    ix.save()
    ix.close()
    again = Index.open(path)
    st = again.store
    salt = st.documents["salt"].chunk_ids
    assert [st.chunks.tail(c) for c in salt] == _scan_tails(SALT, [st.chunks.span(c)[1:] for c in salt])
    assert any(st.chunks.tail(c) for c in salt)
    assert all(st.chunks.tail(c) is None for c in st.documents["harbor"].chunk_ids)
    res = again.search("salt dries flats wind rakes", budget=500, retriever="bm25")
    assert res[0].members[0].text == SALT[: res[0].members[0].end]   # joined: one exact span from the start
    again.close()
