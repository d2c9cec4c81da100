"""Embedding while indexing: single-text batching, the embedding cache, token-bounded batches, bad input.

References are independent of the code under test: raw onnxruntime runs of one text at a time
(pooled in numpy), the chunker run directly on the old and new versions of a document (to count
which chunks changed), and the shapes of the forward passes recorded from the session itself.
The documents are three small real SQuAD half-A documents.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from _oracles.embedders import reference_session
from momoka import Index
from momoka.errors import InputError
from momoka.registry import create
from momoka.models import Embedder
from momoka.text import Document


@pytest.fixture(scope="module")
def docs(shared_data):
    d = shared_data / "squad_v1_dev_half_a"
    rows = sorted((json.loads(line) for line in open(d / "documents.jsonl", encoding="utf-8")),
                  key=lambda r: len(r["text"]))[:3]
    return [{"doc_id": r["doc_id"], "text": r["text"]} for r in rows]


@pytest.fixture(scope="module")
def emb():
    return Embedder.default()


class _Passes:
    """Records the (batch, tokens) shape of every forward pass of an embedder's session."""

    def __init__(self, e: Embedder):
        self.shapes: list[tuple[int, int]] = []
        run = e._session.run

        def recording_run(names, feed, *a, **kw):
            self.shapes.append(tuple(feed["input_ids"].shape))
            return run(names, feed, *a, **kw)

        self.e, self.run = e, run
        e._session = _Proxy(e._session, recording_run)

    def close(self):
        self.e._session = self.e._session.inner


class _Proxy:
    def __init__(self, inner, run):
        self.inner, self.run = inner, run

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _ref_vector(session, tokenizer, text: str) -> np.ndarray:
    """One text alone through raw onnxruntime, mean-pooled and normalised in numpy."""
    ids = np.array([tokenizer.encode(text).ids[:256]], dtype=np.int64)
    feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    h = session.run(None, feed)[0][0]
    v = h.mean(axis=0)
    return v / np.linalg.norm(v)


def test_default_int8_runs_each_text_alone_and_matches_raw_onnxruntime(emb, docs):
    # Tried: the default int8 embedder on 40 real chunks in one call, then the same chunks shuffled
    # among other companions; each text's vector must be the one it gets alone (bit for bit), and
    # equal to a raw onnxruntime run of that text alone.
    assert emb.batching == "single" and emb.batch_independent
    chunker = create("chunker", "recursive", size=100)
    texts = [c.text for d in docs for c in chunker(Document.from_text(d["text"], doc_id=d["doc_id"]))][:40]
    a = emb.embed(texts)
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(texts))
    b = emb.embed([texts[i] for i in perm] + ["a companion", "another companion text"])[: len(texts)]
    np.testing.assert_array_equal(a[perm], b)
    sess = reference_session(emb.path)
    for t, v in zip(texts[:8], a[:8]):
        np.testing.assert_allclose(v, _ref_vector(sess, emb.tokenizer, t), atol=2e-5)


def test_bucketed_batching_close_to_single(emb, docs):
    # Tried: the same 40 chunks with length-bucketed batches (int8 dynamic quantisation shares one
    # activation scale per batch): not bit-equal, documented close (cosine mean >= 0.99).
    chunker = create("chunker", "recursive", size=100)
    texts = [c.text for d in docs for c in chunker(Document.from_text(d["text"], doc_id=d["doc_id"]))][:40]
    single = emb.embed(texts)
    bucketed = emb.embed(texts, batching="bucketed")
    cos = (single * bucketed).sum(axis=1)
    assert cos.mean() >= 0.99 and cos.min() >= 0.95, (cos.mean(), cos.min())


def test_bucketed_batches_bounded_by_token_budget(models_root_or_skip):
    # Tried: a huge document's worth of texts (300 chunks of mixed length) through bucketed batching
    # with a budget of 600 padded tokens and up to 64 inputs: every forward pass holds at most 600
    # padded tokens (an input longer than the budget runs alone), and no pass is padded beyond its
    # longest input.
    e = Embedder.default(batching="bucketed", batch_size=64, batch_tokens=600)
    words = "the harbour light was rebuilt after the storm of the previous winter".split()
    rng = np.random.default_rng(1)
    texts = [" ".join(rng.choice(words, size=int(n))) for n in rng.integers(1, 200, size=300)]
    rec = _Passes(e)
    try:
        out = e.embed(texts)
    finally:
        rec.close()
    lengths = [len(x.ids) for x in e.tokenize(texts)[0]]
    assert out.shape == (300, 384)
    assert sum(b for b, _ in rec.shapes) == 300
    for b, n in rec.shapes:
        assert b * n <= 600 or b == 1, (b, n)
    assert max(n for _, n in rec.shapes) == max(lengths)
    assert len(rec.shapes) >= sum(lengths) // 600  # the budget, not the input count, cut the batches


