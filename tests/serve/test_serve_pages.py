"""``/search`` answers carry each hit's page (PDF) and section, and take a ``where`` filter (real HTTP)."""

from __future__ import annotations

import pytest
from momoka import Index
from momoka.serve import QueryServer

pytest.importorskip("pypdf")
pytest.importorskip("docx")

from _oracles.pdf import expected_pages, expected_section, write_corpus  # noqa: E402

from .test_serve import _call  # noqa: E402


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve-pages")
    write_corpus(root / "src")
    Index.build([root / "src"], store=root / "s", embedder=None, chunker="recursive", size=40, progress=False).close()
    return root / "s"


def test_hits_carry_pages_and_sections_and_where_filters(store):
    with QueryServer(store, port=0, retriever="bm25", poll=0.05) as srv:
        code, out = _call(srv.url + "/search", {"query": "the harbor lanterns and ropes", "k": 15})
        assert code == 200 and {h["doc_id"] for h in out["hits"]} >= {"manual", "guide/intro"}
        for h in out["hits"]:
            if h["doc_id"] == "manual":
                assert (h["page"], h["page_end"]) == expected_pages(h["text"])
            else:
                assert h["page"] is None and h["page_end"] is None
                assert tuple(h["section"]) == (expected_section(h["doc_id"], h["text"]) or ())
        code, out = _call(srv.url + "/search", {"query": "dingo emu", "k": 1})
        assert (out["hits"][0]["page"], out["hits"][0]["page_end"]) == (4, 5)  # the passage across pages 4 and 5
        # where: the same answer as the in-process search with the same filter, all on the pages asked
        with Index.open(store) as ix:
            for where in ({"type": "pdf", "page": [2, 3]}, {"folder": "guide"}, {"page": "5-"}):
                code, out = _call(srv.url + "/search", {"query": "harbor boats", "k": 3, "where": where})
                ref = ix.search("harbor boats", k=3, retriever="bm25", where=where)
                assert code == 200 and [(h["doc_id"], h["start"], h["end"]) for h in out["hits"]] == \
                    [it.span for it in ref] and out["hits"]
        for h in _call(srv.url + "/search", {"query": "harbor boats", "k": 3, "where": {"page": [2, 3]}})[1]["hits"]:
            first, last = expected_pages(h["text"])
            assert last >= 2 and first <= 3
        code, out = _call(srv.url + "/search", {"query": "harbor", "where": {"kind": "pdf"}})
        assert code == 400 and "the valid keys are type, folder, title, page" in out["error"]
        code, out = _call(srv.url + "/search", {"query": "harbor", "where": "pdf"})
        assert code == 400 and "where must be a dict" in out["error"]
