"""Store format version 2: artifacts checked against independent references."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
from momoka.errors import ConfigError, InputError, StoreError
from momoka import Index
from momoka.store import BM25, Store
from momoka.store.store import FORMAT_VERSION
from momoka.text.model import Chunk

from .conftest import HashEmbedder

DATA = Path(__file__).with_name("data")
EMB8 = {"model_id": "test/e8", "checksum": "c8", "dim": 8}
WORDS = ["apple", "rocket", "violin", "lava", "king", "pawn", "orbit", "bow", "ash", "tree", "ice", "comet", "été",
         "日本"]


def _random_docs(rng: random.Random, n_docs: int, prefix: str = "d"):
    docs, chunks = [], []
    for d in range(n_docs):
        did = f"{prefix}{d}"
        cs, pos = [], 0
        for i in range(rng.randint(1, 6)):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 9)))
            sec = tuple(rng.choice(["A", "B", "Ü"]) for _ in range(rng.randint(0, 2)))
            meta = {"k": rng.randint(0, 9), "s": rng.choice(WORDS)} if rng.random() < 0.3 else {}
            cs.append(Chunk(text, pos, pos + len(text), did, i, rng.randint(0, 50), rng.randint(0, 90), sec, meta))
            pos += len(text) + 2
        docs.append({"doc_id": did, "title": f"T{d}", "source": None, "length": pos,
                     "metadata": {"n": d} if d % 2 else {}})
        chunks.append(cs)
    return docs, chunks


def _vec(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    v = rng.normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _brute(rows: dict[int, np.ndarray], q: np.ndarray, k: int, allowed=None):
    ids = sorted(i for i in rows if allowed is None or i in set(allowed))
    sims = {i: float(rows[i].astype(np.float32) @ q) for i in ids}
    return sorted(sims.items(), key=lambda t: (-t[1], t[0]))[:k]


# --- chunk table ------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_chunk_table_round_trip(tmp_path, seed):
    rng = random.Random(seed)
    docs, chunks = _random_docs(rng, 12)
    st = Store.create(tmp_path / "s")
    ids = st.add_documents(docs, chunks)
    assert ids == [list(range(sum(map(len, chunks[:i])), sum(map(len, chunks[: i + 1])))) for i in range(12)]
    gone = [docs[3]["doc_id"], docs[7]["doc_id"]]
    st.delete(gone)
    st.save()
    st.close()
    ref = {cid: c for cs, ii in zip(chunks, ids) for cid, c in zip(ii, cs) if c.doc_id not in gone}
    for again in (Store.open(tmp_path / "s"), st):
        t = again.chunks
        assert t.ids().tolist() == sorted(ref) and list(t) == sorted(ref) and len(t) == len(ref)
        assert t.n_slots == again.n_slots == sum(map(len, chunks))
        for cid, c in ref.items():
            got = t.get(cid)
            assert got == c and got.metadata == c.metadata  # every field, metadata included
            assert t.text(cid) == c.text and t.span(cid) == (c.doc_id, c.start, c.end) and t.doc_id(cid) == c.doc_id
            assert again.chunk(cid) == c
        assert t.texts(sorted(ref)) == [ref[c].text for c in sorted(ref)]
        for name in ("start", "end", "index", "paragraph", "sentence"):
            col = t.column(name)
            assert [int(col[c]) for c in sorted(ref)] == [getattr(ref[c], name) for c in sorted(ref)]
        dead = [c for c in range(t.n_slots) if c not in ref]
        assert not t.column("live")[dead].any() and all(c not in t for c in dead)
        with pytest.raises(KeyError):
            t.get(dead[0])
        assert {d: e.metadata for d, e in again.documents.items()} == {
            d["doc_id"]: d["metadata"] for d in docs if d["doc_id"] not in gone}


def test_chunk_metadata_is_sparse_lazy_and_settable(tmp_path):
    st = Store.create(tmp_path / "s")
    [ids] = st.add_documents([{"doc_id": "a"}], [[Chunk("x y", 0, 3, "a", 0, 0, 0), Chunk("z", 4, 5, "a", 1, 1, 1)]])
    st.chunks.set_metadata(ids[1], "title", "Z")
    with pytest.raises(InputError):
        st.chunks.set_metadata(ids[1], "bad", object())
    st.save()
    st.close()
    again = Store.open(tmp_path / "s")
    assert again.chunks._meta is None  # metadata not read on open
    assert again.chunks.metadata(ids[0]) == {} and again.chunk(ids[1]).metadata == {"title": "Z"}


# --- vector views -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_vector_view_search_matches_brute_force(tmp_path, dtype):
    rng = np.random.default_rng(5)
    docs, chunks = _random_docs(random.Random(5), 60)
    st = Store.create(tmp_path / "s", hnsw={"ef_search": 400})
    ids = [c for cs in st.add_documents(docs, chunks) for c in cs]
    v = st.add_vector_view("raw", embedder=EMB8, dtype=dtype)
    vecs = _vec(rng, len(ids), 8)
    v.add(ids, vecs)
    rows = {i: vecs[j].astype(dtype) for j, i in enumerate(ids)}
    np.testing.assert_array_equal(v.get(ids[:5]), vecs[:5].astype(dtype).astype(np.float32))
    st.save()
    st.close()
    again = Store.open(tmp_path / "s").vector_view("raw")
    for _ in range(5):
        q = _vec(rng, 1, 8)[0]
        for k in (1, 5, 20):
            got = again.search(q, k)
            want = _brute(rows, q, k)
            assert [c for c, _ in got] == [c for c, _ in want]
            np.testing.assert_allclose([s for _, s in got], [s for _, s in want], rtol=1e-5, atol=1e-6)
        allowed = ids[10:30:3]
        assert [c for c, _ in again.search(q, 4, allowed)] == [c for c, _ in _brute(rows, q, 4, allowed)]
    with pytest.raises(InputError, match="dimension"):
        again.search(np.ones(9), 3)


def test_vector_view_add_checks(tmp_path):
    st = Store.create(None)
    [ids] = st.add_documents([{"doc_id": "a"}], [[Chunk("x", 0, 1, "a", 0, 0, 0), Chunk("y", 2, 3, "a", 1, 1, 1)]])
    v = st.add_vector_view("raw", embedder=EMB8)
    # tried: wrong shape, an id that is not a chunk, an id added twice, a second view of the same name, bad names
    with pytest.raises(InputError, match="shape"):
        v.add(ids, np.ones((2, 7)))
    with pytest.raises(InputError, match="no live chunk"):
        v.add([99], np.ones((1, 8)))
    v.add(ids[:1], np.ones((1, 8)))
    with pytest.raises(InputError, match="already"):
        v.add(ids[:1], np.ones((1, 8)))
    with pytest.raises(StoreError, match="already"):
        st.add_vector_view("raw", embedder=EMB8)
    for bad in ("a/b", "", "..", "sp ace"):
        with pytest.raises(ConfigError):
            st.add_vector_view(bad, embedder=EMB8)
    with pytest.raises(StoreError, match="raw"):
        st.vector_view("titled")  # names the views there are
    assert v.has(ids).tolist() == [True, False] and v.ids().tolist() == ids[:1]


# --- BM25 views -------------------------------------------------------------------


def test_bm25_view_matches_rank_bm25_and_is_slot_aligned(tmp_path):
    rank_bm25 = pytest.importorskip("rank_bm25")
    docs, chunks = _random_docs(random.Random(7), 30)
    st = Store.create(tmp_path / "s")
    ids = [c for cs in st.add_documents(docs, chunks) for c in cs]
    # a view created after the chunks, given only every other chunk: ids still equal chunk ids
    some = ids[1::2]
    view = st.add_bm25_view("odd", params={"stem": False, "stopwords": None}, source={"text": "chunk"})
    view.add(some, st.chunks.texts(some))
    st.save()
    st.close()
    view = Store.open(tmp_path / "s").bm25_view("odd")
    tok = BM25().tokenize
    corpus = [tok(t) for t in Store.open(tmp_path / "s").chunks.texts(some)]
    ref = rank_bm25.BM25Okapi(corpus)
    for q in ("apple rocket", "violin bow lava", "日本 été"):
        sc = ref.get_scores(tok(q))
        want = sorted((j for j in range(len(some)) if sc[j] > 0 or any(w in corpus[j] for w in tok(q))),
                      key=lambda j: (-sc[j], j))[:5]
        got = view.search(q, 5)
        assert [c for c, _ in got] == [some[j] for j in want], q
        np.testing.assert_allclose([s for _, s in got], [sc[j] for j in want], rtol=1e-6, atol=1e-9)
        allowed = some[:6]
        assert all(c in allowed for c, _ in view.search(q, 5, allowed))


# --- relations and node tables ----------------------------------------------------


def test_relation_round_trip_and_delete_vs_dict_reference(tmp_path):
    rng = random.Random(3)
    docs, chunks = _random_docs(rng, 10)
    st = Store.create(tmp_path / "s")
    per_doc = st.add_documents(docs, chunks)
    ids = [c for cs in per_doc for c in cs]
    rel = st.add_relation("paths", ordered=True, weighted=True, source={"component": "test"})
    ref: dict[int, list[tuple[int, float]]] = {}
    for c in rng.sample(ids, 15):
        t = rng.sample(ids, rng.randint(0, 5))
        w = [rng.random() for _ in t]
        rel.set(c, t, w)
        ref[c] = list(zip(t, np.float32(w).tolist()))
    with pytest.raises(InputError):
        rel.set(ids[0], [ids[1]])  # weighted needs weights
    with pytest.raises(InputError, match="not live"):
        rel.set(ids[0], [10_000], [1.0])
    gone = docs[2]["doc_id"]
    dead = set(per_doc[2])
    st.delete([gone])
    ref = {s: [(t, w) for t, w in row if t not in dead] for s, row in ref.items() if s not in dead}
    st.save()
    st.close()
    again = Store.open(tmp_path / "s").relation("paths")
    assert again._rows is None  # read on first use
    assert again.rows() == sorted(ref)
    for s, row in ref.items():
        assert again.get(s).tolist() == [t for t, _ in row]  # order kept (ordered)
        np.testing.assert_allclose(again.weights(s), [w for _, w in row])
    assert again.get(10_000).tolist() == [] and 10_000 not in again


def test_node_table_and_entity_relation(tmp_path):
    st = Store.create(tmp_path / "s")
    [ids] = st.add_documents([{"doc_id": "a"}], [[Chunk("Ada met Bob", 0, 11, "a", 0, 0, 0)]])
    nodes = st.add_node_table("entities", source={"component": "jerr"})
    ents = nodes.add([{"name": "Ada"}, {"name": "Bob"}])
    rel = st.add_relation("mentions", ordered=False, target_table="entities")
    rel.set(ids[0], [ents[1], ents[0]])
    st.save()
    st.close()
    again = Store.open(tmp_path / "s")
    assert again.node_tables == ["entities"] and len(again.node_table("entities")) == 2
    assert again.node_table("entities").get(1) == {"name": "Bob"}
    assert again.relation("mentions").get(ids[0]).tolist() == [0, 1]  # unordered: sorted
    assert again.relation("mentions").target_table == "entities"


# --- extending a saved store, deletes across artifacts ---------------------------


def _index(tmp_path, docs, embedder, name="s"):
    return Index.build(docs, store=tmp_path / name, embedder=embedder, chunker="paragraph", progress=False)


def test_new_view_and_relation_on_an_existing_store(tmp_path, docs, embedder):
    _index(tmp_path, docs, embedder).close()
    st = Store.open(tmp_path / "s", writable=True)
    first = st.segments[0]["name"]
    stamp = (tmp_path / "s" / first / "bm25" / "raw.bin").stat().st_mtime_ns
    ids = st.chunks.ids()
    toy = HashEmbedder(dim=16, model_id="test/toy")
    view = st.add_vector_view("toy", embedder={"model_id": toy.model_id, "checksum": toy.checksum, "dim": 16},
                              source={"text": "title+chunk", "by": "title"})
    texts = [st.documents[st.chunks.doc_id(c)].title + " " + st.chunks.text(c) for c in ids.tolist()]
    view.add(ids, toy.embed(texts))
    links = st.add_relation("toy-links", source={"component": "next"})
    for a, b in zip(ids[:-1].tolist(), ids[1:].tolist()):
        links.set(a, [b])
    st.save()
    st.close()
    m = json.loads((tmp_path / "s" / "manifest.json").read_text())
    kinds = {(a["kind"], a["name"]) for a in m["artifacts"]}
    assert {("vectors", "raw"), ("vectors", "toy"), ("bm25", "raw"), ("relation", "toy-links"),
            ("chunks", "chunks")} <= kinds
    toy_entry = next(a for a in m["artifacts"] if a["name"] == "toy")
    assert toy_entry["dim"] == 16 and toy_entry["source"] == {"text": "title+chunk", "by": "title"}
    for sg in m["segments"]:
        for files in sg["parts"].values():
            for rel, rec in files.items():
                assert (tmp_path / "s" / sg["name"] / rel).stat().st_size == rec["bytes"]
    # the commit wrote one segment holding only the new artifacts; the older one was not touched
    assert set(m["segments"][-1]["parts"]) == {"vectors/toy", "relation/toy-links"}
    assert m["segments"][0]["name"] == first
    assert (tmp_path / "s" / first / "bm25" / "raw.bin").stat().st_mtime_ns == stamp
    ix = Index.open(tmp_path / "s", embedder=embedder)
    assert ix.search("violin bow", k=1)[0].doc_id == "violins"  # the raw views still serve the Index
    q = toy.embed(["Violins violin strings"])[0]
    best = ix.store.vector_view("toy").search(q, 1)[0][0]
    assert ix.store.chunks.doc_id(best) == "violins"


def test_delete_save_reopen_consistent_across_artifacts(tmp_path, docs, embedder):
    ix = _index(tmp_path, docs, embedder)
    st = ix.store
    ids = st.chunks.ids().tolist()
    rel = st.add_relation("next")
    for a, b in zip(ids[:-1], ids[1:]):
        rel.set(a, [b, ids[0]])
    gone = set(st.documents["rockets"].chunk_ids) | set(st.documents["apples"].chunk_ids)
    assert st.delete(["rockets", "apples"]) == len(gone)
    st.save()
    st.close()
    again = Store.open(tmp_path / "s")
    live = [c for c in ids if c not in gone]
    assert again.chunks.ids().tolist() == live
    assert again.vector_view("raw").ids().tolist() == live
    assert again.vector_view("raw").graph().get_current_count() == len(live)  # compacted
    assert len(again.bm25_view("raw")) == len(live)
    assert all(c not in gone for c, _ in again.bm25_view("raw").search("rocket apple orbit", 50))
    r = again.relation("next")
    assert set(r.rows()) == {c for c in ids[:-1] if c not in gone}
    assert all(t not in gone for c in r.rows() for t in r.get(c).tolist())
    m = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert m["counts"] == {"documents": 3, "chunks": len(live), "slots": len(ids)}
    # the fresh build of the same documents ranks the same chunks (by span) for every method
    fresh = _index(tmp_path, [d for d in docs if d["doc_id"] not in ("rockets", "apples")], embedder, "f")
    inc = Index.open(tmp_path / "s", embedder=embedder)
    for method in ("dense", "bm25", "hybrid"):
        a = [(h.doc_id, h.start, round(h.score, 5)) for h in inc.search("violin lava king", k=6, retriever=method)]
        b = [(h.doc_id, h.start, round(h.score, 5)) for h in fresh.search("violin lava king", k=6, retriever=method)]
        assert a == b, method
    fresh.close()


def test_open_is_lazy(tmp_path, docs, embedder, monkeypatch):
    import momoka.store.vectors as vectors_mod

    monkeypatch.setattr(vectors_mod, "GRAPH_ROWS", 4)  # the segment's part gets an HNSW graph
    ix = _index(tmp_path, docs, embedder)
    ix.store.add_relation("r").set(0, [1])
    ix.save()
    ix.close()
    loads = []
    import momoka.store.bm25 as bm25_mod

    real = bm25_mod.BM25.load.__func__
    monkeypatch.setattr(bm25_mod.BM25, "load", classmethod(lambda cls, p: loads.append(p) or real(cls, p)))
    st = Store.open(tmp_path / "s")
    bv, vv, rel = st.bm25_view("raw"), st.vector_view("raw"), st.relation("r")
    def graphs():
        return [p.graph for p in vv._parts if p.graph is not None]

    assert bv._bm25 is None and not graphs() and rel._rows is None and vv.graph_parts() == 1
    assert not loads
    rows = vv._parts[0].rows
    assert isinstance(rows, np.memmap) or isinstance(getattr(rows, "base", None), np.memmap)
    assert st.chunk(0).text  # chunk reads need no view
    assert bv._bm25 is None and not graphs()
    bv.search("violin", 3)
    assert len(loads) == 1 and not graphs()
    vv.search(embedder.embed(["violin"])[0], 10)  # exact search (view of at most 2k rows): still no graph
    assert not graphs() and rel._rows is None
    vv.search(embedder.embed(["violin"])[0], 3)  # HNSW: read now
    assert len(graphs()) == 1 and vv.n_rows > 6


def test_pipeline_and_names_round_trip(tmp_path):
    st = Store.create(tmp_path / "s", chunker={"name": "fixed", "params": {"size": 5}}, extra={"x": 1})
    st.manifest["pipeline"] = {"chunker": "fixed", "enrichers": ["title"]}
    st.save()
    st.close()
    m = Store.open(tmp_path / "s").manifest
    assert m["pipeline"] == {"chunker": "fixed", "enrichers": ["title"]} and m["extra"] == {"x": 1}
    assert m["version"] == FORMAT_VERSION == 3 and m["momoka_version"]


def test_remove_artifact_and_rebuild(tmp_path, docs, embedder):
    ix = _index(tmp_path, docs, embedder)
    st = ix.store
    st.remove_artifact("bm25", "raw")
    assert st.bm25_views == []
    v = st.add_bm25_view("raw", params={"k1": 1.2})
    v.add(st.chunks.ids(), st.chunks.texts(st.chunks.ids()))
    st.save()
    ix.close()
    assert Store.open(tmp_path / "s").bm25_view("raw").params["k1"] == 1.2
    with pytest.raises(ConfigError):
        st.remove_artifact("tables", "raw")


# --- format version 1 -------------------------------------------------------------


def test_v1_store_opens_searches_identically_and_saves_as_v3(tmp_path):
    src = DATA / "store-v1"
    path = tmp_path / "v1"
    shutil.copytree(src, path)
    expected = json.loads((DATA / "store-v1-expected.json").read_text())
    emb = HashEmbedder(dim=8, model_id="test/hash-embedder-8")

    def check(ix):
        st = ix.store
        for cid, r in expected["chunks"].items():
            c = st.chunk(int(cid))
            assert (c.text, c.start, c.end, c.doc_id, c.index, c.paragraph, c.sentence, list(c.section)) == (
                r["text"], r["start"], r["end"], r["doc_id"], r["index"], r["paragraph"], r["sentence"], r["section"])
            assert c.metadata == (r.get("metadata") or {})
        assert st.chunks.ids().tolist() == sorted(map(int, expected["chunks"]))
        assert st.n_slots == 13 and st.documents["tea"].metadata == {"kind": "fixture"}
        for q, want in expected["queries"].items():
            got = {
                "bm25": [[h.chunk_id, h.score] for h in ix.search(q, k=3, retriever="bm25")],
                "dense": [[h.chunk_id, h.score] for h in ix.search(q, k=3, retriever="dense")],
                "dense_tea": [[h.chunk_id, h.score] for h in ix.search(q, k=3, retriever="dense", doc_ids=["tea"])],
            }
            for kind in want:
                assert [c for c, _ in got[kind]] == [c for c, _ in want[kind]], (q, kind)
                np.testing.assert_allclose([s for _, s in got[kind]], [s for _, s in want[kind]], rtol=1e-6)

    ix = Index.open(path, embedder=emb)
    assert ix.store.manifest["version"] == 1 and not ix.store.dirty  # a reader has no changes; its save rewrites it
    assert ix.store.embedder_info["model_id"] == "test/hash-embedder-8"
    assert ix.store.vector_view("raw").source == {"text": "chunk"}
    check(ix)
    ix.save()  # takes the lock, writes version 3: everything in one segment
    ix.close()
    m = json.loads((path / "manifest.json").read_text())
    assert m["version"] == 3 and "embedder" not in m and "bm25" not in m and len(m["segments"]) == 1
    gen = path / m["segments"][0]["name"]
    assert (gen / "chunks" / "text.bin").is_file() and (gen / "vectors" / "raw.npy").is_file()
    assert not (gen / "chunks.jsonl").exists()
    again = Index.open(path, embedder=emb)
    check(again)
    # and it keeps working as a store: add, delete, save
    again.add([{"doc_id": "new", "text": "Comets have icy tails."}])
    again.delete(["stars"])
    again.save()
    again.close()
    assert Index.open(path, embedder=emb).search("icy comets", k=1, retriever="bm25")[0].doc_id == "new"
