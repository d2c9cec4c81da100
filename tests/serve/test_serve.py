"""``momoka serve``: real HTTP on 127.0.0.1, answers checked against the same search done in-process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from momoka import Index
from momoka.cli import main
from momoka.serve import QueryServer

from ..store.conftest import TOPICS, HashEmbedder

QUERIES = ["apple harvest in autumn", "rocket engine thrust", "violin strings and bow", "lava and magma"]


def _docs() -> list[dict]:
    return [{"doc_id": name, "title": name.title(),
             "text": "\n\n".join(f"{text} Paragraph {i} about {name}." for i in range(3))}
            for name, text in TOPICS.items()]


@pytest.fixture
def store(tmp_path) -> Path:
    Index.build(_docs(), store=tmp_path / "s", embedder=HashEmbedder(), chunker="paragraph", progress=False).close()
    return tmp_path / "s"


def _call(url: str, body=None, method: str | None = None) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method or ("POST" if data is not None else "GET"),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _hits(result) -> list[tuple]:
    return [(it.doc_id, it.start, it.end, it.text, round(it.score, 5)) for it in result]


def _served(answer: dict) -> list[tuple]:
    return [(h["doc_id"], h["start"], h["end"], h["text"], round(h["score"], 5)) for h in answer["hits"]]


def test_search_and_health_match_the_in_process_index(store):
    ref = Index.open(store, embedder=HashEmbedder())
    with QueryServer(store, port=0, embedder=HashEmbedder(), poll=0.05) as srv:
        code, h = _call(srv.url + "/health")
        assert code == 200 and h["store"] == str(store) and h["generation"] == 1
        assert (h["documents"], h["chunks"]) == (5, 15)  # 5 documents of 3 paragraphs
        for q in QUERIES:
            for retriever in ("bm25", "dense", "hybrid"):
                code, a = _call(srv.url + "/search", {"query": q, "k": 3, "retriever": retriever})
                assert code == 200 and a["generation"] == 1 and a["retriever"] == retriever
                assert _served(a) == _hits(ref.search(q, k=3, retriever=retriever)) and len(a["hits"]) == 3
            code, a = _call(srv.url + "/search", {"query": q, "budget": 250})  # the server's default retriever
            assert code == 200 and _served(a) == _hits(ref.search(q, budget=250, retriever="hybrid"))
            assert sum(h["end"] - h["start"] for h in a["hits"]) <= 250 or len(a["hits"]) == 1
        code, a = _call(srv.url + "/search", {"query": "apples and the king", "k": 2, "doc_ids": ["chess"],
                                              "retriever": "bm25", "options": {"view": "raw"}})
        assert code == 200 and {h["doc_id"] for h in a["hits"]} == {"chess"}
    ref.close()


@pytest.mark.parametrize("body, status, words", [
    (b"{not json", 400, "not valid JSON"),
    ([1, 2], 400, "JSON object"),
    ({"k": 3}, 400, "'query' must be a string"),
    ({"query": "   "}, 400, "empty"),
    ({"query": "apples", "k": 0}, 400, "'k' must be an integer in [1, 2147483647]"),
    ({"query": "apples", "budget": "lots"}, 400, "'budget' must be an integer in [1, 2147483647]"),
    ({"query": "apples", "retriever": "nope"}, 400, "nope"),
    ({"query": "apples", "retriever": "trail"}, 400, "paths"),
    ({"query": "apples", "quey": "x"}, 400, "unknown field(s) 'quey'"),
    ({"query": "apples", "options": {"no_such_option": 1}}, 400, "no_such_option"),
    ({"query": "apples", "doc_ids": ["nobody"]}, 400, "nobody"),
])
def test_bad_requests_are_json_errors_with_a_status(store, body, status, words):
    with QueryServer(store, port=0, embedder=HashEmbedder()) as srv:
        code, a = _call(srv.url + "/search", body if isinstance(body, bytes) else json.dumps(body).encode())
        assert code == status and set(a) == {"error"} and words in a["error"], a
        assert "Traceback" not in a["error"]


def test_unknown_paths_and_methods(store):
    with QueryServer(store, port=0, embedder=HashEmbedder()) as srv:
        assert _call(srv.url + "/nope")[0] == 404
        code, a = _call(srv.url + "/search", method="GET")
        assert code == 405 and "POST" in a["error"]
        assert _call(srv.url + "/health", b"{}")[0] == 405


def test_new_commits_are_served_without_a_restart(store):
    with QueryServer(store, port=0, embedder=HashEmbedder(), poll=0.05) as srv:
        assert _call(srv.url + "/search", {"query": "zeppelin", "retriever": "bm25"})[1]["hits"] == []
        w = Index.open(store, embedder=HashEmbedder(), writable=True)
        w.add([{"doc_id": "airship", "text": "A zeppelin is a rigid airship."}])
        w.save()
        deadline = time.monotonic() + 20
        while _call(srv.url + "/health")[1]["generation"] != 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        code, a = _call(srv.url + "/search", {"query": "zeppelin", "retriever": "bm25"})
        assert code == 200 and a["generation"] == 2 and [h["doc_id"] for h in a["hits"]] == ["airship"]
        assert _call(srv.url + "/health")[1]["documents"] == 6
        w.delete(["airship"])
        w.save()
        w.close()
        deadline = time.monotonic() + 20
        while _call(srv.url + "/health")[1]["generation"] != 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _call(srv.url + "/search", {"query": "zeppelin", "retriever": "bm25"})[1]["hits"] == []


def test_a_damaged_new_commit_keeps_the_old_one_serving(store, capsys):
    with QueryServer(store, port=0, embedder=HashEmbedder(), poll=3600) as srv:  # checks only when told
        w = Index.open(store, embedder=HashEmbedder(), writable=True)
        w.add([{"doc_id": "airship", "text": "A zeppelin is a rigid airship."}])
        w.save()
        w.close()
        gen = sorted(store.glob("seg-*/documents.jsonl"))[-1]  # the new commit's segment
        gen.write_bytes(gen.read_bytes()[:-10])  # tried: a commit whose documents file got damaged
        with pytest.raises(Exception, match="corrupted"):
            srv.check()
        code, h = _call(srv.url + "/health")
        assert code == 200 and h["generation"] == 1 and "corrupted" in h["refresh_error"]
        code, a = _call(srv.url + "/search", {"query": "apple harvest", "k": 1})
        assert code == 200 and a["generation"] == 1 and a["hits"][0]["doc_id"] == "apples"


def test_cli_serves_and_stops(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    for name, text in TOPICS.items():
        (src / f"{name}.txt").write_text(text + "\n")
    assert main(["index", str(src), "--store", str(tmp_path / "s"), "--no-dense"]) == 0
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    p = subprocess.Popen([sys.executable, "-m", "momoka", "serve", str(tmp_path / "s"), "--port", "0",
                          "--retriever", "bm25"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stderr.readline()
        assert "serving" in line and "generation 1" in line, line
        url = line.rsplit(" on ", 1)[1].strip()
        code, a = _call(url + "/search", {"query": "chess board king", "k": 1})
        assert code == 200 and a["hits"][0]["doc_id"] == "chess"
        p.terminate()
        assert p.wait(20) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_cli_bad_store_is_one_line(tmp_path, capsys):
    assert main(["serve", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("momoka: error: no store at")


def test_help_names_every_option(capsys):
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    out = capsys.readouterr().out
    for opt in ("--host", "--port", "--retriever", "-k", "--budget", "--option", "--workers", "--queue", "--poll",
                "--max-body", "--read-timeout", "--idle-timeout", "--max-connections", "--token", "MOMOKA_SERVE_TOKEN",
                "POST /search", "GET /health"):
        assert opt in out, opt


@pytest.mark.parametrize("argv, words", [(["--workers", "0"], "workers"), (["--poll", "0"], "poll"),
                                         (["-k", "0"], "'k'"),
                                         (["-k", "9223372036854775808"], "'k' must be an integer in [1, 2147483647]"),
                                         (["--max-body", "0"], "max_body"), (["--read-timeout", "-1"], "read_timeout"),
                                         (["--idle-timeout", "nan"], "idle_timeout"),
                                         (["--max-connections", "0"], "max_connections"),
                                         (["--token", "short"], "16 or more"),
                                         (["--host", "0.0.0.0"], "needs a bearer token")])
def test_cli_bad_options_are_one_line(store, capsys, monkeypatch, argv, words):
    monkeypatch.delenv("MOMOKA_SERVE_TOKEN", raising=False)  # else --host 0.0.0.0 would listen
    assert main(["serve", str(store), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("momoka: error:") and words in err[0]


class SlowEmbedder(HashEmbedder):
    """The hash embedder, taking ``delay`` seconds per call (a search that holds its worker)."""

    delay = 0.0

    def embed(self, texts):
        time.sleep(self.delay)
        return super().embed(texts)


def test_requests_beyond_workers_and_queue_get_503(store):
    import threading

    emb = SlowEmbedder()
    with QueryServer(store, port=0, embedder=emb, workers=1, queue=0) as srv:
        emb.delay = 1.0
        first: list = []
        t = threading.Thread(target=lambda: first.append(_call(srv.url + "/search", {"query": "apples",
                                                                                     "retriever": "dense"})))
        t.start()
        time.sleep(0.3)  # the first search holds the only worker
        code, a = _call(srv.url + "/search", {"query": "rockets", "retriever": "dense"})
        t.join()
        assert code == 503 and "busy" in a["error"]
        assert first[0][0] == 200 and first[0][1]["hits"]
        emb.delay = 0.0
        assert _call(srv.url + "/search", {"query": "rockets", "retriever": "dense"})[0] == 200
