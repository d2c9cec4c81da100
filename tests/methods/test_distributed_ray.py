"""Distributed indexing on a local Ray cluster (``engine="ray"``) against the single-process build.

The reference is the same documents indexed in this process (``engine="local"``): the Ray build must
hold the same chunks at the same offsets (and ids), the same vectors in every view up to float
tolerance, the same document metadata and give the same query results. Then faults: a worker
killed with SIGKILL in the middle of a batch (the run finishes, the store verifies and still equals
the reference), and a driver killed with SIGKILL after some commits (a rerun skips the committed
documents: the texts the workers embed are exactly the chunks of the other documents).

The cluster is started here (``ray.init(num_cpus=2)``) on three small SQuAD half-A documents
(about 60 chunks), written as files so the CLI driver reads the same input; 20 of their questions.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray")

import momoka  # noqa: E402
from momoka.store._verify import verify_store  # noqa: E402

PYDIR = Path(momoka.__file__).resolve().parents[1]
N_DOCS = 3
QUERIES = 20


@pytest.fixture(scope="module")
def cluster():
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(PYDIR)}})
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


@pytest.fixture(scope="module")
def corpus(shared_data, tmp_path_factory):
    """The three smallest SQuAD half-A documents as .txt files, and questions about them."""
    d = shared_data / "squad_v1_dev_half_a"
    docs = sorted((json.loads(line) for line in open(d / "documents.jsonl", encoding="utf-8")),
                  key=lambda r: len(r["text"]))[:N_DOCS]
    folder = tmp_path_factory.mktemp("squad_slice")
    for r in docs:
        (folder / f"{r['doc_id']}.txt").write_text(r["text"], encoding="utf-8")
    ids = {r["doc_id"] for r in docs}
    qs = [q["question"] for q in (json.loads(line) for line in open(d / "questions.jsonl", encoding="utf-8"))
          if q["doc_id"] in ids]
    return folder, qs[:: max(1, len(qs) // QUERIES)][:QUERIES]


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory, clean_llm_env):
    folder, _ = corpus
    ix = momoka.Index.build([folder], store=tmp_path_factory.mktemp("ref") / "s", enrich=["title"], commit_docs=1,
                            progress=False)
    yield ix
    ix.close()


@pytest.fixture(scope="module")
def clean_llm_env():
    """No LLM endpoint: the title enricher takes the documents' own titles (no LLM call)."""
    old = os.environ.pop("MOMOKA_LLM_BASE_URL", None)
    yield
    if old is not None:
        os.environ["MOMOKA_LLM_BASE_URL"] = old


def _spans(ix):
    return [ix.store.chunks.span(int(c)) for c in ix.store.chunks.ids()]


def assert_same_store(ix, ref, views=("raw", "titled")):
    """Same chunk ids, spans and texts; same vectors (float tolerance) in ``views``; same titles and hashes."""
    assert sorted(ix.corpus.doc_ids) == sorted(ref.corpus.doc_ids)
    assert list(ix.store.chunks.ids()) == list(ref.store.chunks.ids())
    assert _spans(ix) == _spans(ref)
    ids = ref.store.chunks.ids()
    assert [ix.store.chunks.text(int(c)) for c in ids] == [ref.store.chunks.text(int(c)) for c in ids]
    for v in views:
        a, b = ix.store.vector_view(v).get(ids), ref.store.vector_view(v).get(ids)
        np.testing.assert_allclose(a, b, atol=1e-6)
    for d in ref.corpus.doc_ids:
        if "titled" in views:
            assert ix.store.documents[d].metadata["momoka_title"] == ref.store.documents[d].metadata["momoka_title"]
        assert ix.store.documents[d].sha256 == ref.store.documents[d].sha256


def _count_adopted(monkeypatch) -> list:
    """Record each part the driver adopts from a worker (the views it stages) instead of receiving vectors."""
    from momoka.methods import distributed

    adopted: list = []
    real = distributed._stage

    def spy(writer, out, written):
        adopted.append(sorted(written["views"]))
        return real(writer, out, written)

    monkeypatch.setattr(distributed, "_stage", spy)
    return adopted


