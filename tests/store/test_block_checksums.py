"""Block checksums: every byte a reader takes from a store is verified, however large the store.

The open-time check verifies files whole (sha256) only up to ``MOMOKA_VERIFY_MB``; these tests damage
what lies past that limit (same-size edits, which no size check sees) and check that the read that
touches the damage is a clear :class:`StoreCorruptedError` naming the file, while reads of undamaged
blocks still answer. Reference values are CRC-32's published check value and hand-placed damage.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pytest

from momoka import Index
from momoka.cli import main
from momoka.errors import StoreCorruptedError
from momoka.store import Store
from momoka.store._blocks import BLOCK, BlockCheck, decode, file_record
from momoka.store._manifest import manifest_checksum
from momoka.text.model import Chunk

from .conftest import HashEmbedder

#: CRC-32 (the zlib / PNG / IEEE 802.3 polynomial) of b"123456789": the standard check value.
CHECK_VALUE = 0xCBF43926


def test_file_record_lists_the_crc_of_each_block(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"123456789")
    rec = file_record(p)
    assert rec["bytes"] == 9 and decode(rec["blocks"]).tolist() == [CHECK_VALUE]
    # a block of zeros, then the check string: two blocks, the second one's CRC is the check value
    p.write_bytes(bytes(BLOCK) + b"123456789")
    rec = file_record(p)
    assert decode(rec["blocks"]).tolist() == [zlib.crc32(bytes(BLOCK)), CHECK_VALUE]
    p.write_bytes(b"")
    assert decode(file_record(p)["blocks"]).tolist() == []


def test_block_check_verifies_only_the_blocks_it_reads(tmp_path):
    p = tmp_path / "f"
    data = bytearray(b"a" * (3 * BLOCK + 10))
    p.write_bytes(bytes(data))
    rec = file_record(p)
    data[2 * BLOCK + 5] = ord("b")  # damage in the third block, same size
    p.write_bytes(bytes(data))
    c = BlockCheck(p, rec, " of test")
    c.span(0, BLOCK + 1)  # first and second blocks: sound
    c.span(3 * BLOCK, 3 * BLOCK + 10)  # the short last block: sound
    with pytest.raises(StoreCorruptedError, match=f"bytes {2 * BLOCK}-{3 * BLOCK} do not match"):
        c.span(2 * BLOCK + 5, 2 * BLOCK + 6)
    with pytest.raises(StoreCorruptedError):
        c.whole()
    # rows of 100 bytes from byte 10: row 1310 holds bytes 131010..131110, i.e. block 1 then block 2
    c2 = BlockCheck(p, rec)
    c2.rows(np.array([0, 5, 650]), 10, 100)  # blocks 0 and 1
    with pytest.raises(StoreCorruptedError):
        c2.rows(np.array([1310]), 10, 100)


def _store_with_text(path: Path, texts: list[str]) -> None:
    st = Store.create(path)
    docs, chunks = [], []
    for i, t in enumerate(texts):
        docs.append({"doc_id": f"d{i}", "title": f"D{i}", "length": len(t)})
        chunks.append([Chunk(t, 0, len(t), f"d{i}", 0, 0, 0, ())])
    st.add_documents(docs, chunks)
    st.save()
    st.close()


def _edit(path: Path, old: bytes, new: bytes) -> int:
    """Replace ``old`` by ``new`` (same length) at its first place in the file; returns the offset."""
    assert len(old) == len(new)
    blob = bytearray(path.read_bytes())
    at = blob.index(old)
    blob[at:at + len(old)] = new
    path.write_bytes(bytes(blob))
    return at


def _texts(n: int = 300) -> list[str]:
    # about 1 KB per document: 300 documents span five 64 KiB blocks of text.bin
    return [f"Report {i}: the company's net profit rose in quarter {i % 4 + 1} (filing code{i}x). " + "Filler text. " * 70
            for i in range(n)]


def test_damage_past_the_eager_limit_is_an_error_on_the_read_that_touches_it(tmp_path, monkeypatch):
    s = tmp_path / "s"
    texts = _texts()
    _store_with_text(s, texts)
    text_bin = next(s.glob("seg-*/chunks/text.bin"))
    assert text_bin.stat().st_size > 4 * BLOCK
    at = _edit(text_bin, b"Report 250: the company's net profit", b"Report 250: the company's net LOSSES")
    assert at // BLOCK >= 3
    # within the eager limit (the default 64 MiB): the open itself finds it
    with pytest.raises(StoreCorruptedError, match="text.bin"):
        Store.open(s)
    monkeypatch.setenv("MOMOKA_VERIFY_MB", "0")
    st = Store.open(s)  # nothing verified eagerly: the open succeeds
    assert st.chunk(st.documents["d0"].chunk_ids[0]).text == texts[0]  # block 0: sound, answered
    with pytest.raises(StoreCorruptedError, match="text.bin") as ei:
        st.chunk(st.documents["d250"].chunk_ids[0])
    assert Path(ei.value.path).name == "text.bin" and "net LOSSES" not in str(ei.value)
    with pytest.raises(StoreCorruptedError, match="text.bin"):  # a pass over every text finds it too
        list(st.chunks.scan())
    st.close()


def test_damage_past_the_limit_through_search_and_the_cli(tmp_path, monkeypatch, capsys):
    docs = [{"doc_id": f"d{i}", "text": t} for i, t in enumerate(_texts(200))]
    s = tmp_path / "s"
    Index.build(docs, store=s, embedder=HashEmbedder(), chunker="paragraph", progress=False).close()
    text_bin = next(s.glob("seg-*/chunks/text.bin"))
    _edit(text_bin, b"Report 150: the company's net profit", b"Report 150: the company's net LOSSES")
    monkeypatch.setenv("MOMOKA_VERIFY_MB", "0")
    ix = Index.open(s, embedder=HashEmbedder())
    assert ix.search("code3x", k=1, retriever="bm25")[0].doc_id == "d3"  # another block: answered
    with pytest.raises(StoreCorruptedError, match="text.bin"):
        ix.search("code150x", k=1, retriever="bm25")
    ix.close()
    rc = main(["query", str(s), "code150x", "--retriever", "bm25", "-k", "1"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("momoka: error: ") and "text.bin" in err and err.count("\n") == 1


def test_damaged_vector_rows_and_columns_past_the_limit(tmp_path, monkeypatch, docs):
    s = tmp_path / "s"
    Index.build(docs, store=s, embedder=HashEmbedder(), chunker="paragraph", progress=False).close()
    rows = next(s.glob("seg-*/vectors/raw.npy"))
    arr = np.load(rows)
    blob = bytearray(rows.read_bytes())
    header = len(blob) - arr.nbytes
    blob[header:header + 4] = np.float32(0.5).tobytes()  # the first vector's first value, same size
    rows.write_bytes(bytes(blob))
    monkeypatch.setenv("MOMOKA_VERIFY_MB", "0")
    ix = Index.open(s, embedder=HashEmbedder())
    with pytest.raises(StoreCorruptedError, match="raw.npy"):
        ix.search("apples orchard", k=3, retriever="dense")
    ix.close()
    # a column read whole at open: the open finds it
    rows.write_bytes(bytes(blob[:header]) + arr.tobytes())
    start = next(s.glob("seg-*/chunks/start.npy"))
    col = bytearray(start.read_bytes())
    col[-1] ^= 0x01
    start.write_bytes(bytes(col))
    with pytest.raises(StoreCorruptedError, match="start.npy"):
        Index.open(s, embedder=HashEmbedder())


def test_a_store_written_before_block_checksums_is_verified_whole_on_first_read(tmp_path, monkeypatch):
    s = tmp_path / "s"
    _store_with_text(s, _texts(100))
    m = json.loads((s / "manifest.json").read_text())
    for sg in m["segments"]:
        for files in sg["parts"].values():
            for rec in files.values():
                rec.pop("blocks")
    m["checksum"] = manifest_checksum(m)
    (s / "manifest.json").write_text(json.dumps(m))
    text_bin = next(s.glob("seg-*/chunks/text.bin"))
    _edit(text_bin, b"Report 90: the company's net profit", b"Report 90: the company's net LOSSES")
    monkeypatch.setenv("MOMOKA_VERIFY_MB", "0")
    st = Store.open(s)
    with pytest.raises(StoreCorruptedError, match="sha256"):
        st.chunk(st.documents["d0"].chunk_ids[0])  # the whole file is checked at its first read
    st.close()


def test_a_store_larger_than_the_default_eager_limit(tmp_path):
    """70 MiB of chunk text: past the default 64 MiB, the damaged text is still an error when read."""
    s = tmp_path / "s"
    texts = [f"Passage {i}: net profit of unit {i}. " + "x" * 1000 for i in range(70_000)]
    _store_with_text(s, texts)
    text_bin = next(s.glob("seg-*/chunks/text.bin"))
    assert text_bin.stat().st_size > 64 << 20
    _edit(text_bin, b"Passage 69000: net profit", b"Passage 69000: net LOSSES")
    st = Store.open(s)  # the default limit: text.bin is not hashed at open
    assert st.chunk(st.documents["d1"].chunk_ids[0]).text == texts[1]
    with pytest.raises(StoreCorruptedError, match="text.bin"):
        st.chunk(st.documents["d69000"].chunk_ids[0])
    st.close()
