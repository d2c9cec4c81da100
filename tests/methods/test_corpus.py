"""Components receive narrow views, never the Index: an enricher or relator a Batch, a retriever a Corpus."""

from __future__ import annotations

import numpy as np
import pytest

from momoka import Index, registry
from momoka.methods.corpus import Batch, Corpus

from ..store.conftest import HashEmbedder
from .conftest import builtin_components

DOCS = [{"doc_id": "a", "text": "Owls hunt at night.\n\nPenguins swim well."},
        {"doc_id": "b", "text": "The sun is a star.\n\nNeutron stars are dense."}]


class Probe:
    """An enricher object that records what it is given and writes a view through it."""

    name = "probe"

    def __init__(self):
        self.seen = []

    def enrich(self, batch, doc_ids):
        self.seen.append((batch, list(doc_ids)))
        st = batch.store
        if not st.has_vector_view("probe"):
            emb = batch.embedder
            st.add_vector_view("probe", embedder={"model_id": emb.model_id, "checksum": emb.checksum, "dim": emb.dim})
        ids = [c for d in doc_ids for c in st.documents[d].chunk_ids]
        texts = [f"{batch.title(st.chunks.doc_id(c)) or ''} {st.chunks.text(c)}" for c in ids]
        st.vector_view("probe").add(ids, batch.embed(texts, view="raw", label="probe"))
        assert batch.truncated == 0
        assert batch.document(doc_ids[0]).doc_id == doc_ids[0]

    def describe(self):
        return {}


def test_an_enricher_gets_a_batch_and_a_retriever_a_corpus():
    emb = HashEmbedder()
    probe = Probe()
    ix = Index.build(DOCS, embedder=emb, chunker="paragraph", enrich=[probe], progress=False)
    (batch, ids), = probe.seen
    assert isinstance(batch, Batch) and not isinstance(batch, Index) and ids == ["a", "b"]
    for name in ("save", "add", "delete", "search", "retriever", "extend"):  # nothing of the index's own
        assert not hasattr(batch, name), name
    v = ix.store.vector_view("probe")
    assert v.n_rows == ix.store.n_chunks
    # the vectors written through the batch are the embedder's own (an independent reference)
    c = int(ix.store.chunks.ids()[0])
    want = emb.embed([f"{ix.corpus.title('a') or ''} {ix.store.chunks.text(c)}"])[0]
    np.testing.assert_allclose(v.get([c])[0], want, rtol=1e-6)
    # every retriever momoka registers that this index has the artifacts of (listed from the registry)
    runs = [n for n in builtin_components("retriever") if registry.missing(n, ix.store) is None]
    assert {"dense", "bm25", "hybrid"} <= set(runs)
    for name in runs:
        r = ix.corpus.retriever(name)
        assert isinstance(r.index, Corpus), name
        for attr in ("save", "add", "delete", "extend"):
            assert not hasattr(r.index, attr), attr
    assert ix.search("penguins swim", k=1, retriever="hybrid")[0].doc_id == "a"


class FailsOn:
    """An enricher that writes a metadata key, and raises on the batch holding document ``bad``."""

    name = "fails-on"

    def __init__(self, bad):
        self.bad, self.stores = bad, []

    def enrich(self, batch, doc_ids):
        self.stores.append((batch.store, sorted(batch.store.documents)))
        for d in doc_ids:
            batch.store.documents[d].metadata["seen"] = True
        if self.bad in doc_ids:
            raise RuntimeError("enricher failed")

    def describe(self):
        return {}


def test_a_batch_is_written_apart_and_applied_whole(tmp_path):
    comp = FailsOn("b")
    ix = None
    try:
        with pytest.raises(RuntimeError, match="enricher failed"):
            Index.build(DOCS, store=tmp_path / "s", embedder=HashEmbedder(), chunker="paragraph", enrich=[comp],
                        commit_docs=1, progress=False)
        # each batch ran on a store of its own holding that batch's documents only, never the index's store
        assert [docs for _, docs in comp.stores] == [["a"], ["b"]]
        assert comp.stores[0][0] is not comp.stores[1][0]
        # the failed batch left nothing behind: the committed store holds document a alone, with its two
        # paragraphs (the paragraph chunker's cut of DOCS[0]) and the enricher's mark
        ix = Index.open(tmp_path / "s", embedder=HashEmbedder())
        assert ix.corpus.doc_ids == ["a"] and ix.store.n_chunks == 2
        assert ix.store.documents["a"].metadata["seen"] is True
        assert ix.store.vector_view("raw").n_rows == 2
    finally:
        if ix is not None:
            ix.close()


class _CountingTruncator(HashEmbedder):
    """A hash embedder that says how many texts of a call it truncated (over 3 words): its count in
    ``last_truncated``, its warning without a number."""

    def embed(self, texts):
        import warnings

        from momoka.models import TruncationWarning

        self.last_truncated = sum(len(t.split()) > 3 for t in texts)
        if self.last_truncated:
            warnings.warn("some inputs were truncated", TruncationWarning, stacklevel=2)
        return super().embed(texts)


def test_the_truncation_count_is_the_embedders_own_not_parsed_from_its_warning():
    """Regression: the count was read from the warning's text (``N of``); a warning without a number counted 1."""
    from momoka.methods.indexer import Embedding
    from momoka.store.store import Store

    emb = _CountingTruncator()
    st = Store.create(None)
    st.add_vector_view("raw", embedder={"model_id": emb.model_id, "checksum": emb.checksum, "dim": emb.dim})
    service = Embedding(st, emb)
    texts = ["one two", "one two three four", "a b c d e", "x y z w v u", "short"]  # 3 over 3 words, by hand
    with pytest.warns(UserWarning, match=r"^3 of 5 texts of view 'raw' are longer"):
        service.embed(texts, st.vector_view("raw").info["embedder"])
    assert service.last_truncated == 3
