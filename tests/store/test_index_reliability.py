"""Each case of "nothing lost, nothing corrupt, nothing silent", done as a user or a fault tester would.

CLI runs use ``--no-dense`` (BM25 only) where vectors do not matter; stores with
vectors are built through the API with the hash embedder.
"""

from __future__ import annotations

import errno
import json
import os
import random
from pathlib import Path

import pytest
from momoka.cli import main
from momoka.errors import StoreCorruptedError, StoreError
from momoka import Index
from momoka.store.artifact import StoreWarning

from .conftest import HashEmbedder


def _files(root: Path, n: int = 6) -> Path:
    for i in range(n):
        (root / f"d{i}.txt").parent.mkdir(parents=True, exist_ok=True)
        (root / f"d{i}.txt").write_text(f"Document {i} tells of comet{i} and glacier{i % 3}.\n\nMore on orbit{i}.\n")
    return root


def _cli(capsys, *argv):
    rc = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _hash_store(tmp_path: Path, docs) -> Path:
    Index.build(docs, store=tmp_path / "s", embedder=HashEmbedder(), chunker="paragraph", progress=False).close()
    return tmp_path / "s"


# --- resumable, idempotent indexing ---------------------------------------------------------


def test_rerun_adds_missing_skips_identical_and_replaces_changed(tmp_path, capsys):
    src = _files(tmp_path / "in")
    s = tmp_path / "s"
    assert _cli(capsys, "index", src / "d0.txt", src / "d1.txt", "--store", s, "--no-dense")[0] == 0
    # tried: the same command over the whole folder on a store that already holds two of its documents
    rc, out, err = _cli(capsys, "index", src, "--store", s, "--no-dense")
    assert rc == 0 and "indexed 4 document(s)" in out and "2 unchanged" in out and "6 documents in the store" in out
    # tried: one document changed on disk, rerun without and with --replace
    (src / "d3.txt").write_text("Document 3 now tells of volcanoes only.\n")
    rc, out, err = _cli(capsys, "index", src, "--store", s, "--no-dense")
    assert rc == 1 and "indexed 0 document(s)" in out and "d3.txt" in err and "--replace" in err
    rc, out, err = _cli(capsys, "index", src, "--store", s, "--no-dense", "--replace")
    assert rc == 0 and "indexed 1 document(s)" in out and "1 replaced" in out
    ix = Index.open(s)
    assert len(ix) == 6 and ix.search("volcanoes", k=1, retriever="bm25")[0].doc_id == "d3"
    assert "comet3" not in " ".join(ix.store.chunk(c).text for c in ix.store.documents["d3"].chunk_ids)


@pytest.mark.parametrize("overwrite", [False, True])
def test_store_left_by_a_kill_inside_the_first_save_is_rebuilt(tmp_path, capsys, overwrite):
    src = _files(tmp_path / "in")
    s = tmp_path / "s"
    s.mkdir()
    # tried: what a kill inside the first save leaves: the lock and a half-written generation
    (s / ".lock").write_text("999999")
    (s / "gen-000001.tmp-424242").mkdir()
    (s / "gen-000001.tmp-424242" / "documents.jsonl").write_text('{"doc_id": "half')
    rc, out, err = _cli(capsys, "index", src, "--store", s, "--no-dense", *(["--overwrite"] if overwrite else []))
    assert rc == 0, err
    assert "momoka: warning: store" in err and "interrupted" in err  # one line, no source path
    assert "indexed 6 document(s)" in out and not [p for p in s.iterdir() if ".tmp-" in p.name]


# --- verified stores ------------------------------------------------------------------------------


def _rand_overwrite(p: Path, rng: random.Random, n: int = 16) -> None:
    data = bytearray(p.read_bytes())
    off = rng.randrange(max(len(data) - n, 1))
    data[off : off + n] = bytes(rng.randrange(256) for _ in range(n))
    p.write_bytes(bytes(data))


def test_random_bytes_in_the_hnsw_graph_rebuild_it_from_the_vectors(tmp_path, docs, monkeypatch):
    import momoka.store.vectors as vectors_mod

    monkeypatch.setattr(vectors_mod, "GRAPH_ROWS", 1)  # the segment's vectors get a graph file
    s = _hash_store(tmp_path, docs)
    want = [(it.doc_id, it.start, round(it.score, 5)) for it in
            Index.open(s, embedder=HashEmbedder()).search("apples orchard", k=3, retriever="dense")]
    g = next(s.glob("seg-*/hnsw/raw.bin"))
    pristine = g.read_bytes()
    rng = random.Random(7)
    for _ in range(15):  # tried: 16 random bytes written into the graph, 15 times, then a query
        _rand_overwrite(g, rng)
        ix = Index.open(s, embedder=HashEmbedder())
        with pytest.warns(StoreWarning, match="rebuilding the graph from the vectors"):
            got = [(it.doc_id, it.start, round(it.score, 5)) for it in ix.search("apples orchard", k=3,
                                                                                  retriever="dense")]
        assert got == want
        g.write_bytes(pristine)


