"""End to end on tiny documents: real default embedder, paths from the native MCTS engine, Trail retrieval."""

from __future__ import annotations

import pytest
from momoka import Index
from momoka.methods.momoka.trail import TrailRetriever


@pytest.fixture(scope="module")
def real_embedder():
    from momoka.models import Embedder, is_installed
    from momoka.models.catalog import DEFAULT_EMBEDDER

    if not is_installed(DEFAULT_EMBEDDER):
        pytest.skip("the default embedder is not installed (momoka models install)")
    return Embedder.default()


FILLER = [
    "Bread dough rises when yeast ferments the sugars in warm kitchens.",
    "Tides follow the pull of the moon on the oceans of the earth.",
    "A violin has four strings and is played with a bow in orchestras.",
    "Glaciers carve valleys slowly as the ice moves downhill over centuries.",
    "Chess players protect the king and promote pawns on the last rank.",
    "Volcanic islands form where magma rises through the ocean floor.",
    "Honey bees pollinate apple blossoms in the spring.",
    "Comets grow bright tails of gas when they pass near the sun.",
    "Origami folds a single square of paper into cranes and boats.",
    "Marathon runners train for months to cover forty-two kilometres.",
]
ANCHOR = "The Zorblax Corporation was founded by the engineer Mira Quell to build water pumps."
PARTNER = "The Zorblax Corporation moved its headquarters to the harbour city of Vantor in 1988."


def test_top_result_joins_planted_partner(real_embedder):
    from momoka.text import Document

    # anchor first, partner last, filler between. With the paper's alpha = 3, beta = 2 the structural
    # prior of eq. 4 favours the adjacent filler (3/2 + 2/2 = 2.5 against 1 + 3/6 + 2/6 = 1.83 for the
    # partner), so the structural prior is switched off here: the path can only come from the referee.
    # Enough filler that a rollout of 5 does not visit every chunk (it would give every child the same
    # return).
    paras = [ANCHOR] + FILLER + [PARTNER]
    doc = Document.from_text("\n\n".join(paras), title="Zorblax Corporation", doc_id="zorblax")
    other = Document.from_text("\n\n".join(FILLER[::-1]), title="Assorted facts", doc_id="other")
    ix = Index.build([doc, other], chunker="paragraph", embedder=real_embedder,
                     enrich=[("title", {"mode": "document"})],
                     relate=[("paths", {"referee": "embedding", "threshold": 0.5, "alpha": 0.0, "beta": 0.0})],
                     progress=False)
    ids = ix.store.documents["zorblax"].chunk_ids
    assert [len(ix.store.documents[d].chunk_ids) for d in ("zorblax", "other")] == [12, 10]
    assert ix.store.chunks.text(ids[11]) == PARTNER
    rel = ix.store.relation("paths")
    assert rel.get(ids[0]).tolist()[:1] == [ids[11]]  # the anchor's path starts at the planted partner
    tr = TrailRetriever(ix.corpus, first_stage="dense")  # dense first stage, cosine reranker with the same embedder
    res = tr.retrieve("Who founded the Zorblax Corporation and where is its headquarters?", k=3)
    top = res[0]
    assert set(top.chunk_ids) >= {ids[0], ids[11]}
    assert top.composite and top.spans[0][0] == "zorblax"
    assert [doc.text[s:e] for _, s, e in top.spans] == [ix.store.chunks.text(c) for c in top.chunk_ids]
    # the registered retriever (first stage mm over the titled view) joins them too
    res = ix.search("Who founded the Zorblax Corporation and where is its headquarters?", k=3, retriever="momoka")
    assert res[0].provenance["first_stage"] == "mm" and set(res[0].chunk_ids) >= {ids[0], ids[11]}
