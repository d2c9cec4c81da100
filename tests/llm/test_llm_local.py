"""LocalClient, and the OpenAI-compatible server over it, end to end on 127.0.0.1.

The first tests use a small hand-written stand-in LM (so they run everywhere);
the last ones use the real embedded causal LM and skip when it is not installed.
"""

from __future__ import annotations

import pytest

from momoka.errors import ConfigError, LLMBatchError, LLMCapabilityError, LLMError, ModelError
from momoka.llm import LocalClient, OpenAIClient, parse_binary
from momoka.llm.server import serve_openai


class _Result:
    def __init__(self, text, pt, ct, fr):
        self.text, self.prompt_tokens, self.completion_tokens, self.finish_reason = text, pt, ct, fr


class ReverseLM:
    """Answers the last message reversed; tokens are characters; log p of each continuation char is -0.5."""

    name = "reverse"

    def __init__(self):
        self.calls = []

    def generate(self, messages, *, max_new_tokens, temperature, top_p, seed, stop):
        self.calls.append(dict(messages=messages, max_new_tokens=max_new_tokens, temperature=temperature,
                               top_p=top_p, seed=seed, stop=stop))
        content = messages[-1]["content"]
        if content == "explode":
            raise RuntimeError("boom")
        out = content[::-1][:max_new_tokens]
        for s in stop or []:
            if s in out:
                out = out[: out.index(s)]
        return _Result(out, sum(len(m["content"]) for m in messages), len(out), "stop")

    def continuation_logprob(self, prompt, continuation):
        return -0.5 * len(continuation)


def test_local_client_maps_parameters(cache_path):
    lm = ReverseLM()
    c = LocalClient(lm, cache=cache_path, progress=False)
    assert c.model == "local:reverse"
    assert c.complete("abc") == "cba"
    assert lm.calls[-1] == dict(messages=[{"role": "user", "content": "abc"}], max_new_tokens=256, temperature=0.0,
                                top_p=1.0, seed=None, stop=None)
    assert c.complete("abcdef", max_tokens=3, temperature=0.7, top_p=0.9, seed=5, stop="e") == "f"
    assert lm.calls[-1]["stop"] == ["e"] and lm.calls[-1]["seed"] == 5 and lm.calls[-1]["max_new_tokens"] == 3


def test_local_client_caches_dedups_and_accounts(cache_path):
    lm = ReverseLM()
    c = LocalClient(lm, cache=cache_path, progress=False)
    out = c.complete_many(["ab", "cd", "ab"], method="summary")
    assert out == ["ba", "dc", "ba"] and len(lm.calls) == 2
    st = c.accounting.by_method["summary"]
    assert (st.calls, st.requests, st.deduplicated, st.prompt_tokens, st.completion_tokens) == (3, 2, 1, 4, 4)
    c2 = LocalClient(lm, cache=cache_path, progress=False)
    assert c2.complete_many(["ab", "cd"]) == ["ba", "dc"] and len(lm.calls) == 2


def test_local_model_failure_is_final_and_marked():
    lm = ReverseLM()
    c = LocalClient(lm, cache=False, progress=False)
    with pytest.raises(LLMBatchError) as ei:
        c.complete_many(["ok", "explode"])
    res = ei.value.results
    assert res[0].text == "ko" and isinstance(res[1].error, LLMError) and "boom" in str(res[1].error)
    assert sum(1 for call in lm.calls if call["messages"][-1]["content"] == "explode") == 1  # never retried


def test_local_client_rejects_unknown_parameters():
    c = LocalClient(ReverseLM(), cache=False)
    # a server-only parameter the local model cannot honour
    with pytest.raises(ConfigError, match="response_format"):
        c.complete("x", response_format={"type": "json_object"})
    # a non-positive token budget
    with pytest.raises(ConfigError, match="max_tokens"):
        c.complete("x", max_tokens=0)
    # a negative temperature
    with pytest.raises(ConfigError, match="temperature"):
        c.complete("x", temperature=-1)
    # a nucleus outside (0, 1]
    with pytest.raises(ConfigError, match="top_p"):
        c.complete("x", top_p=0)
    # an object without the model methods
    with pytest.raises(ConfigError, match="generate"):
        LocalClient(object(), cache=False)


