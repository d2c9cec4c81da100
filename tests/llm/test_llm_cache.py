"""The SQLite WAL response cache: keys, persistence, and two writer processes on one file."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import momoka

import pytest

from momoka.errors import ConfigError
from momoka.llm import ResponseCache, make_key

# The folder holding the momoka package this test imports (installed or in-tree), so child
# processes import the same build.
PYTHON_DIR = str(Path(momoka.__file__).resolve().parents[1])


def test_file_is_in_wal_mode(cache_path):
    ResponseCache(cache_path).put("k", "chat", "m", {"text": "v"})
    con = sqlite3.connect(cache_path)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert con.execute("SELECT value FROM responses WHERE key='k'").fetchone()[0] == '{"text":"v"}'


def test_keys_ignore_dict_order_but_not_values():
    a = make_key("chat", "m", {"messages": [{"role": "user", "content": "x"}], "params": {"t": 0, "max": 5}})
    b = make_key("chat", "m", {"params": {"max": 5, "t": 0}, "messages": [{"content": "x", "role": "user"}]})
    assert a == b and len(a) == 64
    assert a != make_key("chat", "m2", {"messages": [{"role": "user", "content": "x"}], "params": {"t": 0, "max": 5}})
    assert a != make_key("chat", "m", {"messages": [{"role": "user", "content": "x "}], "params": {"t": 0, "max": 5}})
    assert a != make_key("logprob", "m", {"messages": [{"role": "user", "content": "x"}], "params": {"t": 0, "max": 5}})


def test_put_get_first_write_wins_and_persistence(cache_path):
    c = ResponseCache(cache_path)
    assert c.put_many([("a", "chat", "m", {"text": "1"}), ("b", "chat", "m", {"text": "2"})]) == 2
    assert c.put_many([("a", "chat", "m", {"text": "other"})]) == 0
    c.close()
    c2 = ResponseCache(cache_path)
    assert c2.get_many(["a", "b", "zz"]) == {"a": {"text": "1"}, "b": {"text": "2"}}
    assert len(c2) == 2 and "a" in c2 and "zz" not in c2
    st = c2.stats()
    assert st["entries"] == 2 and st["by_model"] == [{"model": "m", "kind": "chat", "entries": 2}]
    assert c2.clear("m") == 2 and len(c2) == 0


def test_many_keys_are_read_in_chunks(cache_path):
    c = ResponseCache(cache_path)
    c.put_many([(f"k{i}", "chat", "m", {"i": i}) for i in range(1234)])
    got = c.get_many([f"k{i}" for i in range(0, 1300)])
    assert len(got) == 1234 and got["k1000"] == {"i": 1000}


def test_bad_cache_files(tmp_path):
    # a directory where the file should be
    with pytest.raises(ConfigError, match="directory"):
        ResponseCache(tmp_path)
    # a file that is not SQLite
    bad = tmp_path / "junk.sqlite"
    bad.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(ConfigError, match="SQLite"):
        ResponseCache(bad)


# The worker processes run these snippets with a fresh interpreter (like spawn, but independent of how
# pytest imported this module).
WRITER = """
import os, random, sys, time
from momoka.llm.cache import ResponseCache
path, start, stop, seed, barrier = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
rng = random.Random(seed)
c = ResponseCache(path, timeout=60)
keys = list(range(start, stop))
rng.shuffle(keys)
open(os.path.join(barrier, f"ready{seed}"), "w").close()
deadline = time.time() + 60
while len(os.listdir(barrier)) < 2 and time.time() < deadline:  # both writers start together
    time.sleep(0.001)
first = time.time()
i = 0
while i < len(keys):
    n = rng.randint(1, 6)
    c.put_many([(f"key{k}", "chat", "m", {"text": f"value {k}"}) for k in keys[i : i + n]])
    i += n
print(first, time.time())
c.close()
"""

READER = """
import sys
from momoka.llm.cache import ResponseCache
c = ResponseCache(sys.argv[1], timeout=60)
bad = 0
for _ in range(int(sys.argv[2])):
    got = c.get_many([f"key{k}" for k in range(0, 1500, 7)])
    bad += sum(1 for k, v in got.items() if v != {"text": f"value {k[3:]}"})
print(bad)
"""

CLIENT = """
import json, sys
from momoka.llm import OpenAIClient
path, url, prompts = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
c = OpenAIClient("m", base_url=url, cache=path, concurrency=8, progress=False)
res = c.complete_many(prompts)
print(res == [f"echo: {p}" for p in prompts])
"""


def _spawn(code: str, *args: str) -> subprocess.Popen:
    env = dict(os.environ)
    env["PYTHONPATH"] = PYTHON_DIR + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.Popen([sys.executable, "-c", code, *map(str, args)], stdout=subprocess.PIPE, text=True, env=env)


def _finish(p: subprocess.Popen) -> str:
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 0
    return out.strip()


def test_two_writer_processes_lose_nothing(cache_path):
    # overlapping ranges: 0..999 and 500..1499 (500 keys written by both), about 300 transactions each,
    # started at the same instant, and a reader beside them
    barrier = cache_path.parent / "barrier"
    barrier.mkdir()
    procs = [_spawn(WRITER, cache_path, 0, 1000, 1, barrier), _spawn(WRITER, cache_path, 500, 1500, 2, barrier),
             _spawn(READER, cache_path, 40)]
    outs = [_finish(p) for p in procs]
    (a0, a1), (b0, b1) = (map(float, o.split()) for o in outs[:2])
    assert max(a0, b0) < min(a1, b1)  # the two writers really ran at the same time
    assert outs[2] == "0"  # the reader never saw a torn or wrong value
    c = ResponseCache(cache_path)
    assert len(c) == 1500
    got = c.get_many([f"key{k}" for k in range(1500)])
    assert all(got[f"key{k}"] == {"text": f"value {k}"} for k in range(1500))
    assert c.integrity_check() == "ok"


def test_two_client_processes_share_one_cache(make_server, cache_path):
    srv = make_server(delay=0.005)
    a = [f"q{i}" for i in range(0, 150)]
    b = [f"q{i}" for i in range(100, 250)]
    procs = [_spawn(CLIENT, cache_path, srv.base_url, json.dumps(p)) for p in (a, b)]
    assert [_finish(p) for p in procs] == ["True", "True"]
    assert len(ResponseCache(cache_path)) == 250
    srv.reset()
    from momoka.llm import OpenAIClient

    c = OpenAIClient("m", base_url=srv.base_url, cache=cache_path, progress=False)
    c.complete_many(a + b)
    assert srv.count == 0  # everything either process finished is on disk


def _open_after(path, barrier, errors):
    barrier.wait()
    try:
        ResponseCache(path)
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        errors.put(repr(exc))


def test_processes_opening_a_new_cache_at_once(tmp_path):
    # tried: eight processes opening the same new cache file at the same moment, forty times; switching a
    # new file to WAL takes an exclusive lock SQLite's busy handler does not wait for ("database is locked")
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    errors = ctx.Queue()
    for r in range(40):
        barrier = ctx.Barrier(8)
        procs = [ctx.Process(target=_open_after, args=(tmp_path / f"c{r}.sqlite", barrier, errors)) for _ in range(8)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [p.exitcode for p in procs] == [0] * 8
    got = []
    while not errors.empty():
        got.append(errors.get())
    assert got == []