@pytest.mark.parametrize("target,damage", [("vectors/raw.npy", "overwrite"), ("vectors/raw.npy", "truncate"),
                                           ("documents.jsonl", "truncate"), ("chunks/text.bin", "overwrite"),
                                           ("bm25/raw.bin", "overwrite")])
def test_damaged_artifact_is_an_error_naming_the_file(tmp_path, docs, capsys, target, damage):
    s = _hash_store(tmp_path, docs)
    p = next(s.glob(f"seg-*/{target}"))
    # tried: random bytes over the file, or the file truncated to zero bytes, then open / query / verify
    _rand_overwrite(p, random.Random(3)) if damage == "overwrite" else p.write_bytes(b"")
    with pytest.raises(StoreCorruptedError, match=target.split("/")[-1]) as ei:
        Index.open(s, embedder=HashEmbedder()).search("apples", k=2, retriever="bm25")
    assert Path(ei.value.path).name == p.name
    rc, out, err = _cli(capsys, "query", s, "apples", "--retriever", "bm25")
    assert rc == 2 and err.startswith("momoka: error: ") and p.name in err and err.count("\n") == 1
    rc, out, err = _cli(capsys, "store", "verify", s)
    assert rc == 2 and target in err


def test_store_verify_passes_a_sound_store_and_catches_the_manifest(tmp_path, docs, capsys):
    s = _hash_store(tmp_path, docs)
    rc, out, err = _cli(capsys, "store", "verify", s)
    assert rc == 0 and out.startswith("ok: ")
    m = json.loads((s / "manifest.json").read_text())
    m["counts"]["chunks"] += 1  # tried: a manifest edited by hand (still valid JSON)
    (s / "manifest.json").write_text(json.dumps(m))
    rc, out, err = _cli(capsys, "store", "verify", s)
    assert rc == 2 and "manifest.json does not match its checksum" in err


# --- corpus-tolerant ingestion ------------------------------------------------------------------


def test_a_run_that_indexes_nothing_is_an_error_and_leaves_no_empty_store(tmp_path, capsys):
    # the README's contract: bad input is a one-line error and exit status 2; a bad file among good ones is
    # skipped with a warning (exit 1, as the next test shows), but when every input is skipped nothing was done
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\x00\x01binary\x00" * 10)
    (tmp_path / "empty.md").write_text("")
    s = tmp_path / "s"
    rc, out, err = _cli(capsys, "index", bad, "--store", s, "--no-dense")
    assert rc == 2 and out == "" and not s.exists()
    lines = err.strip().splitlines()
    assert lines[0].startswith("momoka: warning: skipped ") and "bad.txt" in lines[0]
    assert lines[-1].startswith("momoka: error: nothing indexed") and "no store was made" in lines[-1]
    # into an existing store: an error too, and the store keeps what it held
    src = _files(tmp_path / "in")
    assert _cli(capsys, "index", src / "d0.txt", "--store", s, "--no-dense")[0] == 0
    rc, out, err = _cli(capsys, "index", bad, tmp_path / "empty.md", "--store", s, "--no-dense")
    assert rc == 2 and "and 1 more" in err and f"{s} is as it was" in err
    with Index.open(s) as ix:
        assert list(ix.store.documents) == ["d0"]


def test_one_bad_file_does_not_abort_a_directory(tmp_path, capsys):
    src = _files(tmp_path / "mixed")
    (src / "empty.txt").write_text("")
    (src / "bad.txt").write_bytes(b"caf\xe9 latin-1 text\n")
    (src / "slides.pptx").write_bytes(b"PK\x03\x04")
    (src / "report.pdf").write_bytes(b"%PDF-1.4")  # a PDF cut off after its header
    s = tmp_path / "s"
    # tried: a folder with an empty file, an invalid UTF-8 file, a damaged PDF and an unsupported type among
    # good files (read strictly as UTF-8, as --encoding says)
    rc, out, err = _cli(capsys, "index", src, "--store", s, "--no-dense", "--encoding", "utf-8")
    assert rc == 1 and "indexed 6 document(s)" in out and "4 skipped" in out
    for name, why in (("empty.txt", "empty"), ("bad.txt", "--encoding latin-1"), ("report.pdf", "damaged PDF"),
                      ("slides.pptx", "unsupported")):
        line = next(ln for ln in err.splitlines() if name in ln)
        assert line.startswith("momoka: warning: skipped") and why in line
    # without --encoding the file that is not UTF-8 is read in the encoding guessed for it, with a warning
    rc, out, err = _cli(capsys, "index", src, "--store", tmp_path / "s1", "--no-dense")
    assert rc == 1 and "indexed 7 document(s)" in out and "3 skipped" in out
    line = next(ln for ln in err.splitlines() if "bad.txt" in ln)
    assert line.startswith("momoka: warning:") and "is not UTF-8 and declares no encoding; read as" in line
    # --on-error stop: nothing indexed, exit 2
    rc, out, err = _cli(capsys, "index", src, "--store", tmp_path / "s2", "--no-dense", "--on-error", "stop")
    assert rc == 2 and not (tmp_path / "s2" / "manifest.json").exists()
    # the message's advice works: --encoding latin-1 reads the file
    rc, out, err = _cli(capsys, "index", src / "bad.txt", "--store", s, "--no-dense", "--encoding", "latin-1")
    assert rc == 0 and "café" in Index.open(s).search("latin", k=1, retriever="bm25")[0].text


