"""Chunker evaluation: containment of gold evidence against a hand-built case and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys


from momoka.eval import Dataset, DocRecord, Question
from momoka.eval.chunking import evaluate_chunker, length_stats
from momoka.text import make_chunks


def _halves(doc):
    n = len(doc.text)
    return make_chunks(doc, [(0, n // 2), (n // 2, n)])


def test_containment_by_hand(tmp_path):
    text = "Alpha beta gamma delta. " * 4  # 96 chars, halves at 48
    ds = Dataset(
        "toy",
        tmp_path,
        [DocRecord("d", "Toy", text)],
        [
            Question("q1", "d", "?", (), (("d", 0, 10),)),  # inside the first half
            Question("q2", "d", "?", (), (("d", 40, 60),)),  # cut by the boundary at 48
            Question("q3", "d", "?", (), (("d", 50, 96),)),  # inside the second half
        ],
    )
    rep = evaluate_chunker(ds, _halves)
    assert rep["evidence_units"] == 3 and rep["contained"] == 2
    assert rep["chunks"] == 2 and rep["chars"]["mean"] == 48.0


def test_length_stats_by_hand():
    s = length_stats([1, 2, 3, 4, 10])
    assert s["count"] == 5 and s["mean"] == 4.0 and s["median"] == 3.0 and s["max"] == 10.0
    assert length_stats([]) == {"count": 0}


def test_cli_eval_chunking_on_real_set(shared_data, tmp_path):
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "momoka", "eval-chunking", "--data", str(shared_data / "leval_qasper"),
         "--chunker", "paragraph", "--out", str(out)],
        capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(out.read_text())
    assert rep["evidence_units"] > 0 and 0.0 <= rep["fraction_contained"] <= 1.0
    # Answers in Qasper are short verbatim strings: paragraph chunks hold nearly all of them.
    assert rep["fraction_contained"] > 0.9


def test_cli_eval_chunking_bad_data_dir(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "momoka", "eval-chunking", "--data", str(tmp_path / "missing")],
        capture_output=True, text=True,
    )
    assert proc.returncode != 0 and "no data set" in proc.stderr and proc.stderr.count("\n") == 1


def test_cli_eval_chunking_windows_coverage_and_correlations(shared_data, tmp_path):
    """``--windows`` samples each document for BC; each chunker gets the default retriever's coverage at
    ``--budget`` and the report the metric's correlation with it, recomputed here with scipy."""
    import numpy as np
    from scipy.stats import spearmanr

    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "momoka", "eval-chunking", "--data", str(shared_data / "leval_qasper"),
         "--chunker", "fixed,recursive,sentence", "--metrics", "bc", "--docs", "3", "--windows", "1",
         "--group-chars", "700", "--target-chars", "300", "--budget", "2000", "--out", str(out)],
        capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert "complete@2000c" in proc.stdout and "within documents" in proc.stdout
    rep = json.loads(out.read_text())
    assert rep["windows"] == 1 and rep["budget"] == 2000 and rep["documents"] == 3
    qdocs = rep["question_docs"]
    means, covs = [], []
    for name, row in rep["chunkers"].items():
        assert {d for ds in qdocs.values() for d in ds} <= set(row["per_document"])
        assert all(v["windows"] == 1 for v in row["per_document"].values())
        assert len(row["per_question"]) == row["questions"] == len(qdocs) > 0
        assert row["complete"] == sum(row["per_question"].values()) / len(row["per_question"])
        assert row["complete_interval"]["low"] <= row["complete"] <= row["complete_interval"]["high"]
        docs = sorted({d for ds in qdocs.values() for d in ds})
        means.append(np.mean([row["per_document"][d]["bc"] for d in docs]))
        covs.append(np.mean([row["per_question"][q] for q, ds in qdocs.items() for _ in ds]))
    corr = rep["correlations"]["metrics"]["bc"]
    want = spearmanr(means, covs).statistic
    if np.isnan(want):
        assert np.isnan(corr["across"]["r"])
    else:
        assert abs(corr["across"]["r"] - want) < 1e-9


def test_compare_chunkers_passes_retriever_options(tmp_path):
    """``-o hybrid.KEY=VALUE`` reaches the retriever that scores each chunker (and is kept in the report); a
    chunker's own options stay with the chunker."""
    import pytest

    from momoka.errors import ConfigError
    from momoka.eval.chunk_compare import compare_chunkers
    from tests.store.conftest import HashEmbedder

    text = ("The harbor opened in 1850. Ships carried grain and timber. Trade grew quickly. "
            "In spring, a storm destroyed the pier. Repairs took two years. ") * 3
    ds = Dataset("toy", tmp_path, [DocRecord("d", "Harbor", text), DocRecord("e", "Pier", text[40:])],
                 [Question("q1", "d", "When did the harbor open?", (), (("d", 0, 26),))], evidence_mode="any")
    import momoka.eval.runner as runner

    seen = []
    real = runner.run_eval

    def spy(*a, **kw):
        seen.append(kw.get("options"))
        return real(*a, embedder=HashEmbedder(), **kw)

    mp = pytest.MonkeyPatch()
    mp.setattr(runner, "run_eval", spy)
    try:
        rep = compare_chunkers(ds, ["fixed"], metrics=[], target_chars=60,
                               options={"hybrid": {"document_weight": 0}, "fixed": {}})
        assert seen == [{"hybrid": {"document_weight": 0}}]
        assert rep["retriever_options"] == {"hybrid": {"document_weight": 0}}
        assert rep["chunkers"]["fixed"]["questions"] == 1
        with pytest.raises(ConfigError, match="document_weight"):
            compare_chunkers(ds, ["fixed"], metrics=[], target_chars=60, options={"hybrid": {"document_weight": -1}})
    finally:
        mp.undo()
