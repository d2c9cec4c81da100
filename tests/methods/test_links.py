"""Title links (momoka.methods.standard.links): the titles a chunk holds, hand-computed link insertions, a
slow reference on random rankings, and the hybrid retriever bringing a bridge question's second passage
in after the first."""

from __future__ import annotations

import random

import pytest

from momoka.methods.standard.links import RARE_MIN, TitleTable, chunk_titles, link_titles

BODY = "was a naval battle fought in the Pacific during the Second World War between two fleets."


def test_chunk_titles():
    text = f"Battle of Manila (1945)\nThe Battle of Manila {BODY}\n\nGuam\nThe island of Guam {BODY}"
    assert chunk_titles(text, "Battles\nNaval history ::: Pacific", "Battles") == [
        "Naval history ::: Pacific", "Battle of Manila", "Guam"]
    # a document without a title: every header line is a section (or title line)
    assert chunk_titles(text, "Naval history ::: Pacific", None)[0] == "Naval history ::: Pacific"
    # a header of the document's title alone names no title; a line that ends a sentence is no title line
    assert chunk_titles(f"It ended.\nThe Battle of Manila {BODY}", "Battles", "Battles") == []
    # too short, or without a capital letter, is no title
    assert chunk_titles(f"Ab\nThe Battle of Manila {BODY}\n\nsome notes\nThe Battle of Guam {BODY}", None) == []


def _table(heads: dict[int, tuple[str, str]], df: dict[str, int] | None = None, n: int = 1000) -> TitleTable:
    """A table of chunks ``id -> (doc, text)``; a chunk's title is its first line."""
    rows = [(cid, doc, text, None, None) for cid, (doc, text) in sorted(heads.items())]
    return TitleTable(rows, lambda t: (df or {}).get(t, 1), n)


PAGES = {
    1: ("d", f"Film Zorro\nFilm Zorro {BODY} It was directed by Grace Hopper and shot in Lima."),
    2: ("d", f"Lima Harbour\nLima Harbour {BODY}"),
    3: ("d", f"Other Page\nOther Page {BODY}"),
    7: ("d", f"Grace Hopper\nGrace Hopper {BODY}"),
    8: ("e", f"Grace Hopper\nGrace Hopper {BODY} (a second page of that title, in another document)"),
    9: ("d", f"Shot in Lima\nShot in Lima {BODY}"),
}


def text_of(cid: int) -> str:
    return PAGES[cid][1]


def doc_of(cid: int) -> str:
    return PAGES[cid][0]


def test_hand_computed_links():
    table = _table(PAGES)
    ranking = [(1, 0.9), (3, 0.8), (2, 0.7)]
    # item 1 writes "Grace Hopper" (heading chunk 7 in its own document, and chunk 8 in another) and "Lima."
    # ("Lima Harbour" and "Shot in Lima" are titles it does not write whole)
    got = link_titles(ranking, "who directed Film Zorro?", table, text_of, doc_of, top=2, k=10)
    assert got == [(1, 0.9), (7, 0.9), (3, 0.8), (2, 0.7)]
    assert link_titles(ranking, "who directed Film Zorro?", table, text_of, doc_of, top=2, k=2) == [(1, 0.9), (7, 0.9)]
    # off, or a title the query writes, or no item in the top that names one: the ranking as it was
    assert link_titles(ranking, "q", table, text_of, doc_of, top=0, k=3) == ranking
    # a title the query writes is not followed from an item: the query places it after the first item
    assert link_titles(ranking, "Grace Hopper and Film Zorro", table, text_of, doc_of, top=2, k=3) == [
        (1, 0.9), (7, 0.9), (3, 0.8)]
    assert link_titles([(3, 0.8), (2, 0.7), (1, 0.6)], "q", table, text_of, doc_of, top=2, k=3) == [(3, 0.8), (2, 0.7), (1, 0.6)]
    # a linked chunk ranked lower moves up, keeping the higher of its scores and the linker's
    assert link_titles([(1, 0.9), (3, 0.8), (7, 0.1)], "q", table, text_of, doc_of, top=1, k=3) == [
        (1, 0.9), (7, 0.9), (3, 0.8)]
    # already right after (or above) its linker: unchanged
    assert link_titles([(7, 1.0), (1, 0.9), (3, 0.8)], "q", table, text_of, doc_of, top=2, k=3) == [(7, 1.0), (1, 0.9), (3, 0.8)]
    # a document filter that excludes the target
    assert link_titles(ranking, "q", table, text_of, doc_of, top=2, k=4, allowed={1, 2, 3}.__contains__) == ranking


