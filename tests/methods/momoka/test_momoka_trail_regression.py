"""Regression: the Trail retriever left the default embedder untruncated, so the next long text crashed onnxruntime.

``momoka eval --method base,mm,momoka`` (now ``--retriever``) on dragonball_finance_en crashed with
"Attempting to broadcast an axis by a dimension other than 1. 512 by 580": the
truncation check called ``no_truncation()`` on the embedder's own tokenizer.
Here the real default embedder reranks composites far over its 256-token limit,
and afterwards embeds a text over 512 tokens: it must still work, and give the
same vector as before the Trail call.
"""

from __future__ import annotations

import numpy as np
import pytest
from momoka import Index

pytestmark = pytest.mark.models


@pytest.fixture(scope="module")
def embedder():
    from momoka.models import Embedder, is_installed
    from momoka.models.catalog import DEFAULT_EMBEDDER

    if not is_installed(DEFAULT_EMBEDDER):
        pytest.skip("the default embedder is not installed (momoka models install)")
    return Embedder.default()


def test_trail_leaves_the_embedder_truncating(embedder):
    words = ("revenue grew in the third quarter while the board approved a new dividend policy and "
             "the company expanded into two markets ").split()
    paras = [" ".join(words[(i + j) % len(words)] for j in range(230)) + "." for i in range(6)]
    doc = {"doc_id": "long", "title": "Annual report", "text": "\n\n".join(paras)}
    long_text = " ".join(paras)  # ~1,400 words: far over 512 tokens
    before = np.asarray(embedder.embed([long_text]))
    ix = Index.build([doc], chunker="paragraph", embedder=embedder, enrich=["title"],
                     relate=[("paths", {"referee": "embedding", "iterations": 20})], progress=False)
    res = ix.search("what did the board approve?", k=3, retriever="trail")
    assert res.stats["truncated"] >= 1  # composites of ~460 words are over the 256-token limit, and counted
    after = np.asarray(embedder.embed([long_text]))
    np.testing.assert_allclose(after, before, atol=1e-6)


def test_truncation_count_equals_full_tokenisation(embedder):
    # The Trail's over-limit check skips tokenising texts that word and byte counts already decide;
    # its verdicts must equal counting every text's tokens (the reference here), for English and
    # multi-byte text just under, at and over the 256-token limit, asked twice (the second time cached).
    from tokenizers import Tokenizer

    from momoka.methods.momoka.trail import _limit_checker
    from momoka.models import CosineReranker

    check = _limit_checker(CosineReranker(embedder))
    ref = Tokenizer.from_str(embedder.tokenizer.to_str())
    ref.no_truncation()
    ref.no_padding()
    words = "the board approved a dividend while naïve café owners in zürich exported 東京 tea".split()
    texts = [" ".join(words[j % len(words)] for j in range(n)) for n in range(150, 300, 7)]
    texts += ["short text", "x" * 3000, "東京" * 200]
    want = [len(e.ids) > embedder.max_length for e in ref.encode_batch(texts, add_special_tokens=True)]
    assert any(want) and not all(want)
    assert check("q", texts) == want
    assert check("q", texts) == want
