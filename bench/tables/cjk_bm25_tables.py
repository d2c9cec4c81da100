"""BM25 alone on a Chinese set, by how runs of CJK characters are tokenised.

Tokenisers (everything that is not CJK is tokenised as always: the native rule, Porter stems, English
stopwords):

* ``unigram``: one token per CJK character (tokeniser rule 1, what BM25 did before rule 2);
* ``bigram``: overlapping character bigrams of each CJK run, a run of one character a token by itself
  (Lucene's CJKAnalyzer);
* ``bigram+unigram``: both of the above (tokeniser rule 2, the default of a new index; Lucene's
  CJKBigramFilter with ``outputUnigrams``);
* ``jieba``, ``jieba_search``: words of the jieba segmenter (``jieba.lcut``, and its search mode
  ``lcut_for_search``, which adds the shorter words inside long ones), each CJK word one token.

The two native rules (``unigram``, ``bigram+unigram``) are selected with the view's ``tokenizer_version``;
the others replace the index's
tokeniser by a Python one (pre-tokenised texts and queries). Every tokeniser runs the same default pipeline
(chunker, contextual headers, assembly) over the same questions; the report gives complete coverage, span
recall, hit and MRR at the character budget, and the paired bootstrap interval of each tokeniser's margin
over ``unigram``.

Usage::

    python bench/tables/cjk_bm25_tables.py --data SET [--limit 300] [--budget 5000] [--tok unigram,bigram,...]
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import sys
import time
from pathlib import Path

ALL = ("unigram", "bigram", "bigram+unigram", "jieba", "jieba_search")


@functools.lru_cache(maxsize=65536)
def _is_cjk(ch: str) -> bool:
    """A CJK character as the native tokeniser sees it (rule 1 gives it alone; rule 2 pairs two of them)."""
    from momoka import _core

    return len(_core.bm25_tokenize(ch + ch, True, False, [], 2)) == 3


def python_tokenizer(name: str, stopwords: list[str]):
    """A function text -> tokens for the Python tokenisers (the text already folded)."""
    from momoka import _core

    def native(text: str) -> list[str]:
        return _core.bm25_tokenize(text, True, True, stopwords, 1)

    def by_runs(text: str, cjk_run) -> list[str]:
        out: list[str] = []
        for is_cjk, run in itertools.groupby(text, _is_cjk):
            run = "".join(run)
            out.extend(cjk_run(run) if is_cjk else native(run))
        return out

    if name == "bigram":
        return lambda text: by_runs(text, lambda r: [r] if len(r) == 1 else [r[i:i + 2] for i in range(len(r) - 1)])
    import jieba  # not a dependency: this table's peer

    jieba.setLogLevel(60)
    cut = jieba.lcut if name == "jieba" else jieba.lcut_for_search

    def segmented(text: str) -> list[str]:
        out: list[str] = []
        for w in cut(text):
            if w and all(_is_cjk(c) for c in w):
                out.append(w)
            else:
                out.extend(native(w))
        return out
    return segmented


def patch_bm25(tok):
    """Make every :class:`momoka.store.BM25` tokenise with ``tok`` (returns an undo function)."""
    from momoka.store import bm25 as mod

    B = mod.BM25
    saved = {n: getattr(B, n) for n in ("add", "search", "tokenize", "get_scores")}

    def add(self, texts, n_threads=0):
        return self._ix.add_tokens([tok(mod.fold_compatibility(t)) for t in texts])

    def search(self, query, k=10, mask=None):
        self._check_query(query)
        return self._ix.search_tokens(tok(mod.fold_compatibility(query)), int(k), self._mask(mask))

    def tokenize(self, text):
        return tok(mod.fold_compatibility(text))

    def get_scores(self, query):
        return self._ix.get_scores_tokens(tok(mod.fold_compatibility(query)))

    B.add, B.search, B.tokenize, B.get_scores = add, search, tokenize, get_scores

    def undo():
        for n, f in saved.items():
            setattr(B, n, f)
    return undo


def run(data: str, toks: list[str], limit: int, budget: int, log=print) -> dict:
    from momoka.eval import load_dataset
    from momoka.eval.runner import run_eval
    from momoka.eval.intervals import paired_bootstrap
    from momoka.store import bm25_view
    from momoka.store.bm25 import ENGLISH_STOPWORDS

    ds = load_dataset(data)
    out = {"data": str(data), "limit": limit, "budget": budget, "tokenizers": {}}
    per = {}
    for name in toks:
        t0 = time.perf_counter()
        undo = lambda: None  # noqa: E731
        saved = dict(bm25_view.DEFAULT_BM25)
        if name in ("unigram", "bigram+unigram"):
            bm25_view.DEFAULT_BM25["tokenizer_version"] = 1 if name == "unigram" else 2
        else:
            undo = patch_bm25(python_tokenizer(name, list(ENGLISH_STOPWORDS)))
        try:
            rep = run_eval(ds, ["bm25"], limit=limit, budgets=(budget,), ks=(1, 3, 5), keep_per_question=True,
                           )
        finally:
            undo()
            bm25_view.DEFAULT_BM25.clear()
            bm25_view.DEFAULT_BM25.update(saved)
        rows = rep["per_question"]["bm25"]
        qids = sorted(rows)
        per[name] = (qids, rows)
        means = {m: sum(rows[q][f"{m}@{budget}c"] for q in qids) / len(qids)
                 for m in ("complete", "span_recall", "hit", "mrr")}
        means.update({f"hit@{k}": sum(rows[q][f"hit@{k}"] for q in qids) / len(qids) for k in (1, 3, 5)})
        out["tokenizers"][name] = {"n": len(qids), "means": means, "seconds": round(time.perf_counter() - t0, 1)}
        log(f"{name}: n={len(qids)} " + " ".join(f"{k}={v:.3f}" for k, v in means.items()))
    base = toks[0]
    for name in toks[1:]:
        qa, ra = per[base]
        qb, rb = per[name]
        assert qa == qb
        out["tokenizers"][name]["margin_over_" + base] = {
            m: paired_bootstrap([rb[q][f"{m}@{budget}c"] for q in qa], [ra[q][f"{m}@{budget}c"] for q in qa]).to_dict()
            for m in ("complete", "hit")}
        log(f"{name} - {base}: " + json.dumps(out["tokenizers"][name]["margin_over_" + base]))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="the set's folder")
    p.add_argument("--limit", type=int, default=300, help="first N questions with evidence (default 300)")
    p.add_argument("--budget", type=int, default=5000, help="character budget (default 5000)")
    p.add_argument("--tok", default=",".join(ALL), help=f"tokenisers, the first the baseline (default {','.join(ALL)})")
    p.add_argument("--out", default=None, help="write the JSON report here")
    a = p.parse_args(argv)
    toks = [t for t in a.tok.split(",") if t]
    bad = [t for t in toks if t not in ALL]
    if bad:
        p.error(f"unknown tokeniser(s) {bad}; choose from {', '.join(ALL)}")
    rep = run(a.data, toks, a.limit, a.budget)
    if a.out:
        Path(a.out).write_text(json.dumps(rep, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
