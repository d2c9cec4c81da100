"""One evaluation runner for every registered retriever.

:func:`run_eval` indexes a data set once with everything the requested
retrievers need (the union of their required enrichers and relators), runs
each retriever on every question with evidence, and scores two views of the
returned items:

* ``item``: each returned item counts as one result, with all its members'
  spans (a Trail composite is one item);
* ``chunk``: the members flattened in rank order, each distinct chunk once,
  cut at k (what a reader receives, counted per chunk).

For single-chunk retrievers (dense, bm25, hybrid, mm) the two views are equal.
The Momoka-RAG ablation (paper Table 3) is ``retrievers=["base", "mm", "momoka"]``.

Every metric is reported at the cut-offs k and at character budgets (default
5,000): the top items that fit, so a retriever returning longer items gets no
free credit (:mod:`momoka.eval.metrics`). The text table leads with the budget
figures.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, DatasetError
from .. import registry
from ..methods.pipeline import DEFAULT_BUDGET, DEFAULT_CHUNKER, Index
from ..methods.sources import jsonable
from ..progress import Progress
from .datasets import load_dataset
from .intervals import DEFAULT_RESAMPLES, bootstrap_mean, paired_bootstrap
from .metrics import evaluate_retrieval, format_table

__all__ = ["DEFAULT_BUDGET", "format_report", "plan", "run_eval"]



def _retriever_options(name: str, given: dict, need: dict) -> dict:
    """``given`` less the options that went to a component of the same name in ``need`` (``jerr`` is a relator
    and a retriever) and that the retriever does not take."""
    built = {k: o for kind in ("enrich", "relate") for n, o in need[kind] if n == name for k in o}
    if not built:
        return dict(given)
    mine = set(registry.option_names(registry.entry("retriever", name).factory, 1))
    return {k: v for k, v in given.items() if k in mine or k not in built}


def plan(retrievers: Sequence[str], options: dict[str, dict] | None = None) -> dict:
    """What an index must hold for ``retrievers``: ``{"enrich": [(name, opts)], "relate": [...], "dense": bool}``."""
    options = options or {}
    enrich: list[str] = []
    relate: list[str] = []
    for name in retrievers:
        req = registry.requirements(name)
        enrich += [e for e in req["enrich"] if e not in enrich]
        relate += [r for r in req["relate"] if r not in relate]
    dense = any(registry.entry("retriever", n).name != "bm25" for n in retrievers) or bool(enrich or relate)
    asked = {registry.entry("retriever", n).name for n in retrievers}

    def opts(kind: str, name: str) -> dict:
        # a name that is both a retriever asked for and this component (``jerr``): the component gets the
        # options it takes, the retriever the rest (each still refuses an option neither takes)
        o = dict(options.get(name, {}))
        if name in asked and o:
            mine = set(registry.option_names(registry.entry(kind, name).factory))
            o = {k: v for k, v in o.items() if k in mine}
        return o

    return {"enrich": [(e, opts("enricher", e)) for e in enrich],
            "relate": [(r, opts("relator", r)) for r in relate], "dense": dense}


def _index_for(ds: Any, documents: list, need: dict, *, chunker: Any, size: int | None, store: Any,
               embedder: Any, progress: bool | None, chunker_options: dict, headers: bool = True):
    if store is not None and (Path(store) / "manifest.json").exists():
        ix = Index.open(store, progress=progress)
        missing = {d.doc_id for d in documents} - set(ix.corpus.doc_ids)
        if missing:
            raise ConfigError(f"store {store} lacks {len(missing)} document(s) of {ds.name}; use another store")
        todo_e = [e for e in need["enrich"] if ix.store.pipeline.needs("enrich", e[0])]
        todo_r = [r for r in need["relate"] if ix.store.pipeline.needs("relate", r[0])]
        if todo_e or todo_r:
            ix.extend(enrich=todo_e, relate=todo_r)
            ix.save()
        return ix
    return Index.build(documents, store=store, chunker=chunker, size=size,
                       embedder=embedder if need["dense"] else None, enrich=need["enrich"], relate=need["relate"],
                       progress=progress, headers=headers, **chunker_options)


def run_eval(dataset: Any, retrievers: Sequence[str], *, chunker: Any = DEFAULT_CHUNKER, size: int | None = None,
             ks: Sequence[int] = (1, 3, 5), limit: int | None = None, scope: str = "corpus",
             documents: str = "all", store: str | None = None, options: dict[str, dict] | None = None,
             chunker_options: dict | None = None, embedder: Any = "default", progress: bool | None = None,
             budgets: Sequence[int] = (DEFAULT_BUDGET,), evidence_mode: str | None = None,
             log: Any = None, refine: str | None = None, assemble: bool = True,
             group_by: str | None = None, headers: bool = True, keep_per_question: bool = False) -> dict:
    """Evaluate ``retrievers`` on ``dataset`` and return a JSON-serialisable report.

    Args:
        dataset: a :class:`momoka.eval.Dataset`, or its folder or name.
        retrievers: registered retriever names (``momoka.registry.available("retriever")``).
        chunker, size, chunker_options: the chunker of the index (name, size and other
            parameters, or an object).
        headers: a new index embeds and BM25-indexes each chunk with its contextual header
            (:meth:`momoka.Index.build`); False indexes the chunk text alone. A reused store keeps its own.
        ks: the cut-offs.
        limit: only the first ``limit`` questions with evidence.
        scope: ``"corpus"`` (every question searches all documents) or
            ``"document"`` (only its own document).
        documents: ``"all"`` (index every document of the set) or ``"questions"``
            (only those the selected questions refer to: a smaller distractor pool).
        store: build the index there (or reuse it: missing components are added).
        options: per component name, its options (e.g. ``{"paths": {"referee": "embedding"}}``).
        embedder: the embedder (``"default"``, a registry id or an object).
        budgets: character budgets at which every metric is also computed.
        evidence_mode: ``"all"`` or ``"any"``; default: the set's own
            (:func:`momoka.eval.load_dataset`), an error when it has none.
        log: a callable taking one-line progress messages (None: silent).
        refine: a registered refiner (e.g. ``"ets"``) applied to each retriever's
            items that fit the first budget (what a reader would get); the refined
            result is scored as retriever ``NAME+REFINER`` beside the plain one.
            Its options come from ``options[refine]``; it gets the index's embedder
            and the index as a component sees it (``corpus``).
        assemble: score at each budget the context ``momoka query`` returns:
            assembled (:mod:`momoka.methods.assemble`: touching hits merged,
            items that do not fit skipped, at the default cap);
            False: the longest prefix of the ranking that fits. The report's
            ``assemble`` says which (with the cap).
        group_by: a field of the set's questions (e.g. DragonBall's ``query_type``):
            the intervals and paired margins are also computed over the questions of
            each of its values (``report["groups"]``: per value its ``n``,
            ``intervals`` and ``margins``; a question without the field counts as
            ``"(none)"``).
        keep_per_question: also return every question's figures (``report["per_question"]``:
            per retriever, ``{qid: {metric@k or metric@Nc: value}}``, and ``report["question_docs"]``:
            ``{qid: [doc_id, ...]}``, the documents its evidence lies in), for analyses over documents.

    Report: ``retrievers[name]`` holds ``item`` and ``chunk`` metric dicts
    (``means`` per k and the Momoka eq. 6 ``sums``), the mean number of
    distinct chunks and characters returned at each k, the seconds per
    question and the retriever's own counts.
    """
    say = log or (lambda msg: None)
    retrievers = list(dict.fromkeys(retrievers))
    if not retrievers:
        raise ConfigError("give at least one retriever")
    for r in retrievers:
        registry.entry("retriever", r)  # unknown names fail before any work
    if refine is not None:
        registry.create("refiner", refine, **dict(options or {}).get(refine, {}))  # bad names or options fail now
    if scope not in ("corpus", "document"):
        raise ConfigError(f"scope must be 'corpus' or 'document', not {scope!r}")
    if documents not in ("all", "questions"):
        raise ConfigError(f"documents must be 'all' or 'questions', not {documents!r}")
    options = dict(options or {})
    ds = dataset if hasattr(dataset, "questions") else load_dataset(dataset, evidence_mode=evidence_mode)
    budgets = tuple(sorted({int(b) for b in budgets}))
    if any(b <= 0 for b in budgets):
        raise ConfigError(f"budgets must be positive numbers of characters, not {budgets}")
    questions = [q for q in ds.questions if q.gold]
    if limit is not None:
        questions = questions[:limit]
    if not questions:
        raise DatasetError(f"{ds.name}: no question has evidence spans; retrieval metrics need them")
    mode = evidence_mode or ds.require_evidence_mode()
    docs = ds.documents
    if documents == "questions":
        want = {g[0] for q in questions for g in q.gold} | {q.doc_id for q in questions}
        docs = [d for d in ds.documents if d.doc_id in want]
    ks = tuple(sorted({int(k) for k in ks}))
    kmax = max(ks)
    need = plan(retrievers, options)
    t0 = time.perf_counter()
    ix = _index_for(ds, docs, need, chunker=chunker, size=size, store=store, embedder=embedder, progress=progress,
                   chunker_options=dict(chunker_options or {}), headers=headers)
    t_index = time.perf_counter() - t0
    say(f"{ds.name}: {len(docs)} documents, {ix.store.n_chunks} chunks, {len(questions)} questions "
        f"(index {t_index:.1f}s)")
    report: dict[str, Any] = {
        "data": ds.name, "evidence_mode": mode,
        "evidence_mode_source": "argument" if evidence_mode else ds.evidence_mode_source, "n_questions": len(questions), "limit": limit,
        "scope": scope, "documents": documents, "n_documents": len(docs), "ks": list(ks), "budgets": list(budgets),
        "chunker": ix.store.manifest.get("chunker"), "n_chunks": ix.store.n_chunks,
        "embedder": (ix.store.embedder_info or {}).get("model_id"), "pipeline": ix.corpus.pipeline,
        "index_seconds": round(t_index, 2), "refine": refine, "retrievers": {},
    }
    asm = ix.corpus.assembler() if assemble else None
    report["assemble"] = {"on": True, "cap": asm.cap} if asm is not None else {"on": False}
    depth = max([kmax] + [ix.corpus.depth_for(b) for b in budgets])
    report["depth"] = depth
    qtexts = [q.question for q in questions]
    per_question: dict[str, dict] = {}
    per_doc = [q.doc_id for q in questions] if scope == "document" else None
    try:
        for name in retrievers:
            r = ix.corpus.retriever(name, **_retriever_options(name, options.get(name, {}), need))
            t1 = time.perf_counter()
            results = _retrieve_all(r, name, qtexts, depth, per_doc, progress)
            dt = time.perf_counter() - t1
            runs = [(name, results, dt)]
            if refine is not None:
                runs.append(_refined(ix, refine, options.get(refine, {}), name, qtexts, results, budgets, asm))
            for label, res_list, secs in runs:
                per_question[label] = _score(report, registry, label, questions, res_list, secs, ks=ks, mode=mode,
                                             budgets=budgets, depth=depth, options=options, say=say,
                                             assemble=asm if label == name else None)
    finally:
        ix.close()
    report["intervals"], report["margins"] = _intervals(per_question, [q.qid for q in questions], budgets)
    if group_by:
        report["groups"] = _groups(per_question, questions, group_by, budgets)
    if keep_per_question:
        report["per_question"] = {name: {q.qid: dict(rows[q.qid]) for q in questions}
                                  for name, rows in per_question.items()}
        report["question_docs"] = {q.qid: sorted({g[0] for g in q.gold}) for q in questions}
    return report


def _groups(per_question: dict[str, dict], questions: list, field: str, budgets: tuple) -> dict:
    """:func:`_intervals` over the questions of each value of question field ``field``."""
    by: dict[str, list[str]] = {}
    for q in questions:
        by.setdefault(str(q.extra.get(field, "(none)")), []).append(q.qid)
    out: dict[str, Any] = {"field": field, "values": {}}
    for value in sorted(by):
        ivs, margins = _intervals(per_question, by[value], budgets)
        out["values"][value] = {"n": len(by[value]), "intervals": ivs, "margins": margins}
    return out


#: Questions per retriever call in :func:`run_eval`: a progress line between slices (every retriever answers
#: each question on its own, so slicing changes no result).
EVAL_SLICE = 32


def _retrieve_all(r: Any, name: str, qtexts: list, depth: int, per_doc: list | None, progress: bool | None) -> list:
    """``r``'s results for every question, in slices, with a progress line naming the retriever."""
    out: list = []
    with Progress(f"eval {name}", total=len(qtexts), unit="questions", enabled=progress) as bar:
        for s in range(0, len(qtexts), EVAL_SLICE):
            part = qtexts[s:s + EVAL_SLICE]
            out.extend(r.retrieve_batch(part, depth, per_query_doc_ids=per_doc[s:s + EVAL_SLICE]) if per_doc
                       else r.retrieve_batch(part, depth))
            bar.update(len(part))
    return out


