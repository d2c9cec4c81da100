"""Store and Index: build, search, add/delete, persistence and bad input."""

from __future__ import annotations

import json

import momoka
import numpy as np
import pytest

from momoka.chunking.headers import with_header
from momoka.errors import (
    ConfigError,
    EmptyInputError,
    InputError,
    InputTooLargeError,
    StoreError,
    StoreLockedError,
    StoreMismatchError,
    StoreVersionError,
)
from momoka import Index
from momoka.store.store import FORMAT_VERSION

from .conftest import HashEmbedder


def _build(tmp_path, docs, embedder, name="s", **kw):
    return Index.build(docs, store=tmp_path / name, embedder=embedder, chunker="paragraph", progress=False, **kw)


def test_build_search_and_offsets(tmp_path, docs, embedder):
    ix = _build(tmp_path, docs, embedder)
    texts = {d["doc_id"]: d["text"] for d in docs}
    for method in ("dense", "bm25", "hybrid"):
        hits = ix.search("violin strings bow", k=3, retriever=method)
        assert hits and hits[0].doc_id == "violins", method
        assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
        for h in hits:
            assert texts[h.doc_id][h.start : h.end] == h.text  # exact offsets
    assert momoka.Index is Index
    ix.close()


def test_dense_scores_are_exact_cosines(tmp_path, docs, embedder):
    ix = _build(tmp_path, docs, embedder)
    q = "magma lava ash"
    hits = ix.search(q, k=5, retriever="dense")
    qv = embedder.embed([q])[0]
    # reference: brute-force cosine over every chunk's indexed text (its header, kept in its metadata, and
    # its text), embedded independently
    ids = ix.store.chunks.ids().tolist()
    mat = embedder.embed([with_header(ix.store.chunks.metadata(c).get("header"), ix.store.chunks.text(c)) for c in ids])
    sims = mat @ qv
    want = sorted(zip(ids, sims), key=lambda t: -t[1])[:5]
    np.testing.assert_allclose([h.score for h in hits], [s for _, s in want], rtol=1e-5, atol=1e-6)
    ix.close()


def test_bm25_scores_match_a_fresh_bm25_over_the_chunks(tmp_path, docs, embedder):
    ix = _build(tmp_path, docs, embedder)
    ref = momoka.store.BM25(stem=True, stopwords="english")
    ids = ix.store.chunks.ids().tolist()
    ref.add(ix.store.chunks.texts(ids))
    hits = ix.search("rocket thrust", k=4, retriever="bm25")
    sc = ref.get_scores("rocket thrust")
    want = sorted((j for j in range(len(ids)) if sc[j] > 0), key=lambda j: (-sc[j], j))[:4]  # only matches come back
    assert [h.chunk_id for h in hits] == [ids[j] for j in want]
    ix.close()


