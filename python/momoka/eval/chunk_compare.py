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
keep LM-heavy runs small; the report says so. ``windows`` keeps whole documents
and samples them instead: BC and CS on that many evenly spaced windows of
``group_chars`` per document (:func:`momoka.eval.chunk_quality.window_runs`), so
retrieval runs over the whole set while the LM work stays bounded.

The metrics of each (document, chunker spans) are kept on disk as they are computed
(:class:`MetricCache`, ``chunk-quality`` in momoka's computed cache, keyed by the model, the text, the
spans and every metric setting), so a run that is stopped resumes at the document it was on, and a
second run over the same chunks (another ``--budget``, more chunkers) computes only what is new.

With retrieval on, each chunker also gets the default pipeline's retriever
(``hybrid``) over the same chunks, scored by complete coverage at ``budget``
characters, with its 95 % interval and each question's figure. Then
:func:`metric_correlations` asks MoC's question of the metrics: does a chunker
with clearer boundaries (higher BC) or less sticky chunks (lower CS) retrieve
better? Two correlations per metric, each with a 95 % bootstrap interval over
documents (a resampled document brings its questions with it):

* ``across``: Spearman's rank correlation over the chunkers of each chunker's
  mean metric (over documents) and its coverage (over questions);
* ``within``: Pearson's correlation over (document, chunker) cells of the
  metric and the coverage of the document's questions, each centred on its
  document's mean over the chunkers, so documents that are easy for every
  chunker count for nothing and only the chunkers' differences on one
  document remain.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError
from .. import registry
from ..methods.base import DEFAULT_BUDGET, DEFAULT_CHUNKER, DEFAULT_RETRIEVER
from ..methods.moc import dynamic_merge
from ..progress import Progress
from ..stats import stats_dict
from ..text import Document, make_chunks
from .chunk_quality import METRICS, quality_of_chunks
from .datasets import Dataset, DocRecord
from .intervals import DEFAULT_RESAMPLES, paired_bootstrap
from .metrics import format_table

__all__ = ["MetricCache", "calibrate", "compare_chunkers", "fallback_note", "fallback_summary", "format_comparison",
           "format_correlations", "metric_correlations", "row_name", "subset"]

#: The metrics whose correlation with retrieval is taken, with the sign MoC expects (BC: clearer is better;
#: CS: less sticky is better; DS: more dissimilar neighbours is better).
EXPECTED_SIGN = {"bc": +1, "cs_complete": -1, "cs_sequential": -1, "ds": +1}


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


#: Part of every :class:`MetricCache` key: raise it when BC, CS or DS are computed differently, so no run reads
#: metrics computed by the old code.
METRIC_CACHE_VERSION = 1


class MetricCache:
    """One JSON file per (document text, chunk spans, metric settings, models): the BC / CS / DS of that
    document's chunks as :func:`quality_of_chunks` returned them.

    ``folder``: where the files go (default ``chunk-quality`` under
    :func:`momoka.models.computed_cache_dir`: ``$MOMOKA_CACHE_DIR`` or ``momoka_home()/cache``; ``momoka
    cache clear computed`` empties it). A file is written whole or not at all (a temporary file renamed
    over it), so a run killed mid-write leaves no half file; an unreadable one is computed again.
    """

    def __init__(self, folder: str | os.PathLike | None = None):
        if folder is None:
            from ..models import computed_cache_dir  # start-up: momoka.models

            folder = computed_cache_dir() / "chunk-quality"
        self.folder = Path(folder)
        self.hits = self.writes = 0
        self.failed = False

    @staticmethod
    def key(text: str, spans: Sequence[tuple[int, int]], settings: dict) -> str:
        """The file name of one document's metrics: a hash of its text, its spans and ``settings``."""
        h = hashlib.sha256()
        h.update(json.dumps(settings, sort_keys=True, default=str).encode())
        h.update(b"\0" + text.encode("utf-8", "surrogatepass") + b"\0")
        h.update(json.dumps([[int(a), int(b)] for a, b in spans]).encode())
        return h.hexdigest()[:40]

    def get(self, key: str) -> dict | None:
        path = self.folder / f"{key}.json"
        try:
            out = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(out, dict):
            return None
        self.hits += 1
        return out

    def put(self, key: str, row: dict) -> None:
        """Keep ``row`` under ``key``. A cache that cannot be written (read-only, full) costs only the
        resumability: one warning, and the run goes on without it."""
        if self.failed:
            return
        path = self.folder / f"{key}.json"
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(row, default=_jsonable), encoding="utf-8")
            os.replace(tmp, path)
        except OSError as exc:
            self.failed = True
            try:
                tmp.unlink()
            except OSError:
                pass
            warnings.warn(f"chunk metrics are not kept in {self.folder} ({exc}); a stopped run will start over",
                          UserWarning, stacklevel=2)
            return
        self.writes += 1