@pytest.mark.parametrize("write_parts", ["1", "0"])
def test_ray_build_equals_single_process(cluster, corpus, reference, tmp_path, monkeypatch, write_parts):
    """Tried: the slice built with engine="ray" (2 workers, a commit every document) and the title
    enricher, the workers writing their vectors into the store's staging folder (the driver adopts one
    part per batch, both views in it, and receives no vector) and, with MOMOKA_RAY_WRITE_PARTS=0, shipping
    them to the driver; chunks, vectors of both views, titles and the results of 20 SQuAD questions for
    the dense, BM25 and hybrid retrievers must equal the single-process build's, and no staging folder
    is left."""
    monkeypatch.setenv("MOMOKA_RAY_WRITE_PARTS", write_parts)
    adopted = _count_adopted(monkeypatch)
    folder, questions = corpus
    ix = momoka.Index.build([folder], store=tmp_path / "s", enrich=["title"], engine="ray", workers=2,
                            commit_docs=1, progress=False)
    assert ix.report.failed == [] and len(ix.report.added) == N_DOCS
    assert ix.report.embedded == 2 * ref_chunks(reference)  # raw + titled, each chunk once
    assert adopted == ([["raw", "titled"]] * N_DOCS if write_parts == "1" else [])
    ix.close()
    assert not (tmp_path / "s" / "staging").exists()
    assert verify_store(tmp_path / "s")["damaged"] == []
    ix = momoka.Index.open(tmp_path / "s")
    assert_same_store(ix, reference)
    for r in ("dense", "bm25", "hybrid", "mm"):
        got = ix.search_batch(questions, k=5, retriever=r)
        want = reference.search_batch(questions, k=5, retriever=r)
        for g, w in zip(got, want):
            assert [it.spans for it in g] == [it.spans for it in w], r
            np.testing.assert_allclose([it.score for it in g], [it.score for it in w], atol=1e-4)
    ix.close()


def test_ray_build_with_every_component_equals_single_process(cluster, corpus, clean_llm_env, tmp_path):
    """Tried: the slice built with every registered enricher (title, keywords, summary) and relator (paths with
    the embedding referee, JERR offline), once in this process and once on 2 Ray workers (a commit every
    document). The workers number chunks, entities and edges from 0; the driver renumbers them (JERR's node
    tables declare which fields hold ids). Chunks, every view's vectors, node rows, relation rows, the
    documents' records and the top-5 of every registered retriever for the questions must be equal."""
    from momoka import registry
    from momoka.methods.jerr.graph import EDGES, ENTITIES

    folder, questions = corpus
    kw = dict(enrich=["title", "keywords", "summary"],
              relate=[("paths", {"referee": "embedding"}), ("jerr", {"backend": "offline"})], commit_docs=1,
              progress=False)
    local = momoka.Index.build([folder], store=tmp_path / "l", **kw)
    ix = momoka.Index.build([folder], store=tmp_path / "r", engine="ray", workers=2, **kw)
    assert ix.report.failed == [] and len(ix.report.added) == N_DOCS
    ix.close()
    local.close()
    assert verify_store(tmp_path / "r")["damaged"] == []
    a, b = momoka.Index.open(tmp_path / "r"), momoka.Index.open(tmp_path / "l")
    assert_same_store(a, b, views=tuple(b.store.vector_views))
    assert sorted(a.store.vector_views) == sorted(b.store.vector_views) and len(b.store.vector_views) >= 4
    for t in (ENTITIES, EDGES):
        ta, tb = a.store.node_table(t), b.store.node_table(t)
        assert len(ta) == len(tb) > 0
        assert [ta.get(i) for i in range(len(ta))] == [tb.get(i) for i in range(len(tb))]
    assert sorted(a.store.relations) == sorted(b.store.relations)
    for r in b.store.relations:
        ra, rb = a.store.relation(r), b.store.relation(r)
        assert ra.rows() == rb.rows() and all(ra.get(c).tolist() == rb.get(c).tolist() for c in ra.rows()), r
    for d in b.corpus.doc_ids:  # the same records (first_entity, first_edge renumbered), but for the time taken
        ra, rb = (dict(x.store.documents[d].metadata["jerr"]) for x in (a, b))
        assert ra.pop("seconds") >= 0 and rb.pop("seconds") >= 0 and ra == rb
    for r in registry.available("retriever"):
        for g, w in zip(a.search_batch(questions, k=5, retriever=r), b.search_batch(questions, k=5, retriever=r)):
            assert [it.spans for it in g] == [it.spans for it in w], r
            np.testing.assert_allclose([it.score for it in g], [it.score for it in w], atol=1e-4)
    a.close()
    b.close()


