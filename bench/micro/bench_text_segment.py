"""Sentence segmentation speed: momoka's native segmenter beside pysbd and blingfire.

One real document (the longest of squad_v1_dev_half_a) repeated to about 5 MB.
pysbd is slow, so it runs on a ~200 KB slice and its rate is per byte of that
slice. MB/s counts UTF-8 bytes (10^6). Run:

    PYTHONPATH=python python -m pytest bench/micro/bench_text_segment.py --benchmark-only -s
"""

from __future__ import annotations

import json

import pytest

from momoka.text import split_paragraphs, split_sentences

TARGET_BYTES = 5_000_000
PYSBD_SLICE = 200_000

_results: dict[str, float] = {}


@pytest.fixture(scope="module")
def corpus(shared_data) -> str:
    path = shared_data / "squad_v1_dev_half_a" / "documents.jsonl"
    if not path.exists():
        pytest.skip(f"{path} is missing")
    with open(path, encoding="utf-8") as f:
        docs = [json.loads(line) for line in f if line.strip()]
    text = max(docs, key=lambda d: len(d["text"]))["text"]
    reps = TARGET_BYTES // len(text.encode("utf-8")) + 1
    return "\n\n".join([text] * reps)


@pytest.fixture(scope="module", autouse=True)
def report():
    yield
    if "momoka" not in _results:
        return
    print("\n\nsentence segmentation, MB/s (UTF-8 bytes):")
    for name, rate in sorted(_results.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<28} {rate:10.2f} MB/s")
    for name, rate in _results.items():
        if not name.startswith("momoka"):
            print(f"  momoka / {name:<19} {_results['momoka'] / rate:10.1f}x")


def _rate(benchmark, text: str) -> float:
    return len(text.encode("utf-8")) / benchmark.stats.stats.min / 1e6


def test_momoka(benchmark, corpus):
    starts, ends = benchmark.pedantic(split_sentences, args=(corpus,), rounds=5, iterations=1, warmup_rounds=1)
    assert len(starts) > 1000
    _results["momoka"] = _rate(benchmark, corpus)


def test_momoka_paragraphs(benchmark, corpus):
    benchmark.pedantic(split_paragraphs, args=(corpus,), rounds=5, iterations=1, warmup_rounds=1)
    _results["momoka (paragraphs only)"] = _rate(benchmark, corpus)


def test_blingfire_offsets(benchmark, corpus):
    blingfire = pytest.importorskip("blingfire")
    benchmark.pedantic(blingfire.text_to_sentences_and_offsets, args=(corpus,), rounds=3, iterations=1)
    _results["blingfire (offsets)"] = _rate(benchmark, corpus)


def test_blingfire_strings(benchmark, corpus):
    blingfire = pytest.importorskip("blingfire")
    benchmark.pedantic(blingfire.text_to_sentences, args=(corpus,), rounds=3, iterations=1)
    _results["blingfire (strings)"] = _rate(benchmark, corpus)


def test_pysbd(benchmark, corpus):
    pysbd = pytest.importorskip("pysbd")
    seg = pysbd.Segmenter(language="en", clean=False, char_span=False)
    piece = corpus[:PYSBD_SLICE]
    benchmark.pedantic(seg.segment, args=(piece,), rounds=1, iterations=1)
    _results["pysbd"] = _rate(benchmark, piece)
