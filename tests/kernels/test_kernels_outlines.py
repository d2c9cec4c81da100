"""recover_outlines: order-aware placement, tiling, flags for unplaceable outlines."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from momoka.errors import ConfigError, EmptyInputError, KernelInputError, OutlineError
from momoka.kernels import DEFAULT_MASKS, recover_outlines, split_outline


def _check_tiling(chunks, n):
    assert chunks[0].start == 0
    assert chunks[-1].end == n
    for a, b in zip(chunks, chunks[1:]):
        assert a.end == b.start
    for c in chunks:
        assert c.start <= c.end


def _edit1(s: str, rng: random.Random) -> str:
    chars = list(s)
    i = rng.randrange(len(chars))
    op = rng.randrange(3)
    if op == 0:
        chars[i] = "q" if chars[i] != "q" else "z"
    elif op == 1:
        chars.insert(i, "z")
    else:
        del chars[i]
    return "".join(chars)


# A text whose paragraphs share openings and endings, so a search that looks
# at the head or tail alone is sent to the wrong copy.
PARAS = [
    "The committee met in March. It approved the budget for the year.",
    "The committee met again in May. The members argued about the budget for the year.",
    "In June the chair resigned. The committee met in March of the next year.",
    "The budget for the year was finally approved. The committee met in March.",
    "Nobody remembers the budget for the year.",
]
TEXT = "\n\n".join(PARAS)


def _spans(paras):
    out, pos = [], 0
    for p in paras:
        out.append((pos, pos + len(p)))
        pos += len(p) + 2
    return out


def test_repeated_phrases_recovered_exactly():
    outlines = [p[:12] + "[MASK]" + p[-12:] for p in PARAS]
    chunks = recover_outlines(TEXT, outlines)
    _check_tiling(chunks, len(TEXT))
    for c, (s, e) in zip(chunks, _spans(PARAS)):
        assert c.placed
        assert (c.match_start, c.match_end) == (s, e)
        assert (c.head_distance, c.tail_distance) == (0, 0)
    # The blank line after each paragraph belongs to it.
    assert chunks[0].end == _spans(PARAS)[1][0]


def test_edited_outlines_and_every_mask_token():
    rng = random.Random(5)
    masks = list(DEFAULT_MASKS)
    outlines = [_edit1(p[:12], rng) + masks[i % len(masks)] + _edit1(p[-12:], rng) for i, p in enumerate(PARAS)]
    chunks = recover_outlines(TEXT, outlines)
    _check_tiling(chunks, len(TEXT))
    for c, (s, e) in zip(chunks, _spans(PARAS)):
        assert c.placed and (c.match_start, c.match_end) == (s, e)
        assert 0 <= c.head_distance <= 1 and 0 <= c.tail_distance <= 1


def test_split_outline():
    assert split_outline("abc [MASK] def") == ("abc ", " def", True)
    assert split_outline("abc<pad>x<omitted>def") == ("abc", "def", True)  # first mask to last mask
    assert split_outline("no mask here") == ("no mask here", "", False)
    assert split_outline("a.*?b") == ("a", "b", True)


def test_hallucinated_outline_is_flagged_and_text_still_covered():
    outlines = [p[:12] + "[MASK]" + p[-12:] for p in PARAS]
    outlines.insert(2, "Zebras quickly[MASK]jumped over it")
    chunks = recover_outlines(TEXT, outlines)
    _check_tiling(chunks, len(TEXT))
    assert [c.placed for c in chunks] == [True, True, False, True, True, True]
    bad = chunks[2]
    assert bad.start == bad.end == chunks[3].start
    assert (bad.head_distance, bad.tail_distance) == (-1, -1)
    real = [c for c in chunks if c.placed]
    for c, (s, e) in zip(real, _spans(PARAS)):
        assert (c.match_start, c.match_end) == (s, e)


def test_outlines_out_of_order():
    # Documented result: an outline whose text lies before the previous
    # chunk cannot be placed after it; it is flagged, the spans still tile.
    paras = ["Alpha opens the story here.", "Bravo continues with more.", "Charlie adds a third part.",
             "Delta closes it all."]
    text = "\n\n".join(paras)
    outlines = [p[:8] + "[MASK]" + p[-8:] for p in paras]
    outlines[1], outlines[2] = outlines[2], outlines[1]
    chunks = recover_outlines(text, outlines)
    _check_tiling(chunks, len(text))
    assert [c.placed for c in chunks] == [True, True, False, True]
    assert chunks[1].match_start == _spans(paras)[2][0]  # Charlie found after Alpha ...
    assert chunks[2].start == chunks[2].end == chunks[3].start  # ... Bravo cannot follow it
    assert chunks[0].end == chunks[1].start == _spans(paras)[2][0]  # Bravo's text goes to Alpha's chunk


def test_outline_without_mask_is_a_whole_chunk():
    outlines = [PARAS[0][:12] + "[MASK]" + PARAS[0][-12:], PARAS[1], PARAS[2][:12] + "[MASK]" + PARAS[2][-12:]]
    text = "\n\n".join(PARAS[:3])
    chunks = recover_outlines(text, outlines)
    _check_tiling(chunks, len(text))
    assert [(c.match_start, c.match_end) for c in chunks] == _spans(PARAS[:3])


def test_mask_only_outline_and_nothing_placed():
    chunks = recover_outlines(TEXT, ["[MASK]"])
    assert len(chunks) == 1 and not chunks[0].placed
    assert (chunks[0].start, chunks[0].end) == (0, len(TEXT))  # documented: the text stays covered
    chunks = recover_outlines(TEXT, ["<pad>", "Zebras quickly[MASK]jumped over it"])
    assert [c.placed for c in chunks] == [False, False]
    _check_tiling(chunks, len(TEXT))


def test_non_ascii_offsets():
    paras = ["日本語の文章です。これは最初の段落。", "二番目の段落はここから始まります。終わり。", "三番目。最後の段落です。"]
    text = "\n".join(paras)
    outlines = [p[:4] + "<omitted>" + p[-4:] for p in paras]
    chunks = recover_outlines(text, outlines)
    pos = 0
    for c, p in zip(chunks, paras):
        assert (c.match_start, c.match_end) == (pos, pos + len(p))
        assert text[c.match_start : c.match_end] == p
        pos += len(p) + 1


def test_squad_paragraphs(shared_data):
    # Real text: paragraphs of two SQuAD articles, one edit in each 10-char head and tail.
    rng = random.Random(11)
    with open(Path(shared_data) / "squad_v1_dev_half_a" / "documents.jsonl", encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f][:3]
    total = exact = 0
    for text in texts:
        spans = _spans(text.split("\n\n"))
        outlines = [_edit1(text[s : s + 10], rng) + "[MASK]" + _edit1(text[e - 10 : e], rng) for s, e in spans]
        chunks = recover_outlines(text, outlines)
        _check_tiling(chunks, len(text))
        for c, (s, e) in zip(chunks, spans):
            total += 1
            exact += (c.match_start, c.match_end) == (s, e)
    assert exact / total >= 0.97


# --- bad input --------------------------------------------------------------


def test_bad_input():
    with pytest.raises(EmptyInputError):  # empty text
        recover_outlines("", ["a[MASK]b"])
    with pytest.raises(OutlineError):  # no outlines at all
        recover_outlines("some text", [])
    with pytest.raises(KernelInputError, match=r"outlines\[1\]"):  # NaN among the outlines
        recover_outlines("some text", ["some[MASK]text", float("nan")])
    with pytest.raises(KernelInputError):  # a bare str instead of a list
        recover_outlines("some text", "some[MASK]text")
    with pytest.raises(ConfigError):  # max_error out of range
        recover_outlines("some text", ["some[MASK]text"], max_error=1.5)
    with pytest.raises(ConfigError):  # empty mask token
        recover_outlines("some text", ["some[MASK]text"], mask=("",))
