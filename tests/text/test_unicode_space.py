"""The native core's whitespace (cpp/include/momoka/unicode_space.hpp) is exactly str.isspace()."""

import numpy as np

from momoka import _core

CODE_POINTS = np.arange(0x110000)
EXPECTED = np.array([chr(c).isspace() for c in range(0x110000)])


def test_expected_set_is_cpythons():
    spaces = {int(c) for c in CODE_POINTS[EXPECTED]}
    assert spaces == {*range(0x09, 0x0E), *range(0x1C, 0x21), 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B),
                      0x2028, 0x2029, 0x202F, 0x205F, 0x3000}


def test_chunk_word_starts_every_code_point():
    # "c1 c2 c3 ...": a word starts at 2k exactly when code point k is not whitespace.
    text = " ".join(chr(c) for c in range(0x110000)) + " "
    starts = np.asarray(_core.chunk_word_starts(text))
    got = np.ones(0x110000, dtype=bool)
    got[starts // 2] = False
    bad = np.nonzero(got != EXPECTED)[0]
    assert bad.size == 0, [hex(int(c)) for c in bad[:20]]


def test_segmenter_trims_every_code_point():
    # Each span "c a c" is trimmed to "a" exactly when c is whitespace.
    text = "".join(chr(c) + "a" + chr(c) for c in range(0x110000))
    lo = np.arange(0x110000, dtype=np.int64) * 3
    starts, ends = _core.Segmenter(newlines="ignore").split_within(text, lo, lo + 3)
    starts, ends = np.asarray(starts), np.asarray(ends)
    span = starts // 3  # spans do not overlap, so each sentence belongs to span start // 3
    first = np.full(0x110000, -1)
    last = np.full(0x110000, -1)
    first[span[::-1]] = starts[::-1] - lo[span[::-1]]
    last[span] = ends - lo[span]
    got = (first == 1) & (last == 2)
    bad = np.nonzero(got != EXPECTED)[0]
    assert bad.size == 0, [hex(int(c)) for c in bad[:20]]
