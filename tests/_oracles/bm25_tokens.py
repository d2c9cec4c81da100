"""BM25 tokenisation of CJK text in plain Python: the reference of the native tokeniser's rules 1 and 2.

A CJK character is told by its Unicode name (ideographs, kana, bopomofo, the ideographic iteration and
closing marks and number zero), independently of the native tokeniser's code point table. Text between
CJK runs is tokenised by the native rule-1 tokeniser (what every version does with it), so the reference
says how CJK runs are cut and that nothing else changes.
"""

from __future__ import annotations

import unicodedata

from momoka import _core

CJK_NAMES = ("CJK UNIFIED IDEOGRAPH", "CJK COMPATIBILITY IDEOGRAPH", "HIRAGANA LETTER", "KATAKANA LETTER",
             "HALFWIDTH KATAKANA LETTER", "KATAKANA-HIRAGANA PROLONGED SOUND MARK", "BOPOMOFO LETTER",
             "IDEOGRAPHIC ITERATION MARK", "IDEOGRAPHIC NUMBER ZERO", "IDEOGRAPHIC CLOSING MARK")


def is_cjk(ch: str) -> bool:
    """A CJK character, by its Unicode name."""
    return unicodedata.name(ch, "").startswith(CJK_NAMES)


def runs(text: str) -> list[tuple[bool, str]]:
    """``text`` cut into maximal runs, each ``(is_cjk, run)``."""
    out: list[tuple[bool, str]] = []
    for ch in text:
        c = is_cjk(ch)
        if out and out[-1][0] == c:
            out[-1] = (c, out[-1][1] + ch)
        else:
            out.append((c, ch))
    return out


def cjk_tokens(run: str, version: int) -> list[str]:
    """Tokens of one CJK run: its characters (rule 1), or each character preceded by the bigram it ends
    (rule 2: A, AB, B, BC, C)."""
    if version == 1:
        return list(run)
    out = []
    for i, ch in enumerate(run):
        if i:
            out.append(run[i - 1:i + 1])
        out.append(ch)
    return out


def tokenize(text: str, version: int, *, stem: bool = False, stopwords=()) -> list[str]:
    """Tokens of ``text`` (already folded) under rule ``version``."""
    out: list[str] = []
    for cjk, run in runs(text):
        out += cjk_tokens(run, version) if cjk else _core.bm25_tokenize(run, True, stem, list(stopwords), 1)
    return out
