"""Segments (store format version 3): each commit writes only its changes, and results do not depend on
how the store is split into segments, checked against independent references (rank_bm25, brute-force
cosine, a store built in one commit) and against stores written by the version-2 code."""

from __future__ import annotations

import os

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from momoka.chunking.headers import with_header

from momoka import Index
from momoka.store import Store
from momoka.text.model import Chunk
from momoka.store.bm25 import tokenize

from .conftest import HashEmbedder

DATA = Path(__file__).with_name("data")


def _passages(root: Path, n: int) -> list[dict]:
    """Real paragraphs of the shared sets in ``root`` (skip when it holds none), as one-paragraph documents."""
    files = sorted(root.glob("*/documents.jsonl"))
    if not files:
        pytest.skip("the shared data folder holds no set")
    out, seen = [], set()
    for f in files:
        with open(f, encoding="utf-8") as fh:
            for line in fh:
                for p in json.loads(line)["text"].split("\n\n"):
                    p = p.strip()
                    if len(p) >= 200 and p not in seen:
                        seen.add(p)
                        out.append({"doc_id": f"p{len(out)}", "text": p})
                        if len(out) == n:
                            return out
    return out


def _build(path, docs, commit_docs, emb, **kw):
    return Index.build(docs, store=path, embedder=emb, chunker="recursive", size=60, commit_docs=commit_docs,
                       progress=False, **kw)


def _hits(ix, q, retriever, k=10):
    return [(h.doc_id, h.start, h.end, h.score) for h in ix.search(q, k=k, retriever=retriever)]


QUERIES = ["when was the company founded", "who wrote the novel", "population of the city in 2010",
           "the river flows into the sea", "election results and the party", "what causes the disease"]


@pytest.fixture(scope="module")
def real(shared_data):
    return _passages(shared_data, 240)


def test_many_segments_rank_exactly_as_one(tmp_path, real, monkeypatch):
    import momoka.store.vectors as vectors_mod

    monkeypatch.setattr(vectors_mod, "GRAPH_ROWS", 10**9)  # dense exact on both sides (graphs: the next test)
    monkeypatch.setenv("MOMOKA_MERGE_FACTOR", "1000")  # keep every commit's segment
    emb = HashEmbedder()
    gone = [d["doc_id"] for d in real[5:200:9]]
    many = _build(tmp_path / "many", real, 16, emb)
    many.delete(gone)
    many.save()
    assert len(many.store.segments) == len(real) // 16 + 1
    one = _build(tmp_path / "one", [d for d in real if d["doc_id"] not in gone], 10_000, emb)
    assert len(one.store.segments) == 1
    for q in QUERIES:
        for r in ("bm25", "dense", "hybrid"):
            assert _hits(many, q, r) == _hits(one, q, r), (q, r)  # bit for bit
    # BM25 against rank_bm25 over the live chunks' tokens (statistics of the whole corpus, not per segment),
    # each chunk's indexed text being its header (kept in its metadata) and its text
    rank_bm25 = pytest.importorskip("rank_bm25")
    st = many.store
    ids = st.chunks.ids().tolist()
    toks = [tokenize(with_header(st.chunks.metadata(c).get("header"), st.chunks.text(c)), stem=True,
                     stopwords="english") for c in ids]
    ref = rank_bm25.BM25Okapi(toks)
    for q in QUERIES:
        want = ref.get_scores(tokenize(q, stem=True, stopwords="english"))
        got = dict(st.bm25_view("raw").search(q, 20))
        for c, s in got.items():
            assert s == pytest.approx(want[ids.index(c)], rel=1e-9, abs=1e-12)
        assert min(got.values()) >= sorted(want, reverse=True)[min(19, len(want) - 1)] - 1e-9
    # merged into one segment: the same answers, and the dead chunks' texts left the store
    before = {(q, r): _hits(many, q, r) for q in QUERIES for r in ("bm25", "dense", "hybrid")}
    text_bytes = sum((tmp_path / "many" / sg["name"] / "chunks" / "text.bin").stat().st_size
                     for sg in st.segments if "chunks/text.bin" in sg["parts"].get("chunks", {}))
    assert many.writer.optimize() and len(many.store.segments) == 1
    assert {(q, r): _hits(many, q, r) for q in QUERIES for r in ("bm25", "dense", "hybrid")} == before
    merged = (tmp_path / "many" / many.store.segments[0]["name"] / "chunks" / "text.bin").stat().st_size
    assert merged < text_bytes
    many.close()
    again = Index.open(tmp_path / "many", embedder=emb)
    assert {(q, r): _hits(again, q, r) for q in QUERIES for r in ("bm25", "dense", "hybrid")} == before
    one.close()


