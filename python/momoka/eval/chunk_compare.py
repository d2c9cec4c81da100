"""Chunkers side by side at equal mean chunk length: MoC Table 3 metrics and retrieval (``momoka eval-chunking --metrics``).

:func:`compare_chunkers` chunks the documents of a set with each chunker, its
size calibrated so the mean chunk length (characters) is as close as it can get
to ``target_chars`` (the paper compares chunkers at equal mean length): a
binary search over the chunker's ``size`` (for MoC / Meta-Chunking chunkers the
dynamic-merge target, which reuses their cached scores and LLM answers). Then,
per chunker, the mean over documents of BC, CS and DS
(:mod:`momoka.eval.chunk_quality`) and, optionally, dense retrieval span
recall@k on the same chunks (:func:`momoka.eval.runner.run_eval`).

``max_chars`` cuts every document after its last sentence ending within that
many characters (questions whose evidence lies past the cut are dropped), to
keep LM-heavy runs small; the report says so.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError
from .. import registry
from ..methods.moc import dynamic_merge
from ..stats import stats_dict
from ..text import Document, make_chunks
from .chunk_quality import METRICS, quality_of_chunks
from .datasets import Dataset, DocRecord
from .metrics import format_table

__all__ = ["calibrate", "compare_chunkers", "fallback_note", "fallback_summary", "format_comparison", "row_name",
           "subset"]


def subset(ds: Dataset, *, docs: int | None = None, max_chars: int | None = None) -> Dataset:
    """The first ``docs`` documents of ``ds``, each cut at a sentence end within ``max_chars``, with their questions."""
    recs = ds.documents[:docs] if docs else list(ds.documents)
    out = []
    for r in recs:
        text = r.text
        if max_chars is not None and len(text) > max_chars:
            ends = [int(b) for _, b in np.asarray(Document.from_text(text).sentences).tolist() if b <= max_chars]
            text = text[:ends[-1]] if ends else text[:max_chars]
        out.append(DocRecord(r.doc_id, r.title, text, r.extra))
    lengths = {r.doc_id: len(r.text) for r in out}
    qs = [q for q in ds.questions
          if q.doc_id in lengths and q.gold and all(g[0] in lengths and g[2] <= lengths[g[0]] for g in q.gold)]
    return Dataset(ds.name, ds.path, out, qs, ds.evidence_mode, ds.evidence_mode_source)


def _mean_len(chunker: Any, docs: list) -> tuple[float, list[list[tuple[int, int]]]]:
    spans = [[(c.start, c.end) for c in chunker(d)] for d in docs]
    lens = [b - a for s in spans for a, b in s]
    return (float(np.mean(lens)) if lens else 0.0), spans


class _Settled:
    """The spans calibration settled on, served as a chunker, so the retrieval run re-chunks nothing
    (an LLM chunker would otherwise ask again for every window whose answer could not be parsed)."""

    def __init__(self, chunker: Any, spans: dict):
        self.chunker, self.spans = chunker, spans
        self.name = getattr(chunker, "name", type(chunker).__name__)
        self.stats = getattr(chunker, "stats", None)
        self.fallbacks = getattr(chunker, "fallbacks", None)

    def params(self) -> dict:
        """The wrapped chunker's settings."""
        p = getattr(self.chunker, "params", None)
        return p() if callable(p) else {}

    def __call__(self, document: Any) -> list:
        """The settled chunks of ``document`` (any other document goes to the wrapped chunker)."""
        spans = self.spans.get(document.text)
        return make_chunks(document, spans) if spans is not None else self.chunker(document)


def _base_spans(chunker: Any, docs: list) -> list[list[tuple[int, int]]]:
    batch = getattr(chunker, "chunk_spans_batch", None)
    if callable(batch):
        return [list(s) for s in batch(docs)]
    return [[(c.start, c.end) for c in chunker(d)] for d in docs]


