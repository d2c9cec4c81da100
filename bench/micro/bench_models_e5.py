"""multilingual-e5-small against the default all-MiniLM-L6-v2 (int8): indexing throughput, and the
cosine calibration of the embedding referee.

``test_index_throughput``: the same documents indexed in memory (``Index.build``, the default
chunker, contextual headers, BM25 and vectors) with each embedder, rounds alternating between the
two (a shared machine's load hits both alike), best of ``ROUNDS``; reported as passages (chunks)
per second of the whole build, and paragraphs per second of the embedding alone (``embed`` of the
paragraphs), with the load average before and after. Two corpora:

- Chinese: the paragraphs with at least 40 Han characters of a Chinese text. ``MOMOKA_BENCH_ZH``
  names a file or folder (read by momoka's readers), or a ``documents.jsonl`` of the shared layout (each
  document's ``text`` one paragraph: e.g. the CRUD-RAG news of ``bench/data/crud_rag.py``); by default the Chinese translation of *Rust
  by Example* that rustup installs with its documentation (``share/doc/rust/html/rust-by-example/
  zh/print.html``), else CPython's ``test/cjkencodings/gb2312-utf8.txt``; skipped when none is found.
- English: SQuAD paragraphs from ``../shared/data`` (skipped without them).

Paragraphs are grouped ``PER_DOC`` to a document.

``test_referee_calibration``: cosines of all within-document pairs of SQuAD paragraphs under both
embedders; the e5 cosine that as many pairs exceed as exceed MiniLM's 0.5 (the embedding
referee's threshold), which sets ``COSINE_FLOORS["multilingual-e5-small"]`` in
:mod:`momoka.methods.momoka.referees`. Run (the second form needs no pytest-benchmark):

    PYTHONPATH=python python -m pytest bench/micro/bench_models_e5.py --benchmark-only -s
    PYTHONPATH=python python bench/micro/bench_models_e5.py

Needs both models installed (``momoka models install`` and ``momoka models install multilingual-e5-small``).
"""

from __future__ import annotations

import glob
import json
import os
import re
import sys
import sysconfig
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

E5, MINILM = "multilingual-e5-small", "minilm-l6-v2-int8"
ROUNDS = 2
PER_DOC = 8
N_ZH = 240  # paragraphs
N_EN = 120


def _models():
    from momoka.models.catalog import installed_models

    have = installed_models()
    missing = [m for m in (E5, MINILM) if m not in have]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)}")


def _zh_source() -> Path | None:
    env = os.environ.get("MOMOKA_BENCH_ZH")
    if env:
        return Path(env)
    hits = sorted(glob.glob(os.path.expanduser(
        "~/.rustup/toolchains/*/share/doc/rust/html/rust-by-example/zh/print.html")))
    if hits:
        return Path(hits[0])
    p = Path(sysconfig.get_paths()["stdlib"]) / "test" / "cjkencodings" / "gb2312-utf8.txt"
    return p if p.is_file() else None


def _zh_paragraphs() -> tuple[list[str], str]:
    from momoka.methods.sources import expand_paths, to_document

    src = _zh_source()
    if src is None:
        pytest.skip("no Chinese text found (set MOMOKA_BENCH_ZH to a file or folder)")
    if src.suffix == ".jsonl":  # the shared layout: one document, one paragraph
        with open(src, encoding="utf-8") as f:
            paras = [json.loads(line)["text"].strip() for line in f if line.strip()]
    else:
        texts = [to_document(it).text for it in expand_paths([src])]
        paras = [p.strip() for t in texts for p in re.split(r"\n\s*\n", t)]
    paras = [p for p in paras if len(re.findall(r"[\u4e00-\u9fff]", p)) >= 40]
    if len(paras) < 16:
        pytest.skip(f"{src} has only {len(paras)} Chinese paragraphs")
    return paras[:N_ZH], str(src)


def _en_paragraphs(shared_data, n: int) -> list[str]:
    out = []
    with open(shared_data / "squad_v1_dev_half_a" / "documents.jsonl", encoding="utf-8") as f:
        for line in f:
            out += [p for p in json.loads(line)["text"].split("\n\n") if len(p.split()) >= 30]
    return out[:n]


def _docs(paras: list[str]) -> list[dict]:
    return [{"doc_id": f"d{i // PER_DOC}", "text": "\n\n".join(paras[i:i + PER_DOC])}
            for i in range(0, len(paras), PER_DOC)]