def test_hybrid_fusion_rules_match_a_hand_computation(tmp_path, docs, embedder):
    ix = _build(tmp_path, docs, embedder)
    q = "orchestra violin apple harvest"
    dense = ix.search(q, k=15, retriever="dense")
    bm = ix.search(q, k=15, retriever="bm25")
    fused = {}
    for ranking in (dense, bm):
        for h in ranking:
            fused[h.chunk_id] = fused.get(h.chunk_id, 0.0) + 1.0 / (60 + h.rank)
    hy = ix.search(q, k=5, retriever="hybrid", depth=15, fusion="rrf", dense_weight=0.5, coverage=0, document_weight=0)
    assert [h.score for h in hy] == pytest.approx(sorted(fused.values(), reverse=True)[:5])
    # Convex fusion (the default): w * min-max(cosine) + (1 - w) * min-max(BM25), 0 where a list lacks the chunk.
    for w in (0.6, 0.8):
        conv: dict = {}
        for share, ranking in ((w, dense), (1 - w, bm)):
            lo, hi = min(h.score for h in ranking), max(h.score for h in ranking)
            for h in ranking:
                conv[h.chunk_id] = conv.get(h.chunk_id, 0.0) + share * (h.score - lo) / (hi - lo)
        hy = ix.search(q, k=5, retriever="hybrid", depth=15, dense_weight=w, coverage=0, document_weight=0)
        assert [h.score for h in hy] == pytest.approx(sorted(conv.values(), reverse=True)[:5])
        assert hy[0].provenance["fusion"] == "convex"
        # the document prior: over the fused top 15, each score plus 0.3 x its document's best
        doc = {h.chunk_id: h.doc_id for h in (*dense, *bm)}
        top = sorted(conv, key=lambda c: -conv[c])[:15]
        best: dict = {}
        for c in top:
            best[doc[c]] = max(best.get(doc[c], 0.0), conv[c])
        prior = sorted((conv[c] + 0.3 * best[doc[c]] for c in top), reverse=True)
        hy = ix.search(q, k=5, retriever="hybrid", depth=15, dense_weight=w, coverage=0, document_weight=0.3)
        assert [h.score for h in hy] == pytest.approx(prior[:5])
    with pytest.raises(ConfigError):
        ix.search(q, retriever="hybrid", fusion="max")
    with pytest.raises(ConfigError):
        ix.search(q, retriever="hybrid", dense_weight=1.5)
    with pytest.raises(ConfigError, match="coverage"):
        ix.search(q, retriever="hybrid", coverage=-1)
    ix.close()


def test_doc_filter(tmp_path, docs, embedder):
    ix = _build(tmp_path, docs, embedder)
    for method in ("dense", "bm25", "hybrid"):
        hits = ix.search("violin strings board lava", k=10, retriever=method, doc_ids=["chess", "volcano"])
        assert hits and {h.doc_id for h in hits} <= {"chess", "volcano"}, method
    # tried: a filter naming a document that is not in the index
    with pytest.raises(InputError):
        ix.search("violin", doc_ids=["nope"])
    ix.close()


def test_reopen_gives_same_results_and_manifest(tmp_path, docs, embedder):
    ix = _build(tmp_path, docs, embedder)
    before = [(h.chunk_id, round(h.score, 6)) for h in ix.search("king pawns board", k=5)]
    ix.close()
    again = Index.open(tmp_path / "s", embedder=embedder)
    assert [(h.chunk_id, round(h.score, 6)) for h in again.search("king pawns board", k=5)] == before
    m = json.loads((tmp_path / "s" / "manifest.json").read_text())
    raw = next(a for a in m["artifacts"] if a["kind"] == "vectors" and a["name"] == "raw")
    assert m["version"] == FORMAT_VERSION and raw["embedder"]["model_id"] == embedder.model_id
    assert raw["embedder"]["checksum"] == embedder.checksum
    assert m["chunker"]["name"] == "paragraph"
    assert m["counts"]["documents"] == len(docs)


def test_incremental_add_delete_equal_a_fresh_build(tmp_path, docs, embedder):
    ix = _build(tmp_path, docs[:3], embedder)
    ix.add(docs[3:])
    ix.delete(["rockets"])
    ix.save()
    ix.close()
    inc = Index.open(tmp_path / "s", embedder=embedder)
    fresh = _build(tmp_path, [d for d in docs if d["doc_id"] != "rockets"], embedder, name="fresh")
    assert sorted(inc.corpus.doc_ids) == sorted(fresh.corpus.doc_ids)
    for q in ("rocket engine thrust", "volcanic islands", "violin bow", "chess king"):
        for method in ("dense", "bm25", "hybrid"):
            a = [(h.doc_id, h.start, h.end, round(h.score, 5)) for h in inc.search(q, k=6, retriever=method)]
            b = [(h.doc_id, h.start, h.end, round(h.score, 5)) for h in fresh.search(q, k=6, retriever=method)]
            assert a == b, (q, method)
    assert inc.store.vector_view("raw").ids().tolist() == inc.store.chunks.ids().tolist()
    inc.close()
    # merged into one segment: one graph holding only the live chunks, the same answers
    merged = Index.open(tmp_path / "s", embedder=embedder, writable=True)
    assert merged.writer.optimize() and len(merged.store.segments) == 1
    assert merged.store.vector_view("raw").graph().get_current_count() == merged.store.n_chunks
    for q in ("rocket engine thrust", "volcanic islands"):
        for method in ("dense", "bm25", "hybrid"):
            a = [(h.doc_id, h.start, h.end, round(h.score, 5)) for h in merged.search(q, k=6, retriever=method)]
            b = [(h.doc_id, h.start, h.end, round(h.score, 5)) for h in fresh.search(q, k=6, retriever=method)]
            assert a == b, (q, method)
    merged.close()
    fresh.close()


