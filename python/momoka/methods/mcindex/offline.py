"""The offline back-ends of MC-indexing's keyword and summary views (no LLM).

* :func:`keyphrases`: KeyBERT-style keyphrases. Candidates are the chunk's own
  1-3-grams that neither start nor end with a stop word (the ``top``
  most frequent, longer n-grams weighted up); each candidate and the chunk are
  embedded with the index's embedder, and Maximal Marginal Relevance picks
  ``n`` phrases close to the chunk and far from each other
  (``(1 - diversity) * sim(phrase, chunk) - diversity * max sim(phrase, picked)``,
  as KeyBERT's ``use_mmr``).
* :func:`extractive_summary`: the most central sentences (cosine to the mean of
  the chunk's normalised sentence vectors), taken in order of centrality while
  they fit in ``max_words`` words and ``max_sentences`` sentences (the most
  central one is kept even when longer), printed in document order (the paper's summary prompt asks for at most 10 sentences or
  200 words).

Markup tags (``<P>``, ``<Li>`` of HTML-ish pages) are removed before either runs.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from ...store.bm25 import ENGLISH_STOPWORDS

from ...text.segment import split_sentences

__all__ = ["STOPWORDS", "candidates", "clean", "extractive_summary", "keyphrases", "mmr"]

_TAG = re.compile(r"<[^<>]{0,200}>")
_WORD = re.compile(r"\w[\w'\-]*", re.UNICODE)

#: English stop words (a candidate never starts or ends with one): BM25's list plus words that
#: make poor keyphrases in papers and articles.
STOPWORDS = frozenset(ENGLISH_STOPWORDS) | frozenset(
    "also edit let however may might must shall one two three via et al using used use based".split())

Embed = Callable[[Sequence[str]], np.ndarray]


def clean(text: str) -> str:
    """``text`` without markup tags, spaces folded within lines."""
    t = _TAG.sub(" ", text)
    return "\n".join(" ".join(line.split()) for line in t.splitlines() if line.strip())


def candidates(text: str, *, max_n: int = 3, top: int = 40) -> list[str]:
    """The chunk's candidate keyphrases (see the module docstring), best first."""
    words = _WORD.findall(text)
    low = [w.lower() for w in words]
    score: Counter = Counter()
    shown: dict[str, str] = {}
    first: dict[str, int] = {}
    for n in range(1, max_n + 1):
        for i in range(len(words) - n + 1):
            a, b = low[i], low[i + n - 1]
            if a in STOPWORDS or b in STOPWORDS or len(a) < 2 or len(b) < 2:
                continue
            if all(w.isdigit() for w in low[i : i + n]):
                continue
            key = " ".join(low[i : i + n])
            score[key] += n
            shown.setdefault(key, " ".join(words[i : i + n]))
            first.setdefault(key, i)
    order = sorted(score, key=lambda k: (-score[k], first[k]))
    return [shown[k] for k in order[:top]]


def _unit(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float32)
    n = np.linalg.norm(m, axis=-1, keepdims=True)
    return m / np.maximum(n, 1e-12)


def mmr(doc_vec: np.ndarray, cand_vecs: np.ndarray, n: int, diversity: float) -> list[int]:
    """Maximal Marginal Relevance: indices of ``n`` candidates, in the order picked."""
    if len(cand_vecs) == 0:
        return []
    c = _unit(cand_vecs)
    d = _unit(doc_vec.reshape(1, -1))[0]
    to_doc = c @ d
    sim = c @ c.T
    picked = [int(np.argmax(to_doc))]
    rest = [i for i in range(len(c)) if i != picked[0]]
    while rest and len(picked) < n:
        r = np.asarray(rest)
        score = (1 - diversity) * to_doc[r] - diversity * sim[np.ix_(r, picked)].max(axis=1)
        j = int(r[int(np.argmax(score))])
        picked.append(j)
        rest.remove(j)
    return picked


def keyphrases(texts: Sequence[str], embed: Embed, *, doc_vecs: np.ndarray | None = None, n: int = 10,
               diversity: float = 0.5, top: int = 40, max_n: int = 3) -> list[list[str]]:
    """KeyBERT-style keyphrases of each text (one list per text).

    ``embed`` maps texts to vectors; ``doc_vecs`` are the texts' own vectors
    when already known (the raw view), else the cleaned texts are embedded.
    Candidate phrases shared by several texts are embedded once.
    """
    cleaned = [clean(t) for t in texts]
    cands = [candidates(t, max_n=max_n, top=top) for t in cleaned]
    uniq = sorted({p for cs in cands for p in cs})
    pos = {p: i for i, p in enumerate(uniq)}
    pvecs = embed(uniq) if uniq else np.zeros((0, 1), np.float32)
    if doc_vecs is None:
        doc_vecs = embed([t or " " for t in cleaned])
    out = []
    for cs, dv in zip(cands, doc_vecs):
        if not cs:
            out.append([])
            continue
        idx = mmr(np.asarray(dv), pvecs[[pos[p] for p in cs]], n, diversity)
        out.append([cs[i] for i in idx])
    return out


def sentences(text: str) -> list[str]:
    """The sentences of a (cleaned) text."""
    s, e = split_sentences(text)
    return [text[a:b].strip() for a, b in zip(s.tolist(), e.tolist()) if text[a:b].strip()]


def extractive_summary(texts: Sequence[str], embed: Embed, *, max_words: int = 200,
                       max_sentences: int = 10) -> list[str]:
    """The extractive summary of each text (see the module docstring); all sentences are embedded in one batch."""
    sents = [sentences(clean(t)) for t in texts]
    flat = [s for ss in sents for s in ss]
    vecs = _unit(embed(flat)) if flat else np.zeros((0, 1), np.float32)
    out, at = [], 0
    for ss in sents:
        v = vecs[at : at + len(ss)]
        at += len(ss)
        if not ss:
            out.append("")
            continue
        centre = _unit(v.mean(axis=0, keepdims=True))[0]
        order = np.argsort(-(v @ centre), kind="stable").tolist()
        picked, words = [], 0
        for i in order:
            w = len(ss[i].split())
            if picked and (words + w > max_words or len(picked) >= max_sentences):
                continue
            picked.append(i)
            words += w
        out.append(" ".join(ss[i] for i in sorted(picked)))
    return out
