"""``momoka serve`` against hostile clients, on 127.0.0.1 over raw sockets: oversize bodies, slow and idle
connections, the connection cap, malformed requests, the bearer token, the retriever cache.

Every case is bounded in count (a few connections) and time (timeouts of a fraction of a second)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from momoka import Index
from momoka.cli import main
from momoka.errors import ConfigError
from momoka.serve import QueryServer

from ..store.conftest import TOPICS, HashEmbedder

TOKEN = "tok-0123456789abcdef"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("hostile") / "s"
    docs = [{"doc_id": name, "title": name.title(),
             "text": "\n\n".join(f"{text} Paragraph {i} about {name}." for i in range(3))}
            for name, text in TOPICS.items()]
    Index.build(docs, store=path, embedder=HashEmbedder(), chunker="paragraph", progress=False).close()
    return path


def _connect(url: str, timeout: float = 5.0) -> socket.socket:
    host, port = url.rsplit("/", 1)[1].rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=timeout)


def _read_answer(s: socket.socket) -> tuple[int, dict, dict]:
    """One HTTP answer from ``s``: status, headers (lower case), the JSON body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before an answer: {data!r}")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    n = int(headers["content-length"])
    while len(body) < n:
        chunk = s.recv(65536)
        if not chunk:
            break
        body += chunk
    return status, headers, json.loads(body[:n])


def _exchange(url: str, raw: bytes) -> tuple[int, dict, dict]:
    with _connect(url) as s:
        s.sendall(raw)
        return _read_answer(s)


def _post(body: bytes, path: str = "/search", extra: str = "") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{extra}"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def _closed(s: socket.socket) -> bool:
    """Whether the server closed ``s`` (EOF or reset) within the socket's timeout."""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def _ok(url: str) -> bool:
    status, _, body = _exchange(url, _post(json.dumps({"query": "apple harvest", "k": 1}).encode()))
    return status == 200 and body["hits"][0]["doc_id"] == "apples"


# ---------------------------------------------------------------------------------------------- body size


def test_an_oversize_body_is_413_before_it_is_sent(store, capfd):
    with QueryServer(store, port=0, embedder=HashEmbedder(), max_body=1000) as srv:
        for extra in ("", "Expect: 100-continue\r\n"):
            with _connect(srv.url) as s:  # the headers of a 50 MB body; not one byte of the body is sent
                s.sendall(f"POST /search HTTP/1.1\r\nHost: x\r\n{extra}Content-Length: 50000000\r\n\r\n".encode())
                status, headers, body = _read_answer(s)
                assert status == 413 and set(body) == {"error"}, body
                assert "50,000,000 bytes" in body["error"] and "1,000 bytes" in body["error"]
                assert headers["connection"] == "close" and _closed(s)
        # a body at the limit is read and answered
        q = json.dumps({"query": "apple harvest", "k": 1}).encode()
        pad = q[:-1] + b', "retriever": "bm25"' + b" " * (1000 - len(q) - 21) + b"}"
        assert len(pad) == 1000
        status, _, body = _exchange(srv.url, _post(pad))
        assert status == 200 and body["hits"][0]["doc_id"] == "apples"
        # Expect: 100-continue under the limit: 100 first, then the answer once the body is sent
        with _connect(srv.url) as s:
            s.sendall(f"POST /search HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: {len(q)}"
                      f"\r\n\r\n".encode())
            assert s.recv(100).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
            s.sendall(q)
            assert _read_answer(s)[0] == 200
        assert srv.health()["refused"]["bad_requests"] == 2
    assert "Traceback" not in capfd.readouterr().err


# ---------------------------------------------------------------------------------------------- timeouts