def _throughput(paras: list[str]) -> dict:
    import momoka
    from momoka.models import Embedder

    embs = {m: Embedder.from_registry(m) for m in (E5, MINILM)}
    docs = _docs(paras)
    best: dict = {m: {"build": float("inf"), "embed": float("inf")} for m in embs}
    chunks: dict = {}
    for _ in range(ROUNDS):
        for m, emb in embs.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                ix = momoka.Index.build(docs, embedder=emb, progress=False)
                t_build = time.perf_counter() - t0
                t0 = time.perf_counter()
                emb.embed(paras)
                t_embed = time.perf_counter() - t0
            chunks[m] = (ix.store.n_chunks, len(paras))
            best[m]["build"] = min(best[m]["build"], t_build)
            best[m]["embed"] = min(best[m]["embed"], t_embed)
    out = {}
    for m in embs:
        n_build, n_embed = chunks[m]
        out[m] = {"passages": n_build, "build passages/s": round(n_build / best[m]["build"], 1),
                  "embed paragraphs/s": round(n_embed / best[m]["embed"], 1)}
    return out


def _report(name: str, res: dict, load0, load1, extra: str = "") -> None:
    print(f"\n{name}{extra}; load average before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, "
          f"after {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}; {os.cpu_count()} CPUs", file=sys.stderr)
    for m, r in res.items():
        print(f"  {m:24s} {r}", file=sys.stderr)
    print(f"  e5 / MiniLM, build: {res[E5]['build passages/s'] / res[MINILM]['build passages/s']:.2f}x, "
          f"embed: {res[E5]['embed paragraphs/s'] / res[MINILM]['embed paragraphs/s']:.2f}x", file=sys.stderr)


def chinese_throughput() -> dict:
    """Throughput on the Chinese paragraphs (printed, and returned)."""
    _models()
    paras, src = _zh_paragraphs()
    load0 = os.getloadavg()
    res = _throughput(paras)
    _report("Chinese", res, load0, os.getloadavg(), f" ({len(paras)} paragraphs of {src})")
    return res


def english_throughput(shared_data: Path) -> dict:
    """Throughput on SQuAD paragraphs (printed, and returned)."""
    _models()
    paras = _en_paragraphs(shared_data, N_EN)
    load0 = os.getloadavg()
    res = _throughput(paras)
    _report("English", res, load0, os.getloadavg(), f" ({len(paras)} SQuAD paragraphs)")
    return res


def test_index_throughput_chinese(benchmark):
    res = chinese_throughput()
    benchmark.extra_info.update({f"{m} {k}": v for m, r in res.items() for k, v in r.items()})
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)


def test_index_throughput_english(benchmark, shared_data):
    res = english_throughput(shared_data)
    benchmark.extra_info.update({f"{m} {k}": v for m, r in res.items() for k, v in r.items()})
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)


def test_referee_calibration(benchmark, shared_data):
    benchmark.extra_info.update(referee_calibration(shared_data))
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)


def referee_calibration(shared_data: Path) -> dict:
    """The e5 cosine matched to MiniLM's 0.5 on within-document SQuAD paragraph pairs (printed, and returned)."""
    _models()
    from momoka.models import Embedder

    groups = []
    with open(shared_data / "squad_v1_dev_half_a" / "documents.jsonl", encoding="utf-8") as f:
        for line in list(f)[:8]:
            groups.append([p for p in json.loads(line)["text"].split("\n\n") if len(p.split()) >= 30][:30])
    flat = [p for g in groups for p in g]
    cos = {}
    for m in (MINILM, E5):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            v = Embedder.from_registry(m).embed(flat)
        parts, o = [], 0
        for g in groups:
            s = v[o:o + len(g)] @ v[o:o + len(g)].T
            o += len(g)
            parts.append(s[np.triu_indices(len(g), 1)])
        cos[m] = np.concatenate(parts)
    rate = float((cos[MINILM] > 0.5).mean())
    t = float(np.quantile(cos[E5], 1 - rate))
    agree = float(((cos[MINILM] > 0.5) == (cos[E5] > t)).mean())
    print(f"\nreferee calibration: {len(cos[E5])} within-document pairs of {len(flat)} SQuAD paragraphs; "
          f"MiniLM > 0.5: {rate:.1%}; the e5 cosine as many pairs exceed: {t:.3f} (floor {2 * t - 1:.2f}); "
          f"verdicts agree on {agree:.1%}; e5 cosine quantiles 10/50/90 %: "
          f"{', '.join(f'{q:.3f}' for q in np.quantile(cos[E5], [0.1, 0.5, 0.9]))}; MiniLM: "
          f"{', '.join(f'{q:.3f}' for q in np.quantile(cos[MINILM], [0.1, 0.5, 0.9]))}", file=sys.stderr)
    return {"minilm pass rate": rate, "e5 matched threshold": t, "agreement": agree}


if __name__ == "__main__":
    from momoka.eval.datasets import find_shared_data

    _shared = find_shared_data(Path(__file__).resolve().parents[2])
    try:
        chinese_throughput()
    except pytest.skip.Exception as exc:
        print(f"Chinese: skipped ({exc})", file=sys.stderr)
    if _shared is None:
        print("English and calibration: skipped (../shared/data is not available)", file=sys.stderr)
    else:
        english_throughput(_shared)
        referee_calibration(_shared)