def ref_chunks(ref) -> int:
    return len(ref.store.chunks.ids())


class KillHook:
    """An enricher object that logs every batch it runs with its worker's pid (``runs.log``), and on a worker's
    first batch writes the pid to a file and lingers, so the test can kill it mid-batch."""

    name = "killhook"

    def __init__(self, folder: str):
        self.folder = folder

    def enrich(self, index, doc_ids):
        folder = Path(self.folder)
        p = folder / f"{os.getpid()}.pid"
        first = not p.exists()
        if first:
            p.write_text(",".join(doc_ids))
        with open(folder / "runs.log", "a", encoding="utf-8") as f:  # one short appended line: atomic
            f.write(f"{os.getpid()} {','.join(doc_ids)}\n")
        if first:
            time.sleep(1.5)


def test_worker_killed_mid_run(cluster, corpus, reference, tmp_path):
    """Tried: SIGKILL of the first Ray worker process while it runs a batch (pid found through the
    worker itself). The batch runs again in another worker process (the restarted actor, or the other
    worker when it is free first, as under load): the run finishes with every document, nothing failed,
    the store verifies and equals the single-process build."""
    import ray.cloudpickle as cp

    cp.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this test module
    folder, _ = corpus
    pids = tmp_path / "pids"
    pids.mkdir()
    killed: list[int] = []

    def killer():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed:
            got = list(pids.glob("*.pid"))
            if got:
                pid = int(got[0].stem)
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            time.sleep(0.05)

    t = threading.Thread(target=killer)
    t.start()
    try:
        ix = momoka.Index.build([folder], store=tmp_path / "s", enrich=[KillHook(str(pids))], engine="ray",
                                workers=2, commit_docs=1, progress=False)
    finally:
        t.join()
    assert killed, "no worker was killed"
    with pytest.raises(ProcessLookupError):
        os.kill(killed[0], 0)
    first = (pids / f"{killed[0]}.pid").read_text()
    runs = [line.split(" ", 1) for line in (pids / "runs.log").read_text(encoding="utf-8").splitlines()]
    again = [pid for pid, docs in runs if pid != str(killed[0]) and docs == first]
    assert again, "the killed worker's batch did not run again in another worker"
    assert ix.report.failed == [] and sorted(ix.report.added) == sorted(reference.corpus.doc_ids)
    ix.close()
    assert not (tmp_path / "s" / "staging").exists()
    assert verify_store(tmp_path / "s")["damaged"] == []
    ix = momoka.Index.open(tmp_path / "s", components={"killhook": KillHook(str(pids))})
    assert_same_store(ix, reference, views=("raw",))
    ix.close()


def test_tasks_of_several_batches_equal_single_process(cluster, corpus, reference, tmp_path, monkeypatch):
    """Tried: batches of one document (as the reference's) grouped into one task of all three (a task is up to
    commit_docs documents while workers write parts; the slice is too small for the default grouping, so
    the grouping thresholds are lowered): the worker runs the three batches, ships one Delta and writes one
    part, committed as one segment; the store equals the single-process build (vectors of both views, titles,
    the top 5 of the dense, BM25 and hybrid retrievers)."""
    from momoka.methods import distributed

    monkeypatch.setenv("MOMOKA_RAY_WRITE_PARTS", "1")
    monkeypatch.setattr(distributed, "ADD_BATCH", 1)
    monkeypatch.setattr(distributed, "TASKS_PER_WORKER", 0.25)
    adopted = _count_adopted(monkeypatch)
    folder, questions = corpus
    ix = momoka.Index.build([folder], store=tmp_path / "s", enrich=["title"], engine="ray", workers=2,
                            commit_docs=N_DOCS, progress=False)
    assert ix.report.failed == [] and len(ix.report.added) == N_DOCS
    assert ix.report.embedded == 2 * ref_chunks(reference)
    assert adopted == [["raw", "titled"]]
    seg = ix.store.segments[-1]  # the one task's segment holds every chunk
    assert (seg["base"], seg["end"]) == (0, ref_chunks(reference))
    ix.close()
    assert verify_store(tmp_path / "s")["damaged"] == []
    ix = momoka.Index.open(tmp_path / "s")
    assert_same_store(ix, reference)
    for r in ("dense", "bm25", "hybrid"):
        for g, w in zip(ix.search_batch(questions, k=5, retriever=r), reference.search_batch(questions, k=5,
                                                                                               retriever=r)):
            assert [it.spans for it in g] == [it.spans for it in w], r
    ix.close()


