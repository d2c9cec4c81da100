"""``momoka llm`` sub-commands."""

from __future__ import annotations

import json

from momoka.cli import main
from momoka.llm import ResponseCache
from momoka.llm.testing import Reply, Status


def test_ping_prints_answer_and_usage(make_server, capsys):
    srv = make_server(lambda body, i: Reply("pong"))
    rc = main(["llm", "ping", "--llm-url", srv.base_url, "--llm-model", "m", "--max-tokens", "3"])
    out = capsys.readouterr().out
    assert rc == 0 and "answer: 'pong'" in out and "completion tokens: 1" in out
    assert srv.chat_bodies()[0]["max_tokens"] == 3 and srv.chat_bodies()[0]["temperature"] == 0


def test_ping_failure_is_one_line_and_nonzero(make_server, capsys):
    # the server refuses the request (401): no retry, one error line, exit 2
    srv = make_server(lambda body, i: Status(401))
    rc = main(["llm", "ping", "--llm-url", srv.base_url, "--llm-model", "m"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("momoka: error:") and "401" in err[0]
    assert srv.count == 1


def test_ping_without_configuration(monkeypatch, capsys):
    # neither --llm-url nor MOMOKA_LLM_BASE_URL
    monkeypatch.delenv("MOMOKA_LLM_BASE_URL", raising=False)
    rc = main(["llm", "ping", "--llm-model", "m"])
    assert rc == 2 and "MOMOKA_LLM_BASE_URL" in capsys.readouterr().err


def test_stats_of_a_cache(cache_path, capsys):
    c = ResponseCache(cache_path)
    c.put_many([(f"k{i}", "chat", "model-a", {"text": "x"}) for i in range(3)])
    c.close()
    assert main(["llm", "stats", "--cache", str(cache_path), "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["entries"] == 3 and st["by_model"][0]["model"] == "model-a"
    assert main(["llm", "stats", "--cache", str(cache_path)]) == 0
    assert "entries: 3" in capsys.readouterr().out
    # a cache file that does not exist
    assert main(["llm", "stats", "--cache", str(cache_path) + ".missing"]) == 2


def test_prompts_list_and_show(capsys):
    assert main(["llm", "prompts"]) == 0
    out = capsys.readouterr().out
    assert "momoka.referee" in out and "jerr.synopsis" in out
    assert main(["llm", "prompts", "ets.answering"]) == 0
    assert "one short phrase" in capsys.readouterr().out
    # an unknown name
    assert main(["llm", "prompts", "nope"]) == 2


def test_client_options_for_other_commands(make_server, cache_path, capsys, monkeypatch):
    import argparse

    from momoka.cli.llm import add_client_args, client_from_args, print_usage
    from momoka.llm import LocalClient, OpenAIClient

    srv = make_server()
    ap = argparse.ArgumentParser()
    add_client_args(ap)
    a = ap.parse_args(["--llm-url", srv.base_url, "--llm-model", "m", "--concurrency", "3", "--llm-cache", str(cache_path)])
    c = client_from_args(a, progress=False)
    assert isinstance(c, OpenAIClient) and c.concurrency == 3 and c.cache.path == cache_path
    c.complete_many(["a"], method="demo")
    print_usage(c)
    assert "demo" in capsys.readouterr().err
    monkeypatch.delenv("MOMOKA_LLM_BASE_URL", raising=False)
    a = ap.parse_args(["--local", "--llm-cache", "off"])
    monkeypatch.setattr("momoka.llm.local._load_default_lm", lambda d: type("LM", (), {
        "generate": lambda self, *x, **k: None, "continuation_logprob": lambda self, p, q: 0.0})())
    c = client_from_args(a)
    assert isinstance(c, LocalClient) and c.cache is None