def test_same_file_name_in_two_folders_are_two_documents(tmp_path, capsys, monkeypatch):
    for sub in ("x", "y"):
        (tmp_path / "in" / sub).mkdir(parents=True)
        (tmp_path / "in" / sub / "report.md").write_text(f"# Report {sub}\n\nFindings of team {sub}.\n")
    # tried: x/report.md and y/report.md in one run, as a folder and as two file arguments
    rc, out, err = _cli(capsys, "index", tmp_path / "in", "--store", tmp_path / "s", "--no-dense")
    assert rc == 0, err
    assert sorted(Index.open(tmp_path / "s").corpus.doc_ids) == ["x/report", "y/report"]
    monkeypatch.chdir(tmp_path / "in")
    rc, out, err = _cli(capsys, "index", "x/report.md", "y/report.md", "--store", tmp_path / "s2", "--no-dense")
    assert rc == 0 and sorted(Index.open(tmp_path / "s2").corpus.doc_ids) == ["x/report", "y/report"]


# --- permissions, read-only stores, full disks ------------------------------------------------------


@pytest.mark.parametrize("err", [errno.EROFS, errno.EACCES, errno.ENOSPC])
def test_unwritable_store_is_one_line_and_leaves_no_temporary_files(tmp_path, docs, capsys, monkeypatch, err):
    s = _hash_store(tmp_path, docs[:2])
    before = sorted(p.name for p in s.iterdir())
    real = os.replace

    def refuse(src, dst):  # tried: a read-only mount / a manifest we may not replace / a full disk
        if str(dst).endswith("manifest.json"):
            raise OSError(err, os.strerror(err), str(dst))
        return real(src, dst)

    monkeypatch.setattr(os, "replace", refuse)
    ix = Index.open(s, embedder=HashEmbedder(), writable=True)
    ix.add([docs[3]])
    with pytest.raises(StoreError, match="cannot save store") as ei:
        ix.save()
    assert "\n" not in str(ei.value) and "nothing was changed" in str(ei.value)
    ix.close()
    assert sorted(p.name for p in s.iterdir()) == before  # no .tmp-*, no orphan generation
    monkeypatch.setattr(os, "replace", real)
    assert len(Index.open(s, embedder=HashEmbedder())) == 2


def test_os_errors_in_the_cli_are_one_line(tmp_path, capsys, monkeypatch):
    src = _files(tmp_path / "in", 2)
    import momoka.store.store as store_mod

    def full(path, data):  # tried: the disk fills up while the first generation is written
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(store_mod, "write_file", full)
    rc, out, err = _cli(capsys, "index", src, "--store", tmp_path / "s", "--no-dense")
    last = err.strip().splitlines()[-1]
    assert rc == 2 and last.startswith("momoka: error: cannot save store") and "no space left" in last
    assert "Traceback" not in err and not [p for p in (tmp_path / "s").iterdir() if ".tmp-" in p.name]


# --- messages point at CLI arguments --------------------------------------------------------------


def test_long_query_message_names_the_cli_option(tmp_path, capsys):
    src = _files(tmp_path / "in", 2)
    assert _cli(capsys, "index", src, "--store", tmp_path / "s", "--no-dense")[0] == 0
    q = "orbit1 " * 2000
    rc, out, err = _cli(capsys, "query", tmp_path / "s", q, "--retriever", "bm25")
    assert rc == 2 and "--max-query-chars" in err
    rc, out, err = _cli(capsys, "query", tmp_path / "s", q, "--retriever", "bm25", "--max-query-chars", "20000")
    assert rc == 0 and "orbit1" in out


def test_cli_names_a_few_skipped_types_and_counts_the_rest(tmp_path, capsys):
    """A folder with many files momoka does not read: the first ones are named, the rest counted per type,
    and the line saying what a folder is read for comes once; a file that failed to read is always named."""
    src = _files(tmp_path / "many")
    for i in range(7):
        (src / f"pic{i}.png").write_bytes(b"\x89PNG\r\n")
    (src / "data.json").write_text("{}")
    (src / "broken.txt").write_bytes(b"caf\xe9\n")
    rc, out, err = _cli(capsys, "index", src, "--store", tmp_path / "s", "--no-dense", "--encoding", "utf-8")
    lines = err.splitlines()
    assert rc == 1 and "indexed 6 document(s)" in out and "9 skipped" in out
    named = [ln for ln in lines if ln.startswith("momoka: warning: skipped ") and "unsupported file type" in ln]
    assert len(named) == 3
    assert any(ln.startswith("momoka: warning: skipped 5 more file(s) that are not documents: .png (") for ln in lines)
    assert sum("a folder is read for" in ln for ln in lines) == 1
    assert any("broken.txt" in ln and "--encoding latin-1" in ln for ln in lines)
