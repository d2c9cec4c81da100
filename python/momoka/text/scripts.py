"""Which writing systems a text is in: the language-aware default embedder's test.

:func:`script_counts` counts *units* of text per script: a word (a run of letters) in a script written
with spaces (Latin, Cyrillic, Greek, Arabic, Hebrew, Hangul, Devanagari, ...), and each character of a
script written without spaces (Han ideographs, kana, Thai, Lao, Khmer, Myanmar, Tibetan), where a
character carries about what a short word does. Digits, punctuation and symbols are not counted.

:func:`non_latin_share` is the share of units outside the Latin script, and :func:`is_mostly_non_latin`
the rule ``momoka index`` uses to pick its embedder: at least :data:`MIN_UNITS` units in the sample and
more than :data:`NON_LATIN_SHARE` of them outside the Latin script. Script detection cannot tell
English from other languages written in Latin letters (French, German, Vietnamese...): those count as
Latin, so the rule never moves an English corpus and never moves those either.

>>> script_counts("The Great Wall 长城 is long.")
{'Latin': 5, 'Han': 2}
>>> round(non_latin_share(["Москва — столица России.", "Moscow is the capital."]), 2)
0.43
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["SCRIPTS", "MIN_UNITS", "NON_LATIN_SHARE", "script_counts", "non_latin_share", "is_mostly_non_latin",
           "dominant_scripts"]

#: A sample needs at least this many units (words, or characters of spaceless scripts) to be judged.
MIN_UNITS = 20
#: More than this share of a sample's units outside the Latin script makes it "mostly non-Latin".
NON_LATIN_SHARE = 0.5

# (name, character class, counted per character?) in matching order; the last entry takes every other letter.
_LATIN = "A-Za-z\u00aa\u00ba\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u1e00-\u1eff\u2c60-\u2c7f\ua720-\ua7ff\uff21-\uff3a\uff41-\uff5a"
_SPACELESS = {
    "Han": "\u2e80-\u2fdf\u3005\u3007\u3021-\u3029\u3038-\u303b\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
           "\U00020000-\U0003ffff",
    "Kana": "\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f",
    "Thai": "\u0e00-\u0e7f",
    "Lao": "\u0e80-\u0eff",
    "Khmer": "\u1780-\u17ff",
    "Myanmar": "\u1000-\u109f",
    "Tibetan": "\u0f00-\u0fff",
}
_SPACED = {
    "Latin": _LATIN,
    "Cyrillic": "\u0400-\u052f\u1c80-\u1c8f\u2de0-\u2dff\ua640-\ua69f",
    "Greek": "\u0370-\u03ff\u1f00-\u1fff",
    "Arabic": "\u0600-\u06ff\u0750-\u077f\u08a0-\u08ff\ufb50-\ufdff\ufe70-\ufeff",
    "Hebrew": "\u0590-\u05ff\ufb1d-\ufb4f",
    "Hangul": "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af",
    "Devanagari": "\u0900-\u097f",
    "Armenian": "\u0530-\u058f",
    "Georgian": "\u10a0-\u10ff",
}
#: The scripts told apart (``"Other"``: letters of any other script, counted per word).
SCRIPTS = tuple(_SPACED) + tuple(_SPACELESS) + ("Other",)

_KNOWN = "".join(_SPACED.values()) + "".join(_SPACELESS.values())
_PATTERNS = [(name, re.compile(f"[{cls}]"), True) for name, cls in _SPACELESS.items()]
_PATTERNS += [(name, re.compile(f"[{cls}]+"), False) for name, cls in _SPACED.items()]
# letters of no listed script: word characters that are not digits, underscore or a listed script
_OTHER = re.compile(f"[^\\W\\d_{_KNOWN}]+")


def script_counts(text: str) -> dict[str, int]:
    """Units of ``text`` per script (see the module docstring), scripts with none left out."""
    out = {}
    for name, pat, _per_char in _PATTERNS:
        n = len(pat.findall(text))
        if n:
            out[name] = n
    n = len(_OTHER.findall(text))
    if n:
        out["Other"] = n
    # report in SCRIPTS order
    return {k: out[k] for k in SCRIPTS if k in out}


def _total(texts: Iterable[str]) -> dict[str, int]:
    tot: dict[str, int] = {}
    for t in texts:
        for k, v in script_counts(t).items():
            tot[k] = tot.get(k, 0) + v
    return tot


def non_latin_share(texts: Iterable[str]) -> float:
    """The share of the units of ``texts`` outside the Latin script (0.0 when there are none)."""
    tot = _total(texts)
    n = sum(tot.values())
    return (n - tot.get("Latin", 0)) / n if n else 0.0


def dominant_scripts(texts: Iterable[str], k: int = 2) -> list[str]:
    """The (at most ``k``) scripts with most units in ``texts``, most first; Latin left out."""
    tot = _total(texts)
    return [s for s, _ in sorted(((s, v) for s, v in tot.items() if s != "Latin"), key=lambda x: -x[1])[:k]]


def is_mostly_non_latin(texts: Iterable[str]) -> bool:
    """Whether ``texts`` hold at least :data:`MIN_UNITS` units and more than :data:`NON_LATIN_SHARE`
    of them are outside the Latin script."""
    tot = _total(texts)
    n = sum(tot.values())
    return n >= MIN_UNITS and (n - tot.get("Latin", 0)) / n > NON_LATIN_SHARE
