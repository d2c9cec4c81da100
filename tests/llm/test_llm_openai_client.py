"""OpenAIClient against scripted servers on 127.0.0.1: protocol, retries, cache, accounting, concurrency.

Length: one client against every kind of server behaviour, hence over 500 lines.
"""

from __future__ import annotations

import threading
import time

import pytest

from momoka.errors import (
    ConfigError,
    InputError,
    LLMBatchError,
    LLMCapabilityError,
    LLMConnectionError,
    LLMHTTPError,
    LLMResponseError,
    LLMTimeoutError,
)
from momoka.llm import Accounting, OpenAIClient, RetryPolicy, parse_binary
from momoka.llm.testing import Drop, Garbage, Reply, Shape, Status, last_user


def client_for(srv, cache=False, **kw):
    kw.setdefault("progress", False)
    return OpenAIClient("test-model", base_url=srv.base_url, cache=cache, **kw)


def per_prompt(fn):
    """A script that counts how often each prompt was seen and hands fn(prompt, nth_time) the decision."""
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def script(body, i):
        p = last_user(body)
        with lock:
            seen[p] = seen.get(p, 0) + 1
            n = seen[p]
        return fn(p, n)

    script.seen = seen
    return script


# --- protocol -------------------------------------------------------------------


def test_answers_in_order_and_request_body_is_the_openai_shape(make_server):
    srv = make_server()
    c = client_for(srv, api_key="sk-test")
    prompts = [f"question {i}" for i in range(25)]
    out = c.complete_many(prompts, temperature=0.0, max_tokens=7)
    assert out == [f"echo: {p}" for p in prompts]
    bodies = sorted(srv.chat_bodies(), key=lambda b: int(b["messages"][0]["content"].split()[1]))
    assert len(bodies) == 25
    for i, b in enumerate(bodies):
        assert b == {"model": "test-model", "messages": [{"role": "user", "content": f"question {i}"}],
                     "temperature": 0.0, "max_tokens": 7}
    assert all(h.get("authorization") == "Bearer sk-test" for h in srv.headers)
    c.close()


def test_messages_lists_and_system_roles_pass_through(make_server):
    srv = make_server()
    c = client_for(srv)
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    assert c.complete(msgs) == "echo: hi"
    assert srv.chat_bodies()[0]["messages"] == msgs


def test_env_configuration(make_server, monkeypatch):
    srv = make_server()
    monkeypatch.setenv("MOMOKA_LLM_BASE_URL", srv.base_url)
    monkeypatch.setenv("MOMOKA_LLM_MODEL", "env-model")
    monkeypatch.setenv("MOMOKA_LLM_API_KEY", "env-key")
    c = OpenAIClient(cache=False, progress=False)
    assert c.complete("x") == "echo: x"
    assert srv.chat_bodies()[0]["model"] == "env-model"
    assert srv.headers[0]["authorization"] == "Bearer env-key"