def test_hand_computed_query_links():
    table = _table(PAGES)
    # the question names Film Zorro (chunk 1, ranked third): right after the first item, with its score;
    # its own links are not followed (it was not in the top)
    got = link_titles([(3, 0.8), (2, 0.7), (1, 0.6)], "Who directed Film Zorro?", table, text_of, doc_of, 2, 5)
    assert got == [(3, 0.8), (1, 0.8), (2, 0.7)]
    # two named passages, in the order named; one already within the first three stays where it is
    got = link_titles([(3, 0.8), (2, 0.7), (9, 0.5), (7, 0.4), (1, 0.3)], "Grace Hopper or Shot in Lima?", table,
                      text_of, doc_of, 1, 5)
    assert got == [(3, 0.8), (7, 0.8), (2, 0.7), (9, 0.5), (1, 0.3)]
    # named but first already, or named in another document than the first item's: that document's head
    assert link_titles([(1, 0.9), (3, 0.8)], "Film Zorro?", table, text_of, doc_of, 1, 5)[0] == (1, 0.9)
    pages = dict(PAGES)
    pages[3] = ("e", PAGES[3][1])
    other = _table(pages)
    got = link_titles([(3, 0.8), (2, 0.7), (7, 0.1)], "Is Grace Hopper older?", other, lambda c: pages[c][1],
                      lambda c: pages[c][0], 1, 5)
    assert [c for c, _ in got] == [3, 8, 2, 7]
    # a document filter that excludes it; and links off
    assert link_titles([(3, 0.8), (1, 0.6)], "Film Zorro", table, text_of, doc_of, 1, 5,
                       allowed={3}.__contains__) == [(3, 0.8), (1, 0.6)]
    assert link_titles([(3, 0.8), (2, 0.7), (1, 0.6)], "Film Zorro", table, text_of, doc_of, 0, 5) == [
        (3, 0.8), (2, 0.7), (1, 0.6)]


def test_mentions_through_trailing_punctuation():
    pages = {1: ("d", f"Outrage! (game)\nOutrage! {BODY}"), 2: ("d", f"Camel Up\nCamel Up {BODY}"),
             3: ("d", f"Alien\nAlien {BODY}")}
    table = _table(pages)
    assert table.mentions("What are both Camel Up and Outrage!?") == ["Camel Up", "Outrage!"]
    assert table.mentions("Was Alien, or Aliens, first?") == ["Alien"]  # "Aliens" is another word


def test_own_title_common_title_and_other_document():
    own = {1: ("d", f"Grace Hopper\nGrace Hopper {BODY} Grace Hopper said so.")}
    own.update({7: ("d", f"Grace Hopper\nGrace Hopper {BODY}")})
    table = _table(own)
    # chunk 1's own title is not a link, even where another chunk of the same title exists
    assert link_titles([(1, 1.0)], "q", table, lambda c: own[c][1], lambda c: own[c][0], 2, 5) == [(1, 1.0)]
    # a title whose rarest term is in more than 2 % of the chunks is no link
    common = _table(PAGES, df={"Grace Hopper": 21}, n=1000)
    assert link_titles([(1, 0.9)], "q", common, text_of, doc_of, 1, 5) == [(1, 0.9)]
    rare = _table(PAGES, df={"Grace Hopper": 20}, n=1000)
    assert [c for c, _ in link_titles([(1, 0.9)], "q", rare, text_of, doc_of, 1, 5)] == [1, 7]
    small = _table(PAGES, df={"Grace Hopper": RARE_MIN}, n=10)  # a small collection: RARE_MIN chunks
    assert [c for c, _ in link_titles([(1, 0.9)], "q", small, text_of, doc_of, 1, 5)] == [1, 7]
    # a title heading chunks in two documents: the linker's document first, else the first document
    pages = dict(PAGES)
    pages[1] = ("e", PAGES[1][1])
    other = _table(pages)
    assert [c for c, _ in link_titles([(1, 0.9)], "q", other, lambda c: pages[c][1], lambda c: pages[c][0], 1, 5)] == [1, 8]


