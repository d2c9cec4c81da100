"""The chunker contract (:class:`momoka.chunking.Chunker`) for every chunker of the registry.

The list comes from the registry, so a chunker registered later is checked without editing this file. The
chunkers that run a model or an LLM are built and checked for the members of the contract; their chunks are
tested on tiny inputs with the local model in tests/methods.
"""

from __future__ import annotations

import json

import pytest

from momoka import registry
from momoka.chunking import Chunker, ClassicChunker, available_chunkers
from momoka.methods import base as methods_base
from momoka.text import Document

from .conftest import check_tiling

#: Chunkers that run a causal LM or ask an LLM for every document.
LM_CHUNKERS = {"llm", "ppl", "msp", "meta", "moc"}

MARKDOWN = ("# Harbor history\n\nThe harbor opened in 1850. Ships carried grain and timber.\n\n"
            "## Trade\n\nTrade grew quickly after the railway arrived. Merchants built warehouses by the quay.\n\n"
            "## References\n\nSmith, J. (1990). A harbor town.\n")
PLAIN = ("Battle of Calabria\nThe Battle of Calabria was a naval battle of the Second World War.\n\n"
         "It was fought near Punta Stilo. Both sides claimed victory.")


@pytest.fixture(autouse=True)
def no_endpoint(monkeypatch):
    for var in ("MOMOKA_LLM_BASE_URL", "MOMOKA_LLM_MODEL"):
        monkeypatch.delenv(var, raising=False)


def test_the_contract_is_one_object():
    assert methods_base.Chunker is Chunker
    assert LM_CHUNKERS <= set(registry.available("chunker"))  # no stale name here
    assert set(available_chunkers()) <= set(registry.available("chunker"))


@pytest.mark.parametrize("name", registry.available("chunker"))
def test_every_registered_chunker_has_the_members_of_the_contract(name):
    chunker = registry.create("chunker", name)
    assert isinstance(chunker, Chunker), name
    assert isinstance(chunker.name, str) and chunker.name
    params = chunker.params()
    assert isinstance(params, dict) and all(isinstance(k, str) for k in params)
    json.dumps(params)  # a dict JSON can hold, as the manifest records it
    for optional in ("batch", "estimate"):
        assert not hasattr(chunker, optional) or callable(getattr(chunker, optional))


@pytest.mark.parametrize("name", [n for n in registry.available("chunker") if n not in LM_CHUNKERS])
@pytest.mark.parametrize("text,markdown", [(MARKDOWN, True), (PLAIN, False)], ids=["markdown", "plain"])
def test_every_registered_chunker_returns_exact_chunks_in_order(name, text, markdown):
    chunker = registry.create("chunker", name, size=12)
    doc = Document.from_markdown(text, doc_id="d") if markdown else Document.from_text(text, doc_id="d")
    chunks = chunker(doc)
    assert chunks, name
    for k, c in enumerate(chunks):
        assert c.index == k and c.doc_id == "d"
        assert doc.text[c.start:c.end] == c.text and c.text.strip()
    assert [c.start for c in chunks] == sorted(c.start for c in chunks)
    if isinstance(chunker, ClassicChunker):  # the classic chunkers tile the text exactly once
        check_tiling(doc.text, chunks)
        # and read a str as a plain-text document
        assert [(c.start, c.end) for c in chunker(doc.text)] == [(c.start, c.end) for c in chunker(
            Document.from_text(doc.text))]
