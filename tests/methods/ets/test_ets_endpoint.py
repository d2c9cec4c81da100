"""ETS against a real OpenAI-compatible server on 127.0.0.1 (``momoka llm serve``'s handler over the local model).

References: the endpoint reader's likelihood is recomputed from the model directly (the raw reader prompt
followed by the answer, scored token by token without any HTTP); the default reader follows
``MOMOKA_LLM_BASE_URL``.
"""

from __future__ import annotations

import math

import pytest

from momoka.llm import LocalClient, OpenAIClient, prompts
from momoka.llm.server import serve_openai
from momoka.methods.base import Item, Member, Result
from momoka.methods.ets import Reader
from momoka.methods.ets.refiner import ETSRefiner

Q = "Who discovered radium?"
EV = ["Marie Curie was born in Warsaw.", "She and Pierre Curie discovered radium in 1898.", "Paris is in France."]


@pytest.fixture(scope="module")
def served(lm, tmp_path_factory):
    local = LocalClient(lm, cache=False, progress=False)
    srv = serve_openai(local, model_name="smollm2")
    yield srv.url + "/v1", local
    srv.stop()


@pytest.mark.models
@pytest.mark.slow
def test_endpoint_reader_likelihood_equals_the_models_own_score(served, lm, tmp_path):
    url, _ = served
    reader = Reader(endpoint=url, model="smollm2", cache=tmp_path / "c.sqlite", progress=False)
    answer = "Marie Curie"
    got = reader.likelihood(Q, answer, EV)
    prompt = prompts.render("ets.answering", background=" ".join(EV), query=Q)
    ref = math.exp(lm.token_logprobs(" " + answer, context=prompt).mean())
    assert got == pytest.approx(ref, rel=1e-3)
    assert 0.0 < got < 1.0


@pytest.mark.models
@pytest.mark.slow
def test_refiner_reads_through_the_configured_endpoint_by_default(served, lm, embedder, monkeypatch):
    url, local = served
    monkeypatch.setenv("MOMOKA_LLM_BASE_URL", url)
    monkeypatch.setenv("MOMOKA_LLM_MODEL", "smollm2")
    refiner = ETSRefiner(embedder=embedder, n=3, expansion=2, beam=2, max_depth=2, lm=lm, progress=False)
    assert refiner.reader_name() == url
    assert isinstance(refiner.reader.client, OpenAIClient) and refiner.reader.client.base_url.startswith(url)
    text = " ".join(EV)
    starts = [text.index(s) for s in EV]
    items = tuple(Item((Member(i, "d", a, a + len(s), s),), 1.0 - i / 10, i + 1, {}, None)
                  for i, (a, s) in enumerate(zip(starts, EV)))
    before = local.accounting.total.requests
    out = refiner.refine(Q, Result(Q, items, "dense", {}))
    assert local.accounting.total.requests > before  # the value came from the server
    assert out.retriever == "dense+ets" and len(out) >= 1
    for it in out:  # every chosen item is one of the given sentences, at its own offsets
        (m,) = it.members
        assert m.text in EV and text[m.start:m.end] == m.text
    assert refiner.describe()["reader"] == url


def test_refiner_without_an_endpoint_reads_locally(monkeypatch):
    monkeypatch.delenv("MOMOKA_LLM_BASE_URL", raising=False)
    assert ETSRefiner().reader_name() == "local"
    assert ETSRefiner(reader="http://127.0.0.1:9/v1").reader_name() == "http://127.0.0.1:9/v1"