def test_invariants_on_random_rankings():
    rng = random.Random(11)
    names = [f"Name{i} Person" for i in range(10)]
    for _ in range(300):
        heads = {t: rng.randrange(100, 130) for t in names}
        pages = {}
        for c in range(100, 130):
            mine = [t for t, h in heads.items() if h == c]
            named = rng.sample(names, rng.randint(0, 3))
            pages[c] = ("d", (mine[0] + "\n" if mine else "") + "Text " + " and ".join(named) + " " + BODY)
        table = _table(pages)
        n = rng.randint(1, 12)
        ranking = list(zip(rng.sample(range(100, 130), n), sorted((rng.random() for _ in range(n)), reverse=True)))
        query = " ".join(rng.sample(names, rng.randint(0, 2)))
        top, k = rng.randint(0, 3), rng.randint(1, n + 3)
        got = link_titles(ranking, query, table, lambda c: pages[c][1], lambda c: pages[c][0], top, k)
        ids = [c for c, _ in got]
        orig = [c for c, _ in ranking]
        assert len(ids) == len(set(ids)) <= k
        assert all(a >= b for (_, a), (_, b) in zip(got, got[1:]))  # never increasing
        def linked(c):  # placed as a link: a top item before it names a title that heads it, or the query does
            before = ids[:ids.index(c)]
            titles = [t for t, h in table.heads.items() if c in h.values() and t not in query]
            named = [t for t in table.heads if t in query and table.head(t, pages[ids[0]][0]) == c]
            return (any(x in orig[:top] and t in pages[x][1].split("\n", 1)[-1] for x in before for t in titles)
                    or (top > 0 and bool(named)))

        rest = [c for c in ids if not linked(c)]
        assert rest == [c for c in orig if c in rest]  # everything else keeps the ranking's order
        assert all(c in orig for c in rest)
        if top == 0:
            assert got == ranking[:k]


def test_hybrid_brings_in_the_bridge_passage(tmp_path):
    import momoka
    from tests.store.conftest import HashEmbedder

    paras = [
        "Film Zorro\nFilm Zorro is a 1999 drama film about a masked rider, directed by Jane Quimby and shot "
        "in Spain over one summer.",
        "Jane Quimby\nJane Quimby is a painter, photographer and writer who later made films. Her family came "
        "from Reykjavik, where she grew up by the sea; she studied art in Paris and lived in Rome and Vienna.",
    ]
    for i in range(12):  # other films and people, closer to the question's words than Quimby's page
        paras.append(f"Film Mira {i}\nFilm Mira {i} is a drama film whose director was born in town {i}; "
                     f"the director of the film was born there.")
    docs = [{"doc_id": f"page{i}", "title": "Films and people", "text": p} for i, p in enumerate(paras)]
    q = "Where was the director of Film Zorro born?"
    with momoka.Index.build(docs, store=tmp_path / "s", embedder=HashEmbedder(), progress=False) as ix:
        plain = ix.search(q, k=2, retriever="hybrid", links=0)
        linked = ix.search(q, k=2, retriever="hybrid")
        assert "Film Zorro" in plain[0].text
        assert not any("Reykjavik" in h.text for h in plain)  # the question does not reach it
        assert "Film Zorro" in linked[0].text and "Reykjavik" in linked[1].text
        assert linked[0].provenance["links"] == 2
        with pytest.raises(momoka.errors.ConfigError, match="links"):
            ix.search(q, k=2, retriever="hybrid", links=-1)
        with pytest.raises(momoka.errors.ConfigError, match="query_links"):
            ix.search(q, k=2, retriever="hybrid", query_links="no")


