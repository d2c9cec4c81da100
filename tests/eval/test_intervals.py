"""Bootstrap intervals (momoka.eval.intervals) against scipy's bootstrap, the normal approximation and hand values.

Tried: the paired interval of a margin on 300 Bernoulli-like questions against
``scipy.stats.bootstrap(paired=True, method="percentile")`` (ends within 0.01);
the interval of a mean on 4,000 normal draws against mean +- 1.96 sd / sqrt(n);
constant differences (the interval is that constant), one question, pairing
that removes shared variance (narrower than either method's own interval),
the seed (same seed, same interval), bad input (lengths differ, NaN, empty,
too few resamples); and ``run_eval``'s report: each margin's mean is the
difference of the two retrievers' reported means, on real SQuAD questions
with BM25 and hybrid; per group of a question field (``group_by``), the intervals
and margins of a run over that group's questions alone.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from momoka.errors import ConfigError, InputError
from momoka.eval import bootstrap_mean, load_dataset, paired_bootstrap
from momoka.eval.datasets import Dataset
from momoka.eval.runner import format_report, run_eval

scipy_stats = pytest.importorskip("scipy.stats")


def test_paired_margin_matches_scipy_percentile_bootstrap():
    rng = np.random.default_rng(7)
    a = (rng.random(300) < 0.82).astype(float)  # complete coverage of method A per question
    b = np.where(rng.random(300) < 0.85, a, 1 - a)  # method B agrees with A on 85 % of the questions
    ours = paired_bootstrap(a, b, n_resamples=20_000, seed=1)
    ref = scipy_stats.bootstrap((a, b), lambda x, y, axis=-1: np.mean(x, axis=axis) - np.mean(y, axis=axis),
                                paired=True, vectorized=True, method="percentile", n_resamples=20_000,
                                confidence_level=0.95, random_state=np.random.default_rng(2))
    assert ours.mean == pytest.approx(a.mean() - b.mean())
    assert ours.low == pytest.approx(ref.confidence_interval.low, abs=0.01)
    assert ours.high == pytest.approx(ref.confidence_interval.high, abs=0.01)
    assert ours.n == 300 and ours.confidence == 0.95


def test_mean_interval_matches_normal_approximation():
    x = np.random.default_rng(3).normal(0.6, 0.2, size=4000)
    iv = bootstrap_mean(x)
    half = 1.96 * x.std(ddof=1) / np.sqrt(x.size)
    assert iv.low == pytest.approx(x.mean() - half, abs=0.1 * half)
    assert iv.high == pytest.approx(x.mean() + half, abs=0.1 * half)


def test_hand_values_constant_difference_and_one_question():
    iv = paired_bootstrap([1, 0, 1, 1], [0.5, -0.5, 0.5, 0.5])  # every difference is 0.5
    assert (iv.mean, iv.low, iv.high) == (0.5, 0.5, 0.5) and iv.excludes_zero
    one = bootstrap_mean([0.25])
    assert (one.mean, one.low, one.high, one.n) == (0.25, 0.25, 0.25, 1)
    tie = paired_bootstrap([1, 0, 1, 0], [1, 0, 1, 0])
    assert (tie.low, tie.high) == (0.0, 0.0) and not tie.excludes_zero


def test_pairing_removes_shared_variance():
    rng = np.random.default_rng(11)
    difficulty = rng.random(200)  # shared by both methods: easy questions are easy for both
    a = difficulty + rng.normal(0.05, 0.02, 200)
    b = difficulty
    paired = paired_bootstrap(a, b)
    alone_a, alone_b = bootstrap_mean(a), bootstrap_mean(b)
    assert paired.high - paired.low < 0.2 * (alone_a.high - alone_a.low)
    assert paired.excludes_zero  # a 0.05 margin on every question is not noise once paired
    # unpaired, the two intervals overlap: the margin would look like noise
    assert alone_a.low < alone_b.high


def test_seed_reproducible_and_resamples_matter():
    x = np.random.default_rng(5).random(50)
    assert bootstrap_mean(x, seed=4) == bootstrap_mean(x, seed=4)
    assert bootstrap_mean(x, seed=4) != bootstrap_mean(x, seed=5)


@pytest.mark.parametrize("call, err", [
    (lambda: paired_bootstrap([1, 0], [1, 0, 1]), InputError),
    (lambda: bootstrap_mean([0.5, float("nan")]), InputError),
    (lambda: bootstrap_mean([]), InputError),
    (lambda: bootstrap_mean([[1, 2], [3, 4]]), InputError),
    (lambda: bootstrap_mean([1.0, 0.0], n_resamples=10), ConfigError),
    (lambda: bootstrap_mean([1.0, 0.0], confidence=1.0), ConfigError),
])
def test_bad_input_is_a_clear_error(call, err):
    with pytest.raises(err):
        call()


@pytest.mark.data
@pytest.mark.models
def test_eval_report_margins_are_paired_differences(shared_data):
    # the first 40 SQuAD questions with evidence over their own documents, BM25 then hybrid
    report = run_eval(shared_data / "squad_v1_dev_half_a", ["bm25", "hybrid"], limit=40, documents="questions")
    key = "complete@5000c"
    means = {n: r["item"]["means"][key] for n, r in report["retrievers"].items()}
    m = report["margins"]["hybrid"]
    assert m["over"] == "bm25" and m[key]["n"] == 40
    assert m[key]["mean"] == pytest.approx(means["hybrid"] - means["bm25"])
    assert m[key]["low"] <= m[key]["mean"] <= m[key]["high"]
    for name, iv in report["intervals"].items():
        assert iv[key]["mean"] == pytest.approx(means[name]) and iv[key]["low"] <= means[name] <= iv[key]["high"]
    text = format_report(report)
    assert "95 % bootstrap intervals over the 40 questions" in text and "complete@5000c - bm25" in text


@pytest.mark.data
@pytest.mark.models
def test_eval_group_margins_equal_a_run_on_the_groups_questions_alone(shared_data, tmp_path):
    # 30 SQuAD questions labelled by a field; each group's intervals and margins must be those of a run over
    # that group's questions alone (same documents, same store)
    ds = load_dataset(shared_data / "squad_v1_dev_half_a")
    qs = [dataclasses.replace(q, extra={**q.extra, "half": "odd" if i % 2 else "even"})
          for i, q in enumerate([q for q in ds.questions if q.gold][:30])]
    wanted = {q.doc_id for q in qs}
    docs = [d for d in ds.documents if d.doc_id in wanted]

    def subset(questions):
        return Dataset(ds.name, ds.path, docs, questions, ds.evidence_mode, ds.evidence_mode_source)

    store = tmp_path / "store"
    report = run_eval(subset(qs), ["bm25", "hybrid"], store=store, group_by="half")
    groups = report["groups"]
    assert groups["field"] == "half" and sorted(groups["values"]) == ["even", "odd"]
    for value in ("even", "odd"):
        alone = run_eval(subset([q for q in qs if q.extra["half"] == value]), ["bm25", "hybrid"], store=store)
        g = groups["values"][value]
        assert g["n"] == 15 == alone["n_questions"]
        assert g["intervals"] == alone["intervals"] and g["margins"] == alone["margins"]
    assert "per half (complete coverage at 5000 characters)" in format_report(report)
    # one retriever: the per-value table still prints, with its intervals and no margin column
    one = run_eval(subset(qs), ["hybrid"], store=store, group_by="half")
    text = format_report(one)
    assert "per half (complete coverage at 5000 characters)" in text and " - hybrid" not in text.split("per half")[1]
    for value in ("even", "odd"):
        assert one["groups"]["values"][value]["intervals"]["hybrid"] == groups["values"][value]["intervals"]["hybrid"]
