"""Answer metrics: SQuAD exact match and token F1 (with SQuAD's answer normalisation, best over the gold answers),
ROUGE-L (LCS F-measure) and sentence BLEU-1..4 (clipped n-gram precision with brevity penalty, multiple
references, optional smoothing).

Public as :mod:`momoka.eval.metrics` (and :mod:`momoka.eval`); this module sits below both ``eval`` and
``methods``, whose readers score their answers with it.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from typing import Sequence

from .errors import InputError


# --- answer metrics -------------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)


def normalize_answer(s: str) -> str:
    """SQuAD normalisation: lower case, drop punctuation and articles, fold spaces."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def exact_match(prediction: str, answers: Sequence[str]) -> float:
    """1.0 if the normalised prediction equals a normalised gold answer."""
    if not answers:
        raise InputError("exact_match needs at least one gold answer")
    p = normalize_answer(prediction)
    return float(any(p == normalize_answer(a) for a in answers))


def _f1_tokens(pred: list[str], gold: list[str]) -> float:
    if not pred or not gold:
        return float(pred == gold)
    common = Counter(pred) & Counter(gold)
    same = sum(common.values())
    if same == 0:
        return 0.0
    p, r = same / len(pred), same / len(gold)
    return 2 * p * r / (p + r)


def token_f1(prediction: str, answers: Sequence[str]) -> float:
    """SQuAD token F1 of the prediction against the best gold answer."""
    if not answers:
        raise InputError("token_f1 needs at least one gold answer")
    pred = normalize_answer(prediction).split()
    return max(_f1_tokens(pred, normalize_answer(a).split()) for a in answers)


_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens (letters and digits of any script)."""
    return _NON_WORD.sub(" ", text.lower()).split()


def _lcs(a: Sequence[str], b: Sequence[str]) -> int:
    if not a or not b:
        return 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b, 1):
            cur[j] = prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1])
        prev = cur
    return prev[-1]


def rouge_l(prediction: str, references: str | Sequence[str]) -> float:
    """ROUGE-L F-measure (LCS over word tokens), best over the references."""
    refs = [references] if isinstance(references, str) else list(references)
    if not refs:
        raise InputError("rouge_l needs at least one reference")
    pred = tokenize(prediction)
    best = 0.0
    for ref in refs:
        r = tokenize(ref)
        lcs = _lcs(pred, r)
        if lcs == 0:
            continue
        p, rc = lcs / len(pred), lcs / len(r)
        best = max(best, 2 * p * rc / (p + rc))
    return best


def _ngrams(tokens: Sequence[str], n: int) -> Counter:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def bleu(
    prediction: str | Sequence[str],
    references: str | Sequence[str] | Sequence[Sequence[str]],
    max_n: int = 4,
    smoothing: str | None = None,
) -> float:
    """Sentence BLEU-``max_n`` (uniform weights over 1..max_n).

    Clipped n-gram precisions against all references, brevity penalty with the
    reference length closest to the prediction's. ``smoothing="epsilon"`` adds
    0.1 to zero numerators (Chen and Cherry's method 1); without smoothing a
    zero precision gives 0. Strings are tokenised with :func:`tokenize`.
    """
    if max_n < 1:
        raise InputError("max_n must be at least 1")
    if smoothing not in (None, "epsilon"):
        raise InputError(f"unknown smoothing {smoothing!r}")
    hyp = tokenize(prediction) if isinstance(prediction, str) else list(prediction)
    if isinstance(references, str):
        refs = [tokenize(references)]
    else:
        refs = [tokenize(r) if isinstance(r, str) else list(r) for r in references]
    if not refs:
        raise InputError("bleu needs at least one reference")
    if not hyp:
        return 0.0
    log_sum = 0.0
    for n in range(1, max_n + 1):
        counts = _ngrams(hyp, n)
        denom = sum(counts.values())
        max_ref: Counter = Counter()
        for r in refs:
            for g, c in _ngrams(r, n).items():
                max_ref[g] = max(max_ref[g], c)
        num = sum(min(c, max_ref[g]) for g, c in counts.items())
        if denom == 0:
            return 0.0
        if num == 0:
            if smoothing is None:
                return 0.0
            num = 0.1
        log_sum += math.log(num / denom) / max_n
    hl = len(hyp)
    closest = min((abs(len(r) - hl), len(r)) for r in refs)[1]
    bp = 1.0 if hl > closest else math.exp(1 - closest / hl)
    return bp * math.exp(log_sum)


def answer_metrics(prediction: str, answers: Sequence[str]) -> dict[str, float]:
    """EM, token F1, ROUGE-L and BLEU-1..4 of one prediction."""
    out = {
        "em": exact_match(prediction, answers),
        "f1": token_f1(prediction, answers),
        "rouge_l": rouge_l(prediction, answers),
    }
    for n in range(1, 5):
        out[f"bleu{n}"] = bleu(prediction, answers, max_n=n)
    return out


def contains_answer(text: str, answers: Sequence[str]) -> float:
    """1.0 if a normalised gold answer occurs in the normalised ``text`` (SQuAD normalisation, whole words)."""
    if not answers:
        raise InputError("contains_answer needs at least one gold answer")
    t = f" {normalize_answer(text)} "
    return float(any(a and f" {a} " in t for a in (normalize_answer(x) for x in answers)))