def test_query_links_option():
    table = _table(PAGES)
    ranking = [(3, 0.8), (2, 0.7), (1, 0.6)]
    assert link_titles(ranking, "Who directed Film Zorro?", table, text_of, doc_of, 2, 5, query_links=False) == ranking


def test_document_titles_mentions():
    from momoka.methods.standard.links import DocumentTitles

    titles = DocumentTitles([("d1", "Acme Corp"), ("d2", "Acme Corp Holdings"), ("d3", "Beta Ltd"),
                             ("d4", "Report"), ("d5", "Report"), ("d6", "lower case"), ("d7", "Abc"),
                             ("d8", None), ("d9", "Beta  Ltd")])
    assert len(titles) == 4  # uncapitalised, short and missing titles do not count; namesakes count once
    assert titles.mentions("Compare Acme Corp Holdings and Beta Ltd.") == [("Acme Corp Holdings", ("d2",)),
                                                                           ("Beta Ltd", ("d3", "d9"))]
    assert titles.mentions("Did Acme Corp, Beta Ltd or Acme Corp grow? Report") == [
        ("Acme Corp", ("d1",)), ("Beta Ltd", ("d3", "d9")), ("Report", ("d4", "d5"))]
    assert titles.mentions("acme corp and beta ltd") == []


def _named_first(ix, q: str, parts, k: int = 6) -> list[int]:
    """The reference ranking of ``named_documents=1``: for each ``(other title, doc ids)`` in ``parts``, the best
    chunk of those documents for ``q`` with the other title taken out, in that order, then the plain ranking
    without them."""
    plain = ix.search(q, k=k, retriever="hybrid", named_documents=0)
    first = [ix.search(" ".join(q.replace(other, " ").split()), k=1, retriever="hybrid", named_documents=0,
                       doc_ids=list(ds))[0] for other, ds in parts]
    want = [h.chunk_id for h in first]
    return (want + [h.chunk_id for h in plain if h.chunk_id not in want])[:k]


def test_hybrid_named_documents_come_first(tmp_path):
    import momoka
    from tests.store.conftest import HashEmbedder

    alpha = " ".join(f"Alpha Corp revenue rose in quarter {i} as the revenue of its stores grew." for i in range(6))
    beta = ("Beta Ltd opened a factory. Its staff grew to 400 people. "
            "In 2020 the revenue of Beta Ltd fell by a tenth. The company moved its offices.")
    docs = [{"doc_id": "a", "title": "Alpha Corp", "text": alpha * 3},
            {"doc_id": "b", "title": "Beta Ltd", "text": beta},
            {"doc_id": "c", "title": "Gamma Group", "text": "Gamma Group revenue rose. " * 20}]
    q = "Compare the revenue of Alpha Corp in 2019 and Beta Ltd in 2020."
    with momoka.Index.build(docs, store=tmp_path / "s", embedder=HashEmbedder(), size=20, progress=False) as ix:
        got = ix.search(q, k=6, retriever="hybrid", named_documents=1)
        assert [h.chunk_id for h in got] == _named_first(ix, q, (("Beta Ltd", ["a"]), ("Alpha Corp", ["b"])))
        assert [h.doc_id for h in got[:2]] == ["a", "b"]
        assert got[0].provenance["named_documents"] == 1
        # one named document, or off: the plain ranking
        one = ix.search("What was the revenue of Beta Ltd in 2020?", k=4, retriever="hybrid")
        assert [h.chunk_id for h in one] == [h.chunk_id for h in ix.search(
            "What was the revenue of Beta Ltd in 2020?", k=4, retriever="hybrid", named_documents=0)]
        with pytest.raises(momoka.errors.ConfigError, match="named_documents"):
            ix.search(q, k=2, retriever="hybrid", named_documents=-1)


