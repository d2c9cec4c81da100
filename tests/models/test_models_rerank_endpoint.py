"""EndpointReranker against a real HTTP server on 127.0.0.1 (momoka.llm.testing.ScriptedServer, route /v1/rerank).

The server scores each document by how many query words it contains (a rule the test computes itself) and lists
the results best first, as Cohere, Jina and vLLM do; the client must put them back in input order. Fault injection:
timeouts, HTTP 500 (once, and always), HTTP 400, malformed JSON, a dropped connection, and answers of the wrong shape.
"""

from __future__ import annotations

import numpy as np
import pytest
from momoka.errors import (
    ConfigError,
    EmptyInputError,
    LLMConnectionError,
    LLMHTTPError,
    LLMResponseError,
    LLMTimeoutError,
)
from momoka.llm.retry import RetryPolicy
from momoka.llm.testing import Drop, Garbage, ScriptedServer, Shape, Status
from momoka.models import EndpointReranker, get_reranker

FAST = RetryPolicy(max_retries=2, backoff_base=0.01, backoff_max=0.02)


def overlap(query, doc):
    return float(len(set(query.lower().split()) & set(doc.lower().split())))


def good(body, i):
    docs = body["documents"]
    scored = sorted(((overlap(body["query"], d), k) for k, d in enumerate(docs)), key=lambda t: (-t[0], t[1]))
    return Shape({"id": f"r{i}", "model": body.get("model"),
                  "results": [{"index": k, "relevance_score": s} for s, k in scored[: body["top_n"]]]})


@pytest.fixture
def server():
    srv = ScriptedServer()
    srv.start()
    srv.rerank = srv.routes  # tests set srv.rerank["/v1/rerank"]
    yield srv
    srv.stop()


DOCS = ["the river flows through warsaw", "bananas grow in warm places", "warsaw is in poland on the river vistula",
        "nothing here", "a river"]
Q = "which river flows through warsaw"


def test_scores_in_input_order_batched_with_auth(server):
    # Tried: 5 passages, batch_size 2 (three requests), results listed best first by the server.
    server.rerank["/v1/rerank"] = good
    rr = EndpointReranker(server.base_url, "bge-reranker-base", api_key="k3y", batch_size=2, retry=FAST)
    got = rr.score(Q, DOCS)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, [overlap(Q, d) for d in DOCS])
    bodies = [b for p, b in server.requests]
    assert [p for p, _ in server.requests] == ["/v1/rerank"] * 3 and rr.requests == 3
    assert [b["documents"] for b in bodies] == [DOCS[:2], DOCS[2:4], DOCS[4:]]
    assert all(b["query"] == Q and b["model"] == "bge-reranker-base" and b["return_documents"] is False for b in bodies)
    assert [b["top_n"] for b in bodies] == [2, 2, 1]
    assert server.headers[0].get("authorization") == "Bearer k3y"
    assert len(rr.score(Q, [])) == 0 and rr.requests == 3  # nothing to send
    # the 'score' key (some servers) is read like 'relevance_score'
    server.rerank["/v1/rerank"] = lambda b, i: Shape({"results": [{"index": 1, "score": 0.5}, {"index": 0, "score": 2}]})
    np.testing.assert_array_equal(rr.score(Q, DOCS[:2]), [2.0, 0.5])
    assert get_reranker("endpoint", base_url=server.base_url).url == server.base_url + "/rerank"


def test_transient_failures_are_retried(server):
    # Tried: HTTP 500, malformed JSON, a dropped connection and a too-slow answer, each once, then a good answer.
    faults = [Status(500), Garbage(b'{"results": [ {"index": '), Drop(), None]
    for fault in faults:
        def script(body, i, fault=fault):
            if i == 0:
                return fault if fault is not None else Shape({"results": []}, delay=1.0)
            return good(body, i)

        server.reset()
        server.rerank["/v1/rerank"] = script
        rr = EndpointReranker(server.base_url, timeout=0.3, retry=FAST)
        np.testing.assert_array_equal(rr.score(Q, DOCS), [overlap(Q, d) for d in DOCS])
        assert rr.requests == 2, fault


@pytest.mark.parametrize("fault, error, status", [
    (Status(500), LLMHTTPError, 500), (Status(503), LLMHTTPError, 503),
    (Garbage(b"<html>oops"), LLMResponseError, None), (Drop(), LLMConnectionError, None),
    (Shape({"results": []}, delay=1.0), LLMTimeoutError, None)])
def test_persistent_failures_raise_after_the_retries(server, fault, error, status):
    # Tried: the same fault on every request: 1 try + 2 retries, then the error of the last try.
    server.rerank["/v1/rerank"] = lambda b, i: fault
    rr = EndpointReranker(server.base_url, timeout=0.3, retry=FAST)
    with pytest.raises(error) as info:
        rr.score(Q, DOCS)
    assert rr.requests == 3
    if status is not None:
        assert info.value.status == status


@pytest.mark.parametrize("answer, match", [
    ({"data": []}, "no 'results'"), ({"results": [{"index": 0, "relevance_score": 1.0}]}, "unscored"),
    ({"results": [{"index": 0, "relevance_score": 1}, {"index": 0, "relevance_score": 2}]}, "twice"),
    ({"results": [{"index": 7, "relevance_score": 1}]}, "index 7"),
    ({"results": [{"index": 0, "relevance_score": "high"}, {"index": 1, "relevance_score": 1}]}, "score 'high'"),
    ({"results": ["0"]}, "str")])
def test_wrong_shapes_are_refused_without_retry(server, answer, match):
    # Tried: answers that parse but do not score every passage exactly once with a number.
    server.rerank["/v1/rerank"] = lambda b, i: Shape(answer)
    rr = EndpointReranker(server.base_url, retry=FAST)
    with pytest.raises(LLMResponseError, match=match):
        rr.score(Q, DOCS[:2])
    assert rr.requests == 1


def test_client_errors_and_bad_input(server):
    # Tried: HTTP 400 (not retried), a closed port, an empty query, options out of range.
    server.rerank["/v1/rerank"] = lambda b, i: Status(400, message="bad model")
    rr = EndpointReranker(server.base_url, retry=FAST)
    with pytest.raises(LLMHTTPError, match="400") as info:
        rr.score(Q, DOCS)
    assert info.value.status == 400 and rr.requests == 1
    with pytest.raises(EmptyInputError):
        rr.score("  ", DOCS)
    url = server.base_url
    server.stop()
    with pytest.raises(LLMConnectionError):
        EndpointReranker(url, retry=RetryPolicy(max_retries=0)).score(Q, DOCS)
    for bad in ({"base_url": "127.0.0.1:8000/v1"}, {"base_url": url, "timeout": 0}, {"base_url": url, "batch_size": 0}):
        with pytest.raises(ConfigError):
            EndpointReranker(**bad)


def test_base_url_from_the_environment(monkeypatch):
    monkeypatch.delenv("MOMOKA_RERANK_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match="MOMOKA_RERANK_BASE_URL"):
        EndpointReranker()
    monkeypatch.setenv("MOMOKA_RERANK_BASE_URL", "http://127.0.0.1:9/v1/")
    monkeypatch.setenv("MOMOKA_RERANK_MODEL", "m")
    rr = EndpointReranker()
    assert rr.url == "http://127.0.0.1:9/v1/rerank" and rr.model == "m"