def test_idle_and_slow_clients_are_closed_while_others_are_answered(store, capfd):
    with QueryServer(store, port=0, embedder=HashEmbedder(), read_timeout=0.6, idle_timeout=0.6) as srv:
        t0 = time.monotonic()
        idle = [_connect(srv.url) for _ in range(3)]  # connect, send nothing
        kept = _connect(srv.url)  # one request, then silence on a kept-alive connection
        kept.sendall(_post(json.dumps({"query": "violin", "k": 1}).encode()))
        assert _read_answer(kept)[0] == 200
        slow_head, slow_body = _connect(srv.url), _connect(srv.url)
        head = _post(json.dumps({"query": "lava", "k": 1}).encode())
        cut = head.index(b"\r\n\r\n") + 4
        slow_body.sendall(head[:cut])
        results: dict = {}

        def trickle(s: socket.socket, data: bytes, name: str) -> None:  # a byte every 0.1 s
            try:
                for b in data:
                    s.sendall(bytes([b]))
                    time.sleep(0.1)
            except OSError:
                pass
            results[name] = time.monotonic() - t0

        threads = [threading.Thread(target=trickle, args=(slow_head, head[:cut], "head")),
                   threading.Thread(target=trickle, args=(slow_body, head[cut:], "body"))]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 0.4
        while srv.health()["connections"] < 6 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert srv.health()["connections"] == 6
        for _ in range(3):  # other clients are answered meanwhile, promptly
            t = time.monotonic()
            assert _ok(srv.url) and time.monotonic() - t < 0.5
        for s in (slow_head, slow_body):
            status, _, body = _read_answer(s)
            assert status == 408 and "did not arrive within 0.6 s" in body["error"], body
        for s in idle + [kept]:
            assert _closed(s)
        waited = time.monotonic() - t0
        assert 0.6 <= waited < 4, waited  # the timeout, the linger after a 408, scheduling
        for s in idle + [kept, slow_head, slow_body]:
            s.close()
        for t in threads:
            t.join()
        assert srv.health()["refused"]["timed_out"] >= 6 and _ok(srv.url)
    assert "Traceback" not in capfd.readouterr().err


def test_a_client_that_never_reads_its_answers_is_dropped(store):
    with QueryServer(store, port=0, embedder=HashEmbedder(), read_timeout=0.5, idle_timeout=5) as srv:
        s = _connect(srv.url, timeout=1.0)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        req = _post(json.dumps({"query": "apples", "k": 15, "retriever": "bm25"}).encode())
        try:
            for _ in range(2000):  # pipelined requests, answers never read: the server's send buffer fills
                s.sendall(req)
        except OSError:
            pass
        deadline = time.monotonic() + 10
        while srv.health()["connections"] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert srv.health()["connections"] == 0 and _ok(srv.url)
        s.close()


# ---------------------------------------------------------------------------------------------- connection cap


def test_connections_beyond_the_cap_are_503(store, capfd):
    with QueryServer(store, port=0, embedder=HashEmbedder(), max_connections=3, idle_timeout=5) as srv:
        held = [_connect(srv.url) for _ in range(3)]
        deadline = time.monotonic() + 5
        while srv.health()["connections"] < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        status, headers, body = _exchange(srv.url, _post(json.dumps({"query": "apples"}).encode()))
        assert status == 503 and "connections" in body["error"] and headers["connection"] == "close"
        assert srv.health()["refused"]["rejected"] == 1
        for s in held:
            s.close()
        deadline = time.monotonic() + 5
        while srv.health()["connections"] and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _ok(srv.url)
    assert "Traceback" not in capfd.readouterr().err


# ---------------------------------------------------------------------------------------------- malformed input


def _search(body: str) -> bytes:
    return _post(body.encode("utf-8", "surrogatepass"))