def test_hybrid_named_documents_with_namesakes(tmp_path):
    """Two documents of one title (two companies of one name) are named together: the first place goes to the
    best chunk of either for the query without the other title, as a search restricted to both finds it."""
    import momoka
    from tests.store.conftest import HashEmbedder

    docs = [{"doc_id": "a1", "title": "Alpha Corp", "text": "Alpha Corp sells shoes. Its revenue rose. " * 8},
            {"doc_id": "a2", "title": "Alpha Corp", "text": "Alpha Corp was founded in 1990 in Oslo by two engineers. "
                                                            "It makes pumps. " * 3},
            {"doc_id": "b", "title": "Beta Ltd", "text": "Beta Ltd was founded in 2001 in Lyon. It makes paint. " * 3},
            {"doc_id": "c", "title": "Gamma Group", "text": "Gamma Group was founded in 1990. Gamma Group grew. " * 20}]
    q = "When were Alpha Corp and Beta Ltd founded?"
    with momoka.Index.build(docs, store=tmp_path / "s", embedder=HashEmbedder(), size=20, progress=False) as ix:
        got = ix.search(q, k=6, retriever="hybrid", named_documents=1)
        assert [h.chunk_id for h in got] == _named_first(ix, q, (("Beta Ltd", ["a1", "a2"]), ("Alpha Corp", ["b"])))
        assert got[0].doc_id in ("a1", "a2") and got[1].doc_id == "b"


@pytest.mark.parametrize("independent", [True, False])
def test_named_documents_parts_are_embedded_with_the_question(tmp_path, independent):
    """With an embedder whose vectors depend on their text alone, a question naming two documents and its two
    parts are embedded in one call; with any other embedder in two (the question, then its parts), as a
    batch could change the vectors. The ranking is the reference's either way."""
    import momoka
    from tests.store.conftest import HashEmbedder

    emb = HashEmbedder()
    if independent:
        emb.batch_independent = True
    docs = [{"doc_id": "a", "title": "Alpha Corp", "text": "Alpha Corp revenue rose as its stores grew. " * 12},
            {"doc_id": "b", "title": "Beta Ltd", "text": "In 2020 the revenue of Beta Ltd fell by a tenth. " * 3},
            {"doc_id": "c", "title": "Gamma Group", "text": "Gamma Group revenue rose. " * 20}]
    q = "Compare the revenue of Alpha Corp in 2019 and Beta Ltd in 2020."
    with momoka.Index.build(docs, store=tmp_path / "s", embedder=emb, size=20, progress=False) as ix:
        assert ix.corpus.embedder_for() is emb
        before = emb.calls
        got = ix.search(q, k=6, retriever="hybrid", named_documents=1)
        assert emb.calls - before == (1 if independent else 2)
        assert [h.chunk_id for h in got] == _named_first(ix, q, (("Beta Ltd", ["a"]), ("Alpha Corp", ["b"])))


def _doc_table(pages: dict[int, tuple[str, str, str | None]]) -> TitleTable:
    """A table of one-chunk pages ``id -> (doc, text, document title)``: no title line, no header."""
    return TitleTable([(c, d, x, None, t) for c, (d, x, t) in sorted(pages.items())], lambda t: 1, 1000)


