"""Evaluating a chunker on its own (MC-indexing appendix A).

For every document of a set, chunk it and measure what fraction of the gold
evidence units fall wholly inside one chunk (a unit cut by a chunk boundary
cannot be retrieved whole), together with the chunk length distribution.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

import numpy as np

from ..progress import Progress
from .datasets import Dataset
from .metrics import evidence_containment, format_table


def length_stats(lengths: Sequence[int]) -> dict[str, float]:
    """count, mean, min, p10, median, p90 and max of a list of lengths."""
    a = np.asarray(lengths, dtype=np.float64)
    if a.size == 0:
        return {"count": 0}
    return {
        "count": int(a.size),
        "mean": float(a.mean()),
        "min": float(a.min()),
        "p10": float(np.percentile(a, 10)),
        "median": float(np.median(a)),
        "p90": float(np.percentile(a, 90)),
        "max": float(a.max()),
    }


def evaluate_chunker(dataset: Dataset, chunker: Callable, *, progress: bool = False, keep_lengths: bool = False) -> dict:
    """Chunk every document of ``dataset`` and report evidence containment and lengths.

    ``chunker`` is any ``chunker(document) -> list[Chunk]``. Only documents
    that questions refer to are needed for containment, but all are chunked so
    the length distribution describes the whole set. ``keep_lengths`` adds
    ``char_lengths``, every chunk's length in characters (for
    :func:`momoka.eval.plots.plot_chunk_lengths`).
    """
    spans: dict[str, list[tuple[int, int]]] = {}
    chars: list[int] = []
    words: list[int] = []
    t0 = time.perf_counter()
    with Progress("chunking", total=len(dataset.documents), unit="documents", enabled=progress) as bar:
        for rec in dataset.documents:
            doc = rec.to_document()
            chunks = chunker(doc)
            spans[rec.doc_id] = [(c.start, c.end) for c in chunks]
            chars += [c.end - c.start for c in chunks]
            words += [len(c.text.split()) for c in chunks]
            bar.update()
    elapsed = time.perf_counter() - t0
    containment = evidence_containment(spans, dataset.questions)
    report = {
        "dataset": dataset.name,
        "documents": len(dataset.documents),
        "chunks": len(chars),
        "seconds": elapsed,
        **containment,
        "chars": length_stats(chars),
        "words": length_stats(words),
    }
    if keep_lengths:
        report["char_lengths"] = chars
    return report


def format_chunker_report(report: dict) -> str:
    """A human-readable summary of :func:`evaluate_chunker`'s result."""
    head = (
        f"{report['dataset']}: {report['documents']} documents -> {report['chunks']} chunks "
        f"in {report['seconds']:.2f}s\n"
        f"evidence units inside one chunk: {report['contained']}/{report['evidence_units']}"
        f" = {report['fraction_contained']:.4f}\n"
    )
    keys = ["mean", "min", "p10", "median", "p90", "max"]
    rows = [[unit] + [f"{report[unit].get(k, 0):.1f}" for k in keys] for unit in ("chars", "words")]
    return head + format_table(["length"] + keys, rows)
