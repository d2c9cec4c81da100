"""Throughput of OpenAIClient.complete_many beside a sequential `openai` SDK loop.

A scripted OpenAI-compatible server runs in a separate process on 127.0.0.1 and
answers every request after a fixed delay. For concurrency c the ideal rate is
c / delay; the target is >= 80 % of it up to 128 in flight, with under 1 ms of
client overhead per request.

    PYTHONPATH=python python -m pytest bench/micro/bench_llm_client.py --benchmark-only -s

Environment: MOMOKA_BENCH_LLM_DELAY (seconds, default 0.1).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

DELAY = float(os.environ.get("MOMOKA_BENCH_LLM_DELAY", "0.1"))
ROUNDS = 3
RESULTS: dict[str, dict] = {}
PYTHON_DIR = str(Path(__file__).resolve().parents[2] / "python")


@pytest.fixture(scope="module")
def server_url():
    env = dict(os.environ)
    env["PYTHONPATH"] = PYTHON_DIR + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen([sys.executable, "-m", "momoka.llm.testing", "--delay", str(DELAY)],
                            stdout=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    assert line.startswith("PORT "), line
    yield f"http://127.0.0.1:{int(line.split()[1])}/v1"
    proc.terminate()
    proc.wait(10)
    _print_table()


def _print_table() -> None:
    if not RESULTS:
        return
    print(f"\n\nOpenAI-compatible client throughput, scripted server delay {DELAY * 1000:.0f} ms "
          f"(best of {ROUNDS} rounds)")
    print(f"{'client':<28}{'in flight':>10}{'requests':>10}{'wall s':>9}{'req/s':>10}{'ideal':>9}{'of ideal':>10}"
          f"{'latency+ ms/req':>17}{'client CPU ms/req':>19}")
    sdk = RESULTS.get("openai-sdk sequential")
    for name, r in RESULTS.items():
        print(f"{name:<28}{r['c']:>10}{r['n']:>10}{r['wall']:>9.3f}{r['rate']:>10.1f}{r['ideal']:>9.1f}"
              f"{r['rate'] / r['ideal'] * 100:>9.1f}%{r['overhead_ms']:>17.3f}{r['cpu_ms']:>19.3f}")
    print("latency+ = wall * in_flight / requests - delay (time a request slot spends beyond the server's delay);\n"
          "client CPU = CPU time of the client process (all threads) per request, the server runs in another process")
    if sdk:
        for name, r in RESULTS.items():
            if name.startswith("momoka"):
                print(f"  {name}: {r['rate'] / sdk['rate']:.1f}x the sequential openai SDK loop")


def _record(name, c, n, wall, cpu):
    rate = n / wall
    RESULTS[name] = {"c": c, "n": n, "wall": wall, "rate": rate, "ideal": c / DELAY,
                     "overhead_ms": (wall * c / n - DELAY) * 1000, "cpu_ms": cpu / n * 1000}


def _timed(fn, cpus):
    def run():
        c0 = time.process_time()
        fn()
        cpus.append(time.process_time() - c0)

    return run


@pytest.mark.parametrize("concurrency", [1, 8, 32, 128])
def test_complete_many_throughput(benchmark, server_url, concurrency):
    from momoka.llm import OpenAIClient

    n = 16 if concurrency == 1 else 8 * concurrency
    client = OpenAIClient("bench", base_url=server_url, concurrency=concurrency, cache=False, progress=False)
    client.complete_many([f"warm {i}" for i in range(concurrency)])  # open the keep-alive connections
    rnd = iter(range(1000))

    def run():
        r = next(rnd)
        out = client.complete_many([f"round {r} item {i}" for i in range(n)])
        assert len(out) == n

    cpus: list[float] = []
    benchmark.pedantic(_timed(run, cpus), rounds=ROUNDS, iterations=1)
    wall = benchmark.stats.stats.min
    _record(f"momoka complete_many c={concurrency}", concurrency, n, wall, min(cpus))
    benchmark.extra_info.update(RESULTS[f"momoka complete_many c={concurrency}"])
    client.close()


def test_openai_sdk_sequential_loop(benchmark, server_url):
    openai = pytest.importorskip("openai")
    sdk = openai.OpenAI(base_url=server_url, api_key="none", max_retries=0)
    n = 16
    sdk.chat.completions.create(model="bench", messages=[{"role": "user", "content": "warm"}])
    rnd = iter(range(1000))

    def run():
        r = next(rnd)
        for i in range(n):
            out = sdk.chat.completions.create(model="bench", messages=[{"role": "user", "content": f"r{r} i{i}"}])
            assert out.choices[0].message.content

    cpus: list[float] = []
    benchmark.pedantic(_timed(run, cpus), rounds=ROUNDS, iterations=1)
    _record("openai-sdk sequential", 1, n, benchmark.stats.stats.min, min(cpus))
    benchmark.extra_info.update(RESULTS["openai-sdk sequential"])
