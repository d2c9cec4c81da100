"""momoka.integrations.llama_index.MomokaRetriever against the real llama_index.core.

Tried: the adapter inside a ``RetrieverQueryEngine`` with LlamaIndex's ``MockLLM``
(which answers with the prompt it was given, so the retrieved text must be in
it); its nodes against momoka's own ``Index.search`` (the reference: same items,
same order, same scores) for dense, bm25, hybrid and mm; every node's
``start_char_idx:end_char_idx`` against the source text; sync and async (the
async search runs off the event loop thread, which keeps ticking); a store path;
bad names; and the import without llama-index-core installed.
"""

from __future__ import annotations

import asyncio
import importlib
import sys

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.query_engine import RetrieverQueryEngine  # noqa: E402
from llama_index.core.schema import NodeRelationship, QueryBundle  # noqa: E402
from momoka._extras import MissingExtraError  # noqa: E402
from momoka.errors import ConfigError  # noqa: E402
from momoka.integrations.llama_index import MomokaRetriever  # noqa: E402

from ._helpers import expected as _expected, run_with_ticker  # noqa: E402
from .conftest import QUESTIONS, RETRIEVERS  # noqa: E402

pytestmark = pytest.mark.models


def _got(nodes):
    return [(n.node.metadata["doc_id"], n.node.start_char_idx, n.node.end_char_idx, n.score, n.node.get_content())
            for n in nodes]


@pytest.mark.parametrize("name", RETRIEVERS)
def test_nodes_equal_momoka_search_and_source_spans(index, sources, name):
    retriever = MomokaRetriever(index, retriever=name, k=4)
    for q in QUESTIONS:
        nodes = retriever.retrieve(q)
        assert _got(nodes) == _expected(index, q, 4, name)
        assert 1 <= len(nodes) <= 4  # BM25 returns only chunks that share a term
        for rank, n in enumerate(nodes, start=1):
            node, m = n.node, n.node.metadata
            assert sources[m["doc_id"]][node.start_char_idx:node.end_char_idx] == node.get_content()
            assert (m["start"], m["end"], m["rank"], m["retriever"]) == (node.start_char_idx, node.end_char_idx,
                                                                          rank, name)
            assert node.relationships[NodeRelationship.SOURCE].node_id == m["doc_id"]


def test_query_engine_with_mock_llm(index, sources):
    engine = RetrieverQueryEngine.from_args(MomokaRetriever(index, retriever="hybrid", k=3), llm=MockLLM())
    response = engine.query(QUESTIONS[0])
    assert _got(response.source_nodes) == _expected(index, QUESTIONS[0], 3, "hybrid")
    answer = str(response)  # MockLLM returns the prompt: the retrieved spans, the question
    for n in response.source_nodes:
        node = n.node
        assert sources[node.metadata["doc_id"]][node.start_char_idx:node.end_char_idx] in answer
        assert f"doc_id: {node.metadata['doc_id']}" in answer
    assert "chunk_id:" not in answer and "spans:" not in answer  # bookkeeping metadata is hidden from the LLM
    assert QUESTIONS[0] in answer


def test_async_equals_sync_and_leaves_the_loop_free(index, slow_index):
    retriever = MomokaRetriever(index, retriever="dense", k=3)

    async def many():
        return await asyncio.gather(*(retriever.aretrieve(q) for q in QUESTIONS))

    got = asyncio.run(many())
    assert [_got(n) for n in got] == [_expected(index, q, 3, "dense") for q in QUESTIONS]

    slow = MomokaRetriever(slow_index, retriever="dense", k=3)
    nodes, ticks, loop_thread = asyncio.run(run_with_ticker(slow.aretrieve(QueryBundle(QUESTIONS[3]))))
    assert _got(nodes) == _expected(index, QUESTIONS[3], 3, "dense")
    assert slow_index.threads and slow_index.threads[0] != loop_thread  # searched off the loop thread
    assert ticks >= 10  # 0.3 s blocking search; a 10 ms ticker kept running (0 ticks if the loop were blocked)

    engine = RetrieverQueryEngine.from_args(MomokaRetriever(index, retriever="bm25", k=2), llm=MockLLM())
    response = asyncio.run(engine.aquery(QUESTIONS[2]))
    assert _got(response.source_nodes) == _expected(index, QUESTIONS[2], 2, "bm25")


def test_store_path_and_errors(store_path, index):
    retriever = MomokaRetriever(store_path, retriever="mm", k=2)
    assert _got(retriever.retrieve(QUESTIONS[4])) == _expected(index, QUESTIONS[4], 2, "mm")
    retriever.index.close()
    with pytest.raises(ConfigError, match="unknown"):
        MomokaRetriever(index, retriever="no-such-retriever")
    with pytest.raises(ConfigError, match="k must be"):
        MomokaRetriever(index, k=-1)


def test_missing_extra_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_index.core", None)  # what an absent package looks like to import
    monkeypatch.delitem(sys.modules, "momoka.integrations.llama_index")
    with pytest.raises(MissingExtraError, match=r'pip install "momoka\[llama-index\]"') as exc:
        importlib.import_module("momoka.integrations.llama_index")
    assert isinstance(exc.value, ImportError) and "llama-index-core" in str(exc.value)