MALFORMED = [
    ("k of 2**63", _search('{"query": "apples", "k": 9223372036854775808}'), 400,
     "'k' must be an integer in [1, 2147483647]"),
    ("k of 2**64", _search('{"query": "apples", "k": 18446744073709551616}'), 400, "'k' must be"),
    ("k of 1e400", _search('{"query": "apples", "k": 1e400}'), 400, "'k' must be"),
    ("k negative", _search('{"query": "apples", "k": -3}'), 400, "'k' must be"),
    ("budget of 2**63", _search('{"query": "apples", "budget": 9223372036854775808}'), 400, "'budget' must be"),
    ("k NaN", _search('{"query": "apples", "k": NaN}'), 400, "NaN is not a JSON number"),
    ("a lone surrogate (JSON escape)", _search('{"query": "apple \\ud800 harvest"}'), 400, "lone surrogate"),
    ("a lone surrogate, dense", _search('{"query": "\\udcff", "retriever": "dense"}'), 400, "lone surrogate"),
    ("invalid UTF-8", _post(b'{"query": "apple \xff\xfe harvest"}'), 400, "not valid UTF-8 (byte 17)"),
    ("UTF-16", _post('{"query": "apples"}'.encode("utf-16")), 400, "not valid UTF-8"),
    ("JSON 100,000 deep", _post(b'{"query": "x", "options": {"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}"),
     400, "nested too deeply"),
    ("options of the wrong type", _search('{"query": "apples", "options": {"rrf_k": "many"}}'), 400, "rrf_k"),
    ("an unknown option nested deep", _search('{"query": "apples", "options": {"x": ' + "[" * 500 + "]" * 500 + "}}"),
     400, "'x'"),
    ("Content-Length negative", b"POST /search HTTP/1.1\r\nContent-Length: -5\r\n\r\n", 400, "Content-Length"),
    ("Content-Length not a number", b"POST /search HTTP/1.1\r\nContent-Length: ten\r\n\r\n", 400, "'ten'"),
    ("Content-Length signed", b"POST /search HTTP/1.1\r\nContent-Length: +2\r\n\r\n{}", 400, "digits only"),
    ("Content-Length twice", b"POST /search HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400,
     "twice"),
    ("Content-Length of 40 digits", b"POST /search HTTP/1.1\r\nContent-Length: " + b"9" * 40 + b"\r\n\r\n", 413,
     "40-digit"),
    ("chunked body", b"POST /search HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 411,
     "Content-Length"),
    ("header without a colon", b"POST /search HTTP/1.1\r\nContent-Length 2\r\n\r\n{}", 400, "malformed header"),
    ("space before the colon", b"POST /search HTTP/1.1\r\nContent-Length : 2\r\n\r\n{}", 400, "malformed header"),
    ("folded header", b"GET /health HTTP/1.1\r\nX-A: 1\r\n  folded\r\n\r\n", 400, "malformed header"),
    ("NUL in a header", b"GET /health HTTP/1.1\r\nX-A: a\x00b\r\n\r\n", 400, "control character"),
    ("garbage request line", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400, "malformed request line"),
    ("no version", b"GET /health\r\n\r\n", 400, "malformed request line"),
    ("HTTP/2.0", b"GET /health HTTP/2.0\r\n\r\n", 505, "HTTP/1.1"),
    ("a 10 kB path", b"GET /" + b"a" * 10_000 + b" HTTP/1.1\r\n\r\n", 414, "8,192 bytes"),
    ("101 headers", b"GET /health HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(101)) + b"\r\n", 431,
     "100 header lines"),
    ("a 10 kB header", b"GET /health HTTP/1.1\r\nX-A: " + b"a" * 10_000 + b"\r\n\r\n", 431, "8,192 bytes"),
]


@pytest.fixture(scope="module")
def server(store):
    with QueryServer(store, port=0, embedder=HashEmbedder(), read_timeout=2, idle_timeout=2) as srv:
        yield srv


@pytest.mark.parametrize("name, raw, status, words", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_requests_are_json_errors_never_500(server, capfd, name, raw, status, words):
    got, headers, body = _exchange(server.url, raw)
    assert (got, set(body)) == (status, {"error"}) and isinstance(body["error"], str), body
    assert words in body["error"] and "Traceback" not in body["error"], body
    assert headers["content-type"] == "application/json"
    assert _ok(server.url)  # the server is unharmed
    err = capfd.readouterr().err
    assert "Traceback" not in err and "error" not in err, err


# ---------------------------------------------------------------------------------------------- bearer token


def test_the_bearer_token_is_required_and_checked(store):
    q = json.dumps({"query": "apple harvest", "k": 1}).encode()
    with QueryServer(store, port=0, embedder=HashEmbedder(), token=TOKEN) as srv:
        for path, raw in (("/search", _post(q)), ("/health", b"GET /health HTTP/1.1\r\n\r\n"),
                          ("/nope", b"GET /nope HTTP/1.1\r\n\r\n")):
            status, headers, body = _exchange(srv.url, raw)
            assert status == 401 and "bearer token" in body["error"] and headers["www-authenticate"].startswith(
                "Bearer"), (path, body)
        for wrong in ("Bearer " + TOKEN[:-1] + "X", "Bearer " + TOKEN + "X", "Basic " + TOKEN, "Bearer",
                      "Bearer tok\xe9-0123456789abcdef"):
            status, headers, body = _exchange(srv.url, _post(q, extra=f"Authorization: {wrong}\r\n".encode(
                "latin-1").decode("latin-1")))
            assert status == 401 and set(body) == {"error"}, (wrong, body)
        status, _, body = _exchange(srv.url, _post(q, extra=f"Authorization: Bearer {TOKEN}\r\n"))
        assert status == 200 and body["hits"][0]["doc_id"] == "apples"
        status, _, body = _exchange(srv.url, _post(q, extra=f"authorization: bearer {TOKEN}\r\n"))
        assert status == 200
        assert srv.health()["auth"] is True


@pytest.mark.parametrize("kwargs, words", [
    ({"host": "0.0.0.0"}, "needs a bearer token"),
    ({"host": "::"}, "needs a bearer token"),
    ({"host": "example.org"}, "needs a bearer token"),
    ({"token": "short"}, "16 or more"),
    ({"token": "has spaces in it, sixteen+"}, "other characters"),
    ({"max_body": 0}, "max_body"),
    ({"read_timeout": 0}, "read_timeout"),
    ({"idle_timeout": float("nan")}, "idle_timeout"),
    ({"max_connections": 0}, "max_connections"),
    ({"max_retrievers": 0}, "max_retrievers"),
])
def test_bad_limits_and_a_public_address_without_a_token_fail_at_start(store, kwargs, words):
    with pytest.raises(ConfigError, match=words.replace("+", r"\+")):
        QueryServer(store, port=0, embedder=HashEmbedder(), **kwargs)


def test_loopback_addresses_need_no_token(store):
    from momoka.serve import is_loopback

    assert all(is_loopback(h) for h in ("127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost", "LOCALHOST"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "", "10.0.0.1", "192.168.1.5", "example.org"))


# ---------------------------------------------------------------------------------------------- bounded caches


def test_the_retrievers_kept_per_options_are_bounded(store):
    ref = Index.open(store, embedder=HashEmbedder())
    with QueryServer(store, port=0, embedder=HashEmbedder(), max_retrievers=3) as srv:
        for i in range(12):  # a new options value each time: a new retriever each time
            opts = {"rrf_k": 10 + i, "fusion": "rrf"}
            status, _, body = _exchange(srv.url, _search(json.dumps({"query": "rocket engine", "k": 3,
                                                                     "options": opts})))
            expected = ref.search("rocket engine", k=3, retriever="hybrid", **opts)
            assert status == 200 and [(h["doc_id"], h["start"], round(h["score"], 6)) for h in body["hits"]] == [
                (it.doc_id, it.start, round(it.score, 6)) for it in expected]
            assert srv.health()["retrievers_cached"] == min(3, i + 2)  # the default retriever's warm-up + these
        assert srv.health()["max_retrievers"] == 3
    ref.close()


def test_the_index_keeps_the_most_recently_used_retrievers(store):
    ix = Index.open(store, embedder=HashEmbedder())
    ix.corpus.max_retrievers = 2
    a = ix.corpus.retriever("bm25")
    b = ix.corpus.retriever("dense")
    assert ix.corpus.retriever("bm25") is a  # used again: now the most recent
    c = ix.corpus.retriever("hybrid")  # drops dense, the least recently used
    assert ix.corpus.cached_retrievers == 2 and ix.corpus.retriever("bm25") is a and ix.corpus.retriever("hybrid") is c
    assert ix.corpus.retriever("dense") is not b  # built again
    ix.close()


# ---------------------------------------------------------------------------------------------- the command line


@pytest.fixture(scope="module")
def bm25_store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cli")
    src = root / "in"
    src.mkdir()
    for name, text in TOPICS.items():
        (src / f"{name}.txt").write_text(text + "\n")
    assert main(["index", str(src), "--store", str(root / "s"), "--no-dense"]) == 0
    return root / "s"


def _env(**extra) -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), **extra)