def test_local_logprob_and_parsing():
    c = LocalClient(ReverseLM(), cache=False, progress=False)
    assert c.logprob("prompt", "abcd") == -2.0
    assert c.logprob_many([("p", "a"), ("p", "abc")]) == [-0.5, -1.5]
    res = c.complete_parsed(["1", "maybe"], parse_binary, max_reasks=1)
    assert res[0].ok and res[0].value == 1
    assert not res[1].ok and res[1].rounds == 2


def test_missing_model_dir_is_a_model_error(tmp_path):
    pytest.importorskip("onnxruntime")
    with pytest.raises(ModelError):
        LocalClient(model_dir=tmp_path / "nowhere", cache=False)


def test_http_server_over_a_local_client_speaks_openai(cache_path):
    lm = ReverseLM()
    srv = serve_openai(LocalClient(lm, cache=False, progress=False), model_name="rev")
    try:
        c = OpenAIClient("rev", base_url=srv.url + "/v1", cache=cache_path, progress=False, concurrency=4)
        res = c.complete_batch(["hello", "world"], max_tokens=3)
        assert [r.text for r in res] == ["oll", "dlr"]
        assert [(r.prompt_tokens, r.completion_tokens) for r in res] == [(5, 3), (5, 3)]
        # the echo-scoring endpoint is refused honestly
        with pytest.raises(LLMCapabilityError):
            c.logprob("a", "b")
        # the reference SDK parses the server's answers too
        openai = pytest.importorskip("openai")
        sdk = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0)
        r = sdk.chat.completions.create(model="rev", messages=[{"role": "user", "content": "abc"}], max_tokens=5)
        assert r.choices[0].message.content == "cba" and r.usage.completion_tokens == 3
        assert [m.id for m in sdk.models.list().data] == ["rev"]
        # bad requests get OpenAI-style errors
        with pytest.raises(openai.BadRequestError):
            sdk.chat.completions.create(model="rev", messages=[{"role": "wizard", "content": "x"}])
    finally:
        srv.stop()


# --- the real embedded causal LM ------------------------------------------------


@pytest.fixture(scope="module")
def real_lm():
    try:
        from momoka.models.causal_lm import CausalLM  # noqa: F401
        from momoka.llm.local import _load_default_lm
    except ImportError as exc:
        pytest.skip(f"the local causal LM is not part of this build: {exc}")
    try:
        return _load_default_lm(None)
    except ModelError as exc:
        pytest.skip(f"the default causal LM is not installed (run `momoka models install`): {exc}")


QUESTION = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]


@pytest.fixture(scope="module")
def direct_answer(real_lm):
    """The model's own greedy answer, computed without momoka.llm (the reference)."""
    return real_lm.generate(QUESTION, max_new_tokens=4, temperature=0.0, top_p=1.0, seed=None, stop=None)


@pytest.mark.models
@pytest.mark.slow
def test_local_client_on_the_real_model(real_lm, direct_answer):
    c = LocalClient(real_lm, cache=False, progress=False)
    res = c.complete_batch([QUESTION], max_tokens=4)[0]
    assert res.text == direct_answer.text and res.completion_tokens == direct_answer.completion_tokens
    good, bad = c.logprob_many([("The capital of France is", " Paris"), ("The capital of France is", " banana")])
    assert good == pytest.approx(real_lm.continuation_logprob("The capital of France is", " Paris"), abs=1e-4)
    assert good > bad
    # mean=True: the mean per continuation token, from the model's own token log-probs
    mean = c.logprob_many([("The capital of France is", " Paris and Lyon")], mean=True)[0]
    assert mean == pytest.approx(real_lm.token_logprobs(" Paris and Lyon", context="The capital of France is").mean(), abs=1e-4)


@pytest.fixture(scope="module")
def local_model_server(real_lm, tmp_path_factory):
    """A real HTTP server on 127.0.0.1 speaking the OpenAI chat-completions protocol, answering from the local model."""
    local = LocalClient(real_lm, cache=tmp_path_factory.mktemp("server") / "cache.sqlite", progress=False)
    srv = serve_openai(local, model_name="smollm2")
    yield srv, local
    srv.stop()


