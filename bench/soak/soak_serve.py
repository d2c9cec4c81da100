"""Soak: ``momoka serve`` under concurrent clients while a writer commits, compacts, is killed and restarted.

    python bench/soak/soak_serve.py [--seconds 60] [--clients 32] [--commit-every 5] [--batch 4] [--kill-at 0.5]
                               [--poll 0.5] [--data DIR] [--work DIR] [--json FILE]

A writer process builds a BM25 store from real documents (``DIR/*/documents.jsonl``
of the shared data, else the paragraphs of the package's example document),
then adds ``--batch`` documents and commits every ``--commit-every`` seconds;
every third commit also adds a scratch copy of a document, and the commit
after deletes it again with a save of its own (a deletion: a segment of
tombstones). ``momoka serve``
runs as a process on 127.0.0.1 and ``--clients`` clients send ``POST
/search`` (document titles and openings as queries) for ``--seconds``. At
``--kill-at`` of the run the writer gets SIGKILL; the store is opened to check
that every document of its last logged commit is there, and the writer is
started again and resumes with the documents not yet in the store.

Reported: queries served, p50/p99 latency, errors (any non-200 answer or failed
request; target 0), torn reads (an answer whose hits are not all documents of
the generation it names, or a 500; target 0), documents lost across the kill
and at the end (target 0), and the lag between a commit and the first answer
from that generation or a later one. The writer logs each commit (generation,
its documents, the time) after the save returns; a commit made by the killed
writer and not yet logged is read back from the store. The last line printed
is the report as JSON; exit status 1 when a target is missed.

Hostile clients (``--idle``, ``--slow``; 0 and 0 turn them off) come at a quarter of the run, while the
load goes on: ``--idle`` connections that send nothing, ``--slow`` clients sending their request a
byte every 0.5 s, the headers of a 50 MB body, and malformed requests (``k`` of 2**63, a lone
surrogate, invalid UTF-8, JSON 100,000 deep, a negative or non-numeric ``Content-Length``, a
malformed header). The server runs with ``--read-timeout`` and ``--idle-timeout`` of
``--hostile-timeout`` seconds; targets: every idle connection closed and every slow one answered
408 within the timeout plus 3 s, the body 413 without being sent, every malformed request a JSON
400, no traceback in the server's log, and the load's errors still 0. After the load,
``--distinct-options`` searches, each with a new ``options`` value (a new retriever), measure the
server's RSS growth (target: under 5 MB).

Request loops are bounded in count (``--max-requests`` per client) and time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SCRATCH = "scratch-"


# ---------------------------------------------------------------------------------------------- documents


def load_docs(data: Path | None) -> list[dict]:
    """Documents from ``data/*/documents.jsonl`` (interleaved across sets), else the example's paragraphs."""
    sets = []
    for f in sorted(data.glob("*/documents.jsonl")) if data else []:
        rows = []
        with open(f, encoding="utf-8") as fh:
            for line in fh:
                r = json.loads(line)
                if str(r.get("text") or "").strip():
                    rows.append({"doc_id": f"{f.parent.name}:{r['doc_id']}", "title": r.get("title"), "text": r["text"]})
        sets.append(rows)
    docs = [d for group in _interleave(sets) for d in group]
    if docs:
        return docs
    from momoka.examples import __file__ as ex

    text = (Path(ex).parent / "harbor_light.md").read_text(encoding="utf-8")
    paras = [p.strip() for p in text.split("\n\n") if len(p.strip()) > 40]
    return [{"doc_id": f"harbor-{i:02d}", "title": None, "text": p} for i, p in enumerate(paras)]


def _interleave(sets: list[list[dict]]):
    for i in range(max((len(s) for s in sets), default=0)):
        yield [s[i] for s in sets if i < len(s)]


def queries_of(docs: list[dict]) -> list[str]:
    """A title, or the first eight words, of every document."""
    return [d["title"] or " ".join(d["text"].split()[:8]) for d in docs]


# ---------------------------------------------------------------------------------------------- writer


def _log(path: Path, rec: dict) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(rec) + "\n")
        f.flush()
        os.fsync(f.fileno())


