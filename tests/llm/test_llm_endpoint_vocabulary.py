"""One endpoint vocabulary: ``--llm-url``/``--llm-model`` everywhere (``llm ping`` included), the one
model a server lists used when none is named, and a refused connection that fails at once."""

from __future__ import annotations

import socket
import time

import pytest

from momoka.cli import main
from momoka.errors import ConfigError, LLMConnectionError
from momoka.llm import OpenAIClient
from momoka.llm.testing import Reply, Shape


@pytest.fixture
def clean_llm_env(monkeypatch):
    """--llm-url sets the endpoint variables for the process: restore them after the test."""
    for var in ("MOMOKA_LLM_BASE_URL", "MOMOKA_LLM_MODEL", "MOMOKA_LLM_API_KEY"):
        monkeypatch.setenv(var, "x")
        monkeypatch.delenv(var)
    return monkeypatch


def _models(*ids):
    return {"/v1/models": lambda body, i: Shape({"object": "list", "data": [{"id": m, "object": "model"} for m in ids]})}


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: connections are refused
    return port


def test_ping_takes_llm_url_and_llm_model(make_server, capsys, clean_llm_env):
    srv = make_server(lambda body, i: Reply("pong"))
    assert main(["llm", "ping", "--llm-url", srv.base_url, "--llm-model", "m", "--max-tokens", "3"]) == 0
    cap = capsys.readouterr()
    assert "answer: 'pong'" in cap.out and "model: m" in cap.out and "warning" not in cap.err
    assert srv.chat_bodies()[0]["model"] == "m"


def test_ping_old_spelling_still_works_with_a_warning(make_server, capsys, clean_llm_env):
    srv = make_server(lambda body, i: Reply("pong"))
    assert main(["llm", "ping", "--base-url", srv.base_url, "--model", "m"]) == 0
    err = capsys.readouterr().err
    assert "--base-url is deprecated; use --llm-url" in err and "--model is deprecated; use --llm-model" in err


def test_the_one_listed_model_is_used_when_none_is_named(make_server, capsys, clean_llm_env):
    srv = make_server(lambda body, i: Reply("pong"), routes=_models("local:smollm2"))
    assert main(["llm", "ping", "--llm-url", srv.base_url]) == 0
    assert "model: local:smollm2" in capsys.readouterr().out
    assert [p for p, _ in srv.requests] == ["/v1/models", "/v1/chat/completions"]
    assert srv.chat_bodies()[0]["model"] == "local:smollm2"


def test_no_model_and_several_listed_is_a_clear_error(make_server, clean_llm_env):
    srv = make_server(routes=_models("a", "b"))
    client = OpenAIClient(base_url=srv.base_url, cache=False, progress=False)
    with pytest.raises(ConfigError, match=r"does not list exactly one model \(it lists 2: a, b\); give --llm-model"):
        client.model
    client.close()


def test_ask_uses_the_one_listed_model(make_server, tmp_path, capsys, clean_llm_env):
    srv = make_server(lambda body, i: Reply("Ships came from the north [1]."), routes=_models("only-model"))
    f = tmp_path / "harbor.txt"
    f.write_text("The harbor opened in spring. Ships came from the north.\n", encoding="utf-8")
    assert main(["index", str(f), "--store", str(tmp_path / "s"), "--no-dense"]) == 0
    capsys.readouterr()
    assert main(["ask", str(tmp_path / "s"), "where did ships come from?", "--llm-url", srv.base_url]) == 0
    assert "Ships came from the north" in capsys.readouterr().out
    assert srv.chat_bodies()[0]["model"] == "only-model"


def test_refused_connection_fails_at_once_with_one_line(tmp_path, capsys, clean_llm_env):
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    # the client: no retries for a refused connection (the default policy retries 5 times with backoff)
    client = OpenAIClient("m", base_url=url, cache=False, progress=False)
    t0 = time.monotonic()
    res = client.complete_batch(["hello"])[0]
    assert time.monotonic() - t0 < 1.0
    assert isinstance(res.error, LLMConnectionError) and "refused" in str(res.error)
    client.close()
    # the CLI: ask against the refused address is one line and exit status 2, within a second
    f = tmp_path / "harbor.txt"
    f.write_text("The harbor opened in spring. Ships came from the north.\n", encoding="utf-8")
    assert main(["index", str(f), "--store", str(tmp_path / "s"), "--no-dense"]) == 0
    capsys.readouterr()
    for argv in (["ask", str(tmp_path / "s"), "where did ships come from?", "--llm-url", url, "--llm-model", "m"],
                 ["llm", "ping", "--llm-url", url, "--llm-model", "m"],
                 ["ask", str(tmp_path / "s"), "where did ships come from?", "--llm-url", url]):  # model discovery refused too
        t0 = time.monotonic()
        rc = main(argv)
        took = time.monotonic() - t0
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and took < 1.0, (argv, took)
        assert len(err) == 1 and err[0].startswith("momoka: error:") and "refused" in err[0], err