def _jsonable(x: Any) -> Any:
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(f"not JSON-serialisable: {type(x).__name__}")


def _model_id(model: Any) -> str | None:
    if model is None:
        return None
    return str(getattr(model, "model_dir", None) or getattr(model, "model_id", None) or type(model).__name__)


def compare_chunkers(ds: Dataset, chunkers: Sequence[str], *, metrics: Sequence[str] = METRICS,
                     target_chars: int = 400, K: float = 0.8, edge_rule: str = "reference", space: str = "log",
                     group_chars: int | None = 2000, retrieval: bool = True, ks: Sequence[int] = (1, 3, 5),
                     options: dict | None = None, lm: Any = None, embedder: Any = None, log: Any = None,
                     windows: int | None = None, budget: int = DEFAULT_BUDGET, cache: Any = True) -> dict:
    """The comparison report (see the module docstring); ``options`` per chunker name, and per retriever
    name for the retrieval (``{"hybrid": {"document_weight": 0}}``).

    ``cache``: True (momoka's computed cache), a folder, or False: where each document's metrics are kept
    (:class:`MetricCache`); ``report["chunkers"][name]["cached_documents"]`` counts those read back.

    ``report["chunkers"][name]`` holds the chunker's size, mean length, the metric means, their
    per-document values (``per_document``), dense span recall@k, and the default retriever's
    complete coverage at ``budget`` (``complete``, with ``complete_interval`` and ``per_question``).
    With retrieval, a metric and at least three chunkers, ``report["correlations"]`` holds
    :func:`metric_correlations`.
    """
    if windows is not None and (windows < 1 or not group_chars):
        raise ConfigError(f"windows needs a positive count and group_chars, got {windows!r}, {group_chars!r}")
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
    retriever_options = {n: dict((options or {})[n]) for n in ("dense", DEFAULT_RETRIEVER) if n in (options or {})}
    report: dict[str, Any] = {"data": ds.name, "documents": len(docs), "chars": sum(len(d.text) for d in docs),
                              "target_chars": target_chars, "metrics": list(metrics), "K": K,
                              "edge_rule": edge_rule, "space": space, "group_chars": group_chars,
                              "windows": windows, "budget": budget, "retriever": DEFAULT_RETRIEVER,
                              "retriever_options": retriever_options,
                              "model": str(getattr(lm, "model_dir", None)), "chunkers": {}}
    store = None if cache is False or cache is None else MetricCache(None if cache is True else cache)
    settings = {"version": METRIC_CACHE_VERSION, "metrics": sorted(metrics), "K": K, "edge_rule": edge_rule, "space": space,
                "group_chars": group_chars, "windows": windows,
                "lm": _model_id(lm) if {"bc", "cs"} & set(metrics) else None,
                "embedder": _model_id(embedder) if "ds" in metrics else None}
    for name in chunkers:
        t0 = time.perf_counter()
        opts = dict((options or {}).get(name, {}))
        if name in ("ppl", "msp") and lm is not None:
            opts.setdefault("lm", lm)
        ch, size, mean, spans = calibrate(name, docs, target_chars, options=opts)
        t_chunk = time.perf_counter() - t0
        rows = []
        hits0 = store.hits if store is not None else 0
        with Progress(f"{name} metrics", total=len(docs), unit="docs", enabled=None if metrics else False) as bar:
            for d, s in zip(docs, spans):
                key = MetricCache.key(d.text, s, settings) if store is not None and metrics else None
                r = store.get(key) if key is not None else None
                if r is None:
                    r = quality_of_chunks(d.text, s, metrics=metrics, lm=lm, embedder=embedder, K=K,
                                          edge_rule=edge_rule, space=space, group_chars=group_chars,
                                          windows=windows)
                    if key is not None:
                        store.put(key, r)
                else:
                    r["seconds"] = 0.0  # computed by an earlier run
                rows.append(r)
                bar.update(1)
        row: dict[str, Any] = {"size": size, "mean_chars": mean, "chunks": sum(len(s) for s in spans),
                               "chunk_seconds": t_chunk, "metric_seconds": sum(r["seconds"] for r in rows),
                               "cached_documents": (store.hits - hits0) if store is not None else 0}
        for key in ("bc", "cs_complete", "cs_sequential", "ds"):
            vals = [r[key] for r in rows if key in r and not np.isnan(r[key])]
            if any(key in r for r in rows):
                row[key] = float(np.mean(vals)) if vals else float("nan")
        row["per_document"] = {d.doc_id: {k: r[k] for k in ("bc", "cs_complete", "cs_sequential", "ds", "windows")
                                          if k in r} for d, r in zip(docs, rows)}
        st = getattr(ch, "stats", None)
        if st is not None:
            row["stats"] = stats_dict(st)
        fb = fallback_summary(ch)
        if fb is not None:
            row["fallbacks"] = fb
        if retrieval and ds.questions:
            from .runner import run_eval  # start-up: momoka.eval.runner

            rep = run_eval(ds, ["dense", DEFAULT_RETRIEVER], chunker=ch, ks=ks, budgets=(budget,),
                           keep_per_question=True, options=retriever_options)
            means = rep["retrievers"]["dense"]["item"]["means"]
            row["questions"] = rep["n_questions"]
            for k in ks:
                row[f"span_recall@{k}"] = means[f"span_recall@{k}"]
            key = f"complete@{budget}c"
            row["complete"] = rep["retrievers"][DEFAULT_RETRIEVER]["item"]["means"][key]
            row["complete_interval"] = rep["intervals"][DEFAULT_RETRIEVER][key]
            row["per_question"] = {q: v[key] for q, v in rep["per_question"][DEFAULT_RETRIEVER].items()}
            report["question_docs"] = rep["question_docs"]
        report["chunkers"][name] = row
        say(f"  {name}: size {size}, mean {mean:.0f} chars, {row['chunks']} chunks "
            f"({t_chunk:.0f}s chunking, {row['metric_seconds']:.0f}s metrics"
            + (f", {row['cached_documents']} documents' metrics from the cache" if row["cached_documents"] else "")
            + ")")
    if sum("per_question" in r for r in report["chunkers"].values()) >= 3 and ({"bc", "cs", "ds"} & set(metrics)):
        report["correlations"] = metric_correlations(report)
    return report


