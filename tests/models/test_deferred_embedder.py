"""DeferredEmbedder: a registry embedder recorded without loading its model (what a Ray driver uses).

Checked against the loaded :class:`momoka.models.Embedder` of the same model: the same embedder info (model
id, checksum, dim, as an index records them), the same token ids (truncation at the same length) and the same
vectors once it loads; the model is loaded only by a call that needs it."""

from __future__ import annotations

import numpy as np
import pytest

from momoka.methods.sources import embed_limit, embedder_info, load_embedder
from momoka.models.embedder import DeferredEmbedder


@pytest.fixture(scope="module")
def loaded():
    try:
        return load_embedder(None)
    except Exception as exc:  # noqa: BLE001 - no installed default model here
        pytest.skip(f"the default embedder is not installed: {exc}")


def test_deferred_records_what_the_loaded_one_does_without_loading(loaded):
    """Tried: the info an index records, the chunker's token limit and a long text's token ids (truncated at
    max_length) from a DeferredEmbedder, then one embed: equal to the loaded embedder's, and the model is
    loaded by the embed only."""
    d = load_embedder(None, deferred=True)
    assert isinstance(d, DeferredEmbedder)
    assert embedder_info(d) == embedder_info(loaded)
    assert embed_limit(d)[1] == embed_limit(loaded)[1] == loaded.max_length
    text = "momoka reads long documents " * 200
    assert d.tokenizer.encode(text).ids == loaded.tokenizer.encode(text).ids
    assert len(d.tokenizer.encode(text).ids) == loaded.max_length
    assert d._real is None  # nothing above loaded the model
    texts = ["a first sentence", "and another one, longer than the first"]
    np.testing.assert_array_equal(d.embed(texts), loaded.embed(texts))
    assert d._real is not None and d.checksum == d._real.checksum


def test_deferred_refuses_a_model_that_is_not_an_embedder():
    from momoka.errors import ModelError

    with pytest.raises(ModelError, match="not an embedder"):
        DeferredEmbedder("smollm2-135m-instruct")