def test_float16_vectors(tmp_path, docs, embedder):
    ix = _build(tmp_path, docs, embedder, vector_dtype="float16")
    ix.close()
    again = Index.open(tmp_path / "s", embedder=embedder)
    assert np.load(next((tmp_path / "s").glob("seg-*/vectors/raw.npy"))).dtype == np.float16
    # The hashed test embedder ties "lava magma" between two documents (colliding words), so the query
    # is one whose best chunks are clearly the volcano's (cosine 0.84 / 0.79 against 0.38 for the next).
    hits = again.search("volcano erupts lava and ash, magma rises from the mantle", k=3, retriever="dense")
    assert [h.doc_id for h in hits] == ["volcano"] * 3


def test_bm25_only_store(tmp_path, docs):
    ix = _build(tmp_path, docs, None)
    assert ix.search("violin", k=1)[0].doc_id == "violins"  # hybrid falls back to bm25
    with pytest.raises(StoreError):
        ix.search("violin", retriever="dense")
    ix.close()
    assert Index.open(tmp_path / "s").search("chess", k=1, retriever="bm25")[0].doc_id == "chess"


def test_in_memory_then_save(tmp_path, docs, embedder):
    ix = Index.build(docs, embedder=embedder, chunker="paragraph", progress=False)
    assert ix.store.path is None
    ix.save(tmp_path / "later")
    ix.close()
    assert len(Index.open(tmp_path / "later", embedder=embedder)) == len(docs)


def test_files_and_directories(tmp_path, embedder):
    d = tmp_path / "docs"
    (d / "sub").mkdir(parents=True)
    (d / "a.md").write_text("# Title A\n\nAlpha text about comets.\n\n## More\n\nComets have tails.\n")
    (d / "sub" / "b.txt").write_text("Beta text about glaciers and ice.\n")
    (d / "skip.bin").write_bytes(b"\x00\x01")
    ix = Index.build([d], store=tmp_path / "s", embedder=embedder, progress=False)
    assert sorted(ix.corpus.doc_ids) == ["a", "sub/b"]  # ids: paths relative to the directory, no extension
    assert [s for s, _ in ix.report.skipped] == [str(d / "skip.bin")]  # listed, not silent
    hit = ix.search("comets tails", k=1, retriever="bm25")[0]
    assert hit.doc_id == "a" and hit.to_dict()["members"][0]["text"] == hit.text
    ix.close()


# --- bad input ------------------------------------------------------------------


def test_newer_version_refused(tmp_path, docs, embedder):
    _build(tmp_path, docs, embedder).close()
    mf = tmp_path / "s" / "manifest.json"
    m = json.loads(mf.read_text())
    m["version"] = FORMAT_VERSION + 1  # tried: a store written by a future momoka
    mf.write_text(json.dumps(m))
    with pytest.raises(StoreVersionError, match="newer"):
        Index.open(tmp_path / "s")


