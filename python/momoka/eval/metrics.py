"""Retrieval metrics (the answer metrics are :mod:`momoka._answer_metrics`, re-exported here).

Retrieval metrics compare what a retriever returned with gold evidence spans.
A returned *item* is a sequence of ``(doc_id, start, end)`` spans: one span
for a plain chunk, several for a composite (Momoka-Trail joins a chunk with
its path). An item is *relevant* when any of its spans overlaps gold evidence.

Gold spans that overlap are merged into evidence *units* first (SQuAD lists
several annotators' spans of one answer). With ``mode="all"`` every unit is
needed; with ``mode="any"`` the units are alternatives and the best one counts
(see :mod:`momoka.eval.datasets`).

Per question, at cut-off k:

* ``recall@k``: fraction of units that a top-k item overlaps ("any": 1 if one does);
* ``precision@k``: relevant items among the top k, divided by k;
* ``mrr@k``: 1 / rank of the first relevant item (0 if none in the top k);
* ``f1@k``: harmonic mean of that question's precision and recall;
* ``span_recall@k``: MC-indexing's recall: the fraction of gold evidence
  characters covered by the union of the top-k spans ("any": the best unit);
* ``complete@k``: 1 if the evidence is fully covered by the union of the top-k
  spans: every unit's characters ("all"), or one unit's ("any"). In "all" mode
  ``recall`` and ``span_recall`` are *partial* figures (a question with one of
  two units found scores 0.5); ``complete`` is the all-or-nothing figure;
* ``hit@k``: 1 if some gold unit lies wholly inside one returned span.

Scores are averaged over the questions that have evidence. F1 is given both
ways: ``f1`` is the mean of per-question F1, ``f1_pr`` the F1 of mean precision
and mean recall (how the Momoka paper's tables appear to compute it). The Momoka
paper's tables report Metric@1 + Metric@3 + Metric@5 (its eq. 6);
:class:`RetrievalReport` gives those sums too.

**At a budget.** Besides a cut-off k, every metric is also computed at a
character budget B (label ``@{B}c``, e.g. ``span_recall@5000c``): the top items
whose total length fits in B characters (the longest prefix of the ranking that
fits; an item longer than what is left ends the prefix), so a method that
returns longer items gets no free credit. Precision there is relevant items
over items returned. ``returned@{B}c`` and ``chars@{B}c`` give the mean number
of items and characters that fitted.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Iterable, Mapping, Sequence

from .._answer_metrics import (  # noqa: F401  (re-exported: the answer metrics' public home)
    answer_metrics,
    bleu,
    contains_answer,
    exact_match,
    normalize_answer,
    rouge_l,
    token_f1,
    tokenize,
)
from ..errors import InputError

Span = tuple[str, int, int]
Item = Sequence[Span]

RETRIEVAL_METRICS = ("recall", "precision", "mrr", "f1", "span_recall", "complete", "hit")


# --- span arithmetic ---------------------------------------------------------


def merge_spans(spans: Iterable[Span]) -> list[Span]:
    """Merge overlapping spans of the same document (touching ones stay apart)."""
    out: list[list] = []
    for d, s, e in sorted((str(d), int(s), int(e)) for d, s, e in spans):
        if e <= s:
            continue
        if out and out[-1][0] == d and s < out[-1][2]:
            out[-1][2] = max(out[-1][2], e)
        else:
            out.append([d, s, e])
    return [tuple(x) for x in out]  # type: ignore[misc]


def _overlap(a: Span, b: Span) -> int:
    if a[0] != b[0]:
        return 0
    return max(0, min(a[2], b[2]) - max(a[1], b[1]))


def _covered(unit: Span, union: list[Span]) -> int:
    """Characters of ``unit`` covered by ``union`` (merged, disjoint spans)."""
    return sum(_overlap(unit, u) for u in union)


# --- per question ------------------------------------------------------------


def question_metrics(
    retrieved: Sequence[Item], gold: Iterable[Span], k: int, mode: str = "all"
) -> dict[str, float]:
    """The retrieval metrics of one question at cut-off ``k`` (see module doc)."""
    if k <= 0:
        raise InputError(f"k must be positive, got {k}")
    if mode not in ("all", "any"):
        raise InputError(f"mode must be 'all' or 'any', not {mode!r}")
    units = merge_spans(gold)
    if not units:
        raise InputError("a question without gold evidence has no retrieval metrics")
    top = [list(item) for item in retrieved[:k]]

    relevant = [any(_overlap(s, u) > 0 for s in item for u in units) for item in top]
    precision = sum(relevant) / k
    mrr = next((1.0 / (i + 1) for i, r in enumerate(relevant) if r), 0.0)

    member_spans = [s for item in top for s in item]
    touched = [any(_overlap(s, u) > 0 for s in member_spans) for u in units]
    union = merge_spans(member_spans)
    covered = [_covered(u, union) for u in units]
    lengths = [u[2] - u[1] for u in units]
    inside = [any(s[0] == u[0] and s[1] <= u[1] and u[2] <= s[2] for s in member_spans) for u in units]

    full = [c == n for c, n in zip(covered, lengths)]
    if mode == "all":
        recall = sum(touched) / len(units)
        span_recall = sum(covered) / sum(lengths)
        complete = 1.0 if all(full) else 0.0
    else:
        recall = 1.0 if any(touched) else 0.0
        span_recall = max(c / n for c, n in zip(covered, lengths))
        complete = 1.0 if any(full) else 0.0
    hit = 1.0 if any(inside) else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return {
        "recall": recall,
        "precision": precision,
        "mrr": mrr,
        "f1": f1,
        "span_recall": span_recall,
        "complete": complete,
        "hit": hit,
    }


def item_length(item: Item) -> int:
    """Characters of one returned item: the sum of its spans' lengths."""
    return sum(int(e) - int(s) for _, s, e in item)