def test_configuration_errors(monkeypatch):
    monkeypatch.delenv("MOMOKA_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("MOMOKA_LLM_MODEL", raising=False)
    # no base URL anywhere
    with pytest.raises(ConfigError, match="MOMOKA_LLM_BASE_URL"):
        OpenAIClient("m", cache=False)
    # no model name anywhere: the server is asked for its one model on first use (here nothing listens)
    c = OpenAIClient(base_url="http://127.0.0.1:1/v1", cache=False)
    with pytest.raises(LLMConnectionError, match="refused"):
        c.model
    # a URL without scheme
    with pytest.raises(ConfigError, match="http"):
        OpenAIClient("m", base_url="127.0.0.1:8000", cache=False)
    # concurrency must be a positive int
    with pytest.raises(ConfigError, match="concurrency"):
        OpenAIClient("m", base_url="http://127.0.0.1:1/v1", cache=False, concurrency=0)
    # a non-positive timeout
    with pytest.raises(ConfigError, match="timeout"):
        OpenAIClient("m", base_url="http://127.0.0.1:1/v1", cache=False, timeout=0)
    c = OpenAIClient("m", base_url="http://127.0.0.1:1/v1", cache=False)
    # streaming is not supported by a batch client
    with pytest.raises(ConfigError, match="stream"):
        c.complete_many(["x"], stream=True)
    # n > 1 would return several answers per item
    with pytest.raises(ConfigError, match="n=1"):
        c.complete_many(["x"], n=3)
    # params that cannot be JSON
    with pytest.raises(ConfigError, match="JSON"):
        c.complete_many(["x"], temperature=object())
    # the cache argument must be a path, bool or ResponseCache
    with pytest.raises(ConfigError, match="cache"):
        OpenAIClient("m", base_url="http://127.0.0.1:1/v1", cache=3.5)


def test_bad_batch_items_raise_input_errors(make_server):
    srv = make_server()
    c = client_for(srv)
    # a bare string instead of a list of conversations
    with pytest.raises(InputError, match="list of conversations"):
        c.complete_many("hello")
    # an unknown role
    with pytest.raises(InputError, match="role"):
        c.complete_many([[{"role": "wizard", "content": "x"}]])
    # content that is not a string
    with pytest.raises(InputError, match="content"):
        c.complete_many([[{"role": "user", "content": 3}]])
    # an empty conversation
    with pytest.raises(InputError, match="no messages"):
        c.complete_many([[]])
    # a dict where a list of messages is expected
    with pytest.raises(InputError):
        c.complete_many([{"role": "user", "content": "x"}])
    assert srv.count == 0


# --- cache and dedup ----------------------------------------------------------


def test_second_run_makes_zero_requests(make_server, cache_path):
    srv = make_server()
    prompts = [f"p{i}" for i in range(40)]
    c1 = client_for(srv, cache=cache_path)
    first = c1.complete_many(prompts, temperature=0)
    assert srv.count == 40
    c1.close()
    c2 = client_for(srv, cache=cache_path)  # a new client: the answers come from disk
    res = c2.complete_batch(prompts, temperature=0)
    assert srv.count == 40
    assert [r.text for r in res] == first
    assert all(r.cached and r.attempts == 0 for r in res)
    t = c2.accounting.total
    assert (t.requests, t.cache_hits, t.calls) == (0, 40, 40)
    # cached usage is not billed again
    assert t.prompt_tokens == 0 and t.completion_tokens == 0
    # a different parameter is a different request
    c2.complete_many(prompts[:3], temperature=0.5)
    assert srv.count == 43


def test_identical_items_in_a_batch_are_sent_once(make_server, cache_path):
    srv = make_server()
    c = client_for(srv, cache=cache_path)
    batch = ["a", "b", "a", "a", [{"role": "user", "content": "b"}], "c"]
    res = c.complete_batch(batch)
    assert [r.text for r in res] == ["echo: a", "echo: b", "echo: a", "echo: a", "echo: b", "echo: c"]
    assert srv.count == 3
    assert [r.deduplicated for r in res] == [False, False, True, True, True, False]
    assert c.accounting.total.deduplicated == 3
    # without the cache, dedup still holds
    srv2 = make_server()
    c2 = client_for(srv2, cache=False)
    c2.complete_many(["x"] * 10)
    assert srv2.count == 1


def test_use_cache_false_sends_again(make_server, cache_path):
    srv = make_server()
    c = client_for(srv, cache=cache_path)
    c.complete_many(["a", "b"])
    c.complete_many(["a", "b"], use_cache=False)
    assert srv.count == 4


def test_failures_are_not_cached_and_a_rerun_resends_only_them(make_server, cache_path, fast_retry):
    broken = {"p3", "p7"}
    srv = make_server(per_prompt(lambda p, n: Status(400) if p in broken else Reply("ok " + p)))
    c = client_for(srv, cache=cache_path, retry=fast_retry)
    prompts = [f"p{i}" for i in range(10)]
    with pytest.raises(LLMBatchError) as ei:
        c.complete_many(prompts)
    res = ei.value.results
    assert [r.ok for r in res] == [p not in broken for p in prompts]
    assert srv.count == 10
    srv.script = lambda body, i: Reply("fixed " + last_user(body))
    out = c.complete_many(prompts)
    assert srv.count == 12  # only the two failed items were sent again
    assert out[3] == "fixed p3" and out[0] == "ok p0"


# --- retries ------------------------------------------------------------------


def test_500_is_retried_with_backoff(make_server, fast_retry):
    srv = make_server(per_prompt(lambda p, n: Status(500) if n <= 2 else Reply("fine")))
    c = client_for(srv, retry=fast_retry)
    res = c.complete_batch(["a", "b", "c"])
    assert all(r.ok and r.text == "fine" and r.attempts == 3 for r in res)
    t = c.accounting.total
    assert (t.requests, t.retries, t.failures) == (9, 6, 0)


def test_503_and_502_are_retried(make_server, fast_retry):
    codes = iter([502, 503])
    srv = make_server(lambda body, i: Status(next(codes)) if i < 2 else Reply("ok"))
    c = client_for(srv, retry=fast_retry)
    assert c.complete("x") == "ok"
    assert srv.count == 3


def test_429_honours_retry_after(make_server):
    srv = make_server(per_prompt(lambda p, n: Status(429, {"Retry-After": "1"}) if n == 1 else Reply("ok")))
    # backoff alone would wait ~0.01 s: the 1 s wait can only come from Retry-After
    c = client_for(srv, retry=RetryPolicy(max_retries=2, backoff_base=0.01, backoff_max=0.01))
    t0 = time.perf_counter()
    assert c.complete("x") == "ok"
    assert time.perf_counter() - t0 >= 1.0
    assert srv.count == 2


def test_retries_run_out_and_the_item_is_marked(make_server, fast_retry):
    srv = make_server(lambda body, i: Status(500))
    c = client_for(srv, retry=fast_retry)
    res = c.complete_batch(["x"])[0]
    assert not res.ok and isinstance(res.error, LLMHTTPError) and res.error.status == 500
    assert res.attempts == fast_retry.max_retries + 1
    assert srv.count == fast_retry.max_retries + 1
    assert c.accounting.total.failures == 1


@pytest.mark.parametrize("code", [400, 401, 403, 404, 422])
def test_other_4xx_are_not_retried(make_server, fast_retry, code):
    srv = make_server(lambda body, i: Status(code))
    c = client_for(srv, retry=fast_retry)
    with pytest.raises(LLMBatchError) as ei:
        c.complete_many(["x"])
    err = ei.value.results[0].error
    assert isinstance(err, LLMHTTPError) and err.status == code
    assert srv.count == 1


def test_slow_answer_past_the_timeout_is_retried(make_server, fast_retry):
    srv = make_server(per_prompt(lambda p, n: Reply("late", delay=1.0) if n == 1 else Reply("quick")))
    c = client_for(srv, retry=fast_retry, timeout=0.2)
    res = c.complete_batch(["x"])[0]
    assert res.text == "quick" and res.attempts == 2


def test_timeouts_exhaust_into_a_timeout_error(make_server):
    srv = make_server(lambda body, i: Reply("late", delay=0.5))
    c = client_for(srv, retry=RetryPolicy(max_retries=1, backoff_base=0.01), timeout=0.1)
    res = c.complete_batch(["x"])[0]
    assert isinstance(res.error, LLMTimeoutError) and srv.count == 2


def test_dropped_connection_is_retried(make_server, fast_retry):
    srv = make_server(per_prompt(lambda p, n: Drop() if n <= 2 else Reply("back")))
    c = client_for(srv, retry=fast_retry)
    assert c.complete_many(["a", "b"]) == ["back", "back"]
    assert srv.count == 6


def test_always_dropped_gives_a_connection_error(make_server, fast_retry):
    srv = make_server(lambda body, i: Drop())
    c = client_for(srv, retry=fast_retry)
    assert isinstance(c.complete_batch(["a"])[0].error, LLMConnectionError)


def test_unreachable_server(fast_retry):
    c = OpenAIClient("m", base_url="http://127.0.0.1:9/v1", cache=False, retry=fast_retry, progress=False)
    res = c.complete_batch(["a"])[0]
    # a refused connection is not retried (nothing listens there; retrying only delays the error)
    assert isinstance(res.error, LLMConnectionError) and "refused" in str(res.error) and res.attempts == 1


def test_malformed_json_is_retried_then_reported(make_server, fast_retry):
    srv = make_server(per_prompt(lambda p, n: Garbage() if n == 1 else Reply("ok")))
    c = client_for(srv, retry=fast_retry)
    assert c.complete("x") == "ok" and srv.count == 2
    srv2 = make_server(lambda body, i: Garbage())
    c2 = client_for(srv2, retry=fast_retry)
    res = c2.complete_batch(["x"])[0]
    assert isinstance(res.error, LLMResponseError) and "malformed JSON" in str(res.error)


@pytest.mark.parametrize("obj", [
    {"choices": []},
    {"choices": [{"message": {"role": "assistant"}}]},
    {"choices": [{"message": {"content": None}}]},
    {"choices": [{"message": {"content": ["a"]}}]},
    {"result": "x"},
    [1, 2, 3],
])
def test_wrong_shapes_are_reported(make_server, fast_retry, obj):
    srv = make_server(lambda body, i: Shape(obj))
    c = client_for(srv, retry=fast_retry)
    res = c.complete_batch(["x"])[0]
    assert not res.ok and isinstance(res.error, LLMResponseError)
    assert c.accounting.total.failures == 1


def test_missing_usage_counts_zero_tokens(make_server):
    srv = make_server(lambda body, i: Shape({"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}]}))
    c = client_for(srv)
    r = c.complete_batch(["x"])[0]
    assert r.text == "hi" and r.prompt_tokens == 0 and r.finish_reason == "stop"


# --- concurrency, budget, resumability ------------------------------------------


@pytest.mark.parametrize("bound", [1, 7])
def test_concurrency_never_exceeds_its_bound(make_server, bound):
    srv = make_server(delay=0.02)
    c = client_for(srv, concurrency=bound)
    n = 60 if bound > 1 else 12
    c.complete_many([f"q{i}" for i in range(n)])
    assert srv.max_inflight == bound


def test_concurrency_bound_holds_with_retries(make_server, fast_retry):
    srv = make_server(per_prompt(lambda p, n: Status(503, delay=0.01) if n == 1 else Reply("ok", delay=0.01)))
    c = client_for(srv, concurrency=5, retry=fast_retry)
    c.complete_many([f"q{i}" for i in range(50)])
    assert srv.max_inflight <= 5 and srv.count == 100


def test_budget_cuts_a_batch_and_a_rerun_sends_only_the_rest(make_server, cache_path):
    srv = make_server(delay=0.2)
    c = client_for(srv, cache=cache_path, concurrency=2)
    prompts = [f"q{i}" for i in range(20)]
    res = c.complete_batch(prompts, budget_s=0.5)
    done = [r for r in res if r.ok]
    cut = [r for r in res if not r.ok]
    assert 2 <= len(done) < 20 and all(isinstance(r.error, LLMTimeoutError) for r in cut)
    sent_first = srv.count
    srv.reset()
    c2 = client_for(srv, cache=cache_path, concurrency=20)
    out = c2.complete_many(prompts)
    assert out == [f"echo: {p}" for p in prompts]
    # nothing that finished is sent again; what was sent and cut off may be resent
    resent = {b["messages"][0]["content"] for b in srv.chat_bodies()}
    assert resent.isdisjoint({p for p, r in zip(prompts, res) if r.ok})
    assert len(resent) == 20 - len(done)
    assert sent_first >= len(done)


def test_keyboard_interrupt_keeps_finished_answers(make_server, cache_path):
    import signal

    srv = make_server(delay=0.05)
    c = client_for(srv, cache=cache_path, concurrency=4)
    prompts = [f"q{i}" for i in range(200)]

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.6)
    try:
        with pytest.raises(KeyboardInterrupt):
            c.complete_many(prompts)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    from momoka.llm import ResponseCache

    kept = len(ResponseCache(cache_path))
    assert 0 < kept < 200
    srv.reset()
    client_for(srv, cache=cache_path, concurrency=32).complete_many(prompts)
    assert srv.count == 200 - kept


# --- accounting ----------------------------------------------------------------


def test_accounting_matches_hand_counts(make_server, cache_path, fast_retry):
    # usage = whitespace words: "echo: a b" has 3 words; the prompt "a b" has 2
    fail_once = per_prompt(lambda p, n: Status(500) if (p == "x y z" and n == 1) else Reply("echo: " + p))
    srv = make_server(fail_once)
    acc = Accounting(prices={"test-model": (2.0, 10.0)})
    c = client_for(srv, cache=cache_path, retry=fast_retry, accounting=acc)
    c.complete_many(["a b", "x y z", "a b"], method="referee")
    c.complete_many(["a b", "q"], method="keywords")
    by = acc.by_method
    r, k = by["referee"], by["keywords"]
    assert (r.calls, r.requests, r.retries, r.deduplicated, r.cache_hits, r.failures) == (3, 3, 1, 1, 0, 0)
    assert (r.prompt_tokens, r.completion_tokens) == (2 + 3, 3 + 4)
    assert (k.calls, k.requests, k.cache_hits) == (2, 1, 1)
    assert (k.prompt_tokens, k.completion_tokens) == (1, 2)
    assert acc.total.requests == 4
    assert acc.cost() == pytest.approx((6 * 2.0 + 9 * 10.0) / 1e6)
    text = acc.report()
    assert "referee" in text and "keywords" in text and "TOTAL" in text and "cost: $" in text
    d = acc.to_dict()
    assert d["total"]["calls"] == 5 and d["tokens_by_model"]["test-model"] == [6, 9]
    acc.reset()
    assert acc.total.calls == 0


def test_price_table_errors():
    # a price that is not a pair of numbers
    with pytest.raises(ConfigError):
        Accounting(prices={"m": "cheap"})
    # a negative price
    with pytest.raises(ConfigError):
        Accounting(prices={"m": (-1, 2)})
    # a dict without both keys
    with pytest.raises(ConfigError):
        Accounting(prices={"m": {"prompt": 1}})
    assert Accounting(prices={"m": {"prompt": 1, "completion": 2}}).prices["m"] == (1.0, 2.0)


def test_cost_is_unknown_for_an_unpriced_model(make_server):
    srv = make_server()
    c = client_for(srv, prices={"other": (1, 1)})
    c.complete("a")
    assert c.accounting.cost() is None


# --- parsing with re-asks -----------------------------------------------------


def test_parsed_answers_are_reasked_with_a_reminder(make_server):
    def script(body, i):
        msgs = body["messages"]
        if len(msgs) == 1:
            return Reply("I think they are related." if "hard" in msgs[0]["content"] else "1")
        assert msgs[1]["role"] == "assistant" and "1 or 0" in msgs[2]["content"]
        return Reply("0")

    srv = make_server(script)
    c = client_for(srv)
    res = c.complete_parsed(["easy", "hard"], parse_binary, method="referee")
    assert [(p.value, p.ok, p.rounds) for p in res] == [(1, True, 1), (0, True, 2)]
    st = c.accounting.by_method["referee"]
    assert st.reasks == 1 and st.parse_failures == 0


def test_parse_failures_are_marked_never_defaulted(make_server):
    srv = make_server(lambda body, i: Reply("maybe?"))
    c = client_for(srv)
    res = c.complete_parsed(["a", "b"], parse_binary, max_reasks=2, method="referee")
    assert all(not p.ok and p.value is None and p.rounds == 3 for p in res)
    assert all(isinstance(p.error, LLMResponseError) and p.raw == "maybe?" for p in res)
    st = c.accounting.by_method["referee"]
    assert (st.reasks, st.parse_failures) == (4, 2)
    assert srv.count == 6


def test_parsed_request_failures_are_not_parse_failures(make_server, fast_retry):
    srv = make_server(lambda body, i: Status(400))
    c = client_for(srv, retry=fast_retry)
    res = c.complete_parsed(["a"], parse_binary, method="m")[0]
    assert not res.ok and isinstance(res.error, LLMHTTPError)
    assert c.accounting.by_method["m"].parse_failures == 0


# --- log-probabilities ---------------------------------------------------------


def _echo_scorer(body, i):
    # tokens are single characters; log p(char) = -(position + 1) / 10
    text = body["prompt"]
    toks = list(text) + ["!"]
    return Shape({"choices": [{"text": text + "!", "logprobs": {
        "tokens": toks, "text_offset": list(range(len(toks))),
        "token_logprobs": [None] + [-(k + 1) / 10 for k in range(1, len(toks))]}}],
        "usage": {"prompt_tokens": len(text), "completion_tokens": 1}})


def test_logprob_sums_the_continuation_tokens(make_server):
    srv = make_server(routes={"/v1/completions": _echo_scorer})
    c = client_for(srv)
    # prompt "abc", continuation "de": tokens d (pos 3) and e (pos 4): -(4 + 5) / 10
    assert c.logprob("abc", "de") == pytest.approx(-0.9)
    vals = c.logprob_many([("ab", "c"), ("a", "bcd")])
    assert vals == pytest.approx([-0.3, -(2 + 3 + 4) / 10])
    body = srv.requests[0][1]
    assert body["echo"] is True and body["prompt"] == "abcde" and body["logprobs"] == 0


def test_logprob_mean_divides_by_the_continuation_tokens(make_server):
    # tried: mean=True on prompt "abc", continuation "de": (-0.4 - 0.5) / 2 tokens; the plain sum is unchanged
    srv = make_server(routes={"/v1/completions": _echo_scorer})
    c = client_for(srv)
    assert c.logprob_many([("abc", "de"), ("a", "bcd")], mean=True) == pytest.approx([-0.45, -0.3])
    assert c.logprob_many([("abc", "de")]) == pytest.approx([-0.9])


def test_logprob_unsupported_is_a_capability_error(make_server):
    srv = make_server(routes={"/v1/completions": lambda body, i: Status(404)})
    c = client_for(srv)
    with pytest.raises(LLMCapabilityError):
        c.logprob("a", "b")
    n = srv.count
    with pytest.raises(LLMCapabilityError):  # remembered: no second request
        c.logprob("a", "c")
    assert srv.count == n
    srv2 = make_server(routes={"/v1/completions": lambda body, i: Shape({"choices": [{"text": "x"}]})})
    with pytest.raises(LLMCapabilityError):
        client_for(srv2).logprob("a", "b")


def test_logprob_input_errors(make_server):
    c = client_for(make_server())
    # an empty prompt leaves the first token without a probability
    with pytest.raises(InputError):
        c.logprob("", "b")
    # an empty continuation has nothing to score
    with pytest.raises(InputError):
        c.logprob("a", "")
    # not a pair
    with pytest.raises(InputError):
        c.logprob_many([("a", "b", "c")])


def test_async_api_from_a_users_event_loop(make_server):
    import asyncio

    srv = make_server()
    c = client_for(srv)

    async def main():
        return await c.acomplete_many(["u", "v"])

    assert asyncio.run(main()) == ["echo: u", "echo: v"]


# --- progress, protocol, fork ---------------------------------------------------


def test_progress_only_when_asked_or_long(make_server, capsys, monkeypatch):
    srv = make_server(delay=0.01)
    c = client_for(srv)
    c.complete_many([f"a{i}" for i in range(5)], method="referee")
    assert "llm referee" not in capsys.readouterr().err  # shorter than progress_delay
    c = client_for(srv, progress=False)
    c.progress_delay = 0.0
    c.complete_many([f"b{i}" for i in range(5)], method="referee")
    assert "llm referee" not in capsys.readouterr().err
    c = client_for(srv, progress=True)
    c.progress_delay = 0.0
    c.complete_many([f"q{i}" for i in range(20)], method="referee")
    assert "llm referee: 20/20 req" in capsys.readouterr().err
    monkeypatch.setenv("MOMOKA_PROGRESS", "0")
    c.complete_many([f"r{i}" for i in range(20)], method="referee")
    assert "llm referee" not in capsys.readouterr().err
    c2 = client_for(srv)  # progress=False
    c2.complete_many([f"z{i}" for i in range(20)])
    assert "llm" not in capsys.readouterr().err


def test_clients_satisfy_the_protocol(make_server):
    from momoka.llm import LLMClient, LocalClient

    assert isinstance(client_for(make_server()), LLMClient)

    class Tiny:
        def generate(self, *a, **k): ...
        def continuation_logprob(self, p, c): return 0.0

    assert isinstance(LocalClient(Tiny(), cache=False), LLMClient)


def _fork_child(client, q):
    q.put(client.complete_many(["from the child"]))


def test_a_forked_child_can_use_the_parents_client(make_server, cache_path):
    import multiprocessing as mp

    srv = make_server()
    c = client_for(srv, cache=cache_path)
    c.complete_many(["from the parent"])  # the parent's loop, session and connection exist
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_fork_child, args=(c, q))
    p.start()
    p.join(60)
    assert p.exitcode == 0 and q.get(timeout=5) == ["echo: from the child"]
    assert c.complete_many(["from the parent", "from the child"]) == ["echo: from the parent", "echo: from the child"]
    assert srv.count == 2  # the child's answer reached the shared cache


def test_concurrency_bound_holds_across_threads_sharing_a_client(make_server):
    srv = make_server(delay=0.02)
    c = client_for(srv, concurrency=4)
    outs = {}

    def run(tag):
        outs[tag] = c.complete_many([f"{tag}{i}" for i in range(30)])

    ts = [threading.Thread(target=run, args=(t,)) for t in "ab"]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert outs["a"][5] == "echo: a5" and outs["b"][29] == "echo: b29"
    assert srv.count == 60 and srv.max_inflight == 4
