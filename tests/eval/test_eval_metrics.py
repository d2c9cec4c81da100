"""Retrieval and answer metrics against hand-computed values and independent references.

References: a brute-force character-set implementation of the retrieval
metrics written here; ``rouge-score`` for ROUGE-L; NLTK's ``sentence_bleu`` for
BLEU; SQuAD's published normalisation examples for EM/F1.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from momoka.errors import InputError
from momoka.eval import (
    bleu,
    evaluate_retrieval,
    evidence_containment,
    exact_match,
    merge_spans,
    normalize_answer,
    question_metrics,
    rouge_l,
    token_f1,
)
from momoka.eval.datasets import Question

# --- retrieval: hand-computed --------------------------------------------------


def test_single_chunk_question_by_hand():
    gold = [("d", 10, 20)]
    retrieved = [[("d", 0, 5)], [("d", 15, 30)], [("d", 8, 40)]]
    m1 = question_metrics(retrieved, gold, 1)
    assert m1 == {"recall": 0.0, "precision": 0.0, "mrr": 0.0, "f1": 0.0, "span_recall": 0.0, "complete": 0.0,
                  "hit": 0.0}
    m2 = question_metrics(retrieved, gold, 2)
    # item 2 overlaps 15..20 = 5 of 10 gold chars; not wholly inside.
    assert m2["recall"] == 1.0 and m2["precision"] == 0.5 and m2["mrr"] == 0.5
    assert m2["span_recall"] == 0.5 and m2["hit"] == 0.0
    assert m2["f1"] == pytest.approx(2 * 0.5 * 1.0 / 1.5)
    m3 = question_metrics(retrieved, gold, 3)
    assert m3["precision"] == pytest.approx(2 / 3) and m3["span_recall"] == 1.0 and m3["hit"] == 1.0


def test_all_versus_any_modes_by_hand():
    # Two separate gold units of 10 and 30 chars; only the first is retrieved.
    gold = [("d", 0, 10), ("d", 100, 130)]
    retrieved = [[("d", 0, 50)]]
    all_m = question_metrics(retrieved, gold, 1, "all")
    any_m = question_metrics(retrieved, gold, 1, "any")
    assert all_m["recall"] == 0.5 and all_m["span_recall"] == pytest.approx(10 / 40)
    assert any_m["recall"] == 1.0 and any_m["span_recall"] == 1.0
    assert all_m["hit"] == any_m["hit"] == 1.0
    # Complete coverage: "all" needs both units whole, "any" one of them.
    assert all_m["complete"] == 0.0 and any_m["complete"] == 1.0
    both = question_metrics([[("d", 0, 50)], [("d", 95, 125)], [("d", 125, 140)]], gold, 3, "all")
    assert both["recall"] == 1.0 and both["complete"] == 1.0  # 100..125 + 125..140 cover the second unit
    part = question_metrics([[("d", 0, 50)], [("d", 95, 125)]], gold, 2, "all")
    assert part["recall"] == 1.0 and part["complete"] == 0.0 and part["span_recall"] == pytest.approx(35 / 40)


def test_budget_keeps_the_prefix_that_fits_by_hand():
    from momoka.eval.metrics import budget_metrics, fit_budget

    gold = [("d", 300, 320)]
    # Item lengths 100, 250, 80, 400.
    ranked = [[("d", 0, 100)], [("d", 100, 350)], [("d", 500, 580)], [("d", 280, 680)]]
    assert fit_budget(ranked, 400) == ranked[:2]          # 100 + 250 = 350; + 80 = 430 > 400 ends the prefix
    assert fit_budget(ranked, 430) == ranked[:3]
    assert fit_budget(ranked, 99) == []                   # the first item alone is too long
    m = budget_metrics(ranked, gold, 400)
    # item 2 covers 300..320 wholly: recall 1, precision 1/2, mrr 1/2, complete, hit.
    assert (m["recall"], m["precision"], m["mrr"], m["span_recall"], m["complete"], m["hit"]) == \
        (1.0, 0.5, 0.5, 1.0, 1.0, 1.0)
    assert m["returned"] == 2 and m["chars"] == 350
    none = budget_metrics(ranked, gold, 99)
    assert none["recall"] == 0.0 and none["returned"] == 0 and none["chars"] == 0
    # A composite item counts all its members' characters.
    assert fit_budget([[("d", 0, 300), ("d", 400, 600)]], 499) == []
    with pytest.raises(InputError):
        fit_budget(ranked, 0)


def test_report_gives_budget_means_and_f1_both_ways():
    qs = [Question("a", "d", "?", (), (("d", 0, 10),)), Question("b", "d", "?", (), (("d", 100, 110),))]
    results = {"a": [[("d", 0, 50)], [("d", 60, 70)]],            # hit at rank 1
               "b": [[("d", 200, 260)], [("d", 300, 340)]]}        # nothing relevant
    rep = evaluate_retrieval(results, qs, ks=(2,), budgets=(60,))
    # k=2: a: P 1/2, R 1, F1 2/3; b: 0. Mean F1 = 1/3; mean P = 1/4, mean R = 1/2 -> F1 of means = 1/3 too.
    assert rep.means["f1@2"] == pytest.approx(1 / 3)
    assert rep.means["f1_pr@2"] == pytest.approx(2 * 0.25 * 0.5 / 0.75)
    # budget 60: a keeps 1 item (50 chars; +10 = 60 also fits -> 2 items); b keeps 1 (60 chars).
    assert rep.per_question["a"]["returned@60c"] == 2 and rep.per_question["b"]["returned@60c"] == 1
    assert rep.means["returned@60c"] == 1.5 and rep.means["chars@60c"] == 60
    assert rep.means["precision@60c"] == pytest.approx((1 / 2 + 0) / 2)
    assert rep.means["complete@60c"] == 0.5


def test_overlapping_gold_spans_merge_into_one_unit():
    # SQuAD style: three annotator spans of one answer.
    assert merge_spans([("d", 29, 41), ("d", 29, 36), ("d", 37, 41)]) == [("d", 29, 41)]
    # Touching spans stay separate units; other documents never merge.
    assert merge_spans([("d", 0, 5), ("d", 5, 9), ("e", 1, 3)]) == [("d", 0, 5), ("d", 5, 9), ("e", 1, 3)]


def test_composite_item_is_relevant_when_any_member_is():
    gold = [("a", 50, 60)]
    composite = [("a", 0, 10), ("a", 55, 70)]
    m = question_metrics([composite], gold, 1)
    assert m["precision"] == 1.0 and m["span_recall"] == 0.5


def test_cross_document_evidence():
    gold = [("a", 0, 10), ("b", 0, 10)]
    m = question_metrics([[("a", 0, 10)], [("c", 0, 10)]], gold, 2)
    assert m["recall"] == 0.5 and m["precision"] == 0.5


def test_bad_arguments():
    with pytest.raises(InputError):  # k must be positive
        question_metrics([], [("d", 0, 1)], 0)
    with pytest.raises(InputError):  # no gold evidence
        question_metrics([], [], 1)
    with pytest.raises(InputError):  # unknown mode
        question_metrics([], [("d", 0, 1)], 1, "some")


def test_evaluate_retrieval_averages_and_sums():
    qs = [
        Question("q1", "d", "?", ("x",), (("d", 0, 10),)),
        Question("q2", "d", "?", ("x",), (("d", 100, 110),)),
        Question("q3", "d", "?", ("x",), ()),  # no evidence: skipped
    ]
    results = {"q1": [[("d", 0, 10)]], "q2": [[("d", 0, 10)], [("d", 100, 200)]]}
    rep = evaluate_retrieval(results, qs, ks=(1, 2))
    assert rep.n_questions == 2 and rep.n_skipped == 1
    assert rep.means["mrr@1"] == 0.5 and rep.means["mrr@2"] == pytest.approx(0.75)
    assert rep.means["precision@2"] == pytest.approx((0.5 + 0.5) / 2)
    assert rep.sums["mrr"] == pytest.approx(1.25)
    assert "mrr" in rep.table()
    with pytest.raises(InputError):  # a question with evidence but no results
        evaluate_retrieval({}, qs[:1])


# --- retrieval: brute-force reference over character sets --------------------------


def _ref_metrics(retrieved, gold, k, mode):
    gold_chars = {(d, i) for d, s, e in gold for i in range(s, e)}
    # units = connected components of overlapping spans (brute force)
    units = []
    for span in sorted(gold):
        chars = {(span[0], i) for i in range(span[1], span[2])}
        for u in units:
            if u & chars:
                u |= chars
                break
        else:
            units.append(chars)
    merged = True
    while merged:
        merged = False
        for i in range(len(units)):
            for j in range(i + 1, len(units)):
                if units[i] & units[j]:
                    units[i] |= units.pop(j)
                    merged = True
                    break
            if merged:
                break
    top = retrieved[:k]
    item_chars = [{(d, i) for d, s, e in item for i in range(s, e)} for item in top]
    all_chars = set().union(*item_chars) if item_chars else set()
    rel = [bool(c & gold_chars) for c in item_chars]
    precision = sum(rel) / k
    mrr = next((1 / (i + 1) for i, r in enumerate(rel) if r), 0.0)
    touched = [bool(u & all_chars) for u in units]
    cov = [len(u & all_chars) / len(u) for u in units]
    if mode == "all":
        recall = sum(touched) / len(units)
        span_recall = len(gold_chars & all_chars) / len(gold_chars)
    else:
        recall = float(any(touched))
        span_recall = max(cov)
    hit = float(
        any(u <= {(d, i) for i in range(s, e)} for u in units for item in top for d, s, e in item)
    )
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return dict(recall=recall, precision=precision, mrr=mrr, f1=f1, span_recall=span_recall, hit=hit)


_span = st.tuples(st.sampled_from("ab"), st.integers(0, 40), st.integers(1, 15)).map(
    lambda t: (t[0], t[1], t[1] + t[2])
)


@settings(max_examples=150, deadline=None)
@given(
    gold=st.lists(_span, min_size=1, max_size=4),
    retrieved=st.lists(st.lists(_span, min_size=1, max_size=3), max_size=6),
    k=st.integers(1, 6),
    mode=st.sampled_from(["all", "any"]),
)
def test_metrics_match_brute_force_reference(gold, retrieved, k, mode):
    got = question_metrics(retrieved, gold, k, mode)
    want = _ref_metrics(retrieved, gold, k, mode)
    for key in want:
        assert got[key] == pytest.approx(want[key]), key


@settings(max_examples=100, deadline=None)
@given(
    chunks=st.lists(st.tuples(st.integers(0, 60), st.integers(1, 30)), min_size=1, max_size=8),
    gold=st.lists(st.tuples(st.integers(0, 70), st.integers(1, 10)), min_size=1, max_size=5),
)
def test_evidence_containment_matches_brute_force(chunks, gold):
    spans = [(s, s + n) for s, n in chunks]
    q = Question("q", "d", "?", (), tuple(("d", s, s + n) for s, n in gold))
    got = evidence_containment({"d": spans}, [q])
    units = merge_spans(q.gold)
    want = sum(any(cs <= s and e <= ce for cs, ce in spans) for _, s, e in units)
    assert got["evidence_units"] == len(units) and got["contained"] == want


# --- answer metrics ---------------------------------------------------------------------


def test_squad_normalisation_and_scores_by_hand():
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize_answer("an apple, a pear and the fig") == "apple pear and fig"
    assert exact_match("the Denver Broncos", ["Denver Broncos", "Broncos"]) == 1.0
    assert exact_match("Denver", ["Denver Broncos"]) == 0.0
    # pred tokens [denver, broncos, won], gold [denver, broncos]: P=2/3 R=1 F1=0.8
    assert token_f1("Denver Broncos won", ["Denver Broncos"]) == pytest.approx(0.8)
    assert token_f1("nothing", ["Denver Broncos", "x"]) == 0.0
    assert token_f1("", [""]) == 1.0


def test_rouge_l_matches_rouge_score():
    rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer")
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    pairs = [
        ("the cat sat on the mat", "the cat is on the mat"),
        ("police killed the gunman", "the gunman was shot down by police"),
        ("a b c d e", "e d c b a"),
        ("completely different", "nothing shared here"),
        ("Oil prices quadrupled in 1973 and 1974", "In 1973-74 oil prices rose four-fold"),
    ]
    for pred, ref in pairs:
        assert rouge_l(pred, ref) == pytest.approx(scorer.score(ref, pred)["rougeL"].fmeasure)


def test_rouge_l_by_hand():
    # LCS of [a b c d] and [a c d e] is [a c d]: P = R = 3/4.
    assert rouge_l("a b c d", "a c d e") == pytest.approx(0.75)


def test_bleu_matches_nltk():
    bleu_score = pytest.importorskip("nltk.translate.bleu_score")
    cases = [
        ("the cat is on the mat".split(), ["the cat sat on the mat".split(), "there is a cat on the mat".split()]),
        ("it is a guide to action which ensures that the military always obeys the commands of the party".split(),
         ["it is a guide to action that ensures that the military will forever heed party commands".split(),
          "it is the guiding principle which guarantees the military forces always being under the command of the party".split()]),
        ("a b c d e f".split(), ["a b c d e f g h i j".split()]),
    ]
    chencherry = bleu_score.SmoothingFunction()
    for hyp, refs in cases:
        for n in range(1, 5):
            w = tuple([1.0 / n] * n)
            ref_plain = bleu_score.sentence_bleu(refs, hyp, weights=w)
            assert bleu(hyp, refs, max_n=n) == pytest.approx(ref_plain, abs=1e-9)
            ref_smooth = bleu_score.sentence_bleu(refs, hyp, weights=w, smoothing_function=chencherry.method1)
            assert bleu(hyp, refs, max_n=n, smoothing="epsilon") == pytest.approx(ref_smooth, abs=1e-9)


def test_bleu_by_hand():
    # hyp "a b" vs ref "a b c d": p1 = 1, p2 = 1, BP = exp(1 - 4/2) = e^-1.
    assert bleu("a b", "a b c d", max_n=2) == pytest.approx(math.exp(-1))
    assert bleu("x y", "a b", max_n=1) == 0.0
    with pytest.raises(InputError):
        bleu("a", [], max_n=1)


def test_contains_answer_normalised_whole_words():
    from momoka.eval.metrics import contains_answer

    # SQuAD normalisation on both sides: case, punctuation and articles do not matter ...
    assert contains_answer("It began in October, 1973, when OAPEC ...", ["october 1973"]) == 1.0
    assert contains_answer("risen to nearly $12 globally", ["Nearly $12"]) == 1.0
    assert contains_answer("The Oil Shock.", ["an oil shock"]) == 1.0
    # ... but words must match whole: "1979" is not in "19790", nor "oil" in "soil"
    assert contains_answer("in 19790 the soil", ["1979", "oil"]) == 0.0