def test_not_a_store(tmp_path):
    # tried: a missing directory, a plain directory, a file, a manifest that is not ours, broken JSON
    with pytest.raises(StoreError, match="does not exist"):
        Index.open(tmp_path / "missing")
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "x.txt").write_text("hi")
    with pytest.raises(StoreError, match="not a momoka store"):
        Index.open(tmp_path / "plain")
    (tmp_path / "f").write_text("x")
    with pytest.raises(StoreError):
        Index.open(tmp_path / "f")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "manifest.json").write_text('{"format": "something-else"}')
    with pytest.raises(StoreError, match="not a momoka store"):
        Index.open(tmp_path / "other")
    (tmp_path / "other" / "manifest.json").write_text("{broken")
    with pytest.raises(StoreError, match="not JSON"):
        Index.open(tmp_path / "other")
    # building into a non-empty directory that is not a store is refused too
    with pytest.raises(StoreError, match="non-empty"):
        Index.build([{"doc_id": "a", "text": "x y"}], store=tmp_path / "plain", embedder=None, progress=False)


def test_corrupted_generation(tmp_path, docs, embedder):
    _build(tmp_path, docs, embedder).close()
    next((tmp_path / "s").glob("seg-*/bm25/raw.bin")).write_bytes(b"junk")  # tried: a damaged BM25 file
    with pytest.raises(StoreError, match="BM25"):
        Index.open(tmp_path / "s")


def test_other_model_refused(tmp_path, docs, embedder):
    _build(tmp_path, docs, embedder).close()
    # tried: same model id with other weights (checksum), and another model id
    for other in (HashEmbedder(salt="x"), HashEmbedder(model_id="test/other")):
        with pytest.raises(StoreMismatchError, match="built with embedder"):
            Index.open(tmp_path / "s", embedder=other)


