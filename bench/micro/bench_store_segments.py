"""Store write amplification, commit time and query latency: the code under test against a baseline release.

What it measures, for each side in a child process of its own (``--child``), on the same passages:

1. ``Index.build(docs, store=DIR, commit_docs=C, embedder=E, chunker="recursive", size=100)`` of N real
   passages, each one document ``{"doc_id", "text"}``, committing every C documents (default 256;
   ``commit_seconds`` is set out of reach so that only the document count triggers commits). E is a
   deterministic hash embedder of dimension 384 written here (hashed words, L2-normalised): the store's
   costs depend on the vectors' shape, not on the model that made them, and no model time hides them.

   * bytes written by the child during the build: ``write_bytes`` of ``/proc/self/io`` (what reached the
     page cache for the disk; minus ``cancelled_write_bytes``) and ``wchar`` (bytes passed to write calls);
   * the final store size: the ``bytes`` of every file the current manifest lists (every ``bytes`` field
     under ``artifacts`` and ``segments``) plus ``manifest.json``, and ``du -sb`` of the store folder
     (which also counts a previous generation kept for old readers);
   * write amplification: bytes written / final size (target for the segment store: <= 3);
   * commit times: ``momoka.store.store.Store.save`` is wrapped to time each call, with the documents in
     the store at that moment and the bytes it wrote; the median of commits #2-#6 (around 1,000
     documents at C=256), the median of the last five commits before the final one, their ratio
     (target <= 2) and the longest commit.

2. Query latency on the built store, opened read-only with ``Index.open(DIR, embedder=E)``: Q questions
   of the shared sets (default 200, the sets in name order, one question of each in turn) through
   ``index.search(q, k=10, retriever=R)`` for R in dense, bm25, hybrid, one query at a time, after one
   warm-up pass; mean and p50 ms. When the side has ``Index.optimize()`` (the segment store merges
   everything into one segment), it is called and the queries are timed again; the table gives the
   many-segments / one-segment ratios. The number of segments is ``len(manifest["segments"])``, or 1
   for a store without segments.

Passages: the documents of ``$MOMOKA_SHARED_DATA/*/documents.jsonl`` (default ``../shared/data`` beside
the repository; the sets in name order, documents in file order) split at blank lines, stripped, kept
when at least 200 characters long and not seen before: about 6,000 paragraphs. The sets hold no
more, so when N is larger the list goes on with a second round over the same documents: each paragraph
longer than 400 characters cut at sentence ends into passages of 200-400 characters (again only
strings not seen before). The store's costs depend on the number and length of passages, not on whether
their words appeared before; the output says how many passages came from each round.

The code under test is this checkout's ``python/`` (or whatever ``momoka`` is importable when the
checkout has none); the baseline is ``--baseline DIR``, a folder holding a ``momoka`` package with its
built ``_core*.so``, put first on the child's ``PYTHONPATH``. ``--side current`` or ``--side baseline``
runs one side only. Each child prints one JSON line; the parent prints the table, the ratios (current /
baseline), ``uptime`` before and after, the CPU model and the command line; ``--out FILE.json`` keeps
every number. Progress goes to stderr. Stores are made in a temporary folder (``--tmp``) and deleted.

Run:  PYTHONPATH=python python bench/micro/bench_store_segments.py --baseline OLD/python [--n 20000] [--out FILE.json]
      PYTHONPATH=python python -m pytest bench/micro/bench_store_segments.py --benchmark-only -s   (2,000 passages)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DIM = 384
RETRIEVERS = ("dense", "bm25", "hybrid")
MIN_CHARS = 200
#: Second round: paragraphs longer than this are cut at sentence ends into passages of at most CUT_MAX chars.
CUT_OVER, CUT_MAX = 400, 400
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------- inputs


def shared_data(arg: str | None) -> Path | None:
    """``--data``, else ``$MOMOKA_SHARED_DATA``, else ``../shared/data`` beside the repository; None if absent."""
    for c in ([arg] if arg else []) + ([os.environ["MOMOKA_SHARED_DATA"]] if os.environ.get("MOMOKA_SHARED_DATA")
                                       else []) + [str(REPO.parent / "shared" / "data")]:
        if Path(c).is_dir() and any(Path(c).glob("*/documents.jsonl")):
            return Path(c)
    return None


def _cut(paragraph: str) -> list[str]:
    """``paragraph`` cut at sentence ends into pieces of MIN_CHARS..CUT_MAX characters (a short tail joins
    the piece before it; a sentence longer than CUT_MAX stays whole)."""
    out: list[str] = []
    cur = ""
    for s in _SENTENCE_END.split(paragraph):
        if cur and len(cur) >= MIN_CHARS and len(cur) + 1 + len(s) > CUT_MAX:
            out.append(cur)
            cur = s
        else:
            cur = f"{cur} {s}" if cur else s
    if cur:
        if out and len(cur) < MIN_CHARS:
            out[-1] = f"{out[-1]} {cur}"
        else:
            out.append(cur)
    return out


def passages(data: Path, n: int) -> tuple[list[str], dict]:
    """The first ``n`` passages (see the module's docstring) and how many came from each round."""
    paragraphs: list[str] = []
    for f in sorted(data.glob("*/documents.jsonl")):
        with open(f, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    paragraphs.extend(p.strip() for p in re.split(r"\n[ \t\r\f\v]*\n", json.loads(line)["text"]))
    seen: dict[str, None] = {}
    for p in paragraphs:
        if len(p) >= MIN_CHARS and p not in seen:
            seen[p] = None
            if len(seen) >= n:
                break
    first = len(seen)
    if len(seen) < n:
        for p in paragraphs:
            if len(p) > CUT_OVER:
                for piece in _cut(p):
                    piece = piece.strip()
                    if len(piece) >= MIN_CHARS and piece not in seen:
                        seen[piece] = None
                if len(seen) >= n:
                    break
    out = list(seen)[:n]
    return out, {"paragraphs": min(first, len(out)), "sentence_cut": max(0, len(out) - first),
                 "chars": sum(len(p) for p in out)}


def questions(data: Path, q: int) -> list[str]:
    """``q`` questions: the sets in name order, one question of each in turn."""
    per_set = []
    for f in sorted(data.glob("*/questions.jsonl")):
        with open(f, encoding="utf-8") as fh:
            per_set.append([json.loads(line)["question"] for line in fh if line.strip()])
    out: list[str] = []
    i = 0
    while len(out) < q and any(i < len(s) for s in per_set):
        out.extend(s[i] for s in per_set if i < len(s))
        i += 1
    return out[:q]


class HashEmbedder:
    """Deterministic bag-of-words vectors (each word hashed to one of ``dim`` buckets), L2-normalised.

    Cheap and model-free: the store's costs depend on the vectors' shape only."""

    def __init__(self, dim: int = DIM):
        self.dim = dim
        self.model_id = f"bench/hash-embedder-{dim}"
        self.checksum = hashlib.sha256(f"{self.model_id}:{dim}".encode()).hexdigest()
        self._bucket: dict[str, int] = {}

    def embed(self, texts):
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        bucket = self._bucket
        for i, t in enumerate(texts):
            row = out[i]
            for w in re.findall(r"[a-z0-9]+", t.lower()):
                b = bucket.get(w)
                if b is None:
                    b = bucket[w] = int.from_bytes(hashlib.md5(w.encode()).digest()[:4], "little") % self.dim
                row[b] += 1.0
            norm = float(np.linalg.norm(row))
            if norm:
                row /= norm
            else:
                row[0] = 1.0  # a text without words: still a unit vector
        return out


# ---------------------------------------------------------------------------------------------- child


def proc_io() -> dict:
    with open("/proc/self/io") as f:
        return {k: int(v) for k, v in (line.split(":") for line in f if ":" in line)}


def _written(a: dict, b: dict) -> int:
    return (b["write_bytes"] - a["write_bytes"]) - (b["cancelled_write_bytes"] - a["cancelled_write_bytes"])


def _bytes_fields(x) -> int:
    if isinstance(x, dict):
        return sum(int(v) if k == "bytes" and isinstance(v, (int, float)) else _bytes_fields(v) for k, v in x.items())
    if isinstance(x, list):
        return sum(_bytes_fields(v) for v in x)
    return 0


def store_size(path: Path) -> dict:
    manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    listed = _bytes_fields(manifest.get("artifacts") or []) + _bytes_fields(manifest.get("segments") or [])
    du = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=True)
    return {"manifest_bytes": listed + (path / "manifest.json").stat().st_size, "du_bytes": int(du.stdout.split()[0]),
            "segments": len(manifest.get("segments") or []) or 1}


def segments_of(index) -> int:
    return len(index.store.manifest.get("segments") or []) or 1


def query_latency(index, qs: list[str]) -> dict:
    import numpy as np

    out = {}
    for r in RETRIEVERS:
        for q in qs:  # warm-up pass: loads BM25 / HNSW, fills caches
            index.search(q, k=10, retriever=r)
        times = []
        for q in qs:
            t = time.perf_counter()
            index.search(q, k=10, retriever=r)
            times.append((time.perf_counter() - t) * 1000)
        out[r] = {"mean_ms": float(np.mean(times)), "p50_ms": float(np.percentile(times, 50)),
                  "p95_ms": float(np.percentile(times, 95))}
        log(f"  {r}: mean {out[r]['mean_ms']:.3f} ms, p50 {out[r]['p50_ms']:.3f} ms")
    return out


def _cpu() -> float:
    """CPU seconds of this process so far (all threads): a commit's CPU time leaves out its fsync waits."""
    t = os.times()
    return t.user + t.system


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def child(args) -> dict:
    import resource

    import momoka
    from momoka import Index
    from momoka.store import store as store_mod

    data = shared_data(args.data)
    docs_text, origin = passages(data, args.n)
    qs = questions(data, args.queries)
    docs = [{"doc_id": f"p{i:06d}", "text": t} for i, t in enumerate(docs_text)]
    log(f"{args.label}: momoka {momoka.__version__} from {Path(momoka.__file__).parent}; {len(docs)} passages "
        f"({origin['paragraphs']} paragraphs + {origin['sentence_cut']} sentence-cut), {len(qs)} questions")

    commits: list[dict] = []
    original_save = getattr(store_mod.Store, "save", None)

    def timed_save(self, *a, **kw):
        io0, cpu0 = proc_io(), _cpu()
        t = time.perf_counter()
        try:
            return original_save(self, *a, **kw)
        finally:
            dt = time.perf_counter() - t
            commits.append({"docs": len(self.documents), "seconds": dt, "cpu_s": _cpu() - cpu0,
                            "bytes": _written(io0, proc_io())})
            if len(commits) % 10 == 0:
                log(f"  commit #{len(commits)} at {len(self.documents)} docs: {dt:.3f} s")

    if original_save is None:
        log(f"{args.label}: momoka.store.store.Store has no save(): commit times are not measured")
    else:
        store_mod.Store.save = timed_save
    tmp = Path(tempfile.mkdtemp(prefix=f"momoka-segbench-{args.label}-", dir=args.tmp))
    path = tmp / "store"
    if args.embedder == "hash":
        emb, emb_label = HashEmbedder(), f"hash, dim {DIM}"
    else:  # the default model (its query embedding is part of every dense and hybrid query's time)
        from momoka.methods.sources import load_embedder

        emb = load_embedder(None)
        emb_label = f"{emb.model_id} (the default model), dim {emb.dim}"
    result: dict = {"label": args.label, "momoka_version": momoka.__version__,
                    "momoka_dir": str(Path(momoka.__file__).parent), "n": len(docs), "passages": origin,
                    "queries": len(qs), "commit_docs": args.commit, "embedder": emb_label}
    try:
        result["load_before"] = os.getloadavg()
        io0, ru0, t0 = proc_io(), resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        index = Index.build(docs, store=path, commit_docs=args.commit, commit_seconds=1e9, embedder=emb,
                            chunker="recursive", size=100, progress=False)
        wall = time.perf_counter() - t0
        io1, ru1 = proc_io(), resource.getrusage(resource.RUSAGE_SELF)
        result["chunks"] = index.store.n_chunks
        index.close()
        if original_save is not None:
            store_mod.Store.save = original_save
        if not commits:
            log(f"{args.label}: no Store.save() call was seen: commit times are n/a")
        size = store_size(path)
        written = _written(io0, io1)
        n_commits = len(commits)
        early, late = commits[1:6], commits[max(0, n_commits - 6):n_commits - 1]
        result["build"] = {
            "wall_s": wall, "cpu_s": (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime),
            "write_bytes": written, "wchar": io1["wchar"] - io0["wchar"], **size,
            "amplification": written / size["manifest_bytes"], "commits": n_commits,
            "commit_1k_docs": [c["docs"] for c in early], "commit_end_docs": [c["docs"] for c in late],
            "commit_max_s": max((c["seconds"] for c in commits), default=None),
            "commit_total_s": sum(c["seconds"] for c in commits), "commit_log": commits,
            "load_after_build": os.getloadavg(),
        }
        b = result["build"]
        for key, field in (("s", "seconds"), ("cpu_s", "cpu_s"), ("bytes", "bytes")):
            b[f"commit_1k_{key}"] = _median([c[field] for c in early])
            b[f"commit_end_{key}"] = _median([c[field] for c in late])
        b["commit_ratio"] = b["commit_end_s"] / b["commit_1k_s"] if b["commit_1k_s"] else None
        log(f"{args.label}: built {len(docs)} docs in {wall:.1f} s, {n_commits} commits, wrote "
            f"{written / 1e6:.1f} MB for a {size['manifest_bytes'] / 1e6:.1f} MB store ({b['amplification']:.1f}x)")

        index = Index.open(path, embedder=emb)
        result["segments"] = segments_of(index)
        log(f"{args.label}: queries on {result['segments']} segment(s)")
        result["latency"] = query_latency(index, qs)
        if hasattr(index, "writer"):
            io0, t0 = proc_io(), time.perf_counter()
            try:
                index.writer.optimize()
            except Exception as exc:  # a read-only reader may not merge: do it as the writer
                log(f"{args.label}: optimize on the reader failed ({exc!r}); optimizing as the writer")
                index.close()
                w = Index.open(path, embedder=emb, writable=True)
                w.writer.optimize()
                w.close()
                index = Index.open(path, embedder=emb)
            result["optimize"] = {"seconds": time.perf_counter() - t0, "write_bytes": _written(io0, proc_io())}
            index.close()
            index = Index.open(path, embedder=emb)
            result["optimize"].update(store_size(path))
            result["optimize"]["segments"] = segments_of(index)
            log(f"{args.label}: queries after optimize on {result['optimize']['segments']} segment(s)")
            result["latency_optimized"] = query_latency(index, qs)
        else:
            result["optimize"] = None
            result["latency_optimized"] = None
        index.close()
        result["load_after"] = os.getloadavg()
    finally:
        if original_save is not None:
            store_mod.Store.save = original_save
        shutil.rmtree(tmp, ignore_errors=True)
    return result


# ---------------------------------------------------------------------------------------------- parent


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip() + f" ({os.cpu_count()} CPUs)"
    except OSError:
        pass
    return f"unknown ({os.cpu_count()} CPUs)"


def run_side(label: str, pythonpath: list[str], args) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(pythonpath + [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                                      if p and p not in pythonpath])
    env["MOMOKA_PROGRESS"] = "0"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--label", label, "--n", str(args.n),
           "--commit", str(args.commit), "--queries", str(args.queries), "--embedder", args.embedder]
    for opt in ("data", "tmp"):
        if getattr(args, opt):
            cmd += [f"--{opt}", str(getattr(args, opt))]
    log(f"{label}: PYTHONPATH={env['PYTHONPATH']}")
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{label} side failed (exit {p.returncode})")
    return json.loads(p.stdout.strip().splitlines()[-1])