@pytest.mark.parametrize("argv, words", [
    (["-k", "9223372036854775808"], "-k must be an integer in [1, 2147483647], got 9223372036854775808"),
    (["--budget", "99999999999999999999"], "--budget must be an integer in [0, 2147483647]"),
    (["-k", "0"], "-k must be"),
])
def test_cli_query_out_of_range_numbers_are_one_line(bm25_store, capsys, argv, words):
    assert main(["query", str(bm25_store), "chess", "--retriever", "bm25", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0] == f"momoka: error: {words}" or words in err[0], err


def test_cli_query_of_bytes_that_are_not_utf8_is_one_line(bm25_store):
    for command in ("query", "ask"):
        p = subprocess.run([sys.executable, "-m", "momoka", command, str(bm25_store).encode(), b"chess \xff\xfe king",
                            b"--retriever", b"bm25"], capture_output=True, env=_env(), timeout=120)
        err = p.stderr.decode("utf-8", "replace").strip().splitlines()
        assert p.returncode == 2 and len(err) == 1, (command, err)
        assert err[0].startswith("momoka: error: query is not valid text: character 7 is a lone surrogate"), err


def test_cli_serve_takes_the_token_from_the_environment_and_refuses_a_public_address(bm25_store, capsys,
                                                                                    monkeypatch):
    monkeypatch.delenv("MOMOKA_SERVE_TOKEN", raising=False)  # else --host 0.0.0.0 would listen
    assert main(["serve", str(bm25_store), "--host", "0.0.0.0", "--port", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs a bearer token" in err[0] and "MOMOKA_SERVE_TOKEN" in err[0]
    p = subprocess.Popen([sys.executable, "-m", "momoka", "serve", str(bm25_store), "--port", "0", "--retriever",
                          "bm25", "--max-body", "500", "--read-timeout", "1"], env=_env(MOMOKA_SERVE_TOKEN=TOKEN),
                         stderr=subprocess.PIPE, text=True)
    try:
        line = p.stderr.readline()
        assert "(bearer token required)" in line, line
        url = line.split(" on ", 1)[1].split()[0]
        q = json.dumps({"query": "chess board king", "k": 1}).encode()
        assert _exchange(url, _post(q))[0] == 401
        status, _, body = _exchange(url, _post(q, extra=f"Authorization: Bearer {TOKEN}\r\n"))
        assert status == 200 and body["hits"][0]["doc_id"] == "chess"
        status, _, body = _exchange(url, _post(b" " * 501, extra=f"Authorization: Bearer {TOKEN}\r\n"))
        assert status == 413 and "500 bytes" in body["error"]
        with _connect(url) as s:  # --read-timeout 1: half a request line, then nothing
            s.sendall(b"GET /hea")
            assert _read_answer(s)[0] == 408
        p.terminate()
        assert p.wait(20) == 0
        assert "Traceback" not in p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
