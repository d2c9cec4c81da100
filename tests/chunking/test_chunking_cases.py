"""Hand-computed chunkings of small documents, the registry, and bad input.

TEXT offsets:  One(0-3) two(4-7) three.(8-14) Four(15-19) five!(20-25) \\n\\n
               Six(27-30) seven(31-36) eight(37-42) nine.(43-48) Ten.(49-53)
Sentences: (0,14) (15,25) (27,48) (49,53); paragraphs: (0,25) (27,53).
"""

from __future__ import annotations

import pytest

from momoka.chunking import (
    FixedChunker,
    ParagraphChunker,
    RecursiveChunker,
    SentenceChunker,
    StructureChunker,
    available_chunkers,
    get_chunker,
)
from momoka.errors import ConfigError, InputError
from momoka.text import Document, Section

TEXT = "One two three. Four five!\n\nSix seven eight nine. Ten."

# A document with hand-made sections (A contains B and C):
# A(0-1) Intro text here.(3-19) B(21-22) Body of bee.(24-36) More bees.(37-47) C(49-50) Short.(52-58)
STEXT = "A\n\nIntro text here.\n\nB\n\nBody of bee. More bees.\n\nC\n\nShort."
SECTIONS = [
    Section("A", 1, 0, 58, 0, 1, ("A",)),
    Section("B", 2, 21, 49, 21, 22, ("A", "B")),
    Section("C", 2, 49, 58, 49, 50, ("A", "C")),
]


def spans(chunker, doc):
    return [(c.start, c.end) for c in chunker(doc)]


@pytest.fixture
def doc():
    return Document(TEXT)


@pytest.mark.parametrize(
    "chunker, expected",
    [
        (FixedChunker(4), [(0, 19), (20, 42), (43, 53)]),
        (FixedChunker(4, overlap=2), [(0, 19), (8, 30), (20, 42), (31, 53)]),
        (FixedChunker(20, unit="chars"), [(0, 19), (20, 40), (40, 53)]),
        (FixedChunker(5, align="sentence"), [(0, 25), (27, 53)]),
        (FixedChunker(4, align="sentence"), [(0, 14), (15, 25), (27, 48), (49, 53)]),
        (SentenceChunker(2), [(0, 25), (27, 53)]),
        (SentenceChunker(3, overlap=1), [(0, 48), (27, 53)]),
        (ParagraphChunker(), [(0, 25), (27, 53)]),
        (ParagraphChunker(size=10), [(0, 53)]),
        (ParagraphChunker(size=9), [(0, 25), (27, 53)]),
        (RecursiveChunker(6), [(0, 25), (27, 53)]),
        (RecursiveChunker(3), [(0, 14), (15, 25), (27, 42), (43, 48), (49, 53)]),
        (RecursiveChunker(30, unit="chars"), [(0, 25), (27, 53)]),
        (RecursiveChunker(12, unit="chars"), [(0, 7), (8, 14), (15, 25), (27, 36), (37, 48), (49, 53)]),
        (StructureChunker(100), [(0, 53)]),  # no sections: one section, fits
        (StructureChunker(5), [(0, 25), (27, 53)]),  # packed sentences
    ],
    ids=repr,
)
def test_hand_computed(doc, chunker, expected):
    assert spans(chunker, doc) == expected


def test_chunks_carry_document_indices(doc):
    chunks = SentenceChunker(1)(doc)
    assert [c.sentence for c in chunks] == [0, 1, 2, 3]
    assert [c.paragraph for c in chunks] == [0, 0, 1, 1]
    assert [c.text for c in chunks] == ["One two three.", "Four five!", "Six seven eight nine.", "Ten."]


def test_structure_one_chunk_per_smallest_section():
    d = Document(STEXT, sections=SECTIONS)
    assert spans(StructureChunker(100), d) == [(0, 19), (21, 47), (49, 58)]
    chunks = StructureChunker(100)(d)
    assert [c.section for c in chunks] == [("A",), ("A", "B"), ("A", "C")]
    # B (6 tokens) is over 4: split on sentences, heading kept with the first
    assert spans(StructureChunker(4), d) == [(0, 19), (21, 36), (37, 47), (49, 58)]


