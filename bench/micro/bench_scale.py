"""Search that stays fast as the corpus grows: the default pipeline at 5,000, 100,000 and 1,000,000 passages
against bm25s, tantivy, hnswlib and the P1 ensemble on the same corpus, in the same run.

Corpora (all passages real text; built once into ``--work`` and reused):

* ``5k``: ``hotpotqa_dev500_pages`` as it is (4,858 Wikipedia pages, one passage each).
* ``100k``: the shared sets' documents (every ``documents.jsonl`` under ``$MOMOKA_SHARED_DATA``) split
  into paragraphs (blank lines; a paragraph over 3,000 characters at its line breaks), each paragraph cut
  by the default chunker (``recursive``, at 90 tokens so that a mark still fits one 100-token chunk), the
  pieces of at least 150 characters that stay one chunk with both marks below kept once each: 19,183
  distinct real passages. Every one of them is a
  document of the corpus (title: its source document's title); the rest, up to 100,000, are drawn from
  them **with replacement** (seed 0), each such duplicate **marked in its text** with `` (copy N)`` at its
  end so that the passages are distinct. Each passage is one document and one chunk.
* ``1m``: the 100k corpus ten times, replica ``r`` (1-9) of each passage marked `` (replica r)`` at its end.
  Its vectors are **not embedded**: each passage takes the real MiniLM vector of its 100k passage (replica
  0 exactly; the others with Gaussian noise of sigma 0.0168 per dimension, normalised: cosine about 0.95 to
  the real vector, seeded by the passage), through an embedder object that reports the default model's id
  and checksum, so queries are embedded by the real model when the store is opened.

Measured (``measure``), per corpus, on the questions of the shared sets (the first ``--n`` of a mix of
``hotpotqa_dev500_pages``, ``squad_v1_dev_half_a`` and ``dragonball_finance_en``), warm (a warm-up
pass over the questions first), one query at a time:

* ``Index.search(q, retriever=R, budget=5000, assemble=False)`` for R = ``bm25``, ``dense`` (query
  embedding included), ``hybrid``, and the assembled default ``Index.search(q, budget=5000)``: p50, p99;
* the default's steps (query embedding, HNSW, BM25, fusion and document prior, coverage re-rank, title
  links, named documents, the rest: assembly and locating), each as a share of the default's time;
* RSS of the process after opening the index and the warm pass (and before);
* peers over the same passage texts (each passage's text, header included: what momoka indexes), built in
  the same process after momoka's numbers are taken: bm25s (``backend="numba"`` when numba is installed,
  else numpy; the backend used is printed), one query per call with the query tokenised by bm25s;
  tantivy's Python wheel (``en_stem`` tokenizer, one searcher, one query per call, ``parse_query``);
  hnswlib over the index's own vectors (M = 32, ef_construction = 200, ef = 128, the settings of
  momoka's vector view), the query embedded by the same embedder, embedding included: built by the bench
  up to LOAD_GRAPHS_ABOVE passages, above it momoka's own graph files loaded by hnswlib and searched in
  turn (a build of its own would take the bench past half an hour);
  P1 as ``bench/tables/retrieval_tables.py`` builds it: bm25s top 20 and the dense top 20 (here hnswlib)
  fused by reciprocal rank fusion (k = 60, equal weights), as LangChain's ``EnsembleRetriever`` does.

``ab`` times the default with this release's query-path changes against the code before them, alternating
question by question in one process, and checks that the assembled results are equal. ``report`` prints
the markdown tables of ``docs/benchmarks.md`` from the JSON and the build records.

``build`` records the build's wall and CPU seconds, the share of CPU spent inside the embedder's
``embed`` calls, the passages per second, and the store's size on disk (per 100,000 passages).

Run (from the repository root; every phase skips what ``--work`` already holds)::

    PYTHONPATH=python python bench/micro/bench_scale.py --work DIR build --size 5k 100k 1m
    PYTHONPATH=python python bench/micro/bench_scale.py --work DIR measure --size 5k 100k 1m --n 200 \\
        --out bench/micro/bench_scale.json
    PYTHONPATH=python python bench/micro/bench_scale.py --work DIR ab --size 100k 1m --n 100 --out bench/micro/bench_scale.json
    PYTHONPATH=python python bench/micro/bench_scale.py --work DIR report
"""

from __future__ import annotations