@pytest.mark.models
@pytest.mark.slow
def test_openai_protocol_end_to_end_on_the_real_model(local_model_server, direct_answer, cache_path):
    srv, local = local_model_server
    c = OpenAIClient("smollm2", base_url=srv.url + "/v1", cache=cache_path, progress=False, concurrency=2)
    res = c.complete_batch([QUESTION, QUESTION], max_tokens=4, temperature=0)
    for r in res:
        assert r.text == direct_answer.text
        assert (r.prompt_tokens, r.completion_tokens) == (direct_answer.prompt_tokens, direct_answer.completion_tokens)
    assert c.accounting.total.requests == 1  # the repeated question was sent once
    n = local.accounting.total.requests
    c.complete_many([QUESTION], max_tokens=4, temperature=0)
    assert local.accounting.total.requests == n  # second run: answered from the client's cache
    # the reference SDK reads the same answer (the server answers it from its own cache)
    openai = pytest.importorskip("openai")
    sdk = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0)
    r = sdk.chat.completions.create(model="smollm2", messages=QUESTION, max_tokens=4, temperature=0)
    assert r.choices[0].message.content == direct_answer.text


@pytest.mark.models
@pytest.mark.slow
def test_served_local_model_scores_continuations_like_the_model_itself(local_model_server, real_lm, cache_path):
    """``/completions`` with echo and logprobs: the client's log-probability of a continuation, read from the
    served prompt tokens, equals the model's own continuation score (prompt and continuation tokenised apart,
    which is the same split here: each continuation starts with a space)."""
    srv, _ = local_model_server
    c = OpenAIClient("smollm2", base_url=srv.url + "/v1", cache=cache_path, progress=False)
    pairs = [("The capital of France is", " Paris"), ("The capital of France is", " banana bread"),
             ("Water boils at 100 degrees", " Celsius at sea level.")]
    got = c.logprob_many(pairs)
    ref = [real_lm.continuation_logprob(p, k) for p, k in pairs]
    assert got == pytest.approx(ref, abs=1e-3)
    assert got[0] > got[1]
    mean = c.logprob_many(pairs[2:], mean=True)[0]
    assert mean == pytest.approx(real_lm.token_logprobs(pairs[2][1], context=pairs[2][0]).mean(), abs=1e-3)


@pytest.mark.models
@pytest.mark.slow
def test_served_completions_refuse_free_text_and_empty_prompts(local_model_server):
    import json
    import urllib.error
    import urllib.request

    srv, _ = local_model_server

    def post(body):
        req = urllib.request.Request(srv.url + "/v1/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    status, obj = post({"model": "smollm2", "prompt": "Hello", "max_tokens": 5})
    assert status == 501 and "echo" in obj["error"]["message"]
    status, obj = post({"model": "smollm2", "prompt": "", "echo": True, "logprobs": 0})
    assert status == 400
    status, obj = post({"model": "smollm2", "prompt": "Hello world", "echo": True, "logprobs": 0, "max_tokens": 1})
    lp = obj["choices"][0]["logprobs"]
    # the echoed tokens tile the prompt: each token's text sits at its offset
    assert "".join(lp["tokens"]) == "Hello world"
    assert all("Hello world"[o:o + len(t)] == t for o, t in zip(lp["text_offset"], lp["tokens"]))
    assert all(x < 0 for x in lp["token_logprobs"])


class RuntimeLM(ReverseLM):
    """ReverseLM that says which runtime generates (as CausalLM.runtime_key does)."""

    def __init__(self, runtime):
        super().__init__()
        self.runtime = runtime

    def runtime_key(self):
        return self.runtime


def test_cached_answers_are_kept_apart_by_generation_runtime(cache_path):
    onnx = RuntimeLM("onnx")
    assert LocalClient(onnx, cache=cache_path, progress=False).complete("abc") == "cba"
    assert len(onnx.calls) == 1
    # another runtime may generate other tokens: its answer is never the cached onnxruntime one
    llama = RuntimeLM("llama")
    assert LocalClient(llama, cache=cache_path, progress=False).complete("abc") == "cba"
    assert len(llama.calls) == 1
    auto = RuntimeLM("auto")
    LocalClient(auto, cache=cache_path, progress=False).complete("abc")
    assert len(auto.calls) == 1
    # the same runtime again: answered from the cache; so is an LM that names no runtime (onnxruntime)
    again = RuntimeLM("llama")
    LocalClient(again, cache=cache_path, progress=False).complete("abc")
    plain = ReverseLM()
    LocalClient(plain, cache=cache_path, progress=False).complete("abc")
    assert again.calls == [] and plain.calls == []
    # scores do not depend on the generation runtime: one cached score serves every runtime
    a = LocalClient(RuntimeLM("onnx"), cache=cache_path, progress=False)
    b = LocalClient(RuntimeLM("llama"), cache=cache_path, progress=False)
    assert a.logprob("x", "yz") == b.logprob("x", "yz") == -1.0
    assert b.accounting.total.cache_hits == 1