def calibrate(name: str, docs: list, target: int, *, options: dict | None = None,
              lo: int = 1, hi: int = 4000) -> tuple[Any, int | None, float, list]:
    """``(chunker, size, mean length, spans)``: the size whose mean chunk length is closest to ``target`` chars.

    A chunker with a dynamic-merge target in characters (``ppl``, ``msp``, ``meta``, ``moc``) is run
    once without merging and the search merges its spans (what the chunker itself does with that
    target), so the LM / LLM work is done once; the returned chunker serves the settled spans.
    """
    options = dict(options or {})
    if name == "sentence":
        lo, hi = 1, 60
    base = registry.create("chunker", name, **options)
    merge = hasattr(base, "merge_target")
    raw = None
    if merge and getattr(base, "merge_unit", "chars") == "chars":
        base.merge_target = None
        raw = _base_spans(base, docs)

    def run(size: int) -> tuple[Any, float, list]:
        if raw is not None:
            spans = [dynamic_merge(r, size, lambda a, b: b - a) for r in raw]
            lens = [b - a for s in spans for a, b in s]
            return base, (float(np.mean(lens)) if lens else 0.0), spans
        if merge:
            base.merge_target = size
            ch = base
        else:
            ch = registry.create("chunker", name, size=size, **options)
        m, spans = _mean_len(ch, docs)
        return ch, m, spans

    best = None
    a, b = lo, hi
    while a <= b:
        mid = (a + b) // 2
        ch, m, spans = run(mid)
        if best is None or abs(m - target) < abs(best[2] - target):
            best = (ch, mid, m, spans)
        if m < target:
            a = mid + 1
        else:
            b = mid - 1
    ch, size, m, spans = best
    if merge:
        base.merge_target = size
    if raw is not None:
        ch = _Settled(base, {d.text: s for d, s in zip(docs, spans)})
    return ch, size, m, spans


def compare_chunkers(ds: Dataset, chunkers: Sequence[str], *, metrics: Sequence[str] = METRICS,
                     target_chars: int = 400, K: float = 0.8, edge_rule: str = "reference", space: str = "log",
                     group_chars: int | None = 2000, retrieval: bool = True, ks: Sequence[int] = (1, 3, 5),
                     options: dict | None = None, lm: Any = None, embedder: Any = None, log: Any = None) -> dict:
    """The comparison report (see the module docstring); ``options`` per chunker name."""
    say = log or (lambda msg: None)
    bad = sorted(set(metrics) - set(METRICS))
    if bad:
        raise ConfigError(f"unknown chunk metric(s) {bad}; choose from {', '.join(METRICS)}")
    if lm is None and ({"bc", "cs"} & set(metrics)):
        from ..models import default_causal_lm  # start-up: momoka.models

        lm = default_causal_lm()
    if embedder is None and "ds" in metrics:
        from ..models import Embedder  # start-up: momoka.models

        embedder = Embedder.default()
    if retrieval and ds.questions_with_evidence():
        ds.require_evidence_mode()  # before any model work
    docs = [r.to_document() for r in ds.documents]
    report: dict[str, Any] = {"data": ds.name, "documents": len(docs), "chars": sum(len(d.text) for d in docs),
                              "target_chars": target_chars, "metrics": list(metrics), "K": K,
                              "edge_rule": edge_rule, "space": space, "group_chars": group_chars,
                              "model": str(getattr(lm, "model_dir", None)), "chunkers": {}}
    for name in chunkers:
        t0 = time.perf_counter()
        opts = dict((options or {}).get(name, {}))
        if name in ("ppl", "msp") and lm is not None:
            opts.setdefault("lm", lm)
        ch, size, mean, spans = calibrate(name, docs, target_chars, options=opts)
        t_chunk = time.perf_counter() - t0
        rows = [quality_of_chunks(d.text, s, metrics=metrics, lm=lm, embedder=embedder, K=K, edge_rule=edge_rule,
                                  space=space, group_chars=group_chars) for d, s in zip(docs, spans)]
        row: dict[str, Any] = {"size": size, "mean_chars": mean, "chunks": sum(len(s) for s in spans),
                               "chunk_seconds": t_chunk, "metric_seconds": sum(r["seconds"] for r in rows)}
        for key in ("bc", "cs_complete", "cs_sequential", "ds"):
            vals = [r[key] for r in rows if key in r and not np.isnan(r[key])]
            if any(key in r for r in rows):
                row[key] = float(np.mean(vals)) if vals else float("nan")
        st = getattr(ch, "stats", None)
        if st is not None:
            row["stats"] = stats_dict(st)
        fb = fallback_summary(ch)
        if fb is not None:
            row["fallbacks"] = fb
        if retrieval and ds.questions:
            from .runner import run_eval  # start-up: momoka.eval.runner

            rep = run_eval(ds, ["dense"], chunker=ch, ks=ks)
            means = rep["retrievers"]["dense"]["item"]["means"]
            row["questions"] = rep["n_questions"]
            for k in ks:
                row[f"span_recall@{k}"] = means[f"span_recall@{k}"]
        report["chunkers"][name] = row
        say(f"  {name}: size {size}, mean {mean:.0f} chars, {row['chunks']} chunks "
            f"({t_chunk:.0f}s chunking, {row['metric_seconds']:.0f}s metrics)")
    return report


