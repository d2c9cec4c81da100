"""Progress on long CLI commands, and tests that leave ``$MOMOKA_HOME`` as they found it.

The commands run as subprocesses with stderr a pipe (not a terminal), so
progress comes as plain lines; ``MOMOKA_PROGRESS_INTERVAL=0`` asks for a line
at every update, so tiny inputs (seconds of CPU) still show them. The local
models are needed (skipped when not installed).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import momoka
import pytest

pytestmark = [pytest.mark.models]

REPO_PY = Path(momoka.__file__).resolve().parents[1]  # the momoka under test: the checkout or site-packages
TEXT = ("The harbor opened in 1850. Ships carried grain and timber. Trade grew quickly. "
        "Meanwhile, the town council debated taxes. Councillors argued for months. "
        "In spring, a storm destroyed the pier. Repairs took two years.")
ETS_DOC = ("Paris is the capital of France. The Seine flows through Paris. Berlin is the capital of Germany. "
           "Madrid is in Spain.")
ETS_SMALL = ["-o", "ets.n=4", "-o", "ets.expansion=1", "-o", "ets.beam=1", "-o", "ets.max_depth=1"]


@pytest.fixture(scope="module")
def installed():
    from momoka.models import is_installed
    from momoka.models.catalog import DEFAULT_CAUSAL_LM, DEFAULT_EMBEDDER

    missing = [m for m in (DEFAULT_EMBEDDER, DEFAULT_CAUSAL_LM) if not is_installed(m)]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (momoka models install)")


def _momoka(*args: str, **env: str) -> subprocess.CompletedProcess:
    full = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(REPO_PY), os.environ.get("PYTHONPATH")) if p))
    for k in ("MOMOKA_PROGRESS", "MOMOKA_PROGRESS_INTERVAL", "MOMOKA_LLM_BASE_URL"):
        full.pop(k, None)
    full.update(env)
    return subprocess.run([sys.executable, "-m", "momoka", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=full, timeout=300)


def _home_files() -> set[str]:
    """The files under ``$MOMOKA_HOME`` outside ``models/`` (the installed models)."""
    from momoka.models import momoka_home

    home = momoka_home()
    if not home.is_dir():
        return set()
    return {str(p.relative_to(home)) for p in home.rglob("*")
            if p.is_file() and p.relative_to(home).parts[0] != "models"}


def test_ppl_chunk_shows_progress_and_leaves_the_home_alone(installed, tmp_path):
    """``momoka chunk --chunker ppl``: stderr has ``ppl scoring`` lines counting up to the document's tokens,
    ``MOMOKA_PROGRESS=0`` removes them (the chunks stay the same), and the log-prob cache goes where
    ``MOMOKA_CACHE_DIR`` says: ``$MOMOKA_HOME`` gains no file (the text is new to every run, so a cache under
    the home would gain one)."""
    doc = tmp_path / "harbor.txt"
    doc.write_text(f"{TEXT} Run {uuid.uuid4().hex}.")
    before = _home_files()
    cache = tmp_path / "computed"
    shown = _momoka("chunk", str(doc), "--chunker", "ppl", MOMOKA_PROGRESS_INTERVAL="0", MOMOKA_CACHE_DIR=str(cache))
    assert shown.returncode == 0, shown.stderr
    lines = [ln for ln in shown.stderr.splitlines() if ln.startswith("ppl scoring: ")]
    assert lines, shown.stderr
    done, total = lines[-1].split(": ", 1)[1].split(" ", 1)[0].split("/")
    assert done == total and int(total) > 20  # every token of the text scored (about 50 tokens)
    assert list((cache / "ppl-logprobs").glob("*.npy"))  # the cache was written, where the variable says
    quiet = _momoka("chunk", str(doc), "--chunker", "ppl", MOMOKA_PROGRESS="0", MOMOKA_PROGRESS_INTERVAL="0",
                    MOMOKA_CACHE_DIR=str(cache))
    assert quiet.returncode == 0 and quiet.stdout == shown.stdout
    assert "ppl scoring" not in quiet.stderr and quiet.stderr.strip() == "", quiet.stderr
    assert _home_files() == before


def test_ask_refine_ets_shows_the_beam_search(installed, tmp_path):
    """``momoka ask STORE Q --refine ets`` (the smallest search: one node) shows an ``ets beam search`` line;
    ``MOMOKA_PROGRESS=0`` silences it."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "cities.txt").write_text(ETS_DOC)
    store = str(tmp_path / "store")
    built = _momoka("index", str(tmp_path / "docs"), "--store", store, MOMOKA_PROGRESS="0")
    assert built.returncode == 0, built.stderr
    ask = ["ask", store, "What river flows through the capital of France?", "--retriever", "dense", "--refine", "ets",
           *ETS_SMALL]
    shown = _momoka(*ask, MOMOKA_PROGRESS_INTERVAL="0")
    assert shown.returncode == 0, shown.stderr
    lines = [ln for ln in shown.stderr.splitlines() if ln.startswith("ets beam search: ")]
    assert lines and lines[-1].startswith("ets beam search: 1/1 nodes (100%)"), shown.stderr
    quiet = _momoka(*ask, MOMOKA_PROGRESS="0", MOMOKA_PROGRESS_INTERVAL="0")
    assert quiet.returncode == 0, quiet.stderr
    assert "ets beam search" not in quiet.stderr and "elapsed" not in quiet.stderr, quiet.stderr


def test_index_reports_the_files_it_reads(tmp_path):
    # reading files (PDFs, DOCX) can take a while before any document is embedded: the reading has a progress
    # line of its own, naming the file being read, also when stderr is not a terminal
    d = tmp_path / "docs"
    d.mkdir()
    for name in ("a.txt", "b.md", "c.txt"):
        (d / name).write_text(f"{name} says: {TEXT}\n", encoding="utf-8")
    p = _momoka("index", str(d), "--store", str(tmp_path / "s"), "--no-dense", MOMOKA_PROGRESS_INTERVAL="0")
    assert p.returncode == 0, p.stderr
    reading = [ln for ln in p.stderr.splitlines() if ln.startswith("reading: ")]
    assert reading and reading[-1].startswith("reading: 3/3 files (100%)"), p.stderr
    named = {ln.rsplit("file=", 1)[1] for ln in reading if "file=" in ln}
    assert named == {"a.txt", "b.md", "c.txt"}, reading
    # MOMOKA_PROGRESS=0 silences it
    q = _momoka("index", str(d), "--store", str(tmp_path / "t"), "--no-dense", MOMOKA_PROGRESS="0",
                MOMOKA_PROGRESS_INTERVAL="0")
    assert q.returncode == 0 and "reading: " not in q.stderr
