"""Parsers for LLM answers, with validation.

Each parser is a callable ``parser(text) -> value`` that raises
:class:`momoka.errors.LLMResponseError` with a short reason when the answer is
malformed, and has a ``reminder`` sentence that
:meth:`~momoka.llm.base.BaseClient.complete_parsed` sends back when it re-asks.
Nothing is ever turned into a default value.

- :class:`BinaryParser` — a referee's ``1`` / ``0`` (Momoka Figures 4 and 5)
- :class:`JSONListParser` — a JSON list of strings (LLM chunking, MoC outlines), tolerant of code
  fences, smart quotes, trailing commas and an unterminated last item
- :class:`NumberedListParser` — a list of short items written as a numbered, bulleted or bracketed
  list (keywords)
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..errors import ConfigError, LLMResponseError

_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.S)
_SMART = str.maketrans({"\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2033": '"', "\uff02": '"'})


def strip_fences(text: str) -> str:
    """Remove one surrounding Markdown code fence (```json ... ```), if any."""
    m = _FENCE.match(text)
    return m.group(1) if m else text


class BinaryParser:
    """Parse a 0/1 verdict.

    Accepts an answer that is exactly ``0`` or ``1`` once surrounding
    punctuation, quotes, Markdown emphasis and an ``Answer:``/``Output:`` label
    are removed; otherwise an answer in which exactly one of the digits 0 and 1
    occurs as a stand-alone token (``"The answer is 1."``). An answer holding
    neither, or both (``"1/0"``), is malformed.
    """

    reminder = "Answer with a single digit: 1 or 0, and nothing else."
    _label = re.compile(r"^(answer|output|result|verdict|judgement|judgment)\s*[:：]\s*", re.I)
    _token = re.compile(r"(?<!\w)(?<!\d\.)([01])(?!\w|\.\d)")

    def __call__(self, text: str) -> int:
        if not isinstance(text, str):
            raise LLMResponseError(f"expected text, got {type(text).__name__}")
        t = strip_fences(text).strip().strip("*_`\"' \t\n.。!")
        t = self._label.sub("", t).strip().strip("*_`\"' \t\n.。!")
        if t in ("0", "1"):
            return int(t)
        found = set(self._token.findall(text))
        if len(found) == 1:
            return int(found.pop())
        if not found:
            raise LLMResponseError(f"no 0/1 verdict in the answer {text[:80]!r}")
        raise LLMResponseError(f"the answer holds both 0 and 1: {text[:80]!r}")


class JSONListParser:
    """Parse a JSON list (by default of non-empty strings).

    Repairs, tried in order only when plain ``json.loads`` fails: a surrounding
    code fence; text before the first ``[`` and after the last ``]``; smart
    quotes; trailing commas; an unterminated last string or list. ``min_items``
    and ``max_items`` bound the length; ``item_type`` (default ``str``) is
    checked for every element; ``allow_empty_items=False`` rejects blank strings.
    """

    reminder = 'Output ONLY a JSON list of strings, like ["...", "..."], and nothing else.'

    def __init__(self, *, min_items: int = 1, max_items: int | None = None, item_type: type = str,
                 allow_empty_items: bool = False):
        if min_items < 0 or (max_items is not None and max_items < min_items):
            raise ConfigError("JSONListParser needs 0 <= min_items <= max_items")
        self.min_items = min_items
        self.max_items = max_items
        self.item_type = item_type
        self.allow_empty_items = allow_empty_items

    def _candidates(self, text: str):
        t = strip_fences(text.strip()).strip()
        yield t
        i = t.find("[")
        if i < 0:
            return
        j = t.rfind("]")
        bodies = [t[i : j + 1]] if j > i else []
        bodies.append(t[i:])  # the list may be unterminated (a "]" inside an item is no end)
        for body in bodies:
            fixed = body.translate(_SMART)
            fixed = re.sub(r",\s*([\]}])", r"\1", fixed)
            yield body
            yield fixed
        # unterminated: close the last string and the list
        stripped = re.sub(r",\s*([\]}])", r"\1", t[i:].translate(_SMART)).rstrip().rstrip(",")
        yield stripped + "]"
        yield stripped + '"]'

    def __call__(self, text: str) -> list:
        if not isinstance(text, str):
            raise LLMResponseError(f"expected text, got {type(text).__name__}")
        value: Any = None
        ok = False
        for cand in self._candidates(text):
            try:
                value = json.loads(cand)
            except ValueError:
                continue
            if isinstance(value, list):
                ok = True
                break
        if not ok:
            raise LLMResponseError(f"no JSON list in the answer {text[:80]!r}")
        for k, v in enumerate(value):
            if not isinstance(v, self.item_type) or isinstance(v, bool) and self.item_type is not bool:
                raise LLMResponseError(f"item {k} of the list is a {type(v).__name__}, expected {self.item_type.__name__}")
            if isinstance(v, str) and not self.allow_empty_items and not v.strip():
                raise LLMResponseError(f"item {k} of the list is empty")
        if len(value) < self.min_items:
            raise LLMResponseError(f"the list has {len(value)} items, expected at least {self.min_items}")
        if self.max_items is not None and len(value) > self.max_items:
            raise LLMResponseError(f"the list has {len(value)} items, expected at most {self.max_items}")
        return value


class NumberedListParser:
    """Parse a list of short items (keywords, entities).

    Accepted forms, tried in order: a JSON list of strings; a bracketed list
    without quotes (``[a, b, c]``); lines numbered ``1.`` / ``1)`` or bulleted
    ``-`` / ``*`` / ``•`` (lines that are neither are ignored only if at least
    one line is numbered or bulleted); a single line of comma-separated items.
    Items are stripped of quotes and Markdown emphasis; blank items are
    dropped; duplicates (case-insensitive) are dropped keeping the first.
    ``min_items`` / ``max_items`` bound the result; ``max_words`` bounds each
    item (long sentences are not keywords).
    """

    reminder = "Output ONLY the list, one item per line, numbered 1., 2., 3., ..."
    _line = re.compile(r"^\s*(?:\d{1,3}\s*[.)\]:、]|[-*•·])\s+(.*\S)\s*$")

    def __init__(self, *, min_items: int = 1, max_items: int | None = None, max_words: int | None = 12):
        if min_items < 0 or (max_items is not None and max_items < min_items):
            raise ConfigError("NumberedListParser needs 0 <= min_items <= max_items")
        self.min_items = min_items
        self.max_items = max_items
        self.max_words = max_words

    @staticmethod
    def _clean(item: str) -> str:
        return item.strip().strip("*_`\"'“”‘’").strip().rstrip(",;").strip()

    def _split(self, text: str) -> list[str] | None:
        t = strip_fences(text.strip()).strip()
        if t.startswith("[") or ("[" in t and t.rstrip().endswith("]")):
            try:
                v = JSONListParser(min_items=0, allow_empty_items=True)(t)
                return [str(x) for x in v]
            except LLMResponseError:
                i, j = t.find("["), t.rfind("]")
                if 0 <= i < j:
                    return t[i + 1 : j].split(",")
        lines = [ln for ln in t.splitlines() if ln.strip()]
        listed = [m.group(1) for m in (self._line.match(ln) for ln in lines) if m]
        if listed:
            return listed
        if len(lines) == 1 and "," in lines[0]:
            return lines[0].split(",")
        if len(lines) == 1 and len(lines[0].split()) <= (self.max_words or 12):
            return [lines[0]]
        return None

    def __call__(self, text: str) -> list[str]:
        if not isinstance(text, str):
            raise LLMResponseError(f"expected text, got {type(text).__name__}")
        raw = self._split(text)
        if raw is None:
            raise LLMResponseError(f"no list in the answer {text[:80]!r}")
        items: list[str] = []
        seen = set()
        for r in raw:
            c = self._clean(r)
            if not c or c.lower() in seen:
                continue
            if self.max_words is not None and len(c.split()) > self.max_words:
                raise LLMResponseError(f"item {c[:40]!r} is longer than {self.max_words} words")
            seen.add(c.lower())
            items.append(c)
        if len(items) < self.min_items:
            raise LLMResponseError(f"the list has {len(items)} items, expected at least {self.min_items}")
        if self.max_items is not None and len(items) > self.max_items:
            raise LLMResponseError(f"the list has {len(items)} items, expected at most {self.max_items}")
        return items


#: Ready-made instances.
parse_binary = BinaryParser()
parse_json_list = JSONListParser()
parse_numbered_list = NumberedListParser()