def _f(x, fmt: str = "{:.3f}") -> str:
    return "n/a" if x is None else fmt.format(x)


def _ratio(a, b) -> str:
    return "n/a" if a is None or b in (None, 0) else f"{a / b:.2f}x"


def _md(head: list[str], rows: list[list[str]]) -> list[str]:
    return (["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            + ["| " + " | ".join(r) + " |" for r in rows])


def table(results: list[dict]) -> str:
    """Markdown tables: build, commits, queries, queries after optimize; a current / baseline row under each."""
    pair = results if len(results) == 2 and results[1]["label"] == "baseline" else None
    mb = lambda x: _f(None if x is None else x / 1e6, "{:.1f}")  # noqa: E731
    build_keys = ("write_bytes", "manifest_bytes", "du_bytes", "amplification", "wall_s", "cpu_s")
    rows = [[r["label"], str(r["n"]), str(r["chunks"]), str(r["build"]["commits"]), mb(r["build"]["write_bytes"]),
             mb(r["build"]["manifest_bytes"]), mb(r["build"]["du_bytes"]), _f(r["build"]["amplification"], "{:.2f}"),
             _f(r["build"]["wall_s"], "{:.1f}"), _f(r["build"]["cpu_s"], "{:.1f}")] for r in results]
    if pair:
        rows.append(["current / baseline", "", "", ""] + [_ratio(pair[0]["build"][k], pair[1]["build"][k])
                                                          for k in build_keys])
    out = ["Build:", ""] + _md(["side", "N", "chunks", "commits", "written MB", "final MB", "du MB",
                                "written/final", "build s", "build CPU s"], rows)

    def end_1k(b, key):
        return None if not b[f"commit_1k_{key}"] else b[f"commit_end_{key}"] / b[f"commit_1k_{key}"]

    rows = []
    for r in results:
        b = r["build"]
        rows.append([r["label"], _f(b["commit_1k_s"]), _f(b["commit_end_s"]), _f(end_1k(b, "s"), "{:.2f}"),
                     _f(b["commit_max_s"]), _f(b["commit_total_s"], "{:.2f}"), _f(b["commit_1k_cpu_s"]),
                     _f(b["commit_end_cpu_s"]), _f(end_1k(b, "cpu_s"), "{:.2f}"), mb(b["commit_1k_bytes"]),
                     mb(b["commit_end_bytes"]), _f(end_1k(b, "bytes"), "{:.2f}")])
    if pair:
        c, bl = pair[0]["build"], pair[1]["build"]
        rows.append(["current / baseline"] + [_ratio(c[k], bl[k]) for k in ("commit_1k_s", "commit_end_s")]
                    + [_ratio(end_1k(c, "s"), end_1k(bl, "s"))] + [_ratio(c[k], bl[k]) for k in (
                        "commit_max_s", "commit_total_s", "commit_1k_cpu_s", "commit_end_cpu_s")]
                    + [_ratio(end_1k(c, "cpu_s"), end_1k(bl, "cpu_s"))]
                    + [_ratio(c[k], bl[k]) for k in ("commit_1k_bytes", "commit_end_bytes")]
                    + [_ratio(end_1k(c, "bytes"), end_1k(bl, "bytes"))])
    out += ["", "Commits (wall time includes fsync waits, which other disk traffic lengthens; CPU and bytes do "
            "not depend on it):", ""] + _md(
        ["side", "commit@1k s", "commit@end s", "end/1k", "max commit s", "all commits s", "commit@1k CPU s",
         "commit@end CPU s", "end/1k CPU", "commit@1k MB", "commit@end MB", "end/1k MB"], rows)

    rows = [[r["label"], str(r["segments"])] + [f"{r['latency'][q]['mean_ms']:.3f} / {r['latency'][q]['p50_ms']:.3f}"
                                                for q in RETRIEVERS] for r in results]
    if pair:
        rows.append(["current / baseline", ""] + [
            f"{_ratio(pair[0]['latency'][q]['mean_ms'], pair[1]['latency'][q]['mean_ms'])} / "
            f"{_ratio(pair[0]['latency'][q]['p50_ms'], pair[1]['latency'][q]['p50_ms'])}" for q in RETRIEVERS])
    out += ["", "Queries (k=10, one at a time, after a warm-up pass):", ""] + _md(
        ["side", "segments"] + [f"{q} mean / p50 ms" for q in RETRIEVERS], rows)

    rows = []
    for r in results:
        o, lo = r.get("optimize"), r.get("latency_optimized")
        if not o:
            rows.append([r["label"], "n/a (no Index.optimize)", "", "", ""] + ["n/a", "n/a"] * len(RETRIEVERS))
            continue
        rows.append([r["label"], f"{o['seconds']:.2f}", mb(o["write_bytes"]), mb(o["manifest_bytes"]),
                     str(o["segments"])] + [x for q in RETRIEVERS for x in (
                         f"{lo[q]['mean_ms']:.3f} / {lo[q]['p50_ms']:.3f}",
                         _ratio(r["latency"][q]["mean_ms"], lo[q]["mean_ms"]))])
    out += ["", "After `Index.optimize()` (everything merged into one segment):", ""] + _md(
        ["side", "optimize s", "optimize written MB", "final MB", "segments"]
        + [x for q in RETRIEVERS for x in (f"{q} mean / p50 ms", f"{q} many / one segments (mean)")], rows)
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20000, help="passages to index, one document each (default 20000)")
    ap.add_argument("--commit", type=int, default=256, help="documents per commit (default 256)")
    ap.add_argument("--queries", type=int, default=200, help="questions per retriever (default 200)")
    ap.add_argument("--baseline", help="folder holding the baseline's momoka package (with its _core*.so)")
    ap.add_argument("--side", choices=("both", "current", "baseline"), default="both",
                    help="which side(s) to run (default both; baseline sides need --baseline)")
    ap.add_argument("--out", help="write every number to this JSON file")
    ap.add_argument("--data", help="the shared data folder (default $MOMOKA_SHARED_DATA or ../shared/data)")
    ap.add_argument("--tmp", help="where to make the temporary stores (default the system's temporary folder)")
    ap.add_argument("--embedder", choices=("hash", "default"), default="hash",
                    help="hash: a hash embedder of dim 384 (the store's own costs; default); default: the default "
                    "model, so query times include embedding the query as a user's do (slow to build)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--label", default="current", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    data = shared_data(args.data)
    if data is None:
        print("skipped: the shared data (../shared/data or $MOMOKA_SHARED_DATA with */documents.jsonl) is absent")
        return 0
    if args.child:
        print(json.dumps(child(args)), flush=True)
        return 0
    if args.side in ("both", "baseline"):
        if not args.baseline:
            ap.error("--baseline DIR is needed for the baseline side (or use --side current)")
        if not (Path(args.baseline) / "momoka" / "__init__.py").is_file():
            ap.error(f"--baseline {args.baseline} holds no momoka package")
    command = " ".join([Path(sys.executable).name, *sys.argv]) if argv is None else " ".join(argv)
    report = {"command": command, "cpu": cpu_model(), "uptime_before": uptime(), "results": []}
    log(f"load before: {report['uptime_before']}")
    here = [str(REPO / "python")] if (REPO / "python" / "momoka" / "__init__.py").is_file() else []
    sides = [("current", here)] if args.side in ("both", "current") else []
    sides += [("baseline", [str(Path(args.baseline).resolve())])] if args.side in ("both", "baseline") else []
    for label, pp in sides:
        report["results"].append(run_side(label, pp, args))
    report["uptime_after"] = uptime()
    first = report["results"][0]
    print(f"command: {command}")
    print(f"cpu: {report['cpu']}")
    print(f"load before: {report['uptime_before']}")
    print(f"passages: {first['n']} ({first['passages']['paragraphs']} paragraphs + "
          f"{first['passages']['sentence_cut']} sentence-cut, {first['passages']['chars'] / 1e6:.2f} M chars), "
          f"commit every {first['commit_docs']} docs, {first['queries']} queries, k=10")
    if first["embedder"].startswith("hash"):
        print(f"embedder: deterministic hash embedder, dim {DIM} (store costs depend on the vectors' shape, not "
              f"on the model)")
    else:
        print(f"embedder: {first['embedder']}")
    for res in report["results"]:
        load = ["/".join(f"{x:.2f}" for x in res[k]) for k in ("load_before", "load_after")]
        print(f"{res['label']}: momoka {res['momoka_version']} from {res['momoka_dir']}; load average "
              f"{load[0]} -> {load[1]} (1/5/15 min, before the build -> after the queries)")
    print()
    print(table(report["results"]))
    print()
    print("written = write_bytes - cancelled_write_bytes of the child during the build; final = the files the "
          "manifest lists + manifest.json; commit@1k = median of commits #2-#6 (documents in the store: "
          f"{', '.join(map(str, first['build']['commit_1k_docs']))}); commit@end = median of the last five commits "
          f"before the final one ({', '.join(map(str, first['build']['commit_end_docs']))}); MB per commit = bytes "
          "written during that Store.save. Targets for the segment store: written/final <= 3, commit end/1k <= 2.")
    print(f"load after: {report['uptime_after']}")
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
        print(f"numbers written to {args.out}")
    return 0


def test_store_segments(benchmark, tmp_path):
    """Under pytest (``--benchmark-only -s``): the current side on ``MOMOKA_BENCH_SEG_N`` passages (default
    2000), and the baseline beside it when ``MOMOKA_BENCH_SEG_BASELINE`` names its folder."""
    import pytest

    if shared_data(None) is None:
        pytest.skip("../shared/data is not available")
    argv = ["--n", os.environ.get("MOMOKA_BENCH_SEG_N") or "2000", "--tmp", str(tmp_path),
            "--out", str(tmp_path / "store_segments.json")]
    base = os.environ.get("MOMOKA_BENCH_SEG_BASELINE")
    argv += ["--baseline", base] if base else ["--side", "current"]
    benchmark.pedantic(main, args=(argv,), rounds=1, iterations=1)
    report = json.loads((tmp_path / "store_segments.json").read_text(encoding="utf-8"))
    assert all(r["build"]["write_bytes"] > 0 for r in report["results"])


if __name__ == "__main__":
    sys.exit(main())