import argparse
import gc
import glob
import hashlib
import json
import os
import re
import resource
import shutil
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
SIZES = {"5k": None, "100k": 100_000, "1m": 1_000_000}
BUDGET = 5000
#: Noise per dimension of the 1m corpus's replica vectors (cosine about 0.95 to the real vector at 384 dims).
NOISE = 0.0168
REPLICA = re.compile(r" \(replica \d\)$")
#: Above this many passages the hnswlib peer loads momoka's graph files instead of building its own (a 1M
#: build takes over half an hour of this 2-core machine; the 100k one minutes of a shared one).
LOAD_GRAPHS_ABOVE = 50_000
QUESTION_SETS = ("hotpotqa_dev500_pages", "squad_v1_dev_half_a", "dragonball_finance_en")


def shared() -> Path:
    return Path(os.environ.get("MOMOKA_SHARED_DATA") or ROOT.parent / "shared" / "data")


def load(line_file: Path) -> list[dict]:
    with open(line_file, encoding="utf-8") as f:
        return [json.loads(x) for x in f if x.strip()]


# ---------------------------------------------------------------------------------------------- corpora


def pool() -> list[tuple[str, str, str]]:
    """The distinct real passages of the shared sets: ``(source doc id, title, text)``."""
    from momoka.methods.pipeline import chunker_params, make_embedder
    from momoka.methods.sources import resolve_chunker
    from momoka.text import Document

    emb = make_embedder("default")
    params = chunker_params("recursive", 90, {}, embedder=emb, headers=True)
    chunker, _ = resolve_chunker("recursive", params, emb)
    default, _ = resolve_chunker("recursive", chunker_params("recursive", None, {}, embedder=emb, headers=True), emb)
    out, seen = [], set()
    for f in sorted(glob.glob(str(shared() / "*" / "documents.jsonl"))):
        for o in load(Path(f)):
            paras = []
            for p in re.split(r"\n\s*\n", o["text"]):
                paras += p.split("\n") if len(p) > 3000 else [p]
            for p in paras:
                p = p.strip()
                if len(p) < 150:
                    continue
                for c in chunker(Document(doc_id="p", text=p, title=o.get("title"))):
                    t = c.text.strip()
                    if len(t) < 150 or t in seen:
                        continue
                    seen.add(t)
                    marked = Document(doc_id="p", text=f"{t} (copy 99999) (replica 9)", title=o.get("title"))
                    if len(list(default(marked))) == 1:  # one chunk of the default chunker, marks and all
                        out.append((o["doc_id"], o.get("title") or "", t))
    return out


def corpus_100k(work: Path) -> Path:
    """The 100k corpus as JSON lines (see the module doc), written once."""
    f = work / "corpus-100k.jsonl"
    if f.exists():
        return f
    real = pool()
    rng = np.random.default_rng(0)
    picks = list(range(len(real))) + rng.integers(0, len(real), SIZES["100k"] - len(real)).tolist()
    copies = [0] * len(real)
    tmp = f.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        for n, i in enumerate(picks):
            src, title, text = real[i]
            if n >= len(real):
                copies[i] += 1
                text = f"{text} (copy {copies[i]})"
            out.write(json.dumps({"doc_id": f"s{n:07d}", "title": title, "text": text}) + "\n")
    tmp.rename(f)
    print(f"corpus 100k: {len(real)} distinct real passages, {SIZES['100k'] - len(real)} drawn again with "
          "replacement and marked '(copy N)'", file=sys.stderr)
    return f


def docs_of(work: Path, size: str):
    """The documents of corpus ``size`` (dicts ``doc_id, title, text``)."""
    if size == "5k":
        return load(shared() / "hotpotqa_dev500_pages" / "documents.jsonl")
    base = load(corpus_100k(work))
    if size == "100k":
        return base
    return [{"doc_id": f"{d['doc_id']}r{r}", "title": d["title"],
             "text": d["text"] + (f" (replica {r})" if r else "")} for r in range(10) for d in base]