#: The figures that get intervals, at the first budget: complete coverage, span recall, hit, MRR.
INTERVAL_METRICS = ("complete", "span_recall", "recall", "mrr")


def _intervals(per_question: dict[str, dict], qids: list[str], budgets: tuple) -> tuple[dict, dict]:
    """Each retriever's 95 % interval, and each one's paired interval of the margin over the first retriever.

    On the ``item`` view at every budget (nothing without a budget).
    """
    if not budgets or not per_question:
        return {}, {}
    keys = [f"{m}@{b}c" for b in budgets for m in INTERVAL_METRICS]
    vec = {name: {k: [rows[q][k] for q in qids] for k in keys} for name, rows in per_question.items()}
    names = list(vec)
    intervals = {n: {k: bootstrap_mean(vec[n][k]).to_dict() for k in keys} for n in names}
    base = names[0]
    margins = {n: {"over": base, **{k: paired_bootstrap(vec[n][k], vec[base][k]).to_dict() for k in keys}}
               for n in names[1:]}
    return intervals, margins


def _refined(ix: Any, refine: str, opts: dict, name: str, qtexts: list, results: list, budgets: tuple,
             assemble: Any = None):
    """``(NAME+REFINER, refined results, seconds)``: the refiner on each result fitted to the first budget
    (assembled with ``assemble`` when given)."""
    refiner = registry.create("refiner", refine, embedder=ix.corpus.embedder, corpus=ix.corpus, **opts)
    t = time.perf_counter()
    out = []
    with Progress(f"{name}+{refine}", total=len(qtexts), unit="questions") as bar:
        for q, res in zip(qtexts, results):
            out.append(refiner.refine(q, res.fit(budgets[0], assemble=assemble) if budgets else res))
            bar.update(1)
    return f"{name}+{refine}", out, time.perf_counter() - t


