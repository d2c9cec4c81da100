"""Store failures said in the user's words: a full disk, a deleted file, an HNSW graph of the wrong size."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from momoka import Index
from momoka.cli import main
from momoka.errors import StoreCorruptedError, StoreError
from momoka.store._manifest import os_reason

from .conftest import HashEmbedder


def _store(tmp_path: Path, docs) -> Path:
    Index.build(docs, store=tmp_path / "s", embedder=HashEmbedder(), chunker="paragraph", progress=False).close()
    return tmp_path / "s"


def _gen(s: Path) -> Path:
    """The folder of the store's one segment (a build of a few documents commits once)."""
    return next(s.glob("seg-*"))


@pytest.fixture
def graphs(monkeypatch):
    """Every segment's vectors get an HNSW graph file, however few they are."""
    import momoka.store.vectors as vectors_mod

    monkeypatch.setattr(vectors_mod, "GRAPH_ROWS", 1)


def test_full_disk_says_no_space_left_on_device():
    assert os_reason(OSError(errno.ENOSPC, "No space left on device", "/x/y.npy")) == "no space left on device (/x/y.npy)"


def test_a_short_write_of_an_array_keeps_its_os_reason(tmp_path):
    # tried: a file size limit (RLIMIT_FSIZE) cuts the write of a vector file short, as a full disk does after
    # its first bytes; numpy's tofile said "800128 requested and 65536 written" without the reason
    code = ("import resource, signal, sys, numpy as np; from pathlib import Path\n"
            "from momoka.store._io import write_npy; from momoka.store._manifest import os_reason\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN); resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))\n"
            "try:\n    write_npy(Path(sys.argv[1]), np.ones(100_000))\n"
            "except OSError as exc:\n    print(exc.errno, os_reason(exc))\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "v.npy")], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)), timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == str(errno.EFBIG) and "requested" not in out.stdout, out.stdout


def test_full_disk_after_a_native_write_is_named(tmp_path, docs, monkeypatch, graphs):
    # hnswlib reports no short write; a file system with no space left afterwards is the user's answer
    s = _store(tmp_path, docs)
    ix = Index.open(s, embedder=HashEmbedder(), writable=True)
    ix.add([{"doc_id": "new", "text": "Another paragraph about orchards."}])
    real = os.statvfs

    class Reserved:  # only the blocks reserved for root are left: full for a user, not for root
        f_bavail, f_bfree = 0, 1000

    class Full:
        f_bavail, f_bfree = 0, 0

    if os.geteuid() == 0:
        monkeypatch.setattr(os, "statvfs", lambda p: Reserved() if "tmp-" in str(p) else real(p))
        ix.save()  # root wrote into its reserved blocks: the save succeeded and is not called a full disk
        ix.add([{"doc_id": "newer", "text": "A third paragraph about harbours."}])
    monkeypatch.setattr(os, "statvfs", lambda p: Full() if "tmp-" in str(p) else real(p))
    with pytest.raises(StoreError, match="no space left on device .*hnsw/raw.bin.*nothing was changed"):
        ix.save()
    ix.close()


def test_a_deleted_store_file_is_named(tmp_path, docs, capsys):
    s = _store(tmp_path, docs)
    gen = _gen(s)
    (gen / "bm25" / "raw.bin").unlink()
    with pytest.raises(StoreCorruptedError, match=f"{gen.name}/bm25/raw.bin is missing") as ei:
        Index.open(s, embedder=HashEmbedder())
    assert ei.value.path == gen / "bm25" / "raw.bin"
    rc = main(["query", str(s), "apples"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "bm25/raw.bin is missing" in err[0]


def test_a_deleted_file_of_an_open_reader_is_named(tmp_path, docs):
    s = _store(tmp_path, docs)
    ix = Index.open(s, embedder=HashEmbedder())
    (_gen(s) / "bm25" / "raw.bin").unlink()
    with pytest.raises(StoreCorruptedError, match="bm25/raw.bin of bm25 'raw' is missing"):
        ix.search("apples", retriever="bm25")


@pytest.mark.parametrize("how", ["append", "truncate"])
def test_hnsw_of_another_size_is_rebuilt_with_a_warning(tmp_path, docs, capsys, how, graphs):
    s = _store(tmp_path, docs)
    ix = Index.open(s, embedder=HashEmbedder())
    want = [(it.doc_id, it.start, round(it.score, 5)) for it in ix.search("rocket engine thrust", k=3, retriever="dense")]
    ix.close()
    p = _gen(s) / "hnsw" / "raw.bin"
    data = p.read_bytes()
    p.write_bytes(data + b"\0" * 100 if how == "append" else data[: len(data) // 2])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ix = Index.open(s, embedder=HashEmbedder())  # the documented path: no hard error at open ...
        got = [(it.doc_id, it.start, round(it.score, 5)) for it in ix.search("rocket engine thrust", k=3,
                                                                              retriever="dense")]
    assert got == want
    assert any("rebuilding the graph" in str(w.message) and "hnsw/raw.bin" in str(w.message) for w in caught)
    assert main(["store", "verify", str(s)]) == 2  # ... while verify still reports the damage
    assert "hnsw/raw.bin" in capsys.readouterr().err
    assert np.isfinite([g[2] for g in got]).all()
