"""Title lines (``Title\\nText``, no blank line between) stay with their text: ``glue_titles``.

Hand-computed title lines, the chunker with the option on and off on a small document, and the
real HotpotQA documents (each section a title line over its paragraph), where the lone titles are
counted by an independent reading of the file's layout.
"""

from __future__ import annotations

import re

import pytest

from momoka.chunking import RecursiveChunker, get_chunker
from momoka.chunking._splitter import title_lines
from momoka.errors import ConfigError
from momoka.text import Document

TEXT = ("Battle of Calabria\nThe Battle of Calabria was a naval battle fought in 1940 near Punta Stilo.\n\n"
        "Apples\nPears\nPlums are fruit that grow on trees in many gardens.\n"
        "The end of one sentence here.\nResults:\nThe results show a clear gain over every baseline measured here\n"
        "Not after a sentence end\nThis line is long enough to be the text of a title, but the line before it is not one.")


def test_title_lines_hand_cases():
    doc = Document.from_text(TEXT)
    ends, nexts = title_lines(doc)
    # "Battle of Calabria" starts a paragraph; "Results:" follows a sentence end; both over a long line.
    # "Apples" is over a short line, "Pears" follows a line that ends no sentence, "Plums ..." and
    # "The end ..." end sentences, "Not after ..." follows a line that ends no sentence.
    t1, t2 = TEXT.index("Battle of Calabria"), TEXT.index("Results:")
    assert ends.tolist() == [t1 + len("Battle of Calabria"), t2 + len("Results:")]
    assert nexts.tolist() == [TEXT.index("The Battle"), TEXT.index("The results")]
    # a title may end with an abbreviation's period, not with a sentence's
    text = ("Bill Martin Jr.\nWilliam Ivan Martin Jr. was an American educator and author of children's books.\n\n"
            "It ended.\nThe next line is long enough to be the text after a title line here.")
    assert title_lines(Document.from_text(text))[0].tolist() == [len("Bill Martin Jr.")]


def test_wrapped_prose_has_no_title_lines():
    prose = " ".join(f"Clause {i} grants the licensee a right that the licensor may not withdraw later." for i in range(20))
    wrapped = "\n".join(prose[i:i + 72].strip() for i in range(0, len(prose), 72))
    ends, _ = title_lines(Document.from_text(wrapped))
    assert ends.size == 0  # every next line is about as long as the line before: no title over its text


def test_a_title_line_is_never_a_chunk_alone():
    text = ("Battle of Calabria\nThe Battle of Calabria was a naval battle. It was fought in 1940 near Punta Stilo. "
            "Both sides claimed victory. Everyone returned to base.")
    doc = Document.from_text(text)
    glued = RecursiveChunker(size=80, unit="chars", glue_titles=True)(doc)
    plain = RecursiveChunker(size=80, unit="chars")(doc)
    assert plain[0].text == "Battle of Calabria"  # cut at the line break: the title alone
    assert glued[0].text == "Battle of Calabria\nThe Battle of Calabria was a naval battle."
    for chunks in (glued, plain):
        assert all(doc.text[c.start:c.end] == c.text and len(c.text) <= 80 for c in chunks)
        assert "".join(c.text for c in chunks).replace(" ", "").replace("\n", "") == \
            text.replace(" ", "").replace("\n", "")  # the same text, cut elsewhere
    # a title over a first sentence longer than the size: still not alone (cut inside the sentence)
    small = RecursiveChunker(size=40, unit="chars", glue_titles=True)(doc)
    assert small[0].text.startswith("Battle of Calabria\nThe") and all(len(c.text) <= 40 for c in small)


def test_glue_titles_option_and_the_index_default():
    from momoka.methods.pipeline import chunker_params

    assert chunker_params("recursive", 100)["glue_titles"] is True
    assert chunker_params("recursive", 100, {"glue_titles": False})["glue_titles"] is False
    assert "glue_titles" not in RecursiveChunker(100).params()  # stores built before chunk as they did
    assert RecursiveChunker(100, glue_titles=True).params()["glue_titles"] is True
    with pytest.raises(ConfigError, match="glue_titles"):
        get_chunker("recursive", size=100, glue_titles="yes")


def test_hotpotqa_titles_stay_with_their_paragraphs(shared_data):
    from momoka.eval import load_dataset

    path = shared_data / "hotpotqa_dev500_long"
    if not path.is_dir():
        pytest.skip("hotpotqa_dev500_long is not in the shared data")
    docs = load_dataset(path).documents[:10]
    from momoka.methods.pipeline import chunker_params

    on = get_chunker("recursive", **chunker_params("recursive", 100))
    off = get_chunker("recursive", **chunker_params("recursive", 100, {"glue_titles": False}))
    alone = {True: 0, False: 0}
    n_titles = 0
    for d in docs:
        # the layout of the file: sections "Title\nParagraph" separated by blank lines
        titles = {m.group(1) for m in re.finditer(r"(?:\A|\n\n)([^\n]+)\n(?=[^\n])", d.text)}
        n_titles += len(titles)
        doc = d.to_document()
        for glued, chunker in ((True, on), (False, off)):
            alone[glued] += sum(c.text in titles for c in chunker(doc))
    assert n_titles > 300
    assert alone[False] > 50  # without the option the long sections leave their titles alone
    assert alone[True] == 0
