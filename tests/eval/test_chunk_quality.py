"""MoC chunk-quality metrics against the reference formulas computed plainly (no KV reuse, per pair)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from momoka.errors import ConfigError
from momoka.eval.chunk_quality import boundary_clarity, chunk_stickiness, quality_of_chunks, stickiness_entropy


def ref_cs(sum_nll, n_tok, K):
    """Reference CS (relation_eval.py): sum_nll[i][j] = summed NLL of chunk j given chunk i (i == j: alone)."""
    n = len(n_tok)
    deg = {}
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            w = math.exp(sum_nll[i][j] / n_tok[j]) / math.exp(sum_nll[j][j] / n_tok[j])
            if w > K:
                deg[i] = deg.get(i, 0) + 1
                deg[j] = deg.get(j, 0) + 1
    total = sum(deg.values())
    if total == 0:
        return 0.0
    return -sum((d / total) * math.log2(d / total) for d in deg.values())


CHUNKS = ["The harbor opened in 1850 and ships carried grain.",
          "Trade grew quickly as more ships arrived.",
          "A storm in spring destroyed the pier."]


@pytest.fixture(scope="module")
def lm():
    from momoka.models import default_causal_lm

    try:
        return default_causal_lm()
    except Exception as exc:  # pragma: no cover
        pytest.skip(f"default causal LM unavailable: {exc}")


def test_stickiness_entropy_hand_computed():
    # edges 0->1 and 1->0 and 0->2: degrees 0:3, 1:2, 2:1 -> p = 1/2, 1/3, 1/6
    keep = np.zeros((3, 3), bool)
    keep[0, 1] = keep[1, 0] = keep[0, 2] = True
    want = -(0.5 * math.log2(0.5) + (1 / 3) * math.log2(1 / 3) + (1 / 6) * math.log2(1 / 6))
    assert stickiness_entropy(keep) == pytest.approx(want)
    assert stickiness_entropy(np.zeros((4, 4), bool)) == 0.0


def _nll(lm, q, d=None):
    lp = lm.token_logprobs(q, context=d)
    return float(-lp.sum()), len(lp)


def test_bc_and_cs_match_plain_per_pair_scoring(lm):
    # BC (log space): mean over consecutive pairs of meanNLL(q|d) / meanNLL(q), each pair run in full
    pairs = []
    for d, q in zip(CHUNKS, CHUNKS[1:]):
        a, n = _nll(lm, q, d)
        b, _ = _nll(lm, q)
        pairs.append((a / n) / (b / n))
    assert boundary_clarity(lm, CHUNKS) == pytest.approx(np.mean(pairs), rel=1e-4)
    assert boundary_clarity(lm, CHUNKS, reuse_kv=False) == pytest.approx(np.mean(pairs), rel=1e-4)
    # CS (reference rule): the reference's summed-NLL matrix and degree entropy, K chosen to keep some edges
    n = len(CHUNKS)
    S = [[0.0] * n for _ in range(n)]
    ntok = [0] * n
    for j in range(n):
        S[j][j], ntok[j] = _nll(lm, CHUNKS[j])
        for i in range(n):
            if i != j:
                S[i][j] = _nll(lm, CHUNKS[j], CHUNKS[i])[0]
    ratios = sorted(math.exp(S[i][j] / ntok[j]) / math.exp(S[j][j] / ntok[j]) for i in range(n) for j in range(n) if i != j)
    K = (ratios[2] + ratios[3]) / 2  # between two ratios: a non-trivial graph
    got = chunk_stickiness(lm, CHUNKS, K=K)
    assert got["edge_rule"] == "reference"
    assert got["complete"] == pytest.approx(ref_cs(S, ntok, K), abs=1e-6)
    # the paper's rule keeps the complementary pairs (Edge = 1 - ratio > 1 - K)
    paper = chunk_stickiness(lm, CHUNKS, K=1 - K, edge_rule="paper")
    keep = np.zeros((n, n), bool)
    for i in range(n):
        for j in range(n):
            if i != j:
                keep[i, j] = 1 - math.exp(S[i][j] / ntok[j]) / math.exp(S[j][j] / ntok[j]) > 1 - K
    assert paper["complete"] == pytest.approx(stickiness_entropy(keep), abs=1e-6)
    assert paper["sequential"] == pytest.approx(stickiness_entropy(np.triu(keep, 1)), abs=1e-6)


def test_quality_rejects_unknown_metric_and_rule(lm):
    with pytest.raises(ConfigError):
        quality_of_chunks("ab", [(0, 1), (1, 2)], metrics=["xx"], lm=lm)
    with pytest.raises(ConfigError):
        chunk_stickiness(lm, CHUNKS, edge_rule="other")


def test_window_runs_hand_computed():
    from momoka.eval.chunk_quality import window_runs

    spans = [(0, 10), (10, 25), (25, 40), (40, 50), (50, 70), (70, 100)]
    # 3 windows of 40 over [0, 100): starts 0, 30, 60 -> [0, 40), [30, 70), [60, 100)
    assert window_runs(spans, 100, 3, 40) == [[0, 1, 2], [3, 4], [5]]
    # a short document is one window; repeated runs are kept once
    assert window_runs(spans[:2], 25, 4, 40) == [[0, 1]]
    assert window_runs([(0, 90), (90, 100)], 100, 2, 40) == [[1]]
    with pytest.raises(ConfigError):
        window_runs(spans, 100, 0, 40)


def test_windowed_quality_is_the_metrics_of_the_windows(lm):
    # six chunks; two windows of 110 chars: the first holds chunks 0-1, the last chunks 4-5
    text = " ".join(CHUNKS + ["The council rebuilt it in stone.", "Grain prices fell that year.",
                              "Sailors moved to the new docks."])
    cuts = [0]
    for c in CHUNKS + ["The council rebuilt it in stone.", "Grain prices fell that year."]:
        cuts.append(cuts[-1] + len(c) + 1)
    spans = list(zip(cuts, cuts[1:] + [len(text)]))
    from momoka.eval.chunk_quality import window_runs

    runs = window_runs(spans, len(text), 2, 110)
    assert len(runs) == 2 and all(len(r) >= 2 for r in runs)
    got = quality_of_chunks(text, spans, metrics=["bc", "cs"], lm=lm, group_chars=110, windows=2)
    # BC: plain per-pair scoring of the consecutive pairs inside the windows
    pairs = []
    for r in runs:
        for k in r[:-1]:
            d, q = text[slice(*spans[k])], text[slice(*spans[k + 1])]
            a, n = _nll(lm, q, d)
            b, _ = _nll(lm, q)
            pairs.append(a / b)
    assert got["windows"] == 2
    assert got["bc"] == pytest.approx(np.mean(pairs), rel=1e-4)
    # CS: the mean of each window's stickiness
    cs = [chunk_stickiness(lm, [text[slice(*spans[k])] for k in r]) for r in runs]
    assert got["cs_complete"] == pytest.approx(np.mean([c["complete"] for c in cs]), abs=1e-6)
    assert got["cs_sequential"] == pytest.approx(np.mean([c["sequential"] for c in cs]), abs=1e-6)
    with pytest.raises(ConfigError):
        quality_of_chunks(text, spans, metrics=["bc"], lm=lm, windows=2)