def test_dense_over_segments_against_brute_force(tmp_path, real, monkeypatch):
    import momoka.store.vectors as vectors_mod

    monkeypatch.setattr(vectors_mod, "GRAPH_ROWS", 64)  # every segment searched through its own graph
    monkeypatch.setenv("MOMOKA_MERGE_FACTOR", "1000")
    emb = HashEmbedder(dim=32)
    many = _build(tmp_path / "many", real, 48, emb)
    view = many.store.vector_view("raw")
    assert view.graph_parts() >= 4
    ids = view.ids()
    mat = view.get(ids)
    recall_many = recall_one = 0
    qs = emb.embed([d["text"][:80] for d in real[::12]])
    one = _build(tmp_path / "one", real, 10_000, emb)
    for q in qs:
        truth = set(ids[np.lexsort((ids, -(mat @ q)))[:10]].tolist())
        recall_many += len(truth & {c for c, _ in view.search(q, 10)})
        recall_one += len(truth & {c for c, _ in one.store.vector_view("raw").search(q, 10)})
    # the same chunks get the same ids in both stores (same documents, same order)
    assert recall_many >= recall_one and recall_many >= 0.95 * 10 * len(qs)
    many.close()
    one.close()


def test_graph_parts_searched_side_by_side_answer_as_one_after_another(tmp_path, real, monkeypatch):
    """The parts' graphs searched on the thread pool give the hits of searching them in turn, each part through
    hnswlib itself (its own graph, the same ef), first for its share of k, again for k when its last hit
    reaches the k-th best of all, and the best k kept by score, then chunk id."""
    import momoka.store.vectors as vectors_mod

    monkeypatch.setattr(vectors_mod, "GRAPH_ROWS", 64)
    monkeypatch.setenv("MOMOKA_MERGE_FACTOR", "1000")
    emb = HashEmbedder(dim=32)
    many = _build(tmp_path / "many", real, 48, emb)
    view = many.store.vector_view("raw")
    assert view.graph_parts() >= 4
    qs = emb.embed([d["text"][:80] for d in real[::12]])
    for k in (3, 10, 40):
        monkeypatch.setattr(vectors_mod, "_pool", [])
        pooled = [view.search(q, k) for q in qs]
        assert vectors_mod._pool and vectors_mod._pool[0] is not None or (os.cpu_count() or 1) == 1
        monkeypatch.setattr(vectors_mod, "_pool", [None])  # one after another
        assert [view.search(q, k) for q in qs] == pooled
        total = view.n_rows
        def part_hits(q, pi, kk):
            vp = view._parts[pi]
            g = view._graph(pi)
            g.set_ef(max(2 * kk, min(128, int(np.ceil(vectors_mod.PART_EF_SHARE * 128 * vp.n / total)))))
            lab, dist = g.knn_query(q[None, :], k=min(kk, vp.n))
            return [(int(c), float(1.0 - d)) for c, d in zip(lab[0], dist[0])]

        for q, got in zip(qs, pooled):  # hnswlib per part, merged by hand
            first = {}
            for pi, vp in enumerate(view._parts):
                first[pi] = min(k, max(10, int(np.ceil(2.0 * k * vp.n / total))))
                assert 2 * first[pi] < vp.n  # each part through its graph (else it would be searched exactly)
            tops = {pi: part_hits(q, pi, first[pi]) for pi in first}
            kth = sorted((s for top in tops.values() for _, s in top), reverse=True)
            kth = kth[k - 1] if len(kth) >= k else -np.inf
            for pi, top in tops.items():
                if first[pi] < k and top[-1][1] >= kth:
                    tops[pi] = part_hits(q, pi, k)
            hits = [h for top in tops.values() for h in top]
            assert got == sorted(hits, key=lambda t: (-t[1], t[0]))[:k]
    many.close()