def test_structure_merges_heading_only_sections():
    text = "A\n\nB\n\nBody text."  # A(0-1) B(3-4) Body text.(6-16); A has no text of its own
    secs = [Section("A", 1, 0, 16, 0, 1, ("A",)), Section("B", 2, 3, 16, 3, 4, ("A", "B"))]
    d = Document(text, sections=secs)
    assert spans(StructureChunker(100), d) == [(0, 16)]
    assert spans(StructureChunker(100, merge_headings=False), d) == [(0, 1), (3, 16)]


def test_structure_on_markdown():
    d = Document.from_markdown("# Title\n\nIntro.\n\n## Part\n\nBody one. Body two.\n")
    chunks = StructureChunker(100)(d)
    assert [c.section for c in chunks] == [("Title",), ("Title", "Part")]
    assert chunks[0].text.endswith("Intro.") and chunks[1].text.endswith("Body two.")


def test_accepts_plain_string():
    assert [c.text for c in ParagraphChunker()("a b\n\nc")] == ["a b", "c"]


def test_non_ascii_offsets_are_python_str_offsets():
    text = "東京は大きい。 😀 café naïve word.\n\nÉté 日本語 end."
    d = Document(text)
    for chunker in (FixedChunker(2), FixedChunker(5, unit="chars"), RecursiveChunker(3)):
        for c in chunker(d):
            assert text[c.start : c.end] == c.text


def test_registry_names_and_size_alias():
    assert available_chunkers() == ["fixed", "sentence", "paragraph", "recursive", "structure"]
    assert get_chunker("structure", size=7).max_size == 7
    assert get_chunker("sentence", size=4).n == 4
    assert get_chunker("fixed", size=9, overlap=2, unit="chars").size == 9
    assert isinstance(get_chunker("recursive"), RecursiveChunker)
    assert get_chunker("paragraph", size=None).size is None  # None means default


@pytest.mark.parametrize(
    "make",
    [
        lambda: FixedChunker(0),  # size must be positive
        lambda: FixedChunker(-3),  # negative size
        lambda: FixedChunker(2.5),  # not an integer
        lambda: FixedChunker(True),  # bool is not a size
        lambda: FixedChunker(4, overlap=4),  # overlap must be smaller than size
        lambda: FixedChunker(4, overlap=-1),  # negative overlap
        lambda: FixedChunker(4, unit="words"),  # unknown unit
        lambda: FixedChunker(4, unit="chars", tokenizer=len),  # tokenizer with chars
        lambda: FixedChunker(4, align="paragraph"),  # unknown alignment
        lambda: FixedChunker(4, tokenizer=42),  # not a tokenizer
        lambda: SentenceChunker(0),  # n must be positive
        lambda: SentenceChunker(2, overlap=2),  # overlap >= n
        lambda: RecursiveChunker(10, separators=[]),  # no separators
        lambda: RecursiveChunker(10, separators="abc"),  # a string, not a sequence of separators
        lambda: RecursiveChunker(10, separators=["\n", ""]),  # empty separator
        lambda: RecursiveChunker(10, separators=["\n", 3]),  # non-string separator
        lambda: StructureChunker(0),  # max_size must be positive
        lambda: ParagraphChunker(size=0),  # merge size must be positive
        lambda: get_chunker("nope"),  # unknown chunker
        lambda: get_chunker("fixed", bogus=1),  # unknown parameter
        lambda: get_chunker("structure", size=1, max_size=2),  # both size and its alias
    ],
)
def test_bad_configuration_raises_config_error(make):
    with pytest.raises(ConfigError):
        make()


@pytest.mark.parametrize(
    "bad",
    [
        lambda s: "3",  # returns a str
        lambda s: -1,  # negative count
        lambda s: True,  # a bool is not a count
        lambda s: None,  # nothing
    ],
)
def test_bad_tokenizer_output_raises_config_error(bad):
    with pytest.raises(ConfigError):
        FixedChunker(3, tokenizer=bad)(Document("a b c d"))


def test_bad_document_raises_input_error():
    with pytest.raises(InputError):
        FixedChunker(3)(42)  # not a document
    with pytest.raises(InputError):
        FixedChunker(3)(b"bytes are not text")  # bytes
    with pytest.raises(InputError):
        FixedChunker(3)("   \n ")  # whitespace-only text (refused by Document)