def test_worker_restarted_before_writing_runs_the_batch_again(cluster, corpus, reference, tmp_path, monkeypatch):
    """Tried: the first batch's vectors taken out of its worker before the driver asks it to write them (as
    when the worker dies and is restarted between running a batch and writing it): the worker answers that
    it no longer holds them, the batch runs again and ships its Delta, the others are written by their
    workers. The store verifies and equals the single-process build; nothing is left in staging."""
    from momoka.methods import distributed

    monkeypatch.setenv("MOMOKA_RAY_WRITE_PARTS", "1")
    adopted = _count_adopted(monkeypatch)
    real = distributed._written_part
    dropped: list = []

    def lose_first(ray_, writer, out, actor, *rest):
        if not dropped:
            dropped.append(ray_.get(actor.take.options(concurrency_group="io").remote(out["held"])))
        return real(ray_, writer, out, actor, *rest)

    monkeypatch.setattr(distributed, "_written_part", lose_first)
    folder, _ = corpus
    ix = momoka.Index.build([folder], store=tmp_path / "s", enrich=["title"], engine="ray", workers=2,
                            commit_docs=1, progress=False)
    assert dropped and dropped[0] is not None and len(adopted) == N_DOCS - 1
    assert ix.report.failed == [] and len(ix.report.added) == N_DOCS
    ix.close()
    assert not (tmp_path / "s" / "staging").exists()
    assert verify_store(tmp_path / "s")["damaged"] == []
    ix = momoka.Index.open(tmp_path / "s")
    assert_same_store(ix, reference)
    ix.close()


def test_store_out_of_the_workers_reach_falls_back_with_a_warning(cluster, corpus, reference, tmp_path, monkeypatch):
    """Tried: the workers told a staging path that is not the driver's (as a worker on another node without
    the store's filesystem sees it: the run's token file is not there). Each worker refuses to write there;
    the driver warns once (UserWarning naming the staging folder), takes the vectors from the workers as the
    Delta path does, and the store equals the single-process build."""
    from momoka.methods import distributed

    monkeypatch.setenv("MOMOKA_RAY_WRITE_PARTS", "1")
    adopted = _count_adopted(monkeypatch)
    elsewhere = tmp_path / "another-node"
    monkeypatch.setattr(distributed, "_worker_path", lambda stage: str(elsewhere / stage.name))
    folder, _ = corpus
    with pytest.warns(UserWarning, match="cannot reach the store's staging folder") as rec:
        ix = momoka.Index.build([folder], store=tmp_path / "s", enrich=["title"], engine="ray", workers=2,
                                commit_docs=1, progress=False)
    assert len([w for w in rec if "staging folder" in str(w.message)]) == 1
    assert adopted == [] and not elsewhere.exists()
    assert ix.report.failed == [] and len(ix.report.added) == N_DOCS
    assert ix.report.embedded == 2 * ref_chunks(reference)
    ix.close()
    assert not (tmp_path / "s" / "staging").exists()
    assert verify_store(tmp_path / "s")["damaged"] == []
    ix = momoka.Index.open(tmp_path / "s")
    assert_same_store(ix, reference)
    ix.close()