def test_a_part_holding_all_of_the_top_k_gives_them_all(tmp_path, monkeypatch):
    """Parts are first asked for their share of k; a small part holding every one of the best k (a document
    just added, alone in its segment, about what is asked) is asked again and gives them all: the top k equals
    brute force, for k up to that part's size."""
    import momoka.store.vectors as vectors_mod

    monkeypatch.setattr(vectors_mod, "GRAPH_ROWS", 64)  # every segment searched through its own graph
    monkeypatch.setenv("MOMOKA_MERGE_FACTOR", "1000")
    emb = HashEmbedder(dim=32)
    rng = np.random.default_rng(7)
    other = [{"doc_id": f"o{i}", "text": f"other words {i} " + " ".join(f"w{rng.integers(0, 500)}" for _ in range(12))}
             for i in range(1200)]
    ix = _build(tmp_path / "s", other, 300, emb)
    view = ix.store.vector_view("raw")
    # 150 new documents of one chunk each, in one commit: one segment, their vectors close to each other
    news = [{"doc_id": f"n{i}", "text": f"news item {i}"} for i in range(150)]
    ix.add(news, commit=True)
    assert view.graph_parts() >= 4
    ids = view.ids()
    mat = view.get(ids)
    small = view._parts[-1]
    assert small.n == 150 and small.n < 0.2 * view.n_rows
    planted = set(small.ids[: small.n].tolist())
    # the query: the mean of the new part's vectors, so that they are the nearest rows
    q = np.asarray(mat[np.isin(ids, list(planted))].mean(axis=0), np.float32)
    sims = mat @ q
    for k in (10, 26, 60):
        truth = ids[np.lexsort((ids, -sims))[:k]].tolist()
        assert set(truth) <= planted  # the whole top k sits in the small part
        assert vectors_mod.part_k(k, small.n, view.n_rows) < k or k == 10
        got = view.search(q, k)
        # the best k (scores as brute force's: rows of equal score may stand for each other)
        assert {c for c, _ in got} <= planted
        np.testing.assert_allclose([s for _, s in got], np.sort(sims)[::-1][:k], atol=1e-5)
    ix.close()


def test_each_commit_writes_only_its_batch(tmp_path, monkeypatch):
    monkeypatch.setenv("MOMOKA_MERGE_FACTOR", "1000")
    emb = HashEmbedder()
    docs = [{"doc_id": f"d{i}", "text": f"Document {i} is about item{i} and topic{i % 5}. " * 4} for i in range(40)]
    ix = _build(tmp_path / "s", docs[:10], 5, emb)
    st = ix.store
    root = tmp_path / "s"
    stamps = {(sg["name"], rel): (root / sg["name"] / rel).stat().st_mtime_ns
              for sg in st.segments for rel in sg["parts"]["chunks"]}
    for i in range(10, 40, 10):
        old = [sg["name"] for sg in st.segments]
        n0 = st.n_slots
        ix.add(docs[i : i + 10], commit=False)
        ix.save()
        new = st.segments[-1]
        assert [sg["name"] for sg in st.segments[:-1]] == old
        assert (new["base"], new["end"]) == (n0, st.n_slots)  # only the batch's rows
        rows = np.load(root / new["name"] / "chunks" / "start.npy")
        assert len(rows) == st.n_slots - n0
        ids = np.load(root / new["name"] / "vectors" / "raw.ids.npy")
        assert sorted(ids.tolist()) == list(range(n0, st.n_slots))
        for name in old:  # older segments were not touched: the same files, not rewritten
            for rel in st.segments[old.index(name)]["parts"]["chunks"]:
                assert (root / name / rel).stat().st_mtime_ns == stamps[(name, rel)]
        # the generation holds the lease and its manifest only: a commit costs its batch, not the store
        assert sorted(p.name for p in (root / st.manifest["dir"]).iterdir()) == [".lease", "manifest.json"]
        stamps.update({(new["name"], rel): (root / new["name"] / rel).stat().st_mtime_ns
                       for rel in new["parts"]["chunks"]})
    ix.close()


def test_merge_policy_keeps_few_segments(tmp_path, monkeypatch):
    monkeypatch.setenv("MOMOKA_MERGE_FACTOR", "3")
    monkeypatch.setenv("MOMOKA_MERGE_BACKGROUND", "0")  # merged in each save: the levels are exact
    emb = HashEmbedder()
    docs = [{"doc_id": f"d{i}", "text": f"Document {i} is about item{i} and topic{i % 5}."} for i in range(30)]
    ix = _build(tmp_path / "s", docs, 1, emb)
    levels = [sg["level"] for sg in ix.store.segments]
    # 30 commits with a factor of 3 (commits' segments merged by 3, larger ones by max(2, 3 // 2) = 2):
    # a level-n segment (n >= 1) holds 3 * 2**(n-1) commits, and 30 = 24 + 6 -> levels 4 and 2
    assert levels == [4, 2], levels
    assert levels == sorted(levels, reverse=True)
    fresh = Index.build(docs, embedder=emb, chunker="recursive", size=60, progress=False)
    for q in ("item7 topic2", "document about topic4"):
        for r in ("bm25", "dense", "hybrid"):
            assert _hits(ix, q, r) == _hits(fresh, q, r)
    ix.close()


