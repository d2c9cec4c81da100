"""Every path given or found is accounted for: symbolic links, dangling links, FIFOs and sockets.

A FIFO opened for reading blocks until a writer comes, so every command runs in
a subprocess with a timeout: a hang fails the test instead of stalling the suite.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import momoka
from momoka import Index
from momoka._files import path_kind
from momoka.errors import InputError

REPO_PY = Path(momoka.__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs (POSIX)")


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO_PY) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               MOMOKA_HOME=str(tmp_path / "home"), MOMOKA_PROGRESS="0")
    env.pop("MOMOKA_LLM_BASE_URL", None)
    return subprocess.run([sys.executable, "-m", "momoka", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=60, stdin=subprocess.DEVNULL)


def _folder(tmp_path: Path) -> Path:
    """docs/: a.txt; link.txt -> ../outside.txt; gone.txt -> a missing file; pipe.txt, a FIFO."""
    d = tmp_path / "docs"
    d.mkdir()
    (d / "a.txt").write_text("Apples grow on trees. They are red or green.\n")
    (tmp_path / "outside.txt").write_text("Bananas grow in bunches. They are yellow.\n")
    (d / "link.txt").symlink_to(tmp_path / "outside.txt")
    (d / "gone.txt").symlink_to(tmp_path / "missing.txt")
    os.mkfifo(d / "pipe.txt")
    return d


def test_path_kind_names_each_thing_without_opening_it(tmp_path):
    d = _folder(tmp_path)
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(tmp_path / "s.sock"))
        got = {n: path_kind(d / n) for n in ("a.txt", "link.txt", "gone.txt", "pipe.txt")}
        got["sock"] = path_kind(tmp_path / "s.sock")
    finally:
        sock.close()
    assert got == {"a.txt": "file", "link.txt": "file", "gone.txt": "a dangling symbolic link",
                   "pipe.txt": "a FIFO (named pipe)", "sock": "a socket"}
    assert path_kind(tmp_path) == "directory" and path_kind(tmp_path / "nothing") == "missing"
    assert path_kind("/dev/null") == "a character device"


def test_a_folder_with_a_dangling_link_and_a_fifo_warns_for_each(tmp_path):
    # issue 30, failure 3: these were dropped without a word (exit 0); issue 51, item 6: the link to a file
    # outside the folder used to be read (a link to /etc/passwd got indexed): reported, not followed
    d = _folder(tmp_path)
    p = _cli(tmp_path, "index", d, "--store", tmp_path / "s", "--no-dense")
    assert p.returncode == 1, p.stderr  # indexed, with files skipped (the documented status)
    warn = sorted(ln for ln in p.stderr.splitlines() if ln.startswith("momoka: warning:"))
    assert warn == [f"momoka: warning: skipped {d / 'gone.txt'}: a dangling symbolic link, not a regular file: "
                    "not read",
                    f"momoka: warning: skipped {d / 'link.txt'}: a link to {os.path.realpath(tmp_path / 'outside.txt')}, "
                    "outside the folders and files given: not followed (--follow-links or follow_links=True follows it)",
                    f"momoka: warning: skipped {d / 'pipe.txt'}: a FIFO (named pipe), not a regular file: not read"]
    with Index.open(tmp_path / "s") as ix:
        assert sorted(ix.corpus.doc_ids) == ["a"]
    p = _cli(tmp_path, "index", d, "--store", tmp_path / "s2", "--no-dense", "--follow-links")
    assert p.returncode == 1, p.stderr
    with Index.open(tmp_path / "s2") as ix:
        assert sorted(ix.corpus.doc_ids) == ["a", "link"]
        link_text = " ".join(ix.store.chunks.text(c) for c in ix.store.documents["link"].chunk_ids)
    assert link_text == "Bananas grow in bunches. They are yellow."  # the link's target was read


def test_on_error_stop_stops_on_a_fifo_in_a_folder(tmp_path):
    d = _folder(tmp_path)
    (d / "gone.txt").unlink()
    (d / "link.txt").unlink()  # a link out of the folder stops it too (tests/store/test_links.py)
    p = _cli(tmp_path, "index", d, "--store", tmp_path / "s", "--no-dense", "--on-error", "stop")
    assert p.returncode == 2
    assert p.stderr.strip().splitlines()[-1] == (f"momoka: error: {d / 'pipe.txt'} is a FIFO (named pipe), not a "
                                                 f"regular file (found in {d})")
    assert not (tmp_path / "s" / "manifest.json").exists()


def test_on_error_stop_stops_on_a_dangling_link(tmp_path):
    d = _folder(tmp_path)
    (d / "pipe.txt").unlink()
    p = _cli(tmp_path, "index", d, "--store", tmp_path / "s", "--no-dense", "--on-error", "stop")
    assert p.returncode == 2 and "gone.txt is a dangling symbolic link, not a regular file" in p.stderr


def test_a_fifo_argument_is_not_a_regular_file(tmp_path):
    # issue 30, failure 5: this said "no such file or directory"
    os.mkfifo(tmp_path / "pipe.txt")
    p = _cli(tmp_path, "index", tmp_path / "pipe.txt", "--store", tmp_path / "s", "--no-dense")
    assert p.returncode == 2
    assert p.stderr.strip() == (f"momoka: error: {tmp_path / 'pipe.txt'} is a FIFO (named pipe), not a regular "
                                "file or directory")


def test_momoka_chunk_on_a_fifo_is_an_error_not_a_hang(tmp_path):
    os.mkfifo(tmp_path / "pipe.txt")
    p = _cli(tmp_path, "chunk", tmp_path / "pipe.txt")  # used to block in open() forever
    assert p.returncode == 2
    assert p.stderr.strip() == f"momoka: error: {tmp_path / 'pipe.txt'}: is a FIFO (named pipe), not a regular file"


def test_python_add_raises_by_default_and_reports_with_skip(tmp_path):
    d = _folder(tmp_path)
    with pytest.raises(InputError, match=r"gone.txt is a dangling symbolic link"):
        Index.build([d], embedder=None, chunker="paragraph")
    ix = Index.build([d], embedder=None, chunker="paragraph", on_error="skip", follow_links=True)
    assert sorted(ix.corpus.doc_ids) == ["a", "link"]
    assert sorted((Path(p).name, why) for p, why in ix.report.skipped) == [
        ("gone.txt", "a dangling symbolic link, not a regular file: not read"),
        ("pipe.txt", "a FIFO (named pipe), not a regular file: not read")]