def fit_budget(retrieved: Sequence[Item], budget: int) -> list[Item]:
    """The longest prefix of ``retrieved`` whose total length fits in ``budget`` characters."""
    if budget <= 0:
        raise InputError(f"a budget must be a positive number of characters, got {budget}")
    # lengths are >= 0, so the running totals rise and those within budget are a prefix
    n = sum(1 for total in accumulate(item_length(i) for i in retrieved) if total <= budget)
    return list(retrieved[:n])


def budget_metrics(retrieved: Sequence[Item], gold: Iterable[Span], budget: int,
                   mode: str = "all") -> dict[str, float]:
    """:func:`question_metrics` of the items that fit in ``budget`` characters (see module doc).

    Adds ``returned`` (items that fitted) and ``chars`` (their total length).
    """
    fitted = fit_budget(retrieved, budget)
    out = question_metrics(fitted, gold, max(1, len(fitted)), mode)
    out["returned"] = float(len(fitted))
    out["chars"] = float(sum(item_length(i) for i in fitted))
    return out


@dataclass
class RetrievalReport:
    """Mean retrieval metrics over a set of questions.

    ``means["recall@3"]`` etc. (and ``means["f1_pr@3"]``, the F1 of mean
    precision and recall); at a budget ``means["span_recall@5000c"]``,
    ``means["returned@5000c"]``, ``means["chars@5000c"]``; ``sums["recall"]``
    is the Momoka eq. 6 sum of recall@k over the cut-offs;
    ``per_question[qid]["recall@3"]`` keeps the rows.
    """

    ks: tuple[int, ...]
    n_questions: int
    n_skipped: int
    means: dict[str, float] = field(default_factory=dict)
    per_question: dict[str, dict[str, float]] = field(default_factory=dict)
    budgets: tuple[int, ...] = ()

    @property
    def sums(self) -> dict[str, float]:
        return {m: sum(self.means[f"{m}@{k}"] for k in self.ks) for m in RETRIEVAL_METRICS + ("f1_pr",)}

    def to_dict(self) -> dict:
        return {
            "ks": list(self.ks),
            "budgets": list(self.budgets),
            "n_questions": self.n_questions,
            "n_skipped_without_evidence": self.n_skipped,
            "means": self.means,
            "sums": self.sums,
        }

    def table(self, metrics: Sequence[str] = RETRIEVAL_METRICS) -> str:
        """A plain-text table: one row per metric, one column per k."""
        header = ["metric"] + [f"@{k}" for k in self.ks] + ["sum"]
        rows = [
            [m] + [f"{self.means[f'{m}@{k}']:.4f}" for k in self.ks] + [f"{self.sums[m]:.4f}"]
            for m in metrics
        ]
        return format_table(header, rows)


