"""ETS reader: P(y | q, d) against a plain per-token loop, the endpoint path on a local HTTP server, faults.

References: the likelihood is recomputed from one cache-free forward pass over the
whole sequence with a hand-written float64 log-softmax per answer position (the
reader uses a cached prompt head and batched suffixes); the endpoint value is
computed by hand from the scripted server's per-character log-probs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from momoka.errors import ConfigError, InputError, LLMBatchError, LLMCapabilityError, LLMError
from momoka.llm import prompts
from momoka.llm.testing import Garbage, Reply, Shape
from momoka.methods.ets import Reader, is_correct

Q = "Who discovered radium?"
EV = ["Marie Curie was born in Warsaw.", "She and Pierre Curie discovered radium in 1898.", "Paris is in France."]


def _plain_likelihood(lm, question, answer, evidence):
    """exp(mean log p) of the answer tokens from one cache-free forward pass, log-softmax by hand."""
    user = prompts.render("ets.answering", background=" ".join(evidence), query=question)
    text = lm.apply_chat_template([{"role": "user", "content": user}])
    cut = text.index("Documents:") + len("Documents:")
    ids = lm.encode(text[:cut]) + lm.encode(text[cut:])
    ans = lm.encode(answer)
    seq = np.asarray([ids + ans], dtype=np.int64)
    n = seq.shape[1]
    logits, _ = lm._forward(seq, np.ones((1, n), np.int64), np.arange(n, dtype=np.int64)[None, :], lm._empty_cache(1))
    total = 0.0
    for k, tok in enumerate(ans):
        row = logits[0, len(ids) + k - 1].astype(np.float64)
        m = row.max()
        total += row[tok] - m - math.log(np.exp(row - m).sum())
    return math.exp(total / len(ans))


def test_likelihood_matches_a_plain_per_token_loop(reader, lm):
    # tried: a 3-word answer after three evidence sentences, after one, and after none
    for ev in (EV, EV[1:2], []):
        got = reader.likelihood(Q, "Marie Curie", ev)
        assert got == pytest.approx(_plain_likelihood(lm, Q, "Marie Curie", ev), rel=2e-3, abs=1e-6)
        assert 0.0 < got <= 1.0


def test_batched_likelihoods_equal_single_calls_and_order_matters(reader, lm):
    # tried: the same evidence in three orders, scored in one batch and one by one
    sets = [EV, EV[::-1], [EV[1], EV[0]]]
    batch = reader.likelihoods(Q, "Marie and Pierre Curie", sets)
    single = [reader.likelihood(Q, "Marie and Pierre Curie", s) for s in sets]
    assert batch == pytest.approx(single, rel=2e-3)
    assert batch[0] == pytest.approx(_plain_likelihood(lm, Q, "Marie and Pierre Curie", EV), rel=2e-3)
    assert len({round(float(x), 6) for x in batch}) == 3  # the prompt order changes the value
    # the supporting sentence raises the gold answer's likelihood over an unrelated one
    with_ev, without = reader.likelihoods(Q, "Marie Curie", [[EV[1]], [EV[2]]])
    assert with_ev > without
    assert reader.likelihoods(Q, "x", []).shape == (0,)


def test_answer_is_greedy_and_its_likelihood_is_the_scored_answer(reader, lm):
    # tried: the reader's own answer from the supporting sentence, against lm.generate on the same messages
    a, p = reader.answer_with_likelihood(Q, EV[1:2])
    ref = lm.generate([{"role": "user", "content": prompts.render("ets.answering", background=EV[1], query=Q)}],
                      max_new_tokens=32, temperature=0.0).text.strip()
    assert a == ref and a
    assert p == pytest.approx(_plain_likelihood(lm, Q, a, EV[1:2]), rel=2e-3)


def test_is_correct_em_or_f1():
    # tried: hand-computed SQuAD normalisation and token F1 values
    assert is_correct("the Eiffel Tower.", "Eiffel Tower")  # EM after normalisation
    assert is_correct("William Shakespeare playwright", "William Shakespeare")  # F1 = 0.8 exactly
    assert not is_correct("William Shakespeare playwright", "William Shakespeare", mode="em")
    assert not is_correct("Shakespeare", "William Shakespeare")  # F1 = 2/3
    assert is_correct("Shakespeare", "William Shakespeare", f1_threshold=0.6)
    assert is_correct("Paris", ["London", "paris"])  # any gold answer
    assert Reader.is_correct("1898", "1898", mode="f1")
    with pytest.raises(ConfigError):
        is_correct("a", "a", mode="rouge")


def test_bad_input_is_refused(reader):
    with pytest.raises(InputError):  # empty answer cannot be scored
        reader.likelihood(Q, " ", EV)
    with pytest.raises(InputError):  # evidence given as one string
        reader.likelihood(Q, "a", "Marie Curie was born in Warsaw.")
    with pytest.raises(InputError):  # empty question
        reader.answer("", EV)
    with pytest.raises(ConfigError):
        Reader.from_spec("ftp://x")
    with pytest.raises(ConfigError):
        Reader(lm=object(), endpoint="http://127.0.0.1:1/v1")


# --- the endpoint path ------------------------------------------------------------


def _char_scorer(body, i):
    # an OpenAI /completions echo with one token per character; log p(char at k) = -(k + 1) / 100
    text = body["prompt"]
    toks = list(text) + ["!"]
    return Shape({"choices": [{"text": text + "!", "logprobs": {
        "tokens": toks, "text_offset": list(range(len(toks))),
        "token_logprobs": [None] + [-(k + 1) / 100 for k in range(1, len(toks))]}}],
        "usage": {"prompt_tokens": len(text), "completion_tokens": 1}})


def _endpoint_reader(srv, **kw):
    return Reader(endpoint=srv.base_url, model="test-model", cache=False, progress=False, **kw)


def test_endpoint_likelihood_is_exp_mean_of_the_answer_token_logprobs(make_server):
    # tried: a server echoing per-character log-probs; the answer " Curie" is 6 characters after the prompt
    srv = make_server(routes={"/v1/completions": _char_scorer})
    r = _endpoint_reader(srv)
    prompt = prompts.render("ets.answering", background=" ".join(EV), query=Q)
    L = len(prompt)
    want = math.exp(sum(-(k + 1) / 100 for k in range(L, L + 6)) / 6)
    assert r.likelihood(Q, "Curie", EV) == pytest.approx(want)
    vals = r.likelihoods(Q, "Curie", [EV, EV[:1]])
    L1 = len(prompts.render("ets.answering", background=EV[0], query=Q))
    assert vals == pytest.approx([want, math.exp(sum(-(k + 1) / 100 for k in range(L1, L1 + 6)) / 6)])
    body = srv.requests[0][1]
    assert body["echo"] is True and body["prompt"] == prompt + " Curie"


def test_endpoint_answer_uses_chat_completions(make_server):
    # tried: the chat route answers " 1898 "; the reader returns it stripped, then scores it
    srv = make_server(lambda body, i: Reply(" 1898 "), routes={"/v1/completions": _char_scorer})
    r = _endpoint_reader(srv)
    a, p = r.answer_with_likelihood(Q, EV)
    assert a == "1898" and 0 < p < 1
    chat = [b for path, b in srv.requests if path.endswith("/chat/completions")][0]
    assert chat["temperature"] == 0 and chat["max_tokens"] == 32
    assert EV[1] in chat["messages"][-1]["content"]


def test_endpoint_without_logprobs_fails_clearly(make_server):
    # tried: a server that answers /completions without any logprobs field
    srv = make_server(routes={"/v1/completions": lambda body, i: Shape({"choices": [{"text": "x"}]})})
    with pytest.raises(LLMCapabilityError, match="log-prob"):
        _endpoint_reader(srv).likelihood(Q, "Curie", EV)


def test_endpoint_malformed_json_and_timeout_fail_clearly(make_server, fast_retry):
    # tried: a body that is not JSON (retried, then reported), and an answer slower than the timeout
    srv = make_server(routes={"/v1/completions": lambda body, i: Garbage()})
    with pytest.raises(LLMBatchError, match="malformed JSON"):
        _endpoint_reader(srv, retry=fast_retry).likelihood(Q, "Curie", EV)
    slow = make_server(routes={"/v1/completions": lambda body, i: Reply("late", delay=0.5)})
    with pytest.raises(LLMError, match="within 0.1s"):
        _endpoint_reader(slow, retry=fast_retry, timeout=0.1).likelihood(Q, "Curie", EV)