def format_comparison(report: dict) -> str:
    """A MoC-Table-3-style table (BC, CS complete / sequence-aware, DS) with retrieval span recall beside it."""
    ks = sorted(int(k.split("@")[1]) for r in report["chunkers"].values() for k in r if k.startswith("span_recall@"))
    ks = sorted(set(ks))
    budget = report.get("budget")
    has_cov = any("complete" in r for r in report["chunkers"].values())
    header = ["chunker", "size", "mean chars", "chunks", "BC", "CS (complete)", "CS (seq.)", "DS"] + \
        [f"span R@{k}" for k in ks] + ([f"{report.get('retriever')} complete@{budget}c [95 %]"] if has_cov else [])
    ref = _margin_reference(report) if has_cov else None
    if ref is not None:
        header.append(f"minus {ref} (points) [95 % paired]")
    rows = []
    for name, r in report["chunkers"].items():
        f = (lambda key: f"{r[key]:.4f}" if key in r and r[key] == r[key] else "-")
        rows.append([row_name(name, r.get("fallbacks")), r["size"], f"{r['mean_chars']:.0f}", r["chunks"], f("bc"), f("cs_complete"),
                     f("cs_sequential"), f("ds")] + [f"{r.get(f'span_recall@{k}', float('nan')):.3f}" for k in ks]
                    + ([_with_interval(r)] if has_cov else [])
                    + ([_margin(r, report["chunkers"][ref]) if name != ref else ""] if ref is not None else []))
    title = (f"{report['data']}: {report['documents']} documents, {report['chars']} chars, target mean "
             f"{report['target_chars']} chars; BC space={report['space']}; CS K={report['K']} "
             f"edge_rule={report['edge_rule']}, over "
             + (f"{report['windows']} evenly spaced windows of {report['group_chars']} chars per document"
                if report.get("windows") else f"runs of <= {report['group_chars']} chars")
             + f"; model {report['model']}" + (f"; {_questions(report)} questions" if has_cov else ""))
    notes = [fallback_note(name, r["stats"]) for name, r in report["chunkers"].items()
             if isinstance(r.get("stats"), dict) and "fallback" in r["stats"]]
    out = title + "\n" + format_table(header, rows) + "".join("\n" + n for n in notes)
    if "correlations" in report:
        out += "\n\n" + format_correlations(report["correlations"])
    return out