def _score(report: dict, registry: Any, name: str, questions: list, results: list, dt: float, *, ks: tuple,
           mode: str, budgets: tuple, depth: int, options: dict, say: Any, assemble: Any = None) -> dict:
    """Score one retriever's results into ``report["retrievers"][name]``; returns the per-question rows (items).

    With ``assemble`` (an assembler), the figures at each budget are those of the context it assembles
    for that budget (strictly within it: no keep-first item); the figures at k are the ranking's.
    """
    kmax = max(ks)
    base, _, refiner = name.partition("+")
    refiner = refiner or None
    items = {q.qid: res.spans() for q, res in zip(questions, results)}
    chunk_items = {q.qid: [[m.span] for m in res.distinct_chunks()] for q, res in zip(questions, results)}
    at_item = at_chunk = None
    if assemble is not None:
        fitted = {b: [res.fit(b, keep_first=False, assemble=assemble) for res in results] for b in budgets}
        at_item = {b: {q.qid: r.spans() for q, r in zip(questions, rs)} for b, rs in fitted.items()}
        at_chunk = {b: {q.qid: [[m.span] for m in r.distinct_chunks()] for q, r in zip(questions, rs)}
                    for b, rs in fitted.items()}
    rep_item = evaluate_retrieval(items, questions, ks=ks, mode=mode, budgets=budgets, budget_results=at_item)
    rep_chunk = evaluate_retrieval(chunk_items, questions, ks=ks, mode=mode, budgets=budgets, budget_results=at_chunk)
    # Rankings that ended (at ``depth``) before the largest budget was filled.
    # (Assembled, an item may hold several hits: count the hits that fitted, not the items.)
    if budgets and assemble is not None:
        used = [sum(len(it.provenance["assembly"]["hits"]) for it in r) for r in fitted[budgets[-1]]]
    else:
        used = [rep_item.per_question[q.qid][f"returned@{budgets[-1]}c"] for q in questions] if budgets else []
    short = sum(1 for q, u in zip(questions, used) if len(items[q.qid]) >= depth and u >= depth)
    volume = {}
    for k in ks:
        volume[f"chunks@{k}"] = float(np.mean([len(_distinct(res[:k])) for res in results]))
        volume[f"chars@{k}"] = float(np.mean([sum(it.n_chars for it in res[:k]) for res in results]))
    counts: dict[str, float] = {}
    for res in results:
        for key, v in res.stats.items():
            if isinstance(v, (int, float)) and key != "seconds":
                counts[key] = counts.get(key, 0) + v
    report["retrievers"][name] = {
        "retriever": registry.entry("retriever", base).name, "options": jsonable(options.get(base, {})),
        "refiner": refiner,
        "item": rep_item.to_dict(), "chunk": rep_chunk.to_dict(), "returned": volume,
        "counts": counts, "seconds_per_question": dt / len(questions),
        "depth_exhausted": short,
    }
    head = f"span_recall@{budgets[0]}c" if budgets else f"recall@{kmax}"
    say(f"  {name}: {head} {rep_item.means[head]:.3f} (items), "
        f"{rep_chunk.means[head]:.3f} (distinct chunks), {dt / len(questions) * 1000:.1f} ms/q")
    return rep_item.per_question