def writer(args: argparse.Namespace) -> int:
    """The writer process: open the store, commit every ``commit_every`` seconds until ``until``."""
    from momoka import Index

    docs = load_docs(Path(args.data) if args.data else None)
    store, log = Path(args.store), Path(args.log)

    def commit(ix, kind: str) -> None:
        ix.save()
        _log(log, {"event": "commit", "kind": kind, "generation": int(ix.store.manifest["generation"]),
                   "doc_ids": sorted(ix.corpus.doc_ids), "t": time.time(), "pid": os.getpid()})

    ix = Index.open(store, writable=True, progress=False)  # resumes where the last writer's commit left it
    pending = [d for d in docs if d["doc_id"] not in ix]
    rng = random.Random(os.getpid())
    n = 0
    while time.time() < args.until:
        t_next = time.time() + args.commit_every
        n += 1
        scratch = [d for d in ix.corpus.doc_ids if d.startswith(SCRATCH)]
        if scratch:  # the compaction: delete, save
            ix.delete(scratch)
            commit(ix, "compact")
        batch, pending = pending[: args.batch], pending[args.batch :]
        if n % 3 == 1:
            src = rng.choice(docs)
            batch.append({"doc_id": f"{SCRATCH}{os.getpid()}-{n}", "title": src["title"], "text": src["text"]})
        if batch:
            ix.add(batch, progress=False)
            commit(ix, "add")
        time.sleep(max(0.0, min(t_next, args.until) - time.time()))
    ix.close()
    return 0


# ---------------------------------------------------------------------------------------------- clients


async def client(session, url: str, queries: list[str], end: float, max_requests: int, seed: int, out: list) -> None:
    import aiohttp

    rng = random.Random(seed)
    for _ in range(max_requests):
        if time.time() >= end:
            return
        q = rng.choice(queries)
        t = time.perf_counter()
        try:
            async with session.post(url + "/search", json={"query": q, "k": 5}) as r:
                body = await r.json(content_type=None)
                status = r.status
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
            out.append({"status": None, "error": f"{type(exc).__name__}: {exc}", "ms": 0.0, "t": time.time()})
            continue
        rec = {"status": status, "ms": (time.perf_counter() - t) * 1000, "t": time.time()}
        if status == 200:
            rec["generation"] = body["generation"]
            rec["docs"] = sorted({h["doc_id"] for h in body["hits"]})
        else:
            rec["error"] = body.get("error") if isinstance(body, dict) else str(body)
        out.append(rec)


async def load(url: str, queries: list[str], n: int, end: float, max_requests: int, out: list, during) -> None:
    import aiohttp

    conn = aiohttp.TCPConnector(limit=n)
    async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=60)) as session:
        await asyncio.gather(*(client(session, url, queries, end, max_requests, i, out) for i in range(n)), during())


# ---------------------------------------------------------------------------------------------- hostile clients

#: Malformed requests the server must answer 400 (with a JSON error), each on a connection of its own.
MALFORMED = [
    b'{"query": "harbor", "k": 9223372036854775808}',
    b'{"query": "harbor \\ud800 light"}',
    b'{"query": "harbor \xff\xfe light"}',
    b'{"query": "x", "options": {"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}",
]
RAW_MALFORMED = [b"POST /search HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
                 b"POST /search HTTP/1.1\r\nContent-Length: ten\r\n\r\n",
                 b"POST /search HTTP/1.1\r\nContent-Length 2\r\n\r\n{}"]


def _post(body: bytes) -> bytes:
    return b"POST /search HTTP/1.1\r\nHost: soak\r\nContent-Length: %d\r\n\r\n" % len(body) + body


async def _answer(reader: asyncio.StreamReader, timeout: float) -> tuple[int | None, object]:
    """Status and JSON body of one answer (None: the connection closed first)."""
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None, None
    lines = head.decode("latin-1").split("\r\n")
    n = next(int(v) for k, _, v in (ln.partition(":") for ln in lines[1:]) if k.lower() == "content-length")
    body = await asyncio.wait_for(reader.readexactly(n), timeout)
    try:
        return int(lines[0].split()[1]), json.loads(body)
    except ValueError:
        return int(lines[0].split()[1]), body


async def _closed_after(reader: asyncio.StreamReader, t0: float, timeout: float) -> float | None:
    """Seconds from ``t0`` until the server closed the connection (None: still open after ``timeout``)."""
    try:
        while await asyncio.wait_for(reader.read(65536), max(0.01, t0 + timeout - time.monotonic())):
            pass
    except asyncio.TimeoutError:
        return None
    except ConnectionError:
        pass
    return time.monotonic() - t0