def evaluate_retrieval(
    results: Mapping[str, Sequence[Item]],
    questions: Iterable,
    ks: Sequence[int] = (1, 3, 5),
    mode: str = "all",
    budgets: Sequence[int] = (),
    budget_results: Mapping[int, Mapping[str, Sequence[Item]]] | None = None,
) -> RetrievalReport:
    """Average :func:`question_metrics` over ``questions`` at each k (and :func:`budget_metrics` at each budget).

    Args:
        results: ``qid -> ranked items`` (each item a sequence of spans).
        questions: :class:`momoka.eval.datasets.Question` objects (anything with
            ``qid`` and ``gold``). Questions without gold evidence are skipped
            and counted in ``n_skipped``.
        ks: cut-offs.
        mode: ``"all"`` or ``"any"`` evidence semantics.
        budgets: character budgets (labels ``@{B}c``).
        budget_results: per budget, ``qid -> items`` scored at that budget
            instead of ``results`` (e.g. a context assembled for that budget:
            :meth:`momoka.methods.base.Result.fit`); still cut strictly at it.

    Raises:
        InputError: a question with evidence has no entry in ``results``.
    """
    ks = tuple(int(k) for k in ks)
    budgets = tuple(int(b) for b in budgets)
    report = RetrievalReport(ks=ks, n_questions=0, n_skipped=0, budgets=budgets)
    totals: Counter = Counter()
    for q in questions:
        if not q.gold:
            report.n_skipped += 1
            continue
        if q.qid not in results:
            raise InputError(f"no retrieval results for question {q.qid!r}")
        row: dict[str, float] = {}
        for k in ks:
            for m, v in question_metrics(results[q.qid], q.gold, k, mode).items():
                row[f"{m}@{k}"] = v
        for b in budgets:
            at_b = budget_results[b][q.qid] if budget_results is not None else results[q.qid]
            for m, v in budget_metrics(at_b, q.gold, b, mode).items():
                row[f"{m}@{b}c"] = v
        report.per_question[q.qid] = row
        totals.update(row)
        report.n_questions += 1
    n = max(report.n_questions, 1)
    cuts = [(str(k), RETRIEVAL_METRICS) for k in ks] + \
        [(f"{b}c", RETRIEVAL_METRICS + ("returned", "chars")) for b in budgets]
    report.means = {f"{m}@{c}": totals[f"{m}@{c}"] / n for c, names in cuts for m in names}
    for c, _ in cuts:
        p, r = report.means[f"precision@{c}"], report.means[f"recall@{c}"]
        report.means[f"f1_pr@{c}"] = 2 * p * r / (p + r) if p + r > 0 else 0.0
    return report


# --- chunking statistics -----------------------------------------------------


def evidence_containment(
    chunk_spans: Mapping[str, Sequence[tuple[int, int]]], questions: Iterable
) -> dict[str, float | int]:
    """The chunking-error statistic of MC-indexing (appendix A).

    ``chunk_spans`` maps a doc_id to its chunks' ``(start, end)`` spans. Each
    gold evidence unit (overlapping gold spans merged) is counted as *contained*
    when one chunk holds it whole. Returns the counts and the fraction.
    """
    import bisect  # start-up: bisect

    index: dict[str, tuple[list[int], list[int]]] = {}
    for d, spans in chunk_spans.items():
        ss = sorted((int(s), int(e)) for s, e in spans)
        reach, best = [], -1
        for _, e in ss:
            best = max(best, e)
            reach.append(best)  # furthest end among chunks starting at or before this one
        index[d] = ([s for s, _ in ss], reach)
    total = contained = 0
    for q in questions:
        for d, s, e in merge_spans(q.gold):
            total += 1
            if d not in index:
                continue
            starts, reach = index[d]
            i = bisect.bisect_right(starts, s) - 1
            if i >= 0 and reach[i] >= e:
                contained += 1
    return {
        "evidence_units": total,
        "contained": contained,
        "fraction_contained": contained / total if total else float("nan"),
    }


# --- tables ---------------------------------------------------------------------


def format_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain-text table with aligned columns."""
    cells = [list(map(str, header))] + [list(map(str, r)) for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