def _distinct(items: Sequence[Any]) -> set:
    """The distinct chunks among the members of ``items``."""
    return {m.chunk_id if m.chunk_id >= 0 else m.span for it in items for m in it.members}


def format_report(report: dict, metrics: Sequence[str] = ("recall", "precision", "mrr", "f1", "span_recall")) -> str:
    """A plain-text table of a :func:`run_eval` report: one row per retriever and view.

    With budgets, the first columns are the figures at the first budget B:
    span recall, complete coverage, recall, MRR, and the mean number of items
    and characters that fitted. Then each metric's Momoka eq. 6 sum over the
    cut-offs (recall, precision and span recall x100, as the paper prints
    them), recall at each k, distinct chunks and characters at the largest k,
    ms per question.
    """
    ks = report["ks"]
    kmax = max(ks)
    budgets = report.get("budgets") or []
    bh = [f"{c}@{budgets[0]}c" for c in ("span_recall", "complete", "recall", "mrr", "returned", "chars")] \
        if budgets else []
    header = ["retriever", "view"] + bh + [f"{m} (sum)" for m in metrics] + [f"R@{k}" for k in ks] + \
        [f"chunks@{kmax}", f"chars@{kmax}", "ms/q"]
    rows = []
    for name, row in report["retrievers"].items():
        views = ("item", "chunk") if row["item"]["means"] != row["chunk"]["means"] else ("item",)
        for view in views:
            d = row[view]
            cells = [name, view if len(views) > 1 else "item = chunk"]
            for c in bh:
                v = d["means"][c]
                cells.append(f"{v:.1f}" if c.startswith("returned") else f"{v:.0f}" if c.startswith("chars")
                             else f"{v:.3f}")
            for m in metrics:
                s = d["sums"][m]
                cells.append(f"{100 * s:.1f}" if m in ("recall", "precision", "span_recall") else f"{s:.3f}")
            cells += [f"{d['means'][f'recall@{k}']:.3f}" for k in ks]
            cells += [f"{row['returned'][f'chunks@{kmax}']:.1f}", f"{row['returned'][f'chars@{kmax}']:.0f}",
                      f"{1000 * row['seconds_per_question']:.1f}"]
            rows.append(cells)
    title = (f"{report['data']}: {report['n_questions']} questions, evidence mode {report['evidence_mode']}"
             f" ({report.get('evidence_mode_source', 'argument')}), "
             f"{report['n_chunks']} chunks ({(report.get('chunker') or {}).get('name')}), scope {report['scope']}")
    notes = ("recall = evidence units touched (partial in mode all); complete = every unit fully covered "
             "(mode any: one unit); f1 = mean of per-question F1 (f1_pr in the JSON: F1 of mean P and R)")
    asm = report.get("assemble")
    if budgets and asm is not None:
        notes += (f"; at a budget: the assembled context (widening cap {asm['cap']})" if asm.get("on")
                  else "; at a budget: the ranking's longest prefix")
    return title + "\n" + format_table(header, rows) + "\n" + notes + _format_intervals(report)