def test_worker_killed_while_writing_leaves_nothing_adopted(corpus, reference, tmp_path, monkeypatch):
    """Tried in this process (the worker class without Ray): a worker that dies after writing part of a batch's
    files (the second view's write raises) leaves only its temporary folder, no folder a driver could adopt;
    the store's writer, opened again, removes the staging folder, and the store is unchanged and verifies.
    A write whose folder's token is not the run's is refused (no shared filesystem)."""
    from momoka.methods import distributed
    from momoka.methods.indexer import store_template
    from momoka.store import vectors
    from momoka.store.store import Store

    folder, _ = corpus
    ix = momoka.Index.build([folder], store=tmp_path / "s", enrich=["title"], commit_docs=1, progress=False)
    gen = ix.store.manifest["generation"]
    stage = ix.store.staging()
    (stage / distributed.TOKEN_FILE).write_text("tok")
    worker = distributed.Worker(store_template(ix.store))
    from momoka.methods.sources import to_document

    doc = to_document({"doc_id": "extra", "text": "A short passage about rivers and the sea. " * 20})
    out = worker.run([doc], {}, "raise", hold=7)
    assert out["held"] == 7 and all(e["rows"] is None for e in out["delta"].vectors.values())
    assert worker.write(7, ix.store.n_slots, str(stage), "not-the-token", None) == {"unreachable": True}
    real, calls = vectors.write_part, []

    def dies_on_second(*a, **k):
        calls.append(a[1])
        if len(calls) == 2:
            raise SystemExit("killed")
        return real(*a, **k)

    monkeypatch.setattr(vectors, "write_part", dies_on_second)
    with pytest.raises(SystemExit):
        worker.write(7, ix.store.n_slots, str(stage), "tok", None)
    left = sorted(p.name for p in stage.iterdir() if p.name != distributed.TOKEN_FILE)
    assert len(left) == 1 and left[0].startswith("b000007.tmp-")  # a temporary folder only: nothing complete
    ix.close()
    w = Store.open(tmp_path / "s", writable=True)
    assert not (tmp_path / "s" / "staging").exists()
    assert w.manifest["generation"] == gen and "extra" not in w.documents
    w.close()
    assert verify_store(tmp_path / "s")["damaged"] == []


class Poison:
    """An enricher object that kills its worker process whenever it is given document ``doc_id``."""

    name = "poison"

    def __init__(self, doc_id: str):
        self.doc_id = doc_id

    def enrich(self, index, doc_ids):
        if self.doc_id in doc_ids:
            os._exit(9)


def test_worker_dying_on_every_retry_is_reported(cluster, corpus, reference, tmp_path):
    """Tried: a BM25-only build where one document kills its worker every time (4 tries: the actor is
    restarted 3 times). The other documents are indexed and committed, the poisoned one is reported in
    report["failed"] and skipped, and the store verifies and holds exactly the others' chunks."""
    import ray.cloudpickle as cp

    cp.register_pickle_by_value(sys.modules[__name__])
    folder, _ = corpus
    bad = sorted(reference.corpus.doc_ids)[1]
    ix = momoka.Index.build([folder], store=tmp_path / "s", embedder=None, enrich=[Poison(bad)], engine="ray",
                            workers=2, commit_docs=1, on_error="skip", progress=False)
    assert ix.report.failed == [bad]
    assert any(bad in src and "worker died" in why for src, why in ix.report.skipped)
    assert sorted(ix.report.added) == sorted(set(reference.corpus.doc_ids) - {bad})
    ix.close()
    assert verify_store(tmp_path / "s")["damaged"] == []
    ix = momoka.Index.open(tmp_path / "s", components={"poison": Poison(bad)})
    want = sorted(sp for sp in _spans(reference) if sp[0] != bad)
    assert sorted(_spans(ix)) == want
    ix.close()


class NodeWriter:
    """A relator object writing a node table whose rows hold chunk ids (as JERR's entities do)."""

    name = "nodewriter"

    def relate(self, index, doc_ids):
        st = index.store
        if not st.has_node_table("things"):
            st.add_node_table("things")
        st.node_table("things").add([{"doc_id": d, "chunks": list(st.documents[d].chunk_ids)} for d in doc_ids])


def test_node_table_rows_are_refused_on_ray(cluster, corpus, tmp_path):
    """Tried: a BM25-only Ray build whose relator writes node-table rows holding chunk ids (ids a worker's
    scratch store cannot know). A ConfigError names the table and the way out; no document is committed."""
    import ray.cloudpickle as cp

    from momoka.errors import ConfigError

    cp.register_pickle_by_value(sys.modules[__name__])
    folder, _ = corpus
    with pytest.raises(ConfigError, match="node table.*things.*without --engine ray"):
        momoka.Index.build([folder], store=tmp_path / "s", embedder=None, relate=[NodeWriter()], engine="ray",
                           workers=2, commit_docs=1, progress=False)
    assert not (tmp_path / "s" / "manifest.json").exists()


class LLMProbe:
    """An enricher object sending 8 concurrent chat requests per batch to an endpoint (a client of its own)."""

    name = "llmprobe"

    def __init__(self, url: str):
        self.url = url

    def enrich(self, index, doc_ids):
        from momoka.llm import OpenAIClient

        client = OpenAIClient("scripted", base_url=self.url, api_key="x", concurrency=8, cache=False)
        client.complete_many([[{"role": "user", "content": f"{d} {i}"}] for d in doc_ids for i in range(8)])