def test_relations_nodes_and_metadata_across_segments(tmp_path, monkeypatch):
    monkeypatch.setenv("MOMOKA_MERGE_FACTOR", "1000")
    emb = HashEmbedder()
    docs = [{"doc_id": f"d{i}", "text": f"Document {i} talks about item{i}."} for i in range(12)]
    ix = _build(tmp_path / "s", docs[:6], 100, emb)
    st = ix.store
    rel = st.add_relation("next", weighted=True)
    nodes = st.add_node_table("things")
    ment = st.add_relation("mentions", ordered=False, target_table="things")
    ids = st.chunks.ids().tolist()
    for a, b in zip(ids[:-1], ids[1:]):
        rel.set(a, [b, ids[0]], [1.0, 0.5])
    nodes.add([{"name": f"n{i}"} for i in range(3)])
    ment.set(ids[1], [0, 2])
    st.chunks.set_metadata(ids[2], "tag", "x")
    st.documents["d1"].metadata["note"] = "first"
    st.save()
    ix.add(docs[6:], commit=False)
    ids = st.chunks.ids().tolist()
    rel.set(ids[0], [ids[-1]], [2.0])  # a row of an older segment changes in a newer one
    nodes.add([{"name": "n3"}])
    ment.set(ids[-1], [3])
    st.chunks.set_metadata(ids[2], "tag", "y")
    st.documents["d1"].metadata["note"] = "second"  # a document of an older segment changes
    st.save()
    st.delete(["d3"])  # its chunks leave relation rows and targets
    st.save()
    assert len(st.segments) == 4  # the build, the relations, the second batch, the delete

    def snapshot(s):
        r, n, m = s.relation("next"), s.node_table("things"), s.relation("mentions")
        return ({c: (r.get(c).tolist(), r.weights(c).tolist()) for c in r.rows()},
                [n.get(i) for i in range(len(n))], {c: m.get(c).tolist() for c in m.rows()},
                {c: s.chunks.metadata(c) for c in s.chunks.ids().tolist()},
                {d: dict(e.metadata) for d, e in s.documents.items()})

    want = snapshot(st)
    assert "d3" not in st.documents
    # independent expectations, written out by hand
    assert want[0][ids[0]] == ([ids[-1]], [2.0]) and want[2] == {ids[1]: [0, 2], ids[-1]: [3]}
    assert [x["name"] for x in want[1]] == ["n0", "n1", "n2", "n3"]
    assert want[3][ids[2]] == {"tag": "y"} and want[4]["d1"] == {"note": "second"}
    assert all(t in st.chunks for row, _ in want[0].values() for t in row)
    ix.close()
    assert snapshot(Store.open(tmp_path / "s")) == want
    w = Store.open(tmp_path / "s", writable=True)
    assert w.merge() and len(w.segments) == 1
    w.close()
    assert snapshot(Store.open(tmp_path / "s")) == want


def test_store_of_format_2_opens_and_is_written_as_one_segment(tmp_path):
    path = tmp_path / "v2"
    shutil.copytree(DATA / "store-v2", path)
    expected = json.loads((DATA / "store-v2-expected.json").read_text())
    emb = HashEmbedder(dim=8, model_id="test/hash-embedder-8")

    def check(ix):
        st = ix.store
        assert st.n_slots == expected["n_slots"]
        for cid, r in expected["chunks"].items():
            c = int(cid)
            assert (st.chunks.text(c), st.chunks.metadata(c), list(st.chunks.section(c))) == (
                r["text"], r["metadata"], r["section"])
        assert st.chunks.ids().tolist() == sorted(map(int, expected["chunks"]))
        for d, e in expected["documents"].items():
            got = st.documents[d]
            assert (got.chunk_ids, dict(got.metadata), got.title) == (e["chunk_ids"], e["metadata"], e["title"])
        for name, rows in expected["relations"].items():
            r = st.relation(name)
            assert {str(c): [r.get(c).tolist(), r.weights(c).tolist()] for c in r.rows()} == rows
        t = st.node_table("things")
        assert [t.get(i) for i in range(len(t))] == expected["nodes"]["things"]
        for q, want in expected["queries"].items():
            for r, hits in want.items():
                # recorded before hybrid re-ranked for query-term coverage and added a document prior: its
                # fused order and scores, as then
                opts = {"coverage": 0, "document_weight": 0} if r == "hybrid" else {}
                got = [[h.chunk_id, h.score] for h in ix.search(q, k=3, retriever=r, **opts)]
                assert [c for c, _ in got] == [c for c, _ in hits], (q, r)
                np.testing.assert_allclose([s for _, s in got], [s for _, s in hits], rtol=1e-6)

    ix = Index.open(path, embedder=emb)
    assert ix.store.manifest["version"] == 2 and not ix.store.dirty  # a reader has no changes; its save rewrites it
    check(ix)
    ix.save()
    ix.close()
    m = json.loads((path / "manifest.json").read_text())
    assert m["version"] == 3 and len(m["segments"]) == 1
    assert (path / m["segments"][0]["name"] / "chunks").is_dir()
    again = Index.open(path, embedder=emb)
    assert not again.store.dirty
    check(again)