def test_document_titles_link_across_pages():
    pages = {1: ("zorro", f"Film Zorro {BODY} It was directed by Grace Hopper in Lima.", "Film Zorro"),
             2: ("hopper", f"She {BODY}", "Grace Hopper (director)"),
             3: ("other", f"Other {BODY}", "Other Page"),
             4: ("hopper", f"Grace Hopper later {BODY}", "Grace Hopper (director)"),  # her page's second chunk
             5: ("notitle", f"Lima {BODY}", None)}
    table = _doc_table(pages)
    text, doc = (lambda c: pages[c][1]), (lambda c: pages[c][0])
    assert table.doc_title == {"zorro": "Film Zorro", "hopper": "Grace Hopper", "other": "Other Page", "notitle": ""}
    # the page's text names another page's title (its parenthesis dropped): that page's first chunk follows
    assert link_titles([(1, 0.9), (3, 0.8)], "who directed it?", table, text, doc, 1, 5) == [(1, 0.9), (2, 0.9), (3, 0.8)]
    # a page's own title written in its text, or in its other chunks, is no link
    assert link_titles([(4, 0.9), (3, 0.8)], "q", table, text, doc, 1, 5) == [(4, 0.9), (3, 0.8)]
    # the question names a page by its document title
    assert link_titles([(3, 0.9), (5, 0.8), (2, 0.1)], "Where was Grace Hopper born?", table, text, doc, 1, 5) == [
        (3, 0.9), (2, 0.9), (5, 0.8)]


def test_titles_written_in_another_case():
    pages = {1: ("a", f"Text {BODY}", "Bank of China Tower (Hong Kong)"), 2: ("b", f"Text {BODY}", "The Crown"),
             3: ("c", f"Text {BODY}", "Marco Da Silva (dancer)"), 4: ("d", f"Text {BODY}", "Marco da Silva (footballer)")}
    table = _doc_table(pages)
    # later letters in any case; the first letter as the title writes it
    assert table.mentions("the Bank Of China Tower was passed") == ["Bank of China Tower"]
    assert table.mentions("the bank of china tower, the crown") == []
    assert table.mentions("THE CROWN") == ["The Crown"]
    # two titles that differ only in case: the one written exactly, else both
    assert table.mentions("Was Marco Da Silva older?") == ["Marco Da Silva"]
    assert table.mentions("Was Marco da Silva older?") == ["Marco da Silva"]
    assert table.mentions("Was Marco DA SILVA older?") == ["Marco Da Silva", "Marco da Silva"]
    from momoka.methods.standard.links import DocumentTitles

    titles = DocumentTitles([("d1", "Excalibur (film)"), ("d2", "Beta Ltd")])
    assert titles.mentions("Compare Excalibur (Film) and BETA LTD.") == [("Excalibur (film)", ("d1",)),
                                                                       ("Beta Ltd", ("d2",))]


def test_hybrid_links_pages_by_their_document_titles(tmp_path):
    """A corpus of pages: each page's title is its document's (not a line of its text); the first page names the
    second by that title, and the hybrid retriever places it second."""
    import momoka
    from tests.store.conftest import HashEmbedder

    pages = [("Film Zorro", "Film Zorro is a 1999 drama film about a masked rider, directed by Jane Quimby and shot "
                            "in Spain over one summer."),
             ("Jane Quimby", "A painter, photographer and writer who later made films. Her family came from "
                             "Reykjavik, where she grew up by the sea; she studied art in Paris.")]
    for i in range(12):
        pages.append((f"Film Mira {i}", f"Film Mira {i} is a drama film whose director was born in town {i}; "
                                        f"the director of the film was born there."))
    docs = [{"doc_id": f"page{i}", "title": t, "text": x} for i, (t, x) in enumerate(pages)]
    q = "Where was the director of Film Zorro born?"
    with momoka.Index.build(docs, store=tmp_path / "s", embedder=HashEmbedder(), progress=False) as ix:
        plain = ix.search(q, k=2, retriever="hybrid", links=0)
        assert plain[0].doc_id == "page0" and "page1" not in [h.doc_id for h in plain]
        assert [h.doc_id for h in ix.search(q, k=2)] == ["page0", "page1"]


