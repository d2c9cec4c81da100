"""Resumable indexing: kill -9 at random points (and inside the save), then rerun the same command."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import momoka
import pytest
from momoka import Index
from momoka.errors import StoreError
from momoka.store import Store

from .conftest import HashEmbedder

CHILD = Path(__file__).with_name("_resume_child.py")
REPO_PY = Path(momoka.__file__).resolve().parents[1]
QUERIES = ["topic3 river", "orchard apples", "paragraph 2 of document 57", "word11 word40", "rockets and item9"]
N_DOCS = 120


def _corpus(root: Path) -> dict[str, str]:
    """N_DOCS files of three paragraphs each, in two folders (ids are relative paths)."""
    texts = {}
    for i in range(N_DOCS):
        sub = "a" if i % 2 else "b"
        paras = [f"Document {i} is about topic{i % 9} and item{i}, near the river {i % 5}.",
                 " ".join(f"word{(i * j) % 61}" for j in range(25)) + f" orchard apples {i % 4}.",
                 f"This is paragraph 2 of document {i}; rockets and item{i % 11} close it."]
        text = "\n\n".join(paras) + "\n"
        p = root / sub / f"doc{i:03d}.txt"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
        texts[f"{sub}/doc{i:03d}"] = text
    return texts


def _results(ix: Index) -> list:
    """Per query and retriever: the items (doc, span, score), searched exactly (a filter of every document),
    and the scores of the unfiltered (HNSW) search.

    An HNSW graph depends on its insertion order, which differs between one
    build and a resumed one, so which of several equal-scoring chunks it
    returns at the k-th place may differ; the exact search and the scores may not.
    """
    out = []
    every = ix.corpus.doc_ids
    for q in QUERIES:
        for r in ("bm25", "dense", "hybrid"):
            exact = ix.search(q, k=8, retriever=r, doc_ids=every)
            out.append([(it.doc_id, it.start, it.end, round(it.score, 5)) for it in exact])
            if r != "hybrid":  # hybrid fuses ranks, and the rank of a tied chunk is the graph's choice
                out.append([round(it.score, 5) for it in ix.search(q, k=8, retriever=r)])
    return out


def _committed(store: Path, texts: dict[str, str]) -> int:
    """Open the store, check it is a consistent subset of the corpus; return its number of chunks."""
    if not (store / "manifest.json").exists():
        # an interrupted first build: nothing committed, so it is not (yet) a store a reader can open
        with pytest.raises(StoreError):
            Store.open(store)
        return 0
    st = Store.open(store)
    assert set(st.documents) <= set(texts)
    assert len(st.bm25_view("raw")) == st.n_chunks == st.vector_view("raw").n_rows
    for e in st.documents.values():
        chunks = [st.chunks.get(c) for c in e.chunk_ids]
        assert all(c.doc_id == e.doc_id and c.text == texts[e.doc_id][c.start:c.end] for c in chunks)
    n = st.n_chunks
    st.close()
    return n


def _run(store: Path, corpus: Path, counts: Path, kill_save: tuple | None = None):
    env = dict(os.environ, PYTHONPATH=str(REPO_PY) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    extra = [str(kill_save[0]), kill_save[1]] if kill_save else []
    return subprocess.Popen([sys.executable, str(CHILD), str(store), str(corpus), str(counts), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_kill_and_resume_equals_a_clean_build(tmp_path):
    texts = _corpus(tmp_path / "corpus")
    clean = Index.build([tmp_path / "corpus"], store=tmp_path / "clean", embedder=HashEmbedder(),
                        chunker="paragraph", progress=False)
    total = clean.store.n_chunks
    want = _results(clean)
    clean.close()
    store = tmp_path / "s"
    rng = random.Random(18)
    # tried: a kill inside the first save (interrupted first build), inside later saves at each stage,
    # and at random times; then the same command until it finishes
    plan = [(1, "files"), (1, "renamed"), (3, "manifest"), (2, "renamed"), None, None, None, None]
    outcomes = []
    for run, kill in enumerate(plan + [None] * 20):
        before = _committed(store, texts)
        counts = tmp_path / f"counts-{run}.txt"
        p = _run(store, tmp_path / "corpus", counts, kill if run < len(plan) else None)
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
        if run < len(plan) and kill is None:
            time.sleep(rng.uniform(0.1, 1.0))
            p.send_signal(signal.SIGKILL)
        out, err = p.communicate(timeout=120)
        embedded = sum(int(x) for x in counts.read_text().split()) if counts.exists() else 0
        # only what was not committed is embedded again (a killed run may stop before embedding all of it)
        assert embedded <= total - before, (run, embedded, total, before)
        outcomes.append((kill or "random", p.returncode, before, embedded))
        if p.returncode == 0:
            assert "done" in out
            assert embedded == total - before
            break
        assert p.returncode == -signal.SIGKILL, err
    else:
        pytest.fail(f"the rerun never finished: {outcomes}")
    print("kill-and-resume runs (kill, rc, chunks committed before, chunks embedded):", outcomes)
    # the kills placed inside saves always happen; a random-time kill may come after the run has finished
    staged = [o for o in outcomes if o[0] != "random"]
    assert len(staged) == 4 and all(o[1] == -signal.SIGKILL for o in staged), outcomes
    assert _committed(store, texts) == total
    ix = Index.open(store, embedder=HashEmbedder())
    assert sorted(ix.corpus.doc_ids) == sorted(texts)
    ref = Store.open(tmp_path / "clean")
    for d, e in ref.documents.items():  # same chunks, same ids, same vectors
        assert ix.store.documents[d].chunk_ids == e.chunk_ids
    assert (ix.store.vector_view("raw").get(range(total)) == ref.vector_view("raw").get(range(total))).all()
    assert _results(ix) == want  # identical to the clean build
    assert not [q for q in store.iterdir() if ".tmp-" in q.name]
    m = json.loads((store / "manifest.json").read_text())
    assert m["counts"]["chunks"] == total