def test_queries_empty_and_huge(tmp_path, docs, embedder):
    ix = _build(tmp_path, docs, embedder)
    # tried: empty, whitespace-only, non-str, 100,000 characters, k = 0, an unknown method
    for q in ("", "  \t\n"):
        with pytest.raises(EmptyInputError):
            ix.search(q)
    with pytest.raises(InputError):
        ix.search(None)  # type: ignore[arg-type]
    huge = "violin " * (100_000 // 7 + 1)
    with pytest.raises(InputTooLargeError, match="limit"):
        ix.search(huge)
    # documented behaviour: the limit can be raised, then the whole query is used
    ix.corpus.max_query_chars = 200_000
    assert ix.search(huge, retriever="bm25")[0].doc_id == "violins"
    with pytest.raises(ConfigError):
        ix.search("violin", k=0)
    with pytest.raises(ConfigError):
        ix.search("violin", retriever="sparse")
    ix.close()


def test_duplicate_and_unknown_documents(tmp_path, docs, embedder):
    ix = _build(tmp_path, docs, embedder)
    n = ix.store.n_chunks
    # tried: adding a document that is already there, the same id twice in one call
    with pytest.raises(InputError, match="already"):
        ix.add([docs[0]])
    with pytest.raises(InputError, match="twice"):
        ix.add([{"doc_id": "new", "text": "a b"}, {"doc_id": "new", "text": "c d"}])  # given twice
    # tried: deleting an unknown id (nothing is deleted, even the known ones listed with it)
    with pytest.raises(InputError, match="unknown"):
        ix.delete(["apples", "nope"])
    assert ix.store.n_chunks == n and "apples" in ix
    # tried: an empty document, a document without id, nothing at all
    with pytest.raises(EmptyInputError):
        ix.add([{"doc_id": "e", "text": "   "}])
    with pytest.raises(InputError):
        ix.add([{"text": "no id here"}])
    with pytest.raises(EmptyInputError):
        ix.add([])
    with pytest.raises(InputError):
        ix.add([tmp_path / "no-such-file.txt"])
    ix.close()


def test_second_writer_refused_in_process(tmp_path, docs, embedder):
    ix = _build(tmp_path, docs, embedder)  # holds the writer lock
    # tried: a second writer on the same store (explicitly, and lazily by a change)
    with pytest.raises(StoreLockedError, match="open for writing by another Index or Store object of this process"):
        Index.open(tmp_path / "s", writable=True)
    reader = Index.open(tmp_path / "s", embedder=embedder)  # readers need no lock
    assert reader.search("chess", k=1)[0].doc_id == "chess"
    with pytest.raises(StoreLockedError):
        reader.delete(["chess"])
    ix.close()
    # after the first writer closes, a reader that is still current may write
    reader.delete(["chess"])
    reader.save()
    reader.close()


def test_reopen_after_build_in_the_same_script(tmp_path, docs, embedder):
    # the README's snippet: build, search, then reopen the same store by rebinding the name and add to it.
    # The built index is unreachable then, but its store (which its artifacts reference) used to keep the
    # writer lock until the cycle collector ran, so the reopened index's add raised StoreLockedError.
    index = _build(tmp_path, docs, embedder)
    assert index.search("chess", k=1)[0].doc_id == "chess"
    index = Index.open(tmp_path / "s", embedder=embedder)
    index.add([{"doc_id": "extra", "text": "Violins have four strings and a bow."}])
    index.save()
    index.close()
    assert "extra" in Index.open(tmp_path / "s", embedder=embedder).store.documents


def test_index_is_a_context_manager(tmp_path, docs, embedder):
    with _build(tmp_path, docs, embedder) as built:
        assert built.store.writable
        reader = Index.open(tmp_path / "s", embedder=embedder)  # a reader beside the live writer
        assert reader.search("chess", k=1)[0].doc_id == "chess"
    assert not built.store.writable  # the with block released the lock
    with Index.open(tmp_path / "s", embedder=embedder) as again:
        again.delete(["chess"])
        again.save()
    assert "chess" not in Index.open(tmp_path / "s", embedder=embedder).store.documents


def test_reader_refuses_to_write_over_a_newer_generation(tmp_path, docs, embedder):
    _build(tmp_path, docs, embedder).close()
    stale = Index.open(tmp_path / "s", embedder=embedder)
    w = Index.open(tmp_path / "s", embedder=embedder, writable=True)
    w.delete(["chess"])
    w.save()
    w.close()
    # tried: writing through an index loaded before another writer saved
    with pytest.raises(StoreError, match="changed by another writer"):
        stale.delete(["apples"])


def test_overwrite_existing_store(tmp_path, docs, embedder):
    _build(tmp_path, docs, embedder).close()
    # tried: building over an existing store without overwrite
    with pytest.raises(StoreError, match="already a momoka store"):
        _build(tmp_path, docs[:1], embedder)
    ix = _build(tmp_path, docs[:1], embedder, overwrite=True)
    ix.close()
    assert Index.open(tmp_path / "s").corpus.doc_ids == [docs[0]["doc_id"]]


def test_search_batch_per_query_filters(tmp_path, docs, embedder):
    ix = _build(tmp_path, docs, embedder)
    qs = ["violin strings lava", "violin strings lava"]
    for method in ("dense", "bm25", "hybrid"):
        got = ix.search_batch(qs, k=3, retriever=method, per_query_doc_ids=["volcano", ["violins"]])
        assert {h.doc_id for h in got[0]} == {"volcano"} and {h.doc_id for h in got[1]} == {"violins"}
        # each equals the single-query search with the same filter
        single = ix.search(qs[0], k=3, retriever=method, doc_ids=["volcano"])
        assert [h.chunk_id for h in got[0]] == [h.chunk_id for h in single]
    # tried: both kinds of filter at once, a filter list of the wrong length
    with pytest.raises(ConfigError):
        ix.search_batch(qs, doc_ids=["chess"], per_query_doc_ids=["a", "b"])
    with pytest.raises(ConfigError):
        ix.search_batch(qs, per_query_doc_ids=["volcano"])
    ix.close()