def _mentions_reference(text: str, titles: list[str]) -> list[str]:
    """The titles ``text`` writes, by comparing every title at every word start (the module doc's rule, written
    plainly: the first letter as in the title, the rest in any case; a first word may carry trailing
    punctuation; an exact spelling at a word start wins over case variants there), in text order, once each."""
    import re

    out: list[str] = []
    for m in re.finditer(r"\S+", text):
        word, keys = m.group(), [m.group()]
        while len(word) > 1 and word[-1] in ".,;:!?\"')]}":
            word = word[:-1]
            keys.append(word)
        found = []
        for key in keys:  # the keys longest first; titles in table order under each
            for t in titles:
                first = t.split()[0]
                if first[:1] + first[1:].lower() != key[:1] + key[1:].lower():
                    continue
                part = m.string[m.start():m.start() + len(t)]
                if part == t or (len(part) == len(t) and part[:1] == t[:1] and part.lower() == t.lower()):
                    found.append(t)
        exact = [t for t in found if text.startswith(t, m.start())]
        for t in exact or found:
            if t not in out:
                out.append(t)
    return out


def test_mentions_equal_a_per_title_reference():
    """TitleTable.mentions looks titles up by length and lower-cased text; on random texts over a vocabulary
    of shared first words, case variants, punctuation and titles that are prefixes of others, it finds what
    comparing every title at every word start finds, in the same order."""
    rng = random.Random(7)
    words = ["The", "the", "Crown", "crown", "Battle", "of", "Manila", "MANILA", "Outrage!", "Outrage", "Zorro",
             "Da", "da", "Silva", "Marco", "The!", "Lima,", "Lima", "İstanbul", "x"]
    titles: list[str] = []
    while len(titles) < 60:
        t = " ".join(rng.choice(words) for _ in range(rng.randint(1, 4)))
        if len(t) >= 4 and any(c.isupper() for c in t) and t not in titles:
            titles.append(t)
    table = TitleTable([(i, f"d{i}", f"{t}\n{t} {BODY}", None, None) for i, t in enumerate(titles)],
                       lambda t: 1, 10_000)
    linkable = [t for ts in table.by_word.values() for t in ts]
    assert len(linkable) > 40
    order = {t: i for i, t in enumerate(table.heads)}  # the table's order of titles (first chunk first)
    for _ in range(300):
        text = " ".join(rng.choice(words + titles) for _ in range(rng.randint(1, 30)))
        assert table.mentions(text) == _mentions_reference(text, sorted(linkable, key=order.get)), text


def test_hybrid_named_documents_of_one_chunk_each(tmp_path):
    """A corpus of pages of one chunk each: the named pages come first, as searching each part within its page
    finds them, and the parts are neither embedded nor ranked (each page's ranking is its one chunk)."""
    import momoka
    from tests.store.conftest import HashEmbedder

    docs = [{"doc_id": "a", "title": "Awolnation", "text": "Awolnation is a band formed in 2010 in Los Angeles."},
            {"doc_id": "f", "title": "Foo Fighters", "text": "Foo Fighters is a rock band formed in Seattle in 1994."},
            {"doc_id": "g", "title": "Green Day", "text": "Green Day is a band formed in 1987 in California."},
            {"doc_id": "h", "title": "Hole", "text": "Hole was a band formed in Los Angeles in 1989, a rock band."}]
    q = "Which band formed first, Awolnation or Foo Fighters?"
    emb = HashEmbedder()
    with momoka.Index.build(docs, store=tmp_path / "s", embedder=emb, progress=False) as ix:
        assert all(len(ix.store.chunk_ids_of([d["doc_id"]])) == 1 for d in docs)
        want = _named_first(ix, q, (("Foo Fighters", ["a"]), ("Awolnation", ["f"])), k=4)
        embedded: list[str] = []
        calls = ix.corpus.embed_queries

        def counting(queries, **kw):
            embedded.extend(queries)
            return calls(queries, **kw)

        ix.corpus.embed_queries = counting
        got = ix.search(q, k=4, retriever="hybrid", named_documents=1)
        assert [h.chunk_id for h in got] == want
        assert [h.doc_id for h in got[:2]] == ["a", "f"]
        assert embedded == [q]  # the question alone: no part was embedded