async def hostile(url: str, n_idle: int, n_slow: int, limit: float) -> dict:
    """Idle and slow connections, an oversize body and malformed requests against ``url``; what came back."""
    host, port = url.rsplit("/", 1)[1].rsplit(":", 1)
    t0 = time.monotonic()
    idle = [await asyncio.open_connection(host, int(port)) for _ in range(n_idle)]
    slow = [await asyncio.open_connection(host, int(port)) for _ in range(n_slow)]

    async def trickle(w: asyncio.StreamWriter) -> None:
        for b in _post(b'{"query": "harbor"}'):
            try:
                w.write(bytes([b]))
                await w.drain()
            except (ConnectionError, RuntimeError):
                return
            await asyncio.sleep(0.5)

    trickles = [asyncio.ensure_future(trickle(w)) for _, w in slow]
    out: dict = {"idle": n_idle, "slow": n_slow}
    r, w = await asyncio.open_connection(host, int(port))
    w.write(b"POST /search HTTP/1.1\r\nHost: soak\r\nContent-Length: 50000000\r\n\r\n")  # and no body
    status, _ = await _answer(r, 10)
    out["oversize_413"] = status == 413
    w.close()
    codes = []
    for raw in [_post(b) for b in MALFORMED] + RAW_MALFORMED:
        r, w = await asyncio.open_connection(host, int(port))
        w.write(raw)
        status, body = await _answer(r, 10)
        codes.append(status if isinstance(body, dict) and isinstance(body.get("error"), str) else None)
        w.close()
    out["malformed"], out["malformed_400"] = len(codes), codes.count(400)
    closed = await asyncio.gather(*(_closed_after(r, t0, limit + 3) for r, _ in idle))
    out["idle_closed"] = sum(c is not None for c in closed)
    out["idle_closed_after_s"] = round(max((c for c in closed if c is not None), default=0.0), 2)
    answers = await asyncio.gather(*(_answer(r, limit + 3) for r, _ in slow), return_exceptions=True)
    out["slow_408"] = sum(1 for a in answers if isinstance(a, tuple) and a[0] == 408)
    for t in trickles:
        t.cancel()
    for _, w in idle + slow:
        w.close()
    out["ok"] = (out["oversize_413"] and out["malformed_400"] == out["malformed"] and out["idle_closed"] == n_idle
                 and out["slow_408"] == n_slow)
    return out


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def memory(url: str, pid: int, n: int) -> dict:
    """The server's RSS growth over ``n`` searches, each with a new ``options`` value (a new retriever)."""
    import http.client

    host, port = url.rsplit("/", 1)[1].rsplit(":", 1)
    c = http.client.HTTPConnection(host, int(port), timeout=30)

    def post(body: dict) -> int:
        c.request("POST", "/search", json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        return r.status

    for i in range(200):  # warm: the same options every time
        post({"query": f"harbor {i}", "k": 3, "retriever": "hybrid", "options": {"coverage": 0.5}})
    before = _rss_kb(pid)
    bad = sum(post({"query": "harbor light", "k": 3, "retriever": "hybrid",
                    "options": {"coverage": 1 + i / 1000}}) != 200 for i in range(n))
    after = _rss_kb(pid)
    c.request("GET", "/health")
    health = json.loads(c.getresponse().read())
    c.close()
    return {"requests": n, "non_200": bad, "rss_before_kb": before, "rss_after_kb": after,
            "growth_kb": after - before, "retrievers_cached": health.get("retrievers_cached"),
            "ok": bad == 0 and after - before < 5 * 1024}


# ---------------------------------------------------------------------------------------------- the run


def _commits(log: Path) -> dict[int, dict]:
    out: dict[int, dict] = {}
    if log.exists():
        for line in log.read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            out[r["generation"]] = r  # the last record of a generation wins
    return out


def _real(ids) -> set:
    return {d for d in ids if not d.startswith(SCRATCH)}


def _pct(xs: list[float], p: float) -> float:
    """The nearest-rank percentile (the smallest value with at least p % of the values at or below it)."""
    xs = sorted(xs)
    return xs[max(0, math.ceil(p / 100 * len(xs)) - 1)] if xs else float("nan")


def analyse(answers: list[dict], commits: dict[int, dict]) -> dict:
    """Latency, errors, torn reads and commit-to-answer lags of the client records against the commit log."""
    ok = [a for a in answers if a["status"] == 200]
    errors = [a for a in answers if a["status"] != 200]
    torn = [a for a in ok if a["generation"] in commits and not set(a["docs"]) <= set(commits[a["generation"]]["doc_ids"])]
    torn += [a for a in errors if a["status"] == 500]
    first = set(commits[min(commits)]["doc_ids"]) if commits else set()
    lags, unreflected = [], 0
    served = sorted((a["t"], a["generation"]) for a in ok)
    for g, c in commits.items():
        if c.get("t") is None or c["kind"] == "build":
            continue
        seen = next((t for t, gen in served if gen >= g), None)
        if seen is None:
            unreflected += 1
        else:
            lags.append(max(0.0, seen - c["t"]))
    ms = [a["ms"] for a in ok]
    return {"queries": len(ok), "p50_ms": round(_pct(ms, 50), 2), "p99_ms": round(_pct(ms, 99), 2),
            "max_ms": round(max(ms, default=0), 2), "errors": len(errors),
            "error_examples": [a.get("error") for a in errors[:3]], "torn": len(torn),
            "unverified": len([a for a in ok if a["generation"] not in commits]),
            "answers_with_later_documents": len([a for a in ok if set(a["docs"]) - first]),
            "generations_served": len({a["generation"] for a in ok}),
            "max_lag_s": round(max(lags), 3) if lags else None,
            "median_lag_s": round(statistics.median(lags), 3) if lags else None, "unreflected_commits": unreflected}


def run(args: argparse.Namespace) -> dict:
    from momoka.eval.datasets import find_shared_data
    from momoka.store import Store

    data = Path(args.data) if args.data else find_shared_data(Path(__file__).resolve().parents[2])
    work = Path(args.work or tempfile.mkdtemp(prefix="momoka-soak-serve-"))
    work.mkdir(parents=True, exist_ok=True)
    store, log = work / "store", work / "commits.jsonl"
    docs = load_docs(data)
    queries = queries_of(docs)
    import momoka

    # the children (writer, server) import the momoka this process runs: the checkout's or the installed one
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(momoka.__file__).resolve().parents[1])] + sys.path))

    def start_writer(until: float) -> subprocess.Popen:
        cmd = [sys.executable, __file__, "--writer", "--store", str(store), "--log", str(log), "--until", str(until),
               "--commit-every", str(args.commit_every), "--batch", str(args.batch)]
        if data:
            cmd += ["--data", str(data)]
        return subprocess.Popen(cmd, env=env, stderr=open(work / "writer.err", "a"))

    from momoka import Index

    ix = Index.build(docs[: args.batch], store=store, embedder=None, progress=False)  # the first commit
    _log(log, {"event": "commit", "kind": "build", "generation": int(ix.store.manifest["generation"]),
               "doc_ids": sorted(ix.corpus.doc_ids), "t": time.time()})
    ix.close()
    srv = subprocess.Popen([sys.executable, "-m", "momoka", "serve", str(store), "--port", "0", "--retriever", "bm25",
                            "--poll", str(args.poll), "--workers", str(args.workers),
                            "--read-timeout", str(args.hostile_timeout), "--idle-timeout", str(args.hostile_timeout),
                            "--max-connections", str(args.clients + args.idle + args.slow + 64)],
                           env=env, stderr=subprocess.PIPE, text=True)
    line = srv.stderr.readline()
    if " on http://" not in line:
        raise SystemExit(f"the server did not start: {line}{srv.stderr.read()[-2000:]}")
    url = line.rsplit(" on ", 1)[1].strip()
    server_log: list[str] = []
    threading.Thread(target=lambda: server_log.extend(srv.stderr), daemon=True).start()

    t0 = time.time()
    end = t0 + args.seconds
    w = start_writer(end)
    answers: list[dict] = []
    kill: dict = {}

    async def during():
        await asyncio.sleep(max(0.0, t0 + args.kill_at * args.seconds - time.time()))
        loop = asyncio.get_running_loop()

        def kill_and_check():
            nonlocal w
            before = _commits(log)
            w.send_signal(signal.SIGKILL)
            w.wait()
            kill["t"] = time.time() - t0
            last = before[max(before)] if before else {"doc_ids": []}
            st = Store.open(store)  # the store at its last commit
            present, gen = set(st.documents), int(st.manifest["generation"])
            st.close()
            if gen not in _commits(log):  # committed by the killed writer after its last log line
                _log(log, {"event": "commit", "kind": "read-after-kill", "generation": gen,
                           "doc_ids": sorted(present), "t": None})
            kill["lost"] = sorted(_real(last["doc_ids"]) - present)
            kill["docs_before"] = len(_real(present))
            w = start_writer(end)

        await loop.run_in_executor(None, kill_and_check)

    attacks: dict = {}

    async def during_all():
        async def attack():
            if args.idle or args.slow:
                await asyncio.sleep(max(0.0, t0 + 0.25 * args.seconds - time.time()))
                attacks.update(await hostile(url, args.idle, args.slow, args.hostile_timeout))

        await asyncio.gather(during(), attack())

    asyncio.run(load(url, queries, args.clients, end, args.max_requests, answers, during_all))
    rc_writer = w.wait(timeout=args.commit_every * 4 + 60)
    commits = _commits(log)
    final = max(commits)
    deadline = time.time() + 15  # the server catches up with the last commit
    import urllib.request

    health = {}
    while time.time() < deadline:
        with urllib.request.urlopen(url + "/health", timeout=10) as r:
            health = json.loads(r.read())
        if health["generation"] >= final:
            break
        time.sleep(0.1)
    mem = memory(url, srv.pid, args.distinct_options) if args.distinct_options else {}
    srv.send_signal(signal.SIGTERM)
    rc_server = srv.wait(timeout=30)
    tracebacks = sum("Traceback" in line for line in server_log)
    st = Store.open(store)
    final_docs = set(st.documents)
    st.close()

    checks = analyse(answers, commits)
    ever = set().union(*(_real(c["doc_ids"]) for c in commits.values()))
    after_kill = [c for c in commits.values() if c.get("t") and c["t"] - t0 > kill.get("t", 1e9)]
    rep = {
        "seconds": args.seconds, "clients": args.clients, "commit_every": args.commit_every,
        "documents_source": str(data) if data else "harbor_light.md", **checks,
        "qps": round(checks["queries"] / args.seconds, 1),
        "commits": len([c for c in commits.values() if c["kind"] != "build"]),
        "compactions": len([c for c in commits.values() if c["kind"] == "compact"]),
        "final_generation": final,
        "server_generation": health.get("generation"), "server_refreshes": health.get("refreshes"),
        "writer_killed_at_s": round(kill.get("t", -1), 1), "lost_at_kill": len(kill.get("lost", [1])),
        "commits_after_restart": len(after_kill), "documents": len(_real(final_docs)),
        "lost_at_end": len(ever - final_docs),
        "writer_exit": rc_writer, "server_exit": rc_server, "hostile": attacks, "memory": mem,
        "server_tracebacks": tracebacks, "work": str(work),
    }
    rep["ok"] = bool(rep["queries"] and rep["errors"] == 0 and rep["torn"] == 0 and rep["lost_at_kill"] == 0
                     and rep["lost_at_end"] == 0 and rep["commits_after_restart"] > 0 and rc_server == 0
                     and rc_writer == 0 and rep["server_generation"] == final and tracebacks == 0
                     and attacks.get("ok", True) and mem.get("ok", True))
    return rep


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60, help="length of the load (default 60)")
    p.add_argument("--clients", type=int, default=32, help="concurrent clients (default 32)")
    p.add_argument("--commit-every", type=float, default=5, help="seconds between the writer's commits (default 5)")
    p.add_argument("--batch", type=int, default=4, help="documents added per commit (default 4)")
    p.add_argument("--kill-at", type=float, default=0.5, help="when the writer gets SIGKILL, as a share of the run")
    p.add_argument("--poll", type=float, default=0.5, help="the server's --poll (default 0.5 s)")
    p.add_argument("--workers", type=int, default=4, help="the server's --workers (default 4)")
    p.add_argument("--max-requests", type=int, default=100_000, help="requests per client at most")
    p.add_argument("--idle", type=int, default=200, help="idle hostile connections (default 200)")
    p.add_argument("--slow", type=int, default=20, help="hostile clients sending a byte every 0.5 s (default 20)")
    p.add_argument("--hostile-timeout", type=float, default=2.0,
                   help="the server's --read-timeout and --idle-timeout (default 2 s)")
    p.add_argument("--distinct-options", type=int, default=4000,
                   help="searches with a new options value each, after the load, for the RSS growth (default 4000)")
    p.add_argument("--data", default=None, help="folder of */documents.jsonl (default: the shared data, if found)")
    p.add_argument("--work", default=None, help="folder for the store and logs (default: a new temporary one)")
    p.add_argument("--json", default=None, help="also write the report to this file")
    p.add_argument("--writer", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--store", help=argparse.SUPPRESS)
    p.add_argument("--log", help=argparse.SUPPRESS)
    p.add_argument("--until", type=float, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.writer:
        return writer(args)
    rep = run(args)
    print(f"{rep['queries']} queries in {rep['seconds']:.0f} s by {rep['clients']} clients ({rep['qps']}/s): "
          f"p50 {rep['p50_ms']} ms, p99 {rep['p99_ms']} ms; errors {rep['errors']}, torn reads {rep['torn']}; "
          f"{rep['commits']} commits ({rep['compactions']} compactions), writer killed at {rep['writer_killed_at_s']} s: "
          f"lost {rep['lost_at_kill']} at the kill, {rep['lost_at_end']} at the end; lag max {rep['max_lag_s']} s, "
          f"median {rep['median_lag_s']} s; hostile {rep['hostile']}; memory {rep['memory']}", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(rep, indent=2) + "\n")
    print(json.dumps(rep))
    return 0 if rep["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
