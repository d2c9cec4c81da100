"""Bounded LLM stages and caches: garbage, silence and 500s from a scripted server on 127.0.0.1.

The ``momoka index`` runs are separate processes (as a user runs them), so what
they print at exit (e.g. aiohttp's "Unclosed client session") is seen too.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import momoka
from momoka.cli import main
from momoka.llm import OpenAIClient, ResponseCache, default_cache_path
from momoka.llm.testing import Reply, ScriptedServer, Status

REPO_PY = Path(momoka.__file__).resolve().parents[1]


def _docs(root: Path) -> Path:
    root.mkdir()
    for i in range(3):
        (root / f"d{i}.txt").write_text(f"The cat sat on mat {i}.\n\nAn owl flew over barn {i}.\n\n"
                                        f"Fog covered valley {i}.\n\nThe cat came back {i}.\n")
    return root


def _index(tmp_path: Path, url: str, *extra: str, timeout: float = 120):
    env = dict(os.environ, PYTHONPATH=str(REPO_PY) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               MOMOKA_HOME=str(tmp_path / "home"), MOMOKA_PROGRESS="1")
    env.pop("MOMOKA_LLM_CACHE", None)
    cmd = [sys.executable, "-m", "momoka", "index", str(tmp_path / "docs"), "--store", str(tmp_path / "s"),
           "--no-dense", "--chunker", "paragraph", "--relate", "paths", "-o", "paths.referee=llm",
           "--llm-url", url, "--llm-model", "scripted", *extra]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    return p, time.monotonic() - t0


def test_garbage_answers_stop_the_stage_and_are_not_scored_zero(tmp_path):
    _docs(tmp_path / "docs")
    with ScriptedServer(lambda body, i: Reply("What a lovely question!")) as srv:
        # tried: a server that answers every referee prompt with prose instead of 0/1
        p, _ = _index(tmp_path, srv.base_url)
    assert p.returncode == 2, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert re.match(r"momoka: error: referee: (\d+) of \1 verdicts \(100.0 %\) were unusable, more than "
                    r"--llm-max-failed 25 %; e.g. 'What a lovely question!'", last), last
    assert not (tmp_path / "s" / "manifest.json").exists() or "paths" not in (tmp_path / "s" / "manifest.json").read_text()


def test_a_silent_server_is_bounded_by_the_deadline_with_progress(tmp_path):
    _docs(tmp_path / "docs")
    with ScriptedServer(lambda body, i: Reply("1", delay=120)) as srv:
        # tried: a server that never answers, with a 1 s request timeout and a 4 s stage deadline
        p, took = _index(tmp_path, srv.base_url, "--llm-timeout", "1", "--llm-deadline", "4", timeout=90)
    assert p.returncode == 2 and "momoka: error:" in p.stderr
    assert "4s deadline (--llm-deadline)" in p.stderr or "no answer" in p.stderr
    assert took < 60  # bounded: not 120 s per request times the retries
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("llm referee:")]
    assert lines and "failed=" in lines[-1] and "tokens=" in lines[-1]  # progress although stderr is a pipe


def test_a_server_error_closes_its_session(tmp_path):
    _docs(tmp_path / "docs")
    with ScriptedServer(lambda body, i: Status(500)) as srv:
        # tried: a server answering 500 to everything
        p, _ = _index(tmp_path, srv.base_url, "--llm-timeout", "2", "--llm-deadline", "5")
    assert p.returncode == 2 and "momoka: error:" in p.stderr and "500" in p.stderr
    assert "Unclosed" not in p.stderr and "Traceback" not in p.stderr


def test_successful_answers_are_kept_and_a_rerun_resumes(tmp_path):
    _docs(tmp_path / "docs")
    with ScriptedServer(lambda body, i: Reply("1") if i < 20 else Reply("nonsense")) as srv:
        p, _ = _index(tmp_path, srv.base_url)  # tried: a server that degrades after 20 answers
        assert p.returncode == 2
        answered = [str(b["messages"]) for b in srv.chat_bodies()[:20]]
        srv.script = lambda body, i: Reply("1")  # the server recovers: the same command again
        srv.reset()
        p, _ = _index(tmp_path, srv.base_url)
        assert p.returncode == 0, p.stderr
        asked_again = {str(b["messages"]) for b in srv.chat_bodies()}
    assert len(answered) == 20 and not asked_again & set(answered)  # answered prompts came from the cache


def test_momoka_home_moves_the_llm_cache_and_cache_commands(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MOMOKA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MOMOKA_LLM_CACHE", raising=False)
    assert default_cache_path() == tmp_path / "home" / "llm.sqlite"
    with ScriptedServer(lambda body, i: Reply("one")) as srv:
        with OpenAIClient("m", base_url=srv.base_url, api_key="x", progress=False) as c:
            assert c.complete("hello") == "one"
    assert (tmp_path / "home" / "llm.sqlite").exists()
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert str(tmp_path / "home" / "llm.sqlite") in out and "1 answers" in out
    assert main(["cache", "clear", "llm"]) == 0
    assert not (tmp_path / "home" / "llm.sqlite").exists()


def test_two_endpoints_serving_one_model_name_never_share_answers(tmp_path):
    cache = tmp_path / "c.sqlite"
    with ScriptedServer(lambda body, i: Reply("from A")) as a, ScriptedServer(lambda body, i: Reply("from B")) as b:
        # tried: two servers that both call their (different) models "m", one cache file
        with OpenAIClient("m", base_url=a.base_url, api_key="x", cache=str(cache), progress=False) as ca:
            assert ca.complete("same question") == "from A"
        with OpenAIClient("m", base_url=b.base_url, api_key="x", cache=str(cache), progress=False) as cb:
            assert cb.complete("same question") == "from B"
            assert cb.complete("same question") == "from B" and b.count == 1  # its own answer is cached


def test_cache_info_lists_and_clear_all_removes_everything_momoka_writes(tmp_path, monkeypatch, capsys):
    import json

    home = tmp_path / "home"
    monkeypatch.setenv("MOMOKA_HOME", str(home))
    monkeypatch.delenv("MOMOKA_LLM_CACHE", raising=False)
    monkeypatch.delenv("MOMOKA_CACHE_DIR", raising=False)
    # what momoka writes under its home: installed models, LLM answers, the ppl chunker's log-probs, and
    # the GGUF conversions older test suites kept there; plus a file momoka did not write
    written = {"models/minilm/model.onnx": 1000, "cache/ppl-logprobs/ab.npy": 400, "test-gguf/1234-q4/model.onnx": 5000}
    for rel, n in written.items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_bytes(b"x" * n)
    with ResponseCache(home / "llm.sqlite") as c:
        c.put_many([("k", "chat", "m", {"text": "x"})])
    llm_bytes = sum(p.stat().st_size for p in home.glob("llm.sqlite*"))
    (home / "mine.txt").write_bytes(b"y" * 7)
    assert main(["cache", "info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    sizes = {k: info[k]["bytes"] for k in ("models", "llm", "computed", "test-gguf")}
    assert sizes == {"models": 1000, "llm": llm_bytes, "computed": 400, "test-gguf": 5000} and llm_bytes > 0
    assert info["other"] == [{"path": str(home / "mine.txt"), "bytes": 7}]
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert str(home / "test-gguf") in out and str(home / "cache") in out and "not momoka's" in out
    assert main(["cache", "clear", "all"]) == 0
    assert sorted(p.name for p in home.iterdir()) == ["mine.txt"]  # everything momoka wrote is gone, nothing else


def test_cache_dir_variable_moves_the_computed_cache(tmp_path, monkeypatch, capsys):
    """``MOMOKA_CACHE_DIR`` moves the computed cache out of ``$MOMOKA_HOME``: the ppl chunker's log-probs go
    there, ``cache info`` lists it there (and not as a cache/ under the home), ``cache clear computed`` removes it."""
    import json

    from momoka.methods.moc.ppl import default_cache_dir

    home, moved = tmp_path / "home", tmp_path / "elsewhere" / "computed"
    monkeypatch.setenv("MOMOKA_HOME", str(home))
    monkeypatch.setenv("MOMOKA_CACHE_DIR", str(moved))
    assert default_cache_dir() == moved / "ppl-logprobs"
    (moved / "ppl-logprobs").mkdir(parents=True)
    (moved / "ppl-logprobs" / "ab.npy").write_bytes(b"x" * 300)
    assert main(["cache", "info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["computed"] == {"path": str(moved), "bytes": 300}
    assert main(["cache", "clear", "computed"]) == 0
    assert not moved.exists() and (tmp_path / "elsewhere").is_dir()
    monkeypatch.delenv("MOMOKA_CACHE_DIR")
    assert default_cache_dir() == home / "cache" / "ppl-logprobs"