class ReplayEmbedder:
    """The 1m corpus's embedder: each text's vector is that of its 100k passage (see the module doc), under the
    default model's id and checksum; queries go to the real model."""

    def __init__(self, real, table: dict[str, np.ndarray]):
        self.real, self.table = real, table
        self.model_id, self.checksum, self.dim = real.model_id, real.checksum, real.dim
        self.batch_independent = True

    def __getattr__(self, name):
        return getattr(self.real, name)

    def embed(self, texts, **_):
        out = np.empty((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            m = REPLICA.search(t)
            v = self.table[REPLICA.sub("", t)]
            if m:
                seed = int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "little")
                v = v + np.random.default_rng(seed).normal(0, NOISE, self.dim).astype(np.float32)
                v = v / np.linalg.norm(v)
            out[i] = v
        return out

    def embed_query(self, texts):
        fn = getattr(self.real, "embed_query", None)
        return fn(texts) if callable(fn) else self.real.embed(texts)


def indexed_texts(ix) -> tuple[np.ndarray, list[str]]:
    """Chunk ids and the text each raw view indexes for them (header + newline + chunk)."""
    from momoka.chunking.headers import headed, indexed_text

    bv = ix.store.bm25_view("raw")
    h = headed(bv.source)
    ids, texts = [], []
    for cid, _doc, text, meta in ix.store.chunks.scan():
        ids.append(cid)
        texts.append(f"{meta['header']}\n{text}" if h and meta.get("header") else text)
    return np.asarray(ids, np.int64), texts


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def build(work: Path, size: str) -> dict:
    """Build corpus ``size``'s store under ``work`` (once); its build record."""
    from momoka import Index
    from momoka.methods.pipeline import make_embedder

    rec_f, store = work / f"build-{size}.json", work / f"store-{size}"
    if rec_f.exists():
        return json.loads(rec_f.read_text())
    resume = (store / "manifest.json").exists()  # an interrupted build's committed generations
    if store.exists() and not resume:
        shutil.rmtree(store)
    docs = docs_of(work, size)
    emb = make_embedder("default")
    if size == "1m":
        ix = Index.open(work / "store-100k")
        ids, texts = indexed_texts(ix)
        vecs = ix.store.vector_view("raw").get(ids)
        ix.close()
        emb = ReplayEmbedder(emb, dict(zip(texts, vecs)))
    spent = {"cpu": 0.0, "wall": 0.0, "texts": 0}
    inner = emb.embed

    def timed(texts, *a, **kw):
        c, w = time.process_time(), time.perf_counter()
        try:
            return inner(texts, *a, **kw)
        finally:
            spent["cpu"] += time.process_time() - c
            spent["wall"] += time.perf_counter() - w
            spent["texts"] += len(texts)

    emb.embed = timed
    c0, w0 = time.process_time(), time.perf_counter()
    before = 0
    if resume:  # finish it: the documents already committed are skipped (same text, same hash)
        ix = Index.open(store, embedder=emb, writable=True, progress=True)
        before = ix.store.n_chunks
        ix.add(docs, existing="skip", commit=True)
        if ix.store.dirty:
            ix.save()
    else:
        ix = Index.build(docs, store=store, embedder=emb, progress=True)
    n = ix.store.n_chunks
    ix.close()
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    added = n - before  # the passages this run indexed (all of them unless it finished an interrupted build)
    rec = {"size": size, "documents": len(docs), "passages": n, "wall_s": wall, "cpu_s": cpu,
           "embed_cpu_s": spent["cpu"], "embed_wall_s": spent["wall"], "embedded_texts": spent["texts"],
           "embed_cpu_share": spent["cpu"] / cpu, "passages_per_s": added / wall,
           "embedder_passages_per_s": spent["texts"] / spent["wall"] if spent["wall"] else None,
           "disk_bytes": du(store), "disk_mb_per_100k": du(store) / 1e6 * 100_000 / n,
           "wall_s_per_100k": wall * 100_000 / added, "cpu_s_per_100k": cpu * 100_000 / added,
           "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
           "load": os.getloadavg(), "replayed_vectors": size == "1m",
           "resumed_at": before or None}  # times (and the rates) cover the passages after resumed_at
    rec_f.write_text(json.dumps(rec, indent=1))
    print(json.dumps(rec), file=sys.stderr)
    return rec


# ---------------------------------------------------------------------------------------------- measuring


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def questions(n: int) -> list[str]:
    """The first questions of the shared sets, taken in turn (see the module doc)."""
    per = [[json.loads(x)["question"] for x in open(shared() / s / "questions.jsonl", encoding="utf-8") if x.strip()]
           for s in QUESTION_SETS]
    out = []
    for i in range(n):
        out.append(per[i % len(per)][i // len(per)])
    return out


def pct(xs) -> dict:
    a = np.asarray(xs) * 1000
    return {"p50_ms": float(np.percentile(a, 50)), "p99_ms": float(np.percentile(a, 99)), "mean_ms": float(a.mean())}


def step_profile(ix, qs: list[str]) -> dict:
    """Seconds per step of the default (``Index.search(q, budget=BUDGET)``), summed over ``qs``."""
    from momoka.methods.standard import retrievers as R
    from momoka.store.bm25_view import BM25View
    from momoka.store.vectors import VectorView

    spent: dict[str, float] = {}
    saved = []

    def wrap(owner, name, key):
        fn = getattr(owner, name)
        saved.append((owner, name, fn))

        def timed(*a, **kw):
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                spent[key] = spent.get(key, 0.0) + time.perf_counter() - t
        setattr(owner, name, timed)

    wrap(type(ix.corpus), "embed_queries", "query embedding")
    wrap(VectorView, "search", "dense (HNSW)")
    wrap(BM25View, "search", "bm25")
    wrap(R, "convex", "fusion")
    wrap(R, "document_prior", "document prior")
    wrap(R.HybridRetriever, "_cover", "coverage re-rank")
    wrap(R, "link_titles", "title links")
    wrap(R.HybridRetriever, "_named_parts", "named documents: find titles")
    wrap(R.HybridRetriever, "_named", "named documents: rank parts")
    total = 0.0
    try:
        for q in qs:
            t = time.perf_counter()
            ix.search(q, budget=BUDGET)
            total += time.perf_counter() - t
    finally:
        for owner, name, fn in reversed(saved):
            setattr(owner, name, fn)
    # "_named" ranks its parts through the same dense/bm25/fusion steps: those are counted there too
    own = dict(spent)
    rest = total - sum(v for k, v in own.items() if k != "named documents: rank parts")
    out = {k: {"ms_per_query": 1000 * v / len(qs), "share": v / total} for k, v in sorted(own.items())}
    out["rest (result objects, assembly, locating)"] = {"ms_per_query": 1000 * rest / len(qs), "share": rest / total}
    out["_total_ms_per_query"] = 1000 * total / len(qs)
    out["_note"] = ("'named documents: rank parts' includes the dense, bm25, fusion and coverage work of the named "
                    "parts, which is also counted in those steps; the rest is the total minus every other step")
    return out


def bm25s_peer(texts: list[str], qs: list[str], k: int) -> tuple[dict, object]:
    """bm25s over ``texts`` (module doc): its build time and per-query latency, and the index."""
    import bm25s

    try:
        import numba  # noqa: F401

        backend = "numba"
    except ImportError:
        backend = "numpy"
    t = time.perf_counter()
    bm = bm25s.BM25(backend=backend)
    bm.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    built = time.perf_counter() - t
    tok = [bm25s.tokenize([q], stopwords="en", show_progress=False, return_ids=False) for q in qs]
    for q in tok[:20]:
        bm.retrieve(q, k=k, show_progress=False, n_threads=1)
    times, whole = [], []
    for q in qs:
        t = time.perf_counter()
        qt = bm25s.tokenize([q], stopwords="en", show_progress=False, return_ids=False)
        t1 = time.perf_counter()
        docs, _ = bm.retrieve(qt, k=k, show_progress=False, n_threads=1)
        t2 = time.perf_counter()
        times.append(t2 - t1)
        whole.append(t2 - t)
    return {"backend": backend, "build_s": built, "retrieve": pct(times), "with_tokenizing": pct(whole)}, bm


def tantivy_peer(texts: list[str], qs: list[str], k: int, where: Path) -> tuple[dict, object]:
    """tantivy over ``texts`` in folder ``where`` (module doc): build time, per-query latency, size, and a
    function that runs one query."""
    import tantivy

    sb = tantivy.SchemaBuilder()
    sb.add_text_field("text", stored=False, tokenizer_name="en_stem")
    schema = sb.build()
    if where.exists():
        shutil.rmtree(where)
    where.mkdir(parents=True)
    t = time.perf_counter()
    index = tantivy.Index(schema, path=str(where))
    writer = index.writer(heap_size=512_000_000, num_threads=2)
    for x in texts:
        writer.add_document(tantivy.Document(text=x))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    built = time.perf_counter() - t
    searcher = index.searcher()
    clean = re.compile(r"[^\w\s]")

    def run(q):
        query = index.parse_query(clean.sub(" ", q), ["text"])
        return searcher.search(query, k).hits

    for q in qs[:20]:
        run(q)
    times = []
    for q in qs:
        t = time.perf_counter()
        run(q)
        times.append(time.perf_counter() - t)
    return {"build_s": built, "search": pct(times), "disk_mb": du(where) / 1e6}, run


def measure(work: Path, size: str, n: int, peers_too: bool = True) -> dict:
    """Warm latencies, step shares and memory of the default on corpus ``size``, and the peers (module doc)."""
    import hnswlib

    from momoka import Index

    store = work / f"store-{size}"
    qs = questions(n)
    rss0 = rss_mb()
    t = time.perf_counter()
    ix = Index.open(store)
    opened = time.perf_counter() - t
    rss_open = rss_mb()
    t = time.perf_counter()
    ix.search(qs[0], budget=BUDGET)
    first = time.perf_counter() - t
    for q in qs:
        ix.search(q, budget=BUDGET)
    rss_warm = rss_mb()
    k = ix.corpus.depth_for(BUDGET)
    modes = {"bm25": dict(retriever="bm25", assemble=False), "dense": dict(retriever="dense", assemble=False),
             "hybrid": dict(retriever="hybrid", assemble=False), "default": {}}
    times: dict[str, list[float]] = {m: [] for m in modes}
    bm25_native: list[float] = []
    bv = ix.store.bm25_view("raw")
    for q in qs:  # the modes in turn, question by question: each sees the same load
        for m, opts in modes.items():
            t = time.perf_counter()
            ix.search(q, budget=BUDGET, **opts)
            times[m].append(time.perf_counter() - t)
        t = time.perf_counter()
        bv.search(q, k)
        bm25_native.append(time.perf_counter() - t)
    load_during = os.getloadavg()
    out = {"passages": ix.store.n_chunks, "questions": len(qs), "k": k, "budget": BUDGET,
           "open_s": opened, "first_search_s": first,
           "rss_mb": {"before_open": rss0, "open": rss_open, "warm": rss_warm},
           **{m: pct(v) for m, v in times.items()}, "bm25_view_search": pct(bm25_native), "load": load_during}
    out["hybrid_over_dense"] = {p: out["hybrid"][p] / out["dense"][p] for p in ("p50_ms", "p99_ms")}
    out["default_over_dense"] = {p: out["default"][p] / out["dense"][p] for p in ("p50_ms", "p99_ms")}
    print(f"[{size}] momoka " + json.dumps({m: out[m] for m in modes}), file=sys.stderr)
    out["steps"] = step_profile(ix, qs)
    print(f"[{size}] steps " + json.dumps(out["steps"]), file=sys.stderr)
    print(f"[{size}] first search {first:.2f} s, open {opened:.2f} s, RSS {out['rss_mb']}", file=sys.stderr)
    if not peers_too:
        ix.close()
        return out

    ids, texts = indexed_texts(ix)
    vv = ix.store.vector_view("raw")
    emb = ix.corpus.embedding.for_view("raw")
    peers: dict = {}
    b, bm = bm25s_peer(texts, qs, k)
    peers["bm25s"] = b
    print(f"[{size}] bm25s {json.dumps(b)}", file=sys.stderr)
    peers["tantivy"], _ = tantivy_peer(texts, qs, k, work / f"tantivy-{size}")
    print(f"[{size}] tantivy {json.dumps(peers['tantivy'])}", file=sys.stderr)
    del texts
    gc.collect()
    hp = dict(vv.hnsw_params)
    t = time.perf_counter()
    if len(ids) <= LOAD_GRAPHS_ABOVE:  # hnswlib over the same vectors, built with the vector view's settings
        vecs = vv.get(ids)
        h = hnswlib.Index(space="ip", dim=vecs.shape[1])
        h.init_index(max_elements=len(ids), M=hp.get("M", 32), ef_construction=hp.get("ef_construction", 200),
                     random_seed=100)
        h.add_items(vecs, ids, num_threads=2)
        h.set_ef(hp.get("ef_search", 128))
        del vecs
        graphs = [h]
    else:  # hnswlib over momoka's own graph files, each part's graph loaded by hnswlib itself
        graphs = []
        rel = vv._files()[3]
        for vp in vv._parts:
            if vp.n == 0:
                continue
            g = hnswlib.Index(space="ip", dim=vv.dim)
            if vp.part is not None and vp.part.has(rel):
                g.load_index(str(vp.part.path(rel)), max_elements=vp.n)
            else:
                g.init_index(max_elements=max(vp.n, 16), M=hp.get("M", 32), ef_construction=hp.get("ef_construction", 200))
                g.add_items(np.asarray(vp.rows[: vp.n], np.float32), vp.ids[: vp.n])
            g.set_ef(hp.get("ef_search", 128))
            graphs.append(g)
    hbuilt = time.perf_counter() - t

    class Graphs:  # one graph, or the parts' graphs searched in turn and merged
        def knn_query(self, v, k, num_threads=1):
            if len(graphs) == 1:
                return graphs[0].knn_query(v, k=k, num_threads=num_threads)
            hits = []
            for g in graphs:
                lab, dist = g.knn_query(v, k=min(k, g.get_current_count()), num_threads=num_threads)
                hits += zip(dist[0].tolist(), lab[0].tolist())
            hits.sort()
            return np.array([[x for _, x in hits[:k]]]), np.array([[d for d, _ in hits[:k]]])

    h = Graphs()
    qv_all = ix.corpus.embed_queries(qs)
    recall = np.mean([len({c for c, _ in vv.search(v, k)} & set(h.knn_query(v[None, :], k=k)[0][0].tolist())) / k
                      for v in qv_all[:50]])
    d_times, p1_times = [], []
    for q in qs:
        t = time.perf_counter()
        v = np.asarray(emb.embed_query([q]) if hasattr(emb, "embed_query") else emb.embed([q]), np.float32)
        labels, _ = h.knn_query(v, k=k, num_threads=1)
        d_times.append(time.perf_counter() - t)
        t = time.perf_counter()  # P1: LangChain's EnsembleRetriever as bench/tables/retrieval_tables.py has it
        v = np.asarray(emb.embed_query([q]) if hasattr(emb, "embed_query") else emb.embed([q]), np.float32)
        dense20 = h.knn_query(v, k=20, num_threads=1)[0][0]
        qt = __import__("bm25s").tokenize([q], stopwords="en", show_progress=False, return_ids=False)
        lex20 = bm.retrieve(qt, k=20, show_progress=False, n_threads=1)[0][0]
        fused: dict[int, float] = {}
        for ranking in (lex20, dense20):
            for rank, i in enumerate(ranking, start=1):
                fused[int(i)] = fused.get(int(i), 0.0) + 1.0 / (60 + rank)
        sorted(fused, key=lambda i: -fused[i])[:k]
        p1_times.append(time.perf_counter() - t)
    peers["hnswlib"] = {"build_s": hbuilt, "graphs": len(graphs),
                        "how": "built over the view's vectors" if len(graphs) == 1 and len(ids) <= LOAD_GRAPHS_ABOVE
                        else "momoka's graph files loaded by hnswlib, searched in turn", "search_with_embedding": pct(d_times),
                        "recall_of_momoka_dense_vs_hnswlib_top_k": float(recall), "params": hp}
    peers["P1 ensemble (bm25s + hnswlib, RRF)"] = pct(p1_times)
    out["peers"] = peers
    out["load_end"] = os.getloadavg()
    print(f"[{size}] peers " + json.dumps(peers), file=sys.stderr)
    ix.close()
    return out


def ab(work: Path, size: str, n: int) -> dict:
    """The default with this release's query-path changes against the code before them, in one process,
    alternating question by question: the coverage re-rank's plain loop (``tests/_oracles/coverage.py``),
    BLAS's own threads for the exact vector product, and the graph parts searched one after another."""
    sys.path.insert(0, str(ROOT / "tests"))
    from _oracles.coverage import cover_held_loop

    from momoka import Index
    from momoka.methods.standard import retrievers as R
    from momoka.store import vectors as V

    ix = Index.open(work / f"store-{size}")
    qs = questions(n)
    fast_cover = R.cover_held

    def side(before: bool) -> None:
        R.cover_held = cover_held_loop if before else fast_cover
        V._blas[:] = [None] if before else []
        V._pool[:] = [None] if before else []

    times: dict[str, list[float]] = {"before": [], "now": []}
    same = True
    for q in qs[:20]:
        ix.search(q, budget=BUDGET)
    for q in qs:
        got = {}
        for name in ("before", "now"):
            side(name == "before")
            t = time.perf_counter()
            r = ix.search(q, budget=BUDGET)
            times[name].append(time.perf_counter() - t)
            got[name] = [(m.doc_id, m.start, m.end) for it in r for m in it.members]
        same &= got["before"] == got["now"]
    side(False)
    out = {k: pct(v) for k, v in times.items()}
    out.update(results_equal=bool(same), questions=len(qs), load=os.getloadavg())
    print(f"[{size}] before/now " + json.dumps(out), file=sys.stderr)
    ix.close()
    return out


def report(work: Path, out_json: Path) -> str:
    """Markdown tables of the measurements in ``out_json`` and the build records in ``work``."""
    res = json.loads(out_json.read_text()) if out_json.exists() else {}
    f = lambda x: f"{x:.2f}" if x < 10 else f"{x:.1f}"  # noqa: E731
    lines = ["| passages | bm25 | dense | hybrid | default (assembled) | hybrid / dense | load |", "|---|---|---|---|---|---|---|"]
    for s, r in res.items():
        if "default" not in r:
            continue
        cell = lambda m: f"{f(r[m]['p50_ms'])} / {f(r[m]['p99_ms'])}"  # noqa: E731
        lines.append(f"| {r['passages']:,} ({s}) | {cell('bm25')} | {cell('dense')} | {cell('hybrid')} | {cell('default')} | "
                     f"{r['hybrid_over_dense']['p50_ms']:.2f} / {r['hybrid_over_dense']['p99_ms']:.2f} | "
                     f"{r['load'][0]:.1f} |")
    lines += ["", "| passages | momoka BM25 view (one query, tokenising included) | bm25s retrieve / with tokenising | "
              "tantivy | momoka dense (embedding incl.) | hnswlib (embedding incl.) | momoka hybrid | P1 ensemble |",
              "|---|---|---|---|---|---|---|---|"]
    for s, r in res.items():
        p = r.get("peers")
        if not p:
            continue
        c = lambda d: f"{f(d['p50_ms'])} / {f(d['p99_ms'])}"  # noqa: E731
        lines.append(f"| {r['passages']:,} | {c(r['bm25_view_search'])} | {c(p['bm25s']['retrieve'])}; "
                     f"{c(p['bm25s']['with_tokenizing'])} ({p['bm25s']['backend']}) | {c(p['tantivy']['search'])} | "
                     f"{c(r['dense'])} | {c(p['hnswlib']['search_with_embedding'])} | {c(r['hybrid'])} | "
                     f"{c(p['P1 ensemble (bm25s + hnswlib, RRF)'])} |")
    keys = ["query embedding", "dense (HNSW)", "bm25", "fusion", "document prior", "coverage re-rank", "title links",
            "named documents: find titles", "named documents: rank parts", "rest (result objects, assembly, locating)"]
    lines += ["", "| passages | " + " | ".join(keys) + " | total |", "|---" * (len(keys) + 2) + "|"]
    for s, r in res.items():
        st = r.get("steps")
        if st:
            lines.append(f"| {r['passages']:,} | " + " | ".join(
                f"{st[k]['ms_per_query']:.2f} ms ({100 * st[k]['share']:.0f} %)" if k in st else "0" for k in keys)
                + f" | {st['_total_ms_per_query']:.1f} ms |")
    lines += ["", "| passages | open | first search (title tables) | RSS open / warm | build wall (per 100k) | "
              "build CPU in the embedder | disk per 100k | load |", "|---|---|---|---|---|---|---|---|"]
    for s in SIZES:
        b = json.loads((work / f"build-{s}.json").read_text()) if (work / f"build-{s}.json").exists() else None
        r = res.get(s, {})
        if b is None and not r:
            continue
        rss = r.get("rss_mb", {})
        lines.append(f"| {(b or r)['passages']:,} | {r.get('open_s', float('nan')):.2f} s | "
                     f"{r.get('first_search_s', float('nan')):.2f} s | "
                     f"{rss.get('open', float('nan')) - rss.get('before_open', 0):.0f} / "
                     f"{rss.get('warm', float('nan')) - rss.get('before_open', 0):.0f} MB | "
                     + (f"{b['wall_s']:.0f} s ({b['wall_s_per_100k']:.0f} s) | {100 * b['embed_cpu_share']:.1f} % "
                        f"({b['passages_per_s']:.1f} passages/s, embedder alone {b['embedder_passages_per_s']:.1f}) | "
                        f"{b['disk_mb_per_100k']:.0f} MB | {b['load'][0]:.1f} |" if b else "| | | |"))
    for s, r in res.items():
        if "before_and_now" in r:
            a = r["before_and_now"]
            lines.append(f"\n{s}: default before {f(a['before']['p50_ms'])} / {f(a['before']['p99_ms'])} ms, now "
                         f"{f(a['now']['p50_ms'])} / {f(a['now']['p99_ms'])} ms (p50 / p99, {a['questions']} questions, "
                         f"results equal: {a['results_equal']}, load {a['load'][0]:.1f})")
    return "\n".join(lines)


def bm25_only(work: Path, size: str, n: int, k: int = 26) -> dict:
    """BM25 alone over corpus ``size``'s indexed texts (title + newline + text, as the store indexes a passage
    with its header): momoka's native index built here with the view's default parameters, against bm25s and
    tantivy, one query at a time (no store: the 1m point without waiting for its vectors)."""
    from momoka.store.bm25 import BM25
    from momoka.store.bm25_view import DEFAULT_BM25

    texts = [f"{d['title']}\n{d['text']}" if d.get("title") else d["text"] for d in docs_of(work, size)]
    qs = questions(n)
    t = time.perf_counter()
    ix = BM25(**DEFAULT_BM25)
    ix.add(texts)
    built = time.perf_counter() - t
    for q in qs[:20]:
        ix.search(q, k)
    times = []
    for q in qs:
        t = time.perf_counter()
        ix.search(q, k)
        times.append(time.perf_counter() - t)
    out = {"passages": len(texts), "k": k, "momoka": {"build_s": built, "search": pct(times)}}
    saved = ix.to_bytes()  # back for the rounds below, after the peers are built
    del ix
    gc.collect()
    out["bm25s"], bm = bm25s_peer(texts, qs, k)
    gc.collect()
    out["tantivy"], tv = tantivy_peer(texts, qs, k, work / f"tantivy-{size}")
    del texts
    gc.collect()
    # the three again in rounds (each one's warm loop over the questions, then the next's; three rounds), so
    # that each sees the same load over the run without one's queries evicting another's data between two
    # queries of the same engine (tantivy's 40 ms ones would)
    import bm25s

    ix = BM25.from_bytes(saved)
    del saved
    for q in qs[:20]:
        ix.search(q, k)
    runs = {"momoka": lambda q: ix.search(q, k),
            "bm25s (query tokenised by bm25s)": lambda q: bm.retrieve(
                bm25s.tokenize([q], stopwords="en", show_progress=False, return_ids=False), k=k,
                show_progress=False, n_threads=1),
            "tantivy": tv}
    turns: dict[str, list[float]] = {name: [] for name in runs}
    cpu: dict[str, list[float]] = {name: [] for name in runs}  # the process's CPU time per query (all threads)
    for _ in range(3):
        for name, run in runs.items():
            for q in qs[:20]:
                run(q)
            for q in qs:
                c, t = time.process_time(), time.perf_counter()
                run(q)
                turns[name].append(time.perf_counter() - t)
                cpu[name].append(time.process_time() - c)
    inter = {name: pct(v) for name, v in turns.items()}
    m = inter["momoka"]
    inter["bm25s_over_momoka"] = {p: inter["bm25s (query tokenised by bm25s)"][p] / m[p] for p in ("p50_ms", "p99_ms")}
    inter["tantivy_over_momoka"] = {p: inter["tantivy"][p] / m[p] for p in ("p50_ms", "p99_ms")}
    # CPU time per query: what a query costs the machine, whatever else runs on it (wall time on a shared
    # machine also counts the time the process waited for a core)
    inter["cpu"] = {name: pct(v) for name, v in cpu.items()}
    mc = inter["cpu"]["momoka"]
    inter["cpu"]["bm25s_over_momoka"] = {p: inter["cpu"]["bm25s (query tokenised by bm25s)"][p] / mc[p]
                                         for p in ("p50_ms", "p99_ms")}
    inter["cpu"]["tantivy_over_momoka"] = {p: inter["cpu"]["tantivy"][p] / mc[p] for p in ("p50_ms", "p99_ms")}
    inter["rounds"] = 3
    out["rounds"] = inter
    out["load"] = os.getloadavg()
    print(f"[{size}] bm25 alone " + json.dumps(out), file=sys.stderr)
    return out


# ---------------------------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", required=True, help="folder for the corpora, stores and records (reused)")
    ap.add_argument("phase", choices=("corpus", "build", "measure", "ab", "bm25", "report"))
    ap.add_argument("--size", nargs="+", default=list(SIZES), choices=list(SIZES))
    ap.add_argument("--n", type=int, default=200, help="questions timed")
    ap.add_argument("--out", help="write the measurements here as JSON")
    ap.add_argument("--no-peers", action="store_true", help="momoka alone")
    args = ap.parse_args()
    if not (shared() / "hotpotqa_dev500_pages").is_dir():
        print(f"skipped: {shared()} holds no shared sets", file=sys.stderr)
        return
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if args.phase == "corpus":
        corpus_100k(work)
    elif args.phase == "report":
        print(report(work, Path(args.out or ROOT / "bench" / "micro" / "bench_scale.json")))
    elif args.phase == "build":
        for s in args.size:
            build(work, s)
            gc.collect()
    else:
        for s in args.size:
            res = (measure(work, s, args.n, not args.no_peers) if args.phase == "measure" else
                   ab(work, s, args.n) if args.phase == "ab" else bm25_only(work, s, args.n))
            if args.out:  # sizes measured in separate runs are kept side by side
                out = Path(args.out)
                results = json.loads(out.read_text()) if out.exists() else {}
                results.setdefault(s, {})
                if args.phase == "measure":
                    results[s].update(res)
                else:
                    results[s]["before_and_now" if args.phase == "ab" else "bm25_alone"] = res
                out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