def _format_intervals(report: dict) -> str:
    """The 95 % intervals and the paired margins over the first retriever, as a second table (empty without)."""
    ivs, margins = report.get("intervals") or {}, report.get("margins") or {}
    if not ivs:
        return ""
    b = report["budgets"][0]
    keys = [f"{m}@{b}c" for m in INTERVAL_METRICS]
    first = next(iter(ivs))
    more = [f"complete@{c}c" for c in report["budgets"][1:] if f"complete@{c}c" in ivs[next(iter(ivs))]]
    header = ["retriever"] + keys + [f"{k} - {first}" for k in keys[:2]] + [x for k in more for x in (k, f"{k} - {first}")]
    rows = []
    for name, iv in ivs.items():
        cells = [name] + [_iv(iv[k]) for k in keys]
        m = margins.get(name)
        cells += [_iv(m[k], signed=True) for k in keys[:2]] if m else ["", ""]
        for k in more:  # complete coverage at the other budgets, and its margin
            cells += [_iv(iv[k]), _iv(m[k], signed=True) if m else ""]
        rows.append(cells)
    n = next(iter(ivs[first].values()))["n"]

    out = (f"\n\n95 % bootstrap intervals over the {n} questions ({DEFAULT_RESAMPLES:,} resamples); "
           f"margins are paired "
           f"differences with {first} on the same questions\n" + format_table(header, rows))
    groups = report.get("groups")
    if groups:  # with one retriever too: its interval per value (margins need a second retriever)
        key = keys[0]
        header = [groups["field"], "n"] + [f"{key} {name}" for name in ivs] + [f"{name} - {first}" for name in list(ivs)[1:]]
        rows = [[value, str(g["n"])] + [_iv(g["intervals"][name][key]) for name in ivs]
                + [_iv(g["margins"][name][key], signed=True) for name in list(ivs)[1:]]
                for value, g in groups["values"].items()]
        out += f"\n\nper {groups['field']} (complete coverage at {b} characters)\n" + format_table(header, rows)
    return out


def _iv(d: dict, signed: bool = False) -> str:
    return f"{d['mean']:{'+' if signed else ''}.3f} [{d['low']:.3f}, {d['high']:.3f}]"
