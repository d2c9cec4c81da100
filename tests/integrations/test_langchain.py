"""momoka.integrations.langchain.MomokaRetriever against the real langchain_core.

Tried: the adapter inside an LCEL chain (retriever | format | prompt | FakeListLLM);
its documents against momoka's own ``Index.search`` (the reference: same items,
same order, same scores) for dense, bm25, hybrid and mm; every returned span
against the source text the store was built from; sync and async (the async
search runs off the event loop thread, which keeps ticking); a store path instead
of an index; bad names and k; and the import without langchain-core installed.
"""

from __future__ import annotations

import asyncio
import importlib
import sys

import pytest

pytest.importorskip("langchain_core")

from langchain_core.callbacks import BaseCallbackHandler  # noqa: E402
from langchain_core.language_models import FakeListLLM  # noqa: E402
from langchain_core.output_parsers import StrOutputParser  # noqa: E402
from langchain_core.prompts import PromptTemplate  # noqa: E402
from langchain_core.runnables import RunnablePassthrough  # noqa: E402
from momoka._extras import MissingExtraError  # noqa: E402
from momoka.errors import ConfigError  # noqa: E402
from momoka.integrations.langchain import MomokaRetriever  # noqa: E402

from ._helpers import expected as _expected, run_with_ticker  # noqa: E402
from .conftest import QUESTIONS, RETRIEVERS  # noqa: E402

pytestmark = pytest.mark.models


def _got(docs):
    return [(d.metadata["doc_id"], d.metadata["start"], d.metadata["end"], d.metadata["score"], d.page_content)
            for d in docs]


@pytest.mark.parametrize("name", RETRIEVERS)
def test_documents_equal_momoka_search_and_source_spans(index, sources, name):
    retriever = MomokaRetriever(index, retriever=name, k=4)
    for q in QUESTIONS:
        docs = retriever.invoke(q)
        assert _got(docs) == _expected(index, q, 4, name)
        assert 1 <= len(docs) <= 4  # BM25 returns only chunks that share a term
        for rank, d in enumerate(docs, start=1):
            m = d.metadata
            assert sources[m["doc_id"]][m["start"]:m["end"]] == d.page_content
            assert m["retriever"] == name and m["rank"] == rank
            assert m["spans"] == [[m["doc_id"], m["start"], m["end"]]]
            assert isinstance(m["section"], list)
    # Markdown sections come through: the tower question's best dense chunk is under "Construction".
    top = MomokaRetriever(index, retriever="dense", k=1).invoke(QUESTIONS[0])[0]
    assert top.metadata["doc_id"] == "harbor_light" and "1867" in top.page_content
    assert top.metadata["section"][-1] == "Construction"


def test_lcel_chain_with_fake_llm(index, sources):
    prompts: list[str] = []
    retrieved: list = []

    class Capture(BaseCallbackHandler):
        def on_llm_start(self, serialized, p, **kwargs):
            prompts.extend(p)

        def on_retriever_end(self, documents, **kwargs):
            retrieved.extend(documents)

    def fmt(docs):
        return "\n\n".join(f"[{d.metadata['doc_id']} {d.metadata['start']}:{d.metadata['end']}] {d.page_content}"
                           for d in docs)

    retriever = MomokaRetriever(index, retriever="hybrid", k=3)
    prompt = PromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}\nAnswer:")
    llm = FakeListLLM(responses=["The tower was finished in 1867."])
    chain = {"context": retriever | fmt, "question": RunnablePassthrough()} | prompt | llm | StrOutputParser()
    answer = chain.invoke(QUESTIONS[0], config={"callbacks": [Capture()]})
    assert answer == "The tower was finished in 1867."
    assert _got(retrieved) == _expected(index, QUESTIONS[0], 3, "hybrid")
    assert len(prompts) == 1
    for d in retrieved:  # every retrieved span reached the LLM's prompt, with its exact offsets
        m = d.metadata
        assert f"[{m['doc_id']} {m['start']}:{m['end']}] {sources[m['doc_id']][m['start']:m['end']]}" in prompts[0]
    assert prompts[0].endswith(f"Question: {QUESTIONS[0]}\nAnswer:")


def test_async_equals_sync_and_leaves_the_loop_free(index, slow_index):
    retriever = MomokaRetriever(index, retriever="bm25", k=3)
    got = asyncio.run(retriever.abatch(QUESTIONS))
    assert [_got(d) for d in got] == [_expected(index, q, 3, "bm25") for q in QUESTIONS]

    slow = MomokaRetriever(slow_index, retriever="bm25", k=3)
    docs, ticks, loop_thread = asyncio.run(run_with_ticker(slow.ainvoke(QUESTIONS[1])))
    assert _got(docs) == _expected(index, QUESTIONS[1], 3, "bm25")
    assert slow_index.threads and slow_index.threads[0] != loop_thread  # searched off the loop thread
    assert ticks >= 10  # 0.3 s blocking search; a 10 ms ticker kept running (0 ticks if the loop were blocked)


def test_store_path_and_errors(store_path, index):
    retriever = MomokaRetriever(str(store_path), retriever="dense", k=2)
    assert _got(retriever.invoke(QUESTIONS[2])) == _expected(index, QUESTIONS[2], 2, "dense")
    retriever.index.close()
    with pytest.raises(ConfigError, match="unknown"):
        MomokaRetriever(index, retriever="no-such-retriever")
    with pytest.raises(ConfigError, match="k must be"):
        MomokaRetriever(index, k=0)
    with pytest.raises(ConfigError, match="momoka.Index or a store path"):
        MomokaRetriever(42)


def test_missing_extra_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "langchain_core", None)  # what an absent package looks like to import
    monkeypatch.delitem(sys.modules, "momoka.integrations.langchain")
    with pytest.raises(MissingExtraError, match=r'pip install "momoka\[langchain\]"') as exc:
        importlib.import_module("momoka.integrations.langchain")
    assert isinstance(exc.value, ImportError) and "langchain-core" in str(exc.value)