def test_no_segment_or_generation_is_left_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("MOMOKA_MERGE_FACTOR", "3")
    monkeypatch.setenv("MOMOKA_MERGE_BACKGROUND", "0")  # which generations exist depends on when merges land
    emb = HashEmbedder()
    docs = [{"doc_id": f"d{i}", "text": f"Document {i} is about item{i} and topic{i % 5}."} for i in range(20)]
    ix = _build(tmp_path / "s", docs, 1, emb)
    ix.delete(["d4", "d11"])
    ix.save()
    root = tmp_path / "s"
    live = {sg["name"] for sg in ix.store.segments}

    def named_by(gen):
        return {sg["name"] for sg in json.loads((root / gen / "manifest.json").read_text())["segments"]}

    # merged-away segments were deleted, but those the previous generation names (kept for a reader that
    # opened it before this commit)
    assert {p.name for p in root.glob("gen-*")} == {ix.store.manifest["dir"], ix.store.manifest["previous"]}
    assert {p.name for p in root.glob("seg-*")} == live | named_by(ix.store.manifest["previous"])
    # a reader keeps its generation, and the segments it names, while the writer merges them away
    reader = Index.open(root, embedder=emb)
    want = _hits(reader, "item7 topic2", "hybrid")
    assert ix.writer.optimize()
    ix.add([{"doc_id": "late", "text": "A late document about item7."}])
    ix.save()
    assert _hits(reader, "item7 topic2", "hybrid") == want
    assert {p.name for p in root.glob("seg-*")} >= live
    reader.close()
    ix.add([{"doc_id": "later", "text": "Another one."}])
    ix.save()
    assert {p.name for p in root.glob("seg-*")} == ({sg["name"] for sg in ix.store.segments}
                                                    | named_by(ix.store.manifest["previous"]))
    ix.close()


def test_merge_factor_from_the_environment(tmp_path, monkeypatch):
    from momoka.errors import ConfigError

    monkeypatch.setenv("MOMOKA_MERGE_FACTOR", "4")
    assert Store.create(tmp_path / "a").merge_factor == 4
    # tried: values that are not an integer of at least 2: an error naming the variable, never a default
    for bad in ("1", "0", "-3", "2.5", "ten"):
        monkeypatch.setenv("MOMOKA_MERGE_FACTOR", bad)
        with pytest.raises(ConfigError, match=f"MOMOKA_MERGE_FACTOR must be an integer >= 2, not '{bad}'"):
            Store.create(tmp_path / f"b{bad}")


def test_chunk_scan_reads_what_the_per_id_accessors_read(tmp_path, real, monkeypatch):
    # ChunkTable.scan (one pass over every text run) against doc_id/text/metadata per id, over many segments,
    # deleted chunks, memory-mapped texts after a reopen, and rows appended but not saved yet
    monkeypatch.setenv("MOMOKA_MERGE_FACTOR", "1000")

    def per_id(ch):
        return [(c, ch.doc_id(c), ch.text(c), ch.metadata(c)) for c in ch.ids().tolist()]

    emb = HashEmbedder()
    ix = _build(tmp_path / "s", real[:80], 16, emb)
    ix.delete([d["doc_id"] for d in real[3:80:7]])
    ix.save()
    assert len(ix.store.segments) > 2 and list(ix.store.chunks.scan()) == per_id(ix.store.chunks)
    ix.close()
    again = Index.open(tmp_path / "s", embedder=emb, writable=True)
    ch = again.store.chunks
    assert list(ch.scan()) == per_id(ch)
    ch.append([("extra", Chunk("an unsaved chunk", 0, 16, "extra", 0, 0, 0, (), {"header": "H"}, None))])
    rows = list(ch.scan())
    assert rows == per_id(ch) and rows[-1][1:] == ("extra", "an unsaved chunk", {"header": "H"})
    again.close()
