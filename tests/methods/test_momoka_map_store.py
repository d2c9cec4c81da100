"""Momoka-Map in an index store: titles and paths saved with the chunks, add() for new documents, the CLI."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from momoka.errors import ConfigError, InputError

index_mod = pytest.importorskip("momoka.index")
Index = getattr(index_mod, "Index", None)
if Index is None:  # the index area is not part of this build yet
    pytest.skip("momoka.index.Index is not available", allow_module_level=True)

from momoka.methods.momoka import EmbeddingReferee, MomokaMap
from momoka.text import Document, make_chunks


class HashEmbedder:
    """A deterministic bag-of-words embedder (content words hashed to 128 dimensions), index-compatible."""

    model_id = "test-hash-128"
    checksum = "0" * 64
    dim = 128
    STOP = {"the", "and", "of", "a", "to", "was", "were", "its", "in", "on", "by"}

    def embed(self, texts):
        out = np.zeros((len(texts), 128), np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().replace(".", " ").replace("\n", " ").split():
                if w not in self.STOP:
                    out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % 128] += 1.0
        n = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(n, 1e-12)


def sentence_chunker(doc):
    return make_chunks(doc, doc.sentences)


DOCS = [
    Document.from_text("Volcano lava flowed. Bakery bread rose. Volcano lava cooled. Bakery bread sold.",
                       doc_id="planted", title="Mixed Notes"),
    Document.from_text("One lonely sentence.", doc_id="single"),
    Document.from_text("First half here. Second half there.", doc_id="pair", title="Halves"),
]


def _mm(**kw):
    # rollout 1 and no structural prior: a child's mean reward is the referee's verdict on (root, child), so the
    # best path is hand-computable (with rollouts covering the whole short document every child would tie)
    return MomokaMap(referee=EmbeddingReferee(HashEmbedder(), threshold=0.5), title="document", alpha=0, beta=0,
                     rollout=1, **kw)


def test_paths_and_titles_are_stored_with_the_chunks(tmp_path):
    mm = _mm()
    ix = mm.build(DOCS, store=tmp_path / "s", chunker=sentence_chunker, embedder=HashEmbedder())
    ix.close()
    ix = Index.open(tmp_path / "s", embedder=HashEmbedder(), chunker=sentence_chunker, enrich=_mm())
    st = ix.store
    # titles: the document's own title, else its first sentence (title="document")
    meta = {d: st.documents[d].metadata for d in ("planted", "single", "pair")}
    assert meta["planted"]["momoka_title"] == "Mixed Notes"
    assert meta["single"]["momoka_title"] == "One lonely sentence."
    assert meta["single"]["momoka_title_source"] == "sentence"
    assert meta["pair"]["momoka_map"]["n_chunks"] == 2

    def paths(doc_id):
        return [st.chunks[c]["metadata"]["momoka_path"] for c in st.documents[doc_id].chunk_ids]

    # hand-computed: one chunk -> no path; two chunks -> each other; planted: volcano 0 <-> 2, bakery 1 <-> 3
    assert paths("single") == [[]]
    assert paths("pair") == [[1], [0]]
    assert paths("planted") == [[2], [3], [0], [1]]
    # chunk text is unchanged (offsets exact); the embedded text is title + "\n" + chunk
    for did in ("planted", "pair"):
        doc = next(d for d in DOCS if d.doc_id == did)
        for cid in st.documents[did].chunk_ids:
            r = st.chunks[cid]
            assert doc.text[r["start"] : r["end"]] == r["text"]
            want = HashEmbedder().embed([meta[did]["momoka_title"] + "\n" + r["text"]])[0]
            assert np.allclose(st.vectors([cid])[0], want, atol=1e-3)
    # settings recorded in the manifest
    rec = json.loads((tmp_path / "s" / "manifest.json").read_text())["extra"]["enrich"]
    assert rec["method"] == "momoka-map" and rec["iterations"] == 100 and rec["rollout"] == 1
    assert rec["c"] == pytest.approx(2 ** 0.5) and rec["r_max"] == pytest.approx(1.0)  # alpha = beta = 0 here
    assert rec["referee"]["name"] == "embedding" and rec["referee"]["threshold"] == 0.5
    assert rec["stats"]["documents"] == 3 and rec["stats"]["single_chunk_documents"] == 1

    # add(): paths for the new document only; old entries unchanged
    before = {c: dict(st.chunks[c]["metadata"]) for c in st.chunks}
    mm2 = _mm()
    new = Document.from_text("Glacier ice melted. Orbit moon photo. Glacier ice cracked.", doc_id="new")
    mm2.add(ix, [new])
    assert mm2.stats.documents == 1 and mm2.stats.chunks == 3
    ix.close()
    ix = Index.open(tmp_path / "s", embedder=HashEmbedder(), chunker=sentence_chunker)
    st = ix.store
    assert all(st.chunks[c]["metadata"] == m for c, m in before.items())
    assert [st.chunks[c]["metadata"]["momoka_path"] for c in st.documents["new"].chunk_ids][::2] == [[2], [0]]
    # bad input: adding to a Momoka store without the enricher would leave documents without paths
    with pytest.raises(ConfigError):
        ix.add([Document.from_text("More text here. And more.", doc_id="more")])
    ix.close()


def test_build_refuses_an_index_as_sources(tmp_path):
    mm = _mm()
    ix = mm.build(DOCS[:1], chunker=sentence_chunker, embedder=HashEmbedder())
    with pytest.raises(InputError):
        mm.build(ix)  # an index is not a list of documents: use add()


def _write_docs(tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    (d / "a.md").write_text("# Volcanoes\n\nThe volcano erupted. Lava covered the village.\n\n"
                            "The bakery opened. Bread was sold.\n\nLava cooled into rock near the volcano.\n")
    (d / "b.txt").write_text("Only one sentence lives here.\n")
    return d


def test_cli_estimate_prints_expected_calls(tmp_path, capsys):
    from momoka.cli import main

    d = _write_docs(tmp_path)
    rc = main(["index", str(d), "--store", str(tmp_path / "s"), "--method", "momoka", "--referee", "llm",
               "--llm-url", "http://127.0.0.1:9/v1", "--llm-model", "m", "--estimate", "--chunker", "recursive", "--size", "8"])
    assert rc == 0
    est = json.loads(capsys.readouterr().out)
    assert est["documents"] == 2 and est["referee"] == "llm" and est["title_calls"] == 2
    n = est["chunks"] - 1  # b.txt is one chunk: no referee calls for it
    assert est["referee_calls_max"] == n * (n - 1)  # pair memo: every ordered pair at most once
    assert not (tmp_path / "s").exists()  # an estimate builds nothing


def test_cli_bad_input(tmp_path, capsys):
    from momoka.cli import main

    d = _write_docs(tmp_path)
    # --referee llm without an endpoint: one-line error, exit 2
    rc = main(["index", str(d), "--store", str(tmp_path / "s"), "--method", "momoka", "--referee", "llm"])
    assert rc == 2 and "needs an endpoint" in capsys.readouterr().err


@pytest.mark.models
def test_cli_builds_a_momoka_store(tmp_path, capsys):
    from momoka.cli import main

    try:
        from momoka.models import Embedder

        Embedder.default()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"default embedder not installed: {exc}")
    d = _write_docs(tmp_path)
    rc = main(["index", str(d), "--store", str(tmp_path / "s"), "--method", "momoka", "--referee", "embedding",
               "--chunker", "recursive", "--size", "8"])
    out = capsys.readouterr().out
    assert rc == 0 and "Momoka-Map paths" in out
    ix = Index.open(tmp_path / "s")
    docs = ix.store.documents
    assert docs["a"].metadata["momoka_title"] == "Volcanoes"  # the Markdown heading (title=auto, no endpoint)
    assert all("momoka_path" in ix.store.chunks[c]["metadata"] for c in ix.store.chunks)
    assert [ix.store.chunks[c]["metadata"]["momoka_path"] for c in docs["b"].chunk_ids] == [[]]
    ix.close()


def test_titles_only_store_has_no_paths(tmp_path):
    # paths=False (the "MM" ablation row): titles stored, no momoka_path key, the manifest says so, and no
    # referee is ever built (a referee that raises on use proves it)
    class Exploding:
        name = "exploding"

        def __call__(self, pairs):
            raise AssertionError("the referee must not be called")

    mm = MomokaMap(referee=Exploding(), title="document", paths=False)
    ix = mm.build(DOCS, store=tmp_path / "s", chunker=sentence_chunker, embedder=HashEmbedder())
    st = ix.store
    assert st.documents["pair"].metadata["momoka_title"] == "Halves"
    assert all("momoka_path" not in st.chunks[c].get("metadata", {}) for c in st.chunks)
    rec = json.loads((tmp_path / "s" / "manifest.json").read_text())["extra"]["enrich"]
    assert rec["paths"] is False
    ix.close()
