"""The adapters' metadata carry a PDF passage's page in each framework's convention, and take ``where``.

LangChain's PDF loaders put ``metadata["page"]`` on every Document, counting from 0; LlamaIndex's PDF
readers put ``metadata["page_label"]``, the page number as a string counting from 1. The store holds a
PDF the test writes (the page of every word known) and documents of other types (no page keys).
"""

from __future__ import annotations

import pytest
from momoka import Index

pytest.importorskip("pypdf")
pytest.importorskip("docx")

from _oracles.pdf import expected_pages, write_corpus  # noqa: E402

Q = "the harbor lanterns and ropes"


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    root = tmp_path_factory.mktemp("adapter-pages")
    write_corpus(root / "src")
    Index.build([root / "src"], store=root / "s", embedder=None, chunker="recursive", size=40, progress=False).close()
    with Index.open(root / "s") as ix:
        yield ix


def test_langchain_page_is_zero_based(index):
    pytest.importorskip("langchain_core")
    from momoka.integrations.langchain import MomokaRetriever

    docs = MomokaRetriever(index, retriever="bm25", k=15).invoke(Q)
    assert {d.metadata["doc_id"] for d in docs} >= {"manual", "guide/intro"}
    spanning = 0
    for d in docs:
        if d.metadata["doc_id"] == "manual":
            first, last = expected_pages(d.page_content)
            assert (d.metadata["page"], d.metadata["page_end"]) == (first - 1, last - 1)
            spanning += last > first
        else:
            assert "page" not in d.metadata and "page_end" not in d.metadata
    assert spanning
    docs = MomokaRetriever(index, retriever="bm25", k=3, where={"type": "pdf", "page": [2, 3]}).invoke(Q)
    assert docs and all(d.metadata["doc_id"] == "manual" and d.metadata["page"] in (1, 2) for d in docs)


def test_llama_index_page_label_is_one_based(index):
    pytest.importorskip("llama_index.core")
    from momoka.errors import ConfigError
    from momoka.integrations.llama_index import MomokaRetriever

    nodes = MomokaRetriever(index, retriever="bm25", k=15).retrieve(Q)
    assert {n.node.metadata["doc_id"] for n in nodes} >= {"manual", "guide/intro"}
    for n in nodes:
        meta = n.node.metadata
        if meta["doc_id"] == "manual":
            first, last = expected_pages(n.node.text)
            assert (meta["page_label"], meta["page_end_label"]) == (str(first), str(last))
            assert "page_label" not in n.node.excluded_llm_metadata_keys  # shown to the LLM, as LlamaIndex does
        else:
            assert "page_label" not in meta
    nodes = MomokaRetriever(index, retriever="bm25", k=3, where={"page": 6}).retrieve(Q)
    assert nodes and all(n.node.metadata["page_label"] == "6" for n in nodes)
    with pytest.raises(ConfigError, match="valid keys"):
        MomokaRetriever(index, retriever="bm25", where={"pages": 6})