def test_llm_requests_share_one_limit_across_workers(cluster, corpus, tmp_path, monkeypatch):
    """Tried: 2 Ray workers each sending 8 concurrent requests (their clients allow 8) to a scripted
    endpoint on 127.0.0.1 that answers after 0.3 s, with MOMOKA_LLM_GLOBAL_CONCURRENCY=3. The server itself
    counts requests in flight: never more than 3 at once over both workers (and 3 is reached)."""
    import ray.cloudpickle as cp

    from momoka.llm.testing import ScriptedServer

    cp.register_pickle_by_value(sys.modules[__name__])
    monkeypatch.setenv("MOMOKA_LLM_GLOBAL_CONCURRENCY", "3")
    folder, _ = corpus
    with ScriptedServer(delay=0.3) as srv:
        ix = momoka.Index.build([folder], store=tmp_path / "s", embedder=None, enrich=[LLMProbe(srv.base_url)],
                                engine="ray", workers=2, commit_docs=1, progress=False)
        assert srv.count == 8 * N_DOCS
        assert srv.max_inflight == 3
    assert len(ix.report.added) == N_DOCS
    ix.close()


def test_driver_killed_rerun_skips_committed(cluster, corpus, reference, tmp_path):
    """Tried: `momoka index --engine ray --address` as a child process, SIGKILL once the store has a
    commit with some but not all documents; then the same documents added again on Ray. The rerun
    leaves the committed documents alone (reported unchanged) and its workers embed exactly the chunks
    of the others; the final store equals the single-process build (raw view)."""
    folder, _ = corpus
    store = tmp_path / "s"
    env = dict(os.environ, PYTHONPATH=str(PYDIR), MOMOKA_PROGRESS="0")
    cmd = [sys.executable, "-m", "momoka", "index", str(folder), "--store", str(store), "--engine", "ray",
           "--address", cluster, "--workers", "1", "--commit-every", "1"]
    child = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    committed = 0
    deadline = time.monotonic() + 180
    try:
        while time.monotonic() < deadline and child.poll() is None:
            m = store / "manifest.json"
            if m.exists():
                try:
                    committed = json.loads(m.read_text())["counts"]["documents"]
                except (ValueError, KeyError):
                    committed = 0
                if committed >= 1:
                    break
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
    finally:
        out = child.communicate(timeout=60)[0].decode(errors="replace")
    assert child.returncode == -signal.SIGKILL, out
    assert verify_store(store)["damaged"] == []
    before = momoka.Index.open(store)
    done = set(before.corpus.doc_ids)
    done_chunks = sum(len(before.store.documents[d].chunk_ids) for d in done)
    before.close()
    assert 1 <= len(done) < N_DOCS, f"the driver was killed with {len(done)} of {N_DOCS} documents committed"
    ix = momoka.Index.open(store, writable=True)
    ix.writer.commit_docs = 1
    ix.add([folder], existing="skip", commit=True, engine="ray", workers=2)
    assert sorted(ix.report.unchanged) == sorted(done)
    assert sorted(ix.report.added) == sorted(set(reference.corpus.doc_ids) - done)
    assert ix.report.embedded == ref_chunks(reference) - done_chunks
    ix.close()
    ix = momoka.Index.open(store)
    assert sorted(_spans(ix)) == sorted(_spans(reference))
    by_span = {ix.store.chunks.span(int(c)): int(c) for c in ix.store.chunks.ids()}
    ref_ids = list(reference.store.chunks.ids())
    mine = [by_span[reference.store.chunks.span(int(c))] for c in ref_ids]
    np.testing.assert_allclose(ix.store.vector_view("raw").get(mine), reference.store.vector_view("raw").get(ref_ids),
                               atol=1e-6)
    ix.close()


def test_without_ray_the_cli_says_how_to_install(tmp_path, monkeypatch, capsys):
    """Tried: `momoka index --engine ray` with the ray module hidden: one line naming momoka[ray], exit 2,
    no store directory made."""
    from momoka.cli import main

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    (tmp_path / "a.txt").write_text("some text to index")
    rc = main(["index", str(tmp_path / "a.txt"), "--store", str(tmp_path / "s"), "--engine", "ray"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert err[-1].startswith("momoka: error:") and 'pip install "momoka[ray]"' in err[-1]
    assert not (tmp_path / "s").exists()