def _margin_reference(report: dict) -> str | None:
    """The chunker margins are taken over: the default chunker when it is in the report, else the first."""
    names = [n for n, r in report["chunkers"].items() if "per_question" in r]
    if len(names) < 2:
        return None
    return DEFAULT_CHUNKER if DEFAULT_CHUNKER in names else names[0]


def _margin(row: dict, ref: dict) -> str:
    if "per_question" not in row:
        return "-"
    qids = sorted(ref["per_question"])
    iv = paired_bootstrap([row["per_question"][q] for q in qids], [ref["per_question"][q] for q in qids])
    return f"{100 * iv.mean:+.1f} [{100 * iv.low:+.1f}, {100 * iv.high:+.1f}]"


def _questions(report: dict) -> int:
    return max((r.get("questions", 0) for r in report["chunkers"].values()), default=0)


def _with_interval(row: dict) -> str:
    if "complete" not in row:
        return "-"
    iv = row["complete_interval"]
    return f"{row['complete']:.3f} [{iv['low']:.3f}, {iv['high']:.3f}]"


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


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks (from 1) along the last axis, ties given their mean rank (as Spearman's correlation takes them)."""
    def row(v: np.ndarray) -> np.ndarray:
        srt = np.sort(v)
        return (np.searchsorted(srt, v, "left") + np.searchsorted(srt, v, "right") + 1) / 2

    return np.apply_along_axis(row, -1, np.asarray(x, dtype=np.float64))


def _pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson's r along the last axis (NaN where either side is constant)."""
    x = x - x.mean(axis=-1, keepdims=True)
    y = y - y.mean(axis=-1, keepdims=True)
    den = np.sqrt((x * x).sum(axis=-1) * (y * y).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 1e-12, (x * y).sum(axis=-1) / np.where(den > 1e-12, den, 1.0), np.nan)


def metric_correlations(report: dict, *, n_resamples: int = DEFAULT_RESAMPLES // 5, confidence: float = 0.95,
                        seed: int = 0) -> dict:
    """Per metric, its ``across`` and ``within`` correlation with complete coverage (module docstring).

    Needs a :func:`compare_chunkers` report with retrieval and at least three chunkers. Documents enter
    when every chunker has the metric on them and at least one question's evidence lies in them (a
    question whose evidence spans several documents counts for each). Each entry: ``r`` (on all
    documents), ``low``/``high`` (percentile bootstrap over documents, resamples where the statistic
    is undefined dropped and counted in ``undefined``), ``documents``, ``expected_sign``.
    """
    rows = report["chunkers"]
    names = [n for n, r in rows.items() if "per_question" in r and "per_document" in r]
    if len(names) < 3:
        raise ConfigError(f"a correlation over chunkers needs at least 3 with retrieval, got {len(names)}")
    qdocs = report["question_docs"]
    qids = sorted(qdocs)
    doc_ids = sorted({d for ds in qdocs.values() for d in ds})
    cov = np.array([[rows[n]["per_question"][q] for q in qids] for n in names])  # chunker x question
    member = np.array([[d in qdocs[q] for q in qids] for d in doc_ids], dtype=np.float64)  # doc x question
    rng = np.random.default_rng(seed)
    alpha = (1 - confidence) / 2
    out: dict[str, Any] = {"chunkers": names, "questions": len(qids), "resamples": n_resamples, "metrics": {}}
    for metric, sign in EXPECTED_SIGN.items():
        vals = np.array([[rows[n]["per_document"].get(d, {}).get(metric, np.nan) for d in doc_ids] for n in names],
                        dtype=np.float64)  # chunker x doc
        if vals.size == 0 or np.all(np.isnan(vals)):
            continue
        keep = ~np.isnan(vals).any(axis=0) & (member.sum(axis=1) > 0)
        m, mem = vals[:, keep], member[keep]
        nd = int(keep.sum())
        if nd < 2:
            continue
        # the coverage of each (chunker, document): mean over the document's questions
        per_doc_cov = (cov @ mem.T) / mem.sum(axis=1)  # chunker x doc

        def stats(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            """(across, within) for document weights ``w`` (resamples x docs: how often each is drawn)."""
            mw = (m[None] * w[:, None, :]).sum(-1) / w.sum(-1)[:, None]  # resamples x chunker
            qw = w @ mem  # resamples x questions: how often each question is drawn
            cw = (qw[:, None, :] * cov[None]).sum(-1) / qw.sum(-1)[:, None]
            across = _pearson(_ranks(mw), _ranks(cw))
            mc = m - m.mean(axis=0, keepdims=True)
            yc = per_doc_cov - per_doc_cov.mean(axis=0, keepdims=True)
            sw = np.sqrt(w)[:, None, :]  # a cell drawn k times counts k times in the pooled sums
            x, y = (mc[None] * sw).reshape(len(w), -1), (yc[None] * sw).reshape(len(w), -1)
            return across, _pearson(x, y)  # each document's cells sum to zero: centred at any weights

        a0, w0 = stats(np.ones((1, nd)))
        draws = np.stack([np.bincount(rng.integers(0, nd, nd), minlength=nd) for _ in range(n_resamples)])
        a, w = stats(draws.astype(np.float64))
        entry = {"documents": nd, "expected_sign": sign}
        for label, point, boot in (("across", a0[0], a), ("within", w0[0], w)):
            ok = boot[~np.isnan(boot)]
            lo, hi = (np.quantile(ok, [alpha, 1 - alpha]) if ok.size else (np.nan, np.nan))
            entry[label] = {"r": float(point), "low": float(lo), "high": float(hi),
                            "undefined": int(n_resamples - ok.size)}
        out["metrics"][metric] = entry
    return out


def format_correlations(corr: dict) -> str:
    """The correlations of :func:`metric_correlations` as a table."""
    header = ["metric", "MoC expects", "documents", "across chunkers (Spearman) [95 %]",
              "within documents (Pearson) [95 %]"]
    rows = []
    for metric, e in corr["metrics"].items():
        f = (lambda c: f"{c['r']:+.2f} [{c['low']:+.2f}, {c['high']:+.2f}]")
        rows.append([metric, "positive" if e["expected_sign"] > 0 else "negative", e["documents"],
                     f(e["across"]), f(e["within"])])
    return (f"correlation with complete coverage at budget ({len(corr['chunkers'])} chunkers, {corr['questions']} "
            f"questions; bootstrap over documents, {corr['resamples']} resamples)\n" + format_table(header, rows))
