"""Recovery of MoC meta-chunker outlines (head + mask + tail) into text spans."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .. import _core
from ..errors import ConfigError, EmptyInputError, OutlineError
from ._common import check_str, native_call, str_list

__all__ = ["DEFAULT_MASKS", "RecoveredChunk", "split_outline", "recover_outlines"]

#: The eight placeholders of MoC section 3.2.2 (``[MASK]`` is what the released models emit).
DEFAULT_MASKS: tuple[str, ...] = ("[MASK]", "<omitted>", "<ellipsis>", "[ELLIPSIS]", ".*?", "<...>", "<.*>", "<pad>")


@dataclass(frozen=True)
class RecoveredChunk:
    """Where one outline landed in the text.

    ``start``/``end`` tile the text: consecutive chunks share a boundary, the
    first starts at 0, the last ends at ``len(text)``. ``match_start`` /
    ``match_end`` are where the head began and the tail ended (the gap after a
    chunk, e.g. the blank line between paragraphs, belongs to the chunk before
    it). ``placed`` is False for outlines that could not be found (hallucinated,
    out of order, or without any text to anchor on): they get an empty span at
    the boundary where they would sit, and distances of -1.
    """

    index: int
    start: int
    end: int
    match_start: int
    match_end: int
    head_distance: int
    tail_distance: int
    placed: bool


def split_outline(outline: str, mask: Sequence[str] = DEFAULT_MASKS) -> tuple[str, str, bool]:
    """Split an outline into (head, tail, has_mask).

    The head is the text before the first mask token, the tail the text after
    the last one, both kept verbatim (whitespace included: chunks can start or
    end with spaces). Without any mask token the whole outline is the head and
    ``has_mask`` is False (the outline is then located as a whole chunk).
    """
    first, last_end = -1, -1
    for tok in mask:
        i = outline.find(tok)
        if i < 0:
            continue
        if first < 0 or i < first:
            first = i
        j = outline.rfind(tok)
        last_end = max(last_end, j + len(tok))
    if first < 0:
        return outline, "", False
    return outline[:first], outline[last_end:], True


def recover_outlines(
    text: str,
    outlines: Iterable[str],
    mask: Sequence[str] = DEFAULT_MASKS,
    max_error: float = 0.3,
    window: int | None = None,
) -> list[RecoveredChunk]:
    """Map meta-chunker outlines back to spans of ``text`` that tile it in order.

    Each outline is ``head + mask + tail``. The text is walked once: a head is
    first tried right where the previous chunk ended (after whitespace), then
    searched in a growing window; a tail is searched forward from its head
    and each candidate end is scored together with how well the *next*
    outline's head matches right after it, so a phrase repeated elsewhere in
    the text does not pull the boundary away. Heads and tails may differ from
    the text by up to ``max_error`` times their length in edits.

    Documented results for odd input: an outline without a mask token is
    located as a whole chunk; an outline that is only a mask, or that cannot be
    found after the previous one (hallucinated, or out of order), is returned
    with ``placed=False`` and an empty span; if no outline can be placed, the
    first one gets the whole text with ``placed=False``.

    Raises :class:`EmptyInputError` for an empty text, :class:`OutlineError`
    for an empty outline list, :class:`KernelInputError` for non-str outlines
    and :class:`ConfigError` for bad options.
    """
    check_str("text", text)
    items = str_list("outlines", outlines)
    for i, o in enumerate(items):
        check_str(f"outlines[{i}]", o)
    if not text:
        raise EmptyInputError("recover_outlines: text is empty")
    if not items:
        raise OutlineError("recover_outlines: no outlines given")
    if isinstance(mask, str):
        mask = (mask,)
    mask = tuple(mask)
    if not mask or any(not isinstance(t, str) or not t for t in mask):
        raise ConfigError("mask must be a non-empty sequence of non-empty str")
    if not isinstance(max_error, (int, float)) or isinstance(max_error, bool) or math.isnan(max_error) or not 0 <= max_error < 1:
        raise ConfigError(f"max_error must be a number in [0, 1), got {max_error!r}")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise ConfigError(f"window must be None or an int >= 1, got {window!r}")
    heads, tails, has = [], [], []
    for o in items:
        h, t, m = split_outline(o, mask)
        heads.append(h)
        tails.append(t)
        has.append(m)
    rows = native_call(_core.recover_outlines, text, heads, tails, has, float(max_error), int(window or 0))
    return [
        RecoveredChunk(i, int(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4]), int(r[5]), bool(r[6]))
        for i, r in enumerate(rows.tolist())
    ]
