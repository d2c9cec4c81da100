"""Symbolic links in a folder follow one rule (issue 51, item 6), with real links in a temporary folder.

Links to files and folders inside the paths given are followed (a loop is reported once, not followed); a link
whose target is elsewhere is reported (one line naming it) and not followed unless --follow-links; nothing is
left out without a word; --on-error stop stops on a link not followed. The expected documents and lines are
written by hand from the layout below.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import momoka
from momoka import Index
from momoka.errors import InputError

REPO_PY = Path(momoka.__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(not hasattr(os, "symlink") or sys.platform == "win32", reason="needs symbolic links")

OUTSIDE = ", outside the folders and files given: not followed (--follow-links or follow_links=True follows it)"
LOOP = ", a folder that contains it (a loop): not followed"


def _layout(tmp_path: Path) -> Path:
    """docs/                 (the folder given)
         a.txt
         .shared/s.txt       (hidden: read only through the link shared)
         shared -> .shared   (a link to a folder inside docs)
         alias -> sub        (a link to a folder inside docs that is read anyway)
         sub/b.txt
         sub/up -> ..        (a loop: a link to the folder that holds sub)
         ext -> ../outside   (a link to a folder outside)
         pw.txt -> ../secret.txt  (a link to a file outside)
    """
    root = Path(os.path.realpath(tmp_path))
    d = root / "docs"
    (d / ".shared").mkdir(parents=True)
    (d / "sub").mkdir()
    (root / "outside").mkdir()
    (d / "a.txt").write_text("Apples grow on trees.\n")
    (d / ".shared" / "s.txt").write_text("Shared notes about cherries.\n")
    (d / "sub" / "b.txt").write_text("Bananas grow in bunches.\n")
    (root / "outside" / "o.txt").write_text("Oranges from outside.\n")
    (root / "secret.txt").write_text("root:x:0:0:secret\n")
    (d / "shared").symlink_to(".shared", target_is_directory=True)
    (d / "alias").symlink_to("sub", target_is_directory=True)
    (d / "sub" / "up").symlink_to("..", target_is_directory=True)
    (d / "ext").symlink_to(root / "outside", target_is_directory=True)
    (d / "pw.txt").symlink_to(root / "secret.txt")
    return d


def _cli(tmp_path: Path, *args) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO_PY) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               MOMOKA_HOME=str(tmp_path / "home"), MOMOKA_PROGRESS="0")
    env.pop("MOMOKA_LLM_BASE_URL", None)
    return subprocess.run([sys.executable, "-m", "momoka", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=120, stdin=subprocess.DEVNULL)


def _texts(store: Path) -> dict:
    with Index.open(store) as ix:
        return {d: " ".join(ix.store.chunks.text(c) for c in ix.store.documents[d].chunk_ids) for d in ix.corpus.doc_ids}


def _warnings(stderr: str) -> list[str]:
    return sorted(ln for ln in stderr.splitlines() if ln.startswith("momoka: warning:"))


def test_by_default_links_inside_are_followed_and_the_others_reported(tmp_path):
    d = _layout(tmp_path)
    root = d.parent
    p = _cli(tmp_path, "index", d, "--store", tmp_path / "s", "--no-dense", "--chunker", "paragraph")
    assert p.returncode == 1, p.stderr  # indexed, with things skipped (the documented status)
    assert _warnings(p.stderr) == sorted([
        f"momoka: warning: skipped {d / 'ext'}: a link to {root / 'outside'}{OUTSIDE}",
        f"momoka: warning: skipped {d / 'pw.txt'}: a link to {root / 'secret.txt'}{OUTSIDE}",
        f"momoka: warning: skipped {d / 'sub' / 'up'}: a link to {d}{LOOP}"])
    # alias/b is sub/b, read once under its own path; nothing from outside docs/
    assert _texts(tmp_path / "s") == {"a": "Apples grow on trees.", "shared/s": "Shared notes about cherries.",
                                      "sub/b": "Bananas grow in bunches."}
    assert "3 skipped" in p.stdout


def test_follow_links_reads_the_links_outside_but_not_the_loop(tmp_path):
    d = _layout(tmp_path)
    p = _cli(tmp_path, "index", d, "--store", tmp_path / "s", "--no-dense", "--chunker", "paragraph",
             "--follow-links")
    assert p.returncode == 1, p.stderr
    assert _warnings(p.stderr) == [f"momoka: warning: skipped {d / 'sub' / 'up'}: a link to {d}{LOOP}"]
    assert _texts(tmp_path / "s") == {"a": "Apples grow on trees.", "shared/s": "Shared notes about cherries.",
                                      "sub/b": "Bananas grow in bunches.", "ext/o": "Oranges from outside.",
                                      "pw": "root:x:0:0:secret"}


def test_a_folder_without_links_out_or_loops_is_indexed_with_exit_0(tmp_path):
    d = _layout(tmp_path)
    for n in ("ext", "pw.txt", "sub/up"):
        (d / n).unlink()
    p = _cli(tmp_path, "index", d, "--store", tmp_path / "s", "--no-dense", "--chunker", "paragraph")
    assert p.returncode == 0 and _warnings(p.stderr) == [], p.stderr
    assert sorted(_texts(tmp_path / "s")) == ["a", "shared/s", "sub/b"]


def test_on_error_stop_stops_on_a_link_not_followed(tmp_path):
    d = _layout(tmp_path)
    root = d.parent
    p = _cli(tmp_path, "index", d, "--store", tmp_path / "s", "--no-dense", "--on-error", "stop")
    assert p.returncode == 2
    # docs/ is read in name order: pw.txt is the first link found that is not followed (links to folders come
    # after every folder reached without one)
    assert p.stderr.strip().splitlines()[-1] == (
        f"momoka: error: {d / 'pw.txt'} is a link to {root / 'secret.txt'}{OUTSIDE} (found in {d})")
    assert not (tmp_path / "s" / "manifest.json").exists()
    # with --follow-links the loop is still not followed, and stops the run
    p = _cli(tmp_path, "index", d, "--store", tmp_path / "s", "--no-dense", "--on-error", "stop", "--follow-links")
    assert p.returncode == 2
    assert p.stderr.strip().splitlines()[-1] == (
        f"momoka: error: {d / 'sub' / 'up'} is a link to {d}{LOOP} (found in {d})")


def test_a_loop_reached_twice_is_reported_once(tmp_path):
    # two more links lead to sub/ (alias2 -> alias -> sub): sub is read once, so its loop is found once
    d = _layout(tmp_path)
    (d / "alias2").symlink_to("alias", target_is_directory=True)
    ix = Index.build([d], embedder=None, chunker="paragraph", on_error="skip")
    assert [(p, why) for p, why in ix.report.skipped if why.endswith(LOOP)] == [
        (str(d / "sub" / "up"), f"a link to {d}{LOOP}")]
    assert sorted(ix.corpus.doc_ids) == ["a", "shared/s", "sub/b"]


def test_a_link_back_from_a_followed_folder_outside_is_a_loop(tmp_path):
    d = _layout(tmp_path)
    (d.parent / "outside" / "back").symlink_to(d, target_is_directory=True)  # outside/back -> docs
    ix = Index.build([d], embedder=None, chunker="paragraph", on_error="skip", follow_links=True)
    assert sorted(ix.report.skipped) == [(str(d / "ext" / "back"), f"a link to {d}{LOOP}"),
                                            (str(d / "sub" / "up"), f"a link to {d}{LOOP}")]
    assert sorted(ix.corpus.doc_ids) == ["a", "ext/o", "pw", "shared/s", "sub/b"]


def test_the_python_api_follows_the_same_rule(tmp_path):
    d = _layout(tmp_path)
    root = d.parent
    with pytest.raises(InputError) as e:  # on_error="raise" is the default: a link not followed stops the build
        Index.build([d], embedder=None, chunker="paragraph")
    assert str(e.value) == f"{d / 'pw.txt'} is a link to {root / 'secret.txt'}{OUTSIDE} (found in {d})"
    ix = Index.build([d], embedder=None, chunker="paragraph", on_error="skip")
    assert sorted(ix.corpus.doc_ids) == ["a", "shared/s", "sub/b"]
    assert sorted((str(p), why) for p, why in ix.report.skipped) == sorted([
        (str(d / "ext"), f"a link to {root / 'outside'}{OUTSIDE}"),
        (str(d / "pw.txt"), f"a link to {root / 'secret.txt'}{OUTSIDE}"),
        (str(d / "sub" / "up"), f"a link to {d}{LOOP}")])
    ix = Index.build([d], embedder=None, chunker="paragraph", on_error="skip", follow_links=True)
    assert sorted(ix.corpus.doc_ids) == ["a", "ext/o", "pw", "shared/s", "sub/b"]
    assert [str(p) for p, _ in ix.report.skipped] == [str(d / "sub" / "up")]


def test_a_link_to_another_path_given_is_inside(tmp_path):
    # the outside folder and the secret file given too: the links to them stay inside what was given
    d = _layout(tmp_path)
    root = d.parent
    with pytest.warns(UserWarning) as got:
        ix = Index.build([d, root / "outside", root / "secret.txt"], embedder=None, chunker="paragraph",
                         on_error="skip")
    assert [str(p) for p, _ in ix.report.skipped] == [str(d / "sub" / "up")]
    # each file once, under the path given rather than the link's
    assert sorted(ix.corpus.doc_ids) == ["docs/a", "docs/shared/s", "docs/sub/b", "outside/o", "secret"]
    assert sorted(str(w.message) for w in got) == [
        f"{d / 'ext' / 'o.txt'} is the same file as {root / 'outside' / 'o.txt'}; it is indexed once",
        f"{d / 'pw.txt'} is the same file as {root / 'secret.txt'}; it is indexed once"]


def test_paths_given_are_read_whatever_they_link_to(tmp_path):
    # a link named on the command line is the user's choice: read
    d = _layout(tmp_path)
    p = _cli(tmp_path, "index", d / "pw.txt", d / "ext", "--store", tmp_path / "s", "--no-dense")
    assert p.returncode == 0, p.stderr
    assert sorted(_texts(tmp_path / "s").values()) == ["Oranges from outside.", "root:x:0:0:secret"]


def test_help_states_the_rule():
    p = subprocess.run([sys.executable, "-m", "momoka", "index", "--help"], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(REPO_PY)), timeout=60)
    text = " ".join(p.stdout.split())
    assert "--follow-links" in text and "a loop, is not" in text and "skipped with a warning naming each" in text
