"""Pages and sections on every result, and metadata filters on search.

The store is built from real files the test writes (``_oracles.pdf``): a six-page PDF whose every line
starts and ends with its page's marker word, so the page of any passage is known by hand, and Markdown,
HTML, Word and text files whose paragraphs were written under known headings. Results (``Item``, its
members, ``Citation``, ``query --json``, ``ask --json``) are checked against those pages and headings;
filtered searches against the unfiltered full ranking filtered here, in plain Python.
"""

from __future__ import annotations

import json
import re

import pytest
from momoka import Index
from momoka.cli import main
from momoka.errors import ConfigError, InputError
from momoka.methods.filters import parse_pages

pypdf = pytest.importorskip("pypdf")
pytest.importorskip("docx")

from _oracles.pdf import PAGES, expected_pages, expected_section, write_corpus  # noqa: E402

QUESTIONS = ["how many boats near the harbor?", "the harbor lanterns and ropes", "storms nets gulls",
             "dingo emu tides", "sails anchors costs"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("pages")
    types = write_corpus(root / "src")
    # pypdf reads each page back as the lines written on it: the markers give the page of every word
    reader = pypdf.PdfReader(root / "src" / "manual.pdf")
    assert [p.extract_text().split("\n")[: len(lines)] for p, lines in zip(reader.pages, PAGES)] == \
        [list(lines) for lines in PAGES]
    store = root / "store"
    Index.build([root / "src"], store=store, embedder=None, chunker="recursive", size=40, progress=False).close()
    return store, types


@pytest.fixture(scope="module")
def index(corpus):
    with Index.open(corpus[0]) as ix:
        yield ix


def _check_span(span, text=None):
    """A member or citation carries the page and section the test wrote its text on (None/() elsewhere)."""
    text = span.text if text is None else text
    if span.doc_id == "manual":
        assert (span.page, span.page_end) == expected_pages(text), (span, text)
    else:
        assert (span.page, span.page_end) == (None, None)
        assert tuple(span.section) == (expected_section(span.doc_id, text) or ()), (span.section, text)


def test_every_item_and_member_carries_its_page_and_section(index):
    spanning = 0
    for q in QUESTIONS:
        for budget in (None, 700):
            res = index.search(q, k=30 if budget is None else None, budget=budget, retriever="bm25")
            assert len(res)
            for it in res:
                for m in it.members:
                    _check_span(m)
                    spanning += m.page is not None and m.page_end > m.page
                assert (it.page, it.page_end, it.section) == (it.members[0].page, it.members[0].page_end,
                                                              it.members[0].section)
                d = it.to_dict()
                assert (d["page"], d["page_end"]) == (it.page, it.page_end)
                assert [(m["page"], m["page_end"], tuple(m["section"])) for m in d["members"]] == \
                    [(m.page, m.page_end, m.section) for m in it.members]
    assert spanning  # a chunk glued across the page 4 / page 5 break: page 4, page_end 5
    # the one line of page 4 is found on page 4, whatever chunk holds it
    top = index.search("dingo", k=1, retriever="bm25")[0]
    assert top.page == 4 and "dingo" in top.text
    assert index.corpus.page_of("manual", top.start + top.text.index("dingo")) == 4
    assert index.corpus.page_of("report", 0) is None


@pytest.mark.filterwarnings("ignore:no embedder")
def test_citations_and_context_carry_pages_and_sections(index):
    for q in QUESTIONS:
        ans = index.ask(q, retriever="bm25", reader="evidence", budget=1500)
        assert ans.citations and ans.context
        for c in ans.context:
            _check_span(c)
        for c in ans.citations:
            if c.doc_id == "manual":
                _check_span(c)
            else:  # a quoted sentence is under the heading of the passage it was quoted from
                home = next(p for p in ans.context if p.doc_id == c.doc_id and p.start <= c.start < p.end)
                assert c.section == home.section and c.page is None
            assert c.to_dict()["page"] == c.page and c.to_dict()["section"] == list(c.section)


def test_query_and_ask_json_carry_pages(corpus, capsys):
    store = str(corpus[0])
    assert main(["query", store, "the harbor lanterns and ropes", "--retriever", "bm25", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["items"]
    for it in out["items"]:
        for m in it["members"]:
            if m["doc_id"] == "manual":
                assert (m["page"], m["page_end"]) == expected_pages(m["text"])
            else:
                assert m["page"] is None and tuple(m["section"]) == (expected_section(m["doc_id"], m["text"]) or ())
        assert (it["page"], it["page_end"]) == (it["members"][0]["page"], it["members"][0]["page_end"])
    assert main(["ask", store, "how many boats near the harbor?", "--retriever", "bm25", "--json"]) == 0
    ans = json.loads(capsys.readouterr().out)
    for c in ans["context"] + ans["citations"]:
        if c["doc_id"] == "manual":
            assert (c["page"], c["page_end"]) == expected_pages(c["text"])
        else:
            assert c["page"] is None
    # the printout: "p. N", or "pp. N-M" for a passage across pages
    assert main(["query", store, "dingo emu", "--retriever", "bm25", "-k", "1", "--budget", "0"]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert re.search(r"manual pp\. 4-5 \[\d+:\d+\]", head), head


# ---------------------------------------------------------------------------- filters


def _full(index, q):
    """The unfiltered full ranking (every chunk BM25 returns), the reference the filters are checked on."""
    return list(index.search(q, k=index.store.n_chunks, retriever="bm25"))


def _on(it, lo, hi):
    """Hand-known: the passage's marker pages overlap [lo, hi]."""
    first, last = expected_pages(it.text)
    return first is not None and last >= lo and (hi is None or first <= hi)


FILTERS = [  # (where, the same filter written by hand over doc ids and markers)
    ({"type": "pdf"}, lambda it, types: it.doc_id == "manual"),
    ({"type": ["md", "html"]}, lambda it, types: it.doc_id in ("guide/intro", "guide/faq")),
    ({"type": "docx"}, lambda it, types: it.doc_id == "report"),
    ({"type": "txt"}, lambda it, types: it.doc_id == "notes"),
    ({"folder": "guide"}, lambda it, types: it.doc_id.startswith("guide/")),
    ({"folder": "./guide/"}, lambda it, types: it.doc_id.startswith("guide/")),
    ({"folder": "gui"}, lambda it, types: False),
    ({"title": "harbor  faq"}, lambda it, types: it.doc_id == "guide/faq"),
    ({"page": (2, 3)}, lambda it, types: it.doc_id == "manual" and _on(it, 2, 3)),
    ({"page": "5-"}, lambda it, types: it.doc_id == "manual" and _on(it, 5, None)),
    ({"page": 4}, lambda it, types: it.doc_id == "manual" and _on(it, 4, 4)),
    ({"page": [6, 6], "type": "pdf", "folder": "."}, lambda it, types: it.doc_id == "manual" and _on(it, 6, 6)),
    ({"page": "1-2", "type": "html"}, lambda it, types: False),
]


@pytest.mark.parametrize("where,keep", FILTERS)
def test_filters_equal_the_full_ranking_filtered_by_hand(corpus, index, where, keep):
    for q in QUESTIONS:
        ref = [it for it in _full(index, q) if keep(it, corpus[1])]
        for k in (1, 2, 5):
            res = index.search(q, k=k, retriever="bm25", where=where)
            assert [(it.chunk_id, it.score) for it in res] == [(it.chunk_id, it.score) for it in ref[:k]]
            assert [it.rank for it in res] == list(range(1, len(res) + 1))
            assert res.stats["where"]["page" if "page" in where else next(iter(where))] is not None
        # a budget is filled with matching passages: the longest prefix of the filtered ranking that fits
        res = index.search(q, budget=400, retriever="bm25", where=where, assemble=False)
        total, fit = 0, []
        for it in ref[: index.corpus.search_depth(None, 400)]:
            if total + it.n_chars > 400:
                break
            total += it.n_chars
            fit.append(it.chunk_id)
        if ref and not fit:
            fit = [ref[0].chunk_id]  # keep_first
        assert [it.chunk_id for it in res] == fit


def test_a_page_range_reads_deeper_until_enough_match(index):
    # "harbor" is on every line: pages 1-3 rank first for these words, page 6 is far down
    q = "lanterns boats gulls"
    ref = [it for it in _full(index, q) if _on(it, 6, 6) and it.doc_id == "manual"]
    res = index.search(q, k=1, retriever="bm25", where={"page": 6})
    assert [it.chunk_id for it in res] == [it.chunk_id for it in ref[:1]]
    assert res.stats["where"]["read"] > 1


def test_filters_with_doc_ids_and_per_query(index):
    q = "the harbor lanterns and ropes"
    ref = [it.chunk_id for it in _full(index, q) if it.doc_id == "guide/faq"]
    got = index.search(q, k=5, retriever="bm25", doc_ids=["guide/faq", "manual"], where={"folder": "guide"})
    assert [it.chunk_id for it in got] == ref[:5]
    assert not len(index.search(q, k=5, retriever="bm25", doc_ids="notes", where={"type": "pdf"}))
    with pytest.raises(InputError, match="unknown document"):
        index.search(q, k=5, retriever="bm25", doc_ids="nope", where={"type": "pdf"})
    qs = ["storms nets gulls", "sails anchors costs"]
    batch = index.search_batch(qs, k=3, retriever="bm25", per_query_doc_ids=[None, "report"], where={"type": "docx"})
    assert [[it.chunk_id for it in r] for r in batch] == \
        [[it.chunk_id for it in index.search(q, k=3, retriever="bm25", where={"type": "docx"})] for q in qs]


@pytest.mark.parametrize("where,words", [
    ({"typo": "pdf"}, "unknown filter key.*'typo'.*type, folder, title, page"),
    ({"type": "odt"}, "unknown document type.*pdf, docx, html, markdown, text"),
    ({"type": 3}, "string or a non-empty list"),
    ({"page": "7-3"}, "page range"),
    ({"page": 0}, "page range"),
    ({"page": [1, 2, 3]}, "page range"),
    ({"page": True}, "page range"),
    (["type", "pdf"], "where must be a dict"),
])
def test_bad_filters_are_clear_errors(index, where, words):
    with pytest.raises(ConfigError, match=words):
        index.search("harbor", k=3, retriever="bm25", where=where)


def test_page_ranges_parse():
    assert parse_pages(3) == (3, 3)
    assert parse_pages("3-7") == (3, 7) and parse_pages(" 3 - 7 ") == (3, 7)
    assert parse_pages("3-") == (3, None) and parse_pages([3, None]) == (3, None) and parse_pages((2, 2)) == (2, 2)


def test_cli_where_and_pages(corpus, capsys):
    store = str(corpus[0])
    assert main(["query", store, "the harbor lanterns and ropes", "--retriever", "bm25", "--where", "type=pdf",
                 "--pages", "2-3", "--budget", "0", "-k", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["items"] and out["stats"]["where"]["type"] == ["pdf"] and out["stats"]["where"]["page"] == "2-3"
    for it in out["items"]:
        first, last = expected_pages(it["members"][0]["text"])
        assert it["members"][0]["doc_id"] == "manual" and last >= 2 and first <= 3
    assert main(["query", store, "harbor", "--retriever", "bm25", "--where", "type=md", "--where", "type=docx",
                 "--budget", "0", "-k", "20", "--json"]) == 0
    assert {it["members"][0]["doc_id"] for it in json.loads(capsys.readouterr().out)["items"]} == \
        {"guide/intro", "report"}
    assert main(["query", store, "harbor", "--where", "kind=pdf"]) == 2
    assert "unknown filter key(s) 'kind'; the valid keys are type, folder, title, page" in capsys.readouterr().err
    assert main(["query", store, "harbor", "--where", "page=2", "--pages", "3"]) == 2
    assert "one page range" in capsys.readouterr().err
    assert main(["query", store, "harbor", "--where", "pdf"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err
    assert main(["ask", store, "how many boats near the harbor?", "--retriever", "bm25", "--pages", "2", "--json"]) == 0
    ans = json.loads(capsys.readouterr().out)
    assert ans["context"] and all(c["doc_id"] == "manual" and c["page"] == 2 for c in ans["context"])


@pytest.mark.models
def test_hybrid_with_dense_fills_its_budget_with_matching_passages(corpus, tmp_path):
    """The default retriever on a store with vectors: a page range over the ranking, a budget filled from it."""
    from momoka.errors import ModelNotInstalledError

    src = corpus[0].parent / "src"
    try:
        ix = Index.build([src], store=tmp_path / "dense", chunker="recursive", size=40, progress=False)
    except (ImportError, ModelNotInstalledError) as exc:
        pytest.skip(f"default embedder unavailable: {exc}")
    with ix:
        matching = sum(len(ix.corpus.member(c).text) for c in ix.store.documents["manual"].chunk_ids
                       if _on(ix.corpus.member(c), 2, 5))
        for q in QUESTIONS:
            res = ix.search(q, budget=500, where={"page": "2-5"})
            assert res and res.stats["where"]["read"] >= 1
            for it in res:
                for m in it.members:
                    first, last = expected_pages(m.text)
                    assert m.doc_id == "manual" and (m.page, m.page_end) == (first, last) and last >= 2 and first <= 5
            # filled: as much as the budget takes of the matching text, up to one chunk short of it
            assert sum(it.n_chars for it in res) >= min(matching, 500) - max(
                len(ix.corpus.member(c).text) for c in ix.store.documents["manual"].chunk_ids)
