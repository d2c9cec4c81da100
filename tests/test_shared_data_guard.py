"""The ``data`` marker of ``tests/conftest.py``: every test that reads the shared folder carries it.

Checked on a checkout made here (a ``tests/conftest.py`` copied from this one, ``../shared/data`` beside
it holding one set), run by pytest in a child process: a test that takes ``shared_data`` is marked (``-m
data`` selects it), one that opens or lists the folder without the mark fails naming the path, a marked one
passes; without the folder, the marked tests skip and the run ends with one line counting them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).resolve().with_name("conftest.py")

TESTS = '''
import pytest
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"

def test_takes_the_fixture(shared_data):
    assert (shared_data / "tiny" / "documents.jsonl").read_text()

def test_reads_it_unmarked():
    (SHARED / "tiny" / "documents.jsonl").read_text()

def test_lists_it_unmarked():
    list(SHARED.iterdir())

@pytest.mark.data
def test_reads_it_marked():
    if not SHARED.is_dir():
        pytest.skip("no shared data")
    (SHARED / "tiny" / "documents.jsonl").read_text()

def test_reads_nothing_shared(tmp_path):
    (tmp_path / "x").write_text("x")
    assert SHARED.exists() or not SHARED.exists()  # a stat is no read
'''


def _checkout(pytester, with_data: bool) -> Path:
    repo = pytester.path / "checkout"
    (repo / "tests").mkdir(parents=True)
    shutil.copyfile(CONFTEST, repo / "tests" / "conftest.py")
    (repo / "pytest.ini").write_text("[pytest]\nmarkers =\n    data: reads ../shared\n", encoding="utf-8")
    (repo / "tests" / "test_probe.py").write_text(TESTS, encoding="utf-8")
    if with_data:
        (pytester.path / "shared" / "data" / "tiny").mkdir(parents=True)
        (pytester.path / "shared" / "data" / "tiny" / "documents.jsonl").write_text('{"doc_id": "a"}\n')
    return repo


def test_unmarked_reads_fail_and_fixture_users_are_marked(pytester, monkeypatch):
    monkeypatch.delenv("MOMOKA_SHARED_DATA", raising=False)
    repo = _checkout(pytester, with_data=True)
    monkeypatch.chdir(repo)
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "tests")
    res.assert_outcomes(passed=5, errors=2)
    out = res.stdout.str()
    assert "test_reads_it_unmarked reads the shared data" in out and "test_lists_it_unmarked reads" in out
    assert "not marked data" in out
    marked = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-m", "data", "tests")
    marked.assert_outcomes(passed=2)  # the fixture's user and the marked test


def test_without_the_data_the_marked_tests_skip_and_one_line_says_so(pytester, monkeypatch):
    monkeypatch.delenv("MOMOKA_SHARED_DATA", raising=False)
    repo = _checkout(pytester, with_data=False)
    monkeypatch.chdir(repo)
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-m", "data", "tests")
    res.assert_outcomes(skipped=2)
    res.stdout.fnmatch_lines(["no shared data sets (../shared/data): 2 tests marked data skipped, "
                              "0 ran on bundled fallbacks"])