def format_comparison(report: dict) -> str:
    """A MoC-Table-3-style table (BC, CS complete / sequence-aware, DS) with retrieval span recall beside it."""
    ks = sorted(int(k.split("@")[1]) for r in report["chunkers"].values() for k in r if k.startswith("span_recall@"))
    ks = sorted(set(ks))
    header = ["chunker", "size", "mean chars", "chunks", "BC", "CS (complete)", "CS (seq.)", "DS"] + \
        [f"span R@{k}" for k in ks]
    rows = []
    for name, r in report["chunkers"].items():
        f = (lambda key: f"{r[key]:.4f}" if key in r and r[key] == r[key] else "-")
        rows.append([row_name(name, r.get("fallbacks")), r["size"], f"{r['mean_chars']:.0f}", r["chunks"], f("bc"), f("cs_complete"),
                     f("cs_sequential"), f("ds")] + [f"{r.get(f'span_recall@{k}', float('nan')):.3f}" for k in ks])
    title = (f"{report['data']}: {report['documents']} documents, {report['chars']} chars, target mean "
             f"{report['target_chars']} chars; BC space={report['space']}; CS K={report['K']} "
             f"edge_rule={report['edge_rule']}, over runs of <= {report['group_chars']} chars; "
             f"model {report['model']}")
    notes = [fallback_note(name, r["stats"]) for name, r in report["chunkers"].items()
             if isinstance(r.get("stats"), dict) and "fallback" in r["stats"]]
    return title + "\n" + format_table(header, rows) + "".join("\n" + n for n in notes)


def fallback_note(name: str, stats: dict) -> str:
    """One line saying how many of an LLM chunker's windows fell back to the deterministic cut, and why."""
    return (f"{name}: {stats.get('windows', '?')} windows, {stats['fallback']} fell back to whole sentences "
            f"({stats.get('fallback_parse', 0)} unparsable replies, {stats.get('fallback_unplaced', 0)} with no "
            f"outline placed; {stats.get('outlines_unplaced', 0)} of {stats.get('outlines', 0)} outlines unplaced)")


def fallback_summary(chunker: Any) -> dict | None:
    """``{"asked", "fallbacks", "share"}`` of an LLM chunker's fallback tally
    (:class:`~momoka.methods.fallbacks.FallbackTally`); None for other chunkers or when nothing was asked."""
    t = getattr(chunker, "fallbacks", None)
    if t is None or not getattr(t, "asked", 0):
        return None
    return {"asked": int(t.asked), "fallbacks": int(t.failed), "share": round(t.share, 4)}


def row_name(name: str, summary: dict | None) -> str:
    """A chunker's row label: ``name``, or ``"name (x % fallback)"`` when some of its LLM answers fell back
    (``summary``: :func:`fallback_summary`), so a row says what ran."""
    if not summary or not summary.get("fallbacks"):
        return name
    return f"{name} ({100 * summary['fallbacks'] / summary['asked']:.1f} % fallback)"
