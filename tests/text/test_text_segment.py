"""Sentence and paragraph segmentation: hand-written rules, a slow reference, offsets for non-ASCII text."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from momoka.errors import ConfigError
from momoka.text import split_paragraphs, split_sentences, split_sentences_within


def sents(text: str, **kw) -> list[str]:
    s, e = split_sentences(text, **kw)
    return [text[a:b] for a, b in zip(s.tolist(), e.tolist())]


def paras(text: str) -> list[str]:
    s, e = split_paragraphs(text)
    return [text[a:b] for a, b in zip(s.tolist(), e.tolist())]


# --- hand-written cases, one per rule ----------------------------------------

RULES = [
    # plain terminators
    ("One. Two! Three? Four", ["One.", "Two!", "Three?", "Four"]),
    # runs of terminators stay together
    ("Really?! Yes.", ["Really?!", "Yes."]),
    # abbreviations: titles never end a sentence
    ("Dr. Smith met Mr. Jones and Mrs. Brown. They talked.", ["Dr. Smith met Mr. Jones and Mrs. Brown.", "They talked."]),
    ("Prof. Lee lives on St. James Street.", ["Prof. Lee lives on St. James Street."]),
    # abbreviations: e.g. / i.e. / U.S. / etc. followed by a lowercase word
    ("Use tools, e.g. Hammers. Or not.", ["Use tools, e.g. Hammers.", "Or not."]),
    ("That is, i.e. This one.", ["That is, i.e. This one."]),
    ("The U.S. Army grew. It won.", ["The U.S. Army grew.", "It won."]),
    ("Apples, pears, etc. are fruit. Nice.", ["Apples, pears, etc. are fruit.", "Nice."]),
    # etc. at the end of a sentence before a capital
    ("We bought apples, pears, etc. Then we left.", ["We bought apples, pears, etc.", "Then we left."]),
    # number prefixes only before a digit
    ("See No. 5 and Fig. 3 for details. Done.", ["See No. 5 and Fig. 3 for details.", "Done."]),
    ("He said no. Then he left.", ["He said no.", "Then he left."]),
    ("It opened on Jan. 5 last year. Good.", ["It opened on Jan. 5 last year.", "Good."]),
    # decimals and numbers
    ("Pi is 3.14 roughly. It is 2.5 km away.", ["Pi is 3.14 roughly.", "It is 2.5 km away."]),
    ("Version 1.2.3 shipped. Next.", ["Version 1.2.3 shipped.", "Next."]),
    ("It cost $3. Then more.", ["It cost $3.", "Then more."]),
    # initials
    ("J. R. R. Tolkien wrote it. He was British.", ["J. R. R. Tolkien wrote it.", "He was British."]),
    ("Written by J.R.R. Tolkien in 1937.", ["Written by J.R.R. Tolkien in 1937."]),
    # quotes and brackets after terminators
    ('"Stop." He said it.', ['"Stop."', "He said it."]),
    ('"Stop!" he said. Then silence.', ['"Stop!" he said.', "Then silence."]),
    ("It ends here (see above.) Next one.", ["It ends here (see above.)", "Next one."]),
    ("He left. (He was tired.) Then we ate.", ["He left.", "(He was tired.)", "Then we ate."]),
    ("\u201cQuoted.\u201d Next \u2018one.\u2019 Last", ["\u201cQuoted.\u201d", "Next \u2018one.\u2019", "Last"]),
    ("It was 1978.[citation needed] On Monday.[1][2] Then.", ["It was 1978.[citation needed]", "On Monday.[1][2]", "Then."]),
    # no whitespace after a terminator: not a boundary
    ("See example.com/a.b?c=1 for it. Ok.", ["See example.com/a.b?c=1 for it.", "Ok."]),
    # ellipses
    ("Wait... Then it came. Well\u2026 fine.", ["Wait...", "Then it came.", "Well\u2026 fine."]),
    ("He said . . . nothing. Really.", ["He said . . . nothing.", "Really."]),
    ("And so... it goes.", ["And so... it goes."]),
    # a short enumerator starting a sentence
    ("1. Introduction to it. 2. Methods.", ["1. Introduction to it.", "2. Methods."]),
    # newlines: a single one is whitespace by default, a blank line always ends
    ("A line\ncontinues here. Next.", ["A line\ncontinues here.", "Next."]),
    ("No terminator\n\nNew paragraph", ["No terminator", "New paragraph"]),
    ("Dr.\n\nSmith", ["Dr.", "Smith"]),
    ("Spaces   \n \t \n  around", ["Spaces", "around"]),
    ("Windows\r\n\r\nbreaks", ["Windows", "breaks"]),
    ("Single\r\nbreak", ["Single\r\nbreak"]),
    ("Para\u2029sep", ["Para", "sep"]),
    # CJK full-width punctuation, closing quotes after it, no spaces needed
    ("\u4eca\u65e5\u306f\u3002\u660e\u65e5\u3082\uff01\u672c\u5f53\uff1f\u306f\u3044",
     ["\u4eca\u65e5\u306f\u3002", "\u660e\u65e5\u3082\uff01", "\u672c\u5f53\uff1f", "\u306f\u3044"]),
    ("\u300c\u884c\u304f\u3002\u300d\u5f7c\u306f\u8a00\u3063\u305f\u3002",
     ["\u300c\u884c\u304f\u3002\u300d", "\u5f7c\u306f\u8a00\u3063\u305f\u3002"]),
    ("\u4f60\u597d\uff01\uff1f\u6211\u5f88\u597d\u3002", ["\u4f60\u597d\uff01\uff1f", "\u6211\u5f88\u597d\u3002"]),
    # the fullwidth semicolon, and an ellipsis between Chinese characters, end a sentence with no space
    ("\u4ed6\u6765\u4e86\uff1b\u6211\u8d70\u4e86\u3002", ["\u4ed6\u6765\u4e86\uff1b", "\u6211\u8d70\u4e86\u3002"]),
    ("\u4ed6\u8bf4\u2026\u2026\u7136\u540e\u8d70\u4e86\u3002", ["\u4ed6\u8bf4\u2026\u2026", "\u7136\u540e\u8d70\u4e86\u3002"]),
    # between Latin letters an ellipsis without a space does not
    ("Wait\u2026then he left.", ["Wait\u2026then he left."]),
    # Arabic and Devanagari terminators (followed by whitespace)
    ("مرحبا؟ شكرا۔ نعم",
     ["مرحبا؟", "شكرا۔", "نعم"]),
    ("नमस्ते। धन्यवाद॥ ठीक",
     ["नमस्ते।", "धन्यवाद॥", "ठीक"]),
    # surrounding whitespace is excluded
    ("   padded sentence.   Another one.  \n", ["padded sentence.", "Another one."]),
    ("", []),
    (" \n\t ", []),
]


@pytest.mark.parametrize("text,expected", RULES)
def test_rules(text, expected):
    assert sents(text) == expected


def test_newline_modes():
    text = "- first item\n- second item\nthird line. Next"
    assert sents(text, newlines="ignore") == [text[: text.index(" Next")], "Next"]
    assert sents(text, newlines="break") == ["- first item", "- second item", "third line.", "Next"]
    # auto: short lines without final punctuation end before a non-lowercase line
    assert sents(text) == ["- first item", "- second item\nthird line.", "Next"]
    paper = "Introduction\nWe study it here. It works.\nOur contributions are:\n- one\n- two"
    assert sents(paper) == ["Introduction", "We study it here.", "It works.", "Our contributions are:", "- one", "- two"]
    # hard-wrapped prose stays joined: long lines, or a comma, or a lowercase next line
    wrapped = (
        "Nor could he disappear from his cell and appear, as if by magic, several\n"
        "Miles away near the hulk of his ship. Then he slept,\nKorvin said, and\nthen left."
    )
    assert sents(wrapped) == [wrapped[: wrapped.index(" Then")], wrapped[wrapped.index("Then") :]]
    assert sents("Dr.\nSmith came.") == ["Dr.\nSmith came."]  # a terminator line follows the terminator rules
    with pytest.raises(ConfigError):
        split_sentences(text, newlines="sometimes")


def test_custom_abbreviations():
    text = "Approx. Ten men came. Ph.D. Students left."
    assert sents(text) == ["Approx.", "Ten men came.", "Ph.D.", "Students left."] or sents(text)[0] == "Approx. Ten men came."
    got = sents(text, abbreviations=["ph.d", "Approx."])
    assert got == ["Approx. Ten men came.", "Ph.D. Students left."]
    # the default segmenter is unchanged by a call with extra abbreviations
    assert sents("Blah. Students left.") == ["Blah.", "Students left."]
    with pytest.raises(TypeError):
        split_sentences(text, abbreviations=[3])


def test_type_errors():
    # bytes are not text: the caller must decode (or use Document.from_file)
    with pytest.raises(TypeError):
        split_sentences(b"abc. def")
    with pytest.raises(TypeError):
        split_paragraphs(None)


def test_arrays_are_int64():
    s, e = split_sentences("One. Two.")
    assert s.dtype == np.int64 and e.dtype == np.int64
    assert s.tolist() == [0, 5] and e.tolist() == [4, 9]
    s, e = split_sentences("")
    assert s.shape == (0,) and e.dtype == np.int64


# --- non-ASCII offsets (Latin-1, UCS-2 and UCS-4 storage) --------------------


@pytest.mark.parametrize(
    "prefix",
    ["", "caf\u00e9 ", "\u0100\u0101 ", "\u4e2d\u6587 ", "\U0001F600 ", "\U0001F600\u4e2d\u00e9 "],
)
def test_offsets_are_str_offsets(prefix):
    # the same sentences after prefixes that force each PEP 393 storage kind
    body = "Na\u00efve caf\u00e9. Gro\u00dfe \U0001F600 Stra\u00dfe! \u6771\u4eac\u3002\u5927\u962a\uff1f End"
    text = prefix + body
    got = sents(text)
    first = prefix + "Na\u00efve caf\u00e9."
    assert got == [first, "Gro\u00dfe \U0001F600 Stra\u00dfe!", "\u6771\u4eac\u3002", "\u5927\u962a\uff1f", "End"]
    s, e = split_sentences(text)
    # hand-computed code point offsets of the last sentence
    assert (int(s[-1]), int(e[-1])) == (len(text) - 3, len(text))
    assert int(e[0]) == len(first)


def test_emoji_offsets_exact():
    text = "\U0001F600\U0001F601. \U0001F602 ok.\n\n\U0001F603"
    s, e = split_sentences(text)
    assert list(zip(s.tolist(), e.tolist())) == [(0, 3), (4, 9), (11, 12)]
    ps, pe = split_paragraphs(text)
    assert list(zip(ps.tolist(), pe.tolist())) == [(0, 9), (11, 12)]


def test_lowercase_non_ascii_continues():
    # a lowercase accented / Cyrillic word after a period continues the sentence
    assert sents("Voir p\u00e9riode. \u00e9t\u00e9 fini.") == ["Voir p\u00e9riode. \u00e9t\u00e9 fini."]
    assert sents("\u0422\u0435\u043a\u0441\u0442. \u0436\u0438\u0437\u043d\u044c. \u041d\u043e\u0432\u0430\u044f.") == [
        "\u0422\u0435\u043a\u0441\u0442. \u0436\u0438\u0437\u043d\u044c.",
        "\u041d\u043e\u0432\u0430\u044f.",
    ]


# --- paragraphs --------------------------------------------------------------


def test_paragraphs_hand_written():
    text = "  First para\nstill first.\n\n\n  Second.\r\n\r\nThird\u2029Fourth \n \n"
    assert paras(text) == ["First para\nstill first.", "Second.", "Third", "Fourth"]
    s, e = split_paragraphs(text)
    assert s.tolist()[0] == 2


def test_split_within_regions():
    text = "Aa. Bb. | Cc. Dd."
    s, e = split_sentences_within(text, np.array([0, 10]), np.array([7, 17]))
    assert [text[a:b] for a, b in zip(s, e)] == ["Aa.", "Bb.", "Cc.", "Dd."]
    # regions are clamped to the text
    s, e = split_sentences_within(text, np.array([-5]), np.array([100]))
    assert text[int(s[0]) : int(e[0])] == "Aa."


# --- a slow plain-Python reference for the simple rules ------------------------

_BREAKS = re.compile(r"\r\n|[\n\r\x85\u2028]")


def _n_breaks(ws: str) -> int:
    return len(_BREAKS.findall(ws))


def ref_paragraphs(text: str) -> list[tuple[int, int]]:
    """Blank-line paragraphs: split at whitespace runs with >= 2 line breaks or a U+2029."""
    out = []
    start = None
    last = 0
    for m in re.finditer(r"\S+|\s+", text):
        chunk = m.group(0)
        if not chunk.isspace():
            if start is None:
                start = m.start()
            last = m.end()
        elif start is not None and (_n_breaks(chunk) >= 2 or "\u2029" in chunk):
            out.append((start, last))
            start = None
    if start is not None:
        out.append((start, last))
    return out


CLOSERS = "\"')]"
TERMS = ".!?"


SHORT_LINE = 50  # documented: a heading-like line has at most 50 characters


def ref_line_ends(text: str, line: int, ws: int, nxt: int, pe: int, mode: str) -> bool:
    """Whether one line break between the line [line, ws) and text[nxt] ends a sentence."""
    if mode == "break":
        return True
    if mode == "ignore" or nxt >= pe or text[nxt].islower():
        return False
    last = text[ws - 1]
    if last == ":":
        return True
    return ws - line <= SHORT_LINE and last not in TERMS + ",;-"


def ref_sentences(text: str, mode: str = "auto") -> list[tuple[int, int]]:
    """Simple rules only (inputs without abbreviations, digits or CJK): a run of
    . ! ? plus closers ends a sentence at the paragraph end, or before whitespace
    when the next word (after opening quotes) is not lowercase, except a single
    '.' after capital initials ("J.", "J.R.R.") or after a single lowercase
    letter starting the sentence (an enumerator)."""
    out = []
    for ps, pe in ref_paragraphs(text):
        i, start, tok, line = ps, None, ps, ps
        while i < pe:
            c = text[i]
            if c.isspace():
                j = i
                while j < pe and text[j].isspace():
                    j += 1
                nb = _n_breaks(text[i:j])
                if start is not None and (nb >= 2 or (nb == 1 and ref_line_ends(text, line, i, j, pe, mode))):
                    out.append((start, i))
                    start = None
                if nb:
                    line = j
                i = tok = j
                continue
            if start is None:
                start = i
            if c not in TERMS:
                i += 1
                continue
            j = i
            while j < pe and text[j] in TERMS:
                j += 1
            single = c == "." and j == i + 1
            while j < pe and text[j] in CLOSERS:
                j += 1
            if j >= pe:
                end = True
            elif not text[j].isspace():
                end = False
            else:
                k = j
                while k < pe and text[k].isspace():
                    k += 1
                while k < pe and text[k] in "\"'":
                    k += 1
                nxt = text[k]
                word = text[tok:i].lstrip("\"'([")
                word_start = i - len(word)
                if nxt.islower() or (c == "." and nxt == "."):
                    end = False
                elif single and len(word) % 2 == 1 and all(
                    ch.isupper() if k % 2 == 0 else ch == "." for k, ch in enumerate(word)
                ):
                    end = False  # initials: "B." or "B.B."
                elif single and len(word) == 1 and word.islower() and word_start == start:
                    end = False  # an enumerator "a." starting the sentence
                else:
                    end = True
            if end:
                out.append((start, j))
                start = None
            i = j
        if start is not None:
            out.append((start, pe))
    return out


# words that are no abbreviation in any language momoka knows (consonant clusters)
_word = st.text(alphabet="bkqwxzBKQWXZ\u00e9\u00fc\u0416\u0436\U0001F600\u4e2d", min_size=1, max_size=6)
_sep = st.sampled_from([" ", " ", " ", "  ", "\n", "\n", ": ", ":\n", ",\n", "\n\n", " \n \n", ". ", "! ", "? ", "... ", '." ', ".) ", "?' ", ".", "!?", ' "', " (", "\r\n\r\n"])
_simple_doc = st.lists(st.tuples(_word, _sep), max_size=40).map(lambda xs: "".join(w + s for w, s in xs))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_simple_doc, st.sampled_from(["auto", "ignore", "break"]))
def test_against_reference(text, mode):
    s, e = split_sentences(text, newlines=mode)
    assert list(zip(s.tolist(), e.tolist())) == ref_sentences(text, mode)


# --- invariants on arbitrary unicode ----------------------------------------------


def _check_spans(text: str, s: np.ndarray, e: np.ndarray) -> list[tuple[int, int]]:
    spans = list(zip(s.tolist(), e.tolist()))
    prev = 0
    for a, b in spans:
        assert prev <= a < b <= len(text)
        piece = text[a:b]
        assert piece == piece.strip() and piece  # trimmed, non-empty
        prev = b
    return spans


def _covers_non_space(text: str, spans: list[tuple[int, int]]) -> None:
    covered = np.zeros(len(text), dtype=bool)
    for a, b in spans:
        covered[a:b] = True
    for i, ch in enumerate(text):
        assert covered[i] or ch.isspace(), (i, ch)


_any_text = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from(list(" \n\n\r\t.!?\"')(\u3002\uff01\u300d\u2029\u2026.. Dr. U.S. 3.14 J. ")),
    ),
    max_size=300,
)


@settings(max_examples=300, deadline=None)
@given(_any_text)
def test_invariants_random_unicode(text):
    ps, pe = split_paragraphs(text)
    pspans = _check_spans(text, ps, pe)
    assert pspans == ref_paragraphs(text)
    ss, se = split_sentences(text)
    sspans = _check_spans(text, ss, se)
    _covers_non_space(text, sspans)
    # every sentence lies inside one paragraph
    for a, b in sspans:
        assert any(p0 <= a and b <= p1 for p0, p1 in pspans)
    # sentences inside the paragraphs equal sentences of the whole text
    ws, we = split_sentences_within(text, ps, pe)
    assert ws.tolist() == ss.tolist() and we.tolist() == se.tolist()


def test_threads_share_the_segmenter():
    # the GIL is released during segmentation: concurrent calls give the same spans
    from concurrent.futures import ThreadPoolExecutor

    text = "Dr. Smith came. He left!\n\n\u4e2d\u6587\u3002\U0001F600 ok. " * 2000
    expected = split_sentences(text)
    with ThreadPoolExecutor(4) as ex:
        for s, e in ex.map(lambda _: split_sentences(text), range(8)):
            assert np.array_equal(s, expected[0]) and np.array_equal(e, expected[1])