def test_reindex_changed_document_reembeds_only_changed_chunks(emb, docs, tmp_path):
    # Tried: a store of three documents; one document gets one paragraph rewritten and is re-added
    # with existing="replace". Counted: the texts embedded are exactly its chunks not among its old
    # chunks (computed by running the chunker on both versions), the others come from the cache;
    # the unchanged documents are skipped; the vectors equal a fresh build of the new version.
    ix = Index.build(docs, store=tmp_path / "s", embedder=emb, progress=False)
    target = docs[1]
    paras = target["text"].split("\n")
    k = max(range(len(paras)), key=lambda i: len(paras[i]))
    paras[k] = "This paragraph was rewritten entirely for the test, and it says something new. " * 3
    changed = dict(target, text="\n".join(paras))
    chunker = create("chunker", "recursive", size=100)
    old_texts = {c.text for c in chunker(Document.from_text(target["text"], doc_id=target["doc_id"]))}
    new_texts = [c.text for c in chunker(Document.from_text(changed["text"], doc_id=target["doc_id"]))]
    expect_new = len({t for t in new_texts if t not in old_texts})
    assert 0 < expect_new < len(new_texts)
    ix.add([docs[0], changed, docs[2]], existing="replace")
    assert ix.report.unchanged == [docs[0]["doc_id"], docs[2]["doc_id"]]
    assert ix.report.replaced == [target["doc_id"]]
    assert ix.report.embedded == expect_new
    assert ix.report.reused == sum(1 for t in new_texts if t in old_texts)
    got = {ix.store.chunks.get(int(c)).text: v for c, v in
           zip(ix.store.documents[target["doc_id"]].chunk_ids,
               ix.store.vector_view("raw").get(ix.store.documents[target["doc_id"]].chunk_ids))}
    fresh = Index.build([changed], embedder=emb, progress=False)
    ids = fresh.store.documents[target["doc_id"]].chunk_ids
    for c, v in zip(ids, fresh.store.vector_view("raw").get(ids)):
        np.testing.assert_array_equal(got[fresh.store.chunks.get(int(c)).text], v)
    ix.close()
    # reopened from disk (the embedder loaded by the store's model id), a second change reuses too
    ix = Index.open(tmp_path / "s")
    again = dict(changed, text=changed["text"] + "\nOne more closing sentence was appended here.")
    ix.add([again], existing="replace")
    assert ix.report.reused >= len(new_texts) - 2 and ix.report.embedded <= 2
    ix.close()


def test_duplicate_texts_embedded_once(emb):
    # Tried: one call with a text repeated three times among others: embedded once, same vector.
    ix = Index.build([{"doc_id": "a", "text": "Warsaw is the capital of Poland."}], embedder=emb, progress=False)
    texts = ["alpha beta", "gamma", "alpha beta", "delta", "alpha beta"]
    before = ix.report.embedded
    v = ix.corpus.embed(texts)
    assert ix.report.embedded - before == 3
    np.testing.assert_array_equal(v[0], v[2])
    np.testing.assert_array_equal(v[0], v[4])
    np.testing.assert_array_equal(v, emb.embed(texts))


def test_bad_batching_options(emb):
    # Tried: an unknown batching mode and non-positive token budgets, at construction and per call:
    # each is a clear InputError, and the embedder still works afterwards.
    with pytest.raises(InputError, match="batching"):
        Embedder.default(batching="padded")
    with pytest.raises(InputError, match="batch_tokens"):
        Embedder.default(batch_tokens=0)
    with pytest.raises(InputError, match="batch_tokens"):
        Embedder.default(batch_tokens=True)
    with pytest.raises(InputError, match="batching"):
        emb.embed(["x"], batching="fast")
    assert emb.embed(["still works"]).shape == (1, 384)


@pytest.fixture
def models_root_or_skip():
    from momoka.errors import ModelNotInstalledError
    from momoka.models import ensure_installed

    try:
        return ensure_installed(["minilm-l6-v2-int8"])
    except ModelNotInstalledError as exc:
        pytest.skip(f"default models unavailable: {exc}")
