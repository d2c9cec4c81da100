"""Every LLM-backed component end to end against a real OpenAI-compatible server on 127.0.0.1
(``momoka llm serve``'s handler over the local model, :class:`conftest.CountingEndpoint`), reached the way a
user reaches it (``MOMOKA_LLM_BASE_URL``, ``momoka index`` / ``ask`` / ``query``), with ``--estimate`` made first on
the same input and compared with the requests the server received: equal where the estimate is exact,
a bound where it is documented as one.

References: the request counts come from the server, not from momoka's own accounting; the expected
structure (chunks tiling the text, one title per document, a view row per chunk) is stated by hand.
"""

from __future__ import annotations

import json

import pytest

from momoka.cli import main

pytestmark = [pytest.mark.models, pytest.mark.slow]

PARIS = ("# Paris\n\nParis is the capital of France. It lies on the Seine.\n\n"
         "The Eiffel Tower was built in 1889. It is made of iron.\n")
RADIUM = ("Marie Curie was born in Warsaw. She moved to Paris in 1891.\n\n"
          "She and Pierre Curie discovered radium in 1898. Radium glows in the dark.\n")


def _docs(tmp_path, **texts):
    d = tmp_path / "docs"
    d.mkdir()
    for name, text in texts.items():
        (d / f"{name}.md").write_text(text, encoding="utf-8")
    return d


def _estimate(capsys, argv):
    assert main(argv + ["--estimate"]) == 0
    return json.loads(capsys.readouterr().out)


def _open(store):
    from momoka.methods.pipeline import Index

    return Index.open(store)


def _tiles(text, spans):
    """The spans are in order, do not overlap, and leave only whitespace between them and at the ends."""
    pos = 0
    for a, b in spans:
        assert pos <= a < b, (pos, a, b)
        assert not text[pos:a].strip(), text[pos:a]
        pos = b
    assert not text[pos:].strip()


LIGHTHOUSE = "# Lighthouse\n\n" + " ".join(
    f"The keeper climbed the {n} steps of the tower at dusk and lit the lamp for the ships of the bay."
    for n in ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
              "eleventh", "twelfth")) + "\n\n## Harbour\n\nThe harbour froze in the winter of 1902.\n"


def test_title_keywords_and_summary_enrichers(use_endpoint, tmp_path, capsys):
    docs = _docs(tmp_path, paris=PARIS, lighthouse=LIGHTHOUSE)
    # keywords.max_reasks=0: the 135M model's lists rarely parse, and each re-ask is a longer prompt again (the
    # re-ask bound is checked with the meta and moc chunkers below); the estimate is then exact
    argv = ["index", str(docs), "--store", str(tmp_path / "s"), "--no-dense", "--chunker", "sections",
            "--enrich", "title,keywords,summary", "-o", "keywords.max_tokens=16", "-o", "keywords.max_reasks=0",
            "-o", "summary.max_tokens=16"]
    est = _estimate(capsys, argv)
    assert use_endpoint.calls() == 0  # the estimate calls nothing
    title, kw, sm = (est["enrichers"][n] for n in ("title", "keywords", "summary"))
    assert main(argv) == 0
    capsys.readouterr()
    # by hand: one title per document (2); a keyword list per chunk; a summary of the one section of
    # over 200 words (the lighthouse's 12 sentences of 20 words), the others are their own summary
    assert title["llm_calls"] == use_endpoint.asked("momoka.title") == 2
    assert sm["llm_calls"] == use_endpoint.asked("mcindex.summary") == 1
    assert kw["llm_calls"] == est["chunks"] == kw["llm_calls_max"] == use_endpoint.asked("mcindex.keywords")
    assert use_endpoint.calls() == sum(use_endpoint.asked(n) for n in ("momoka.title", "mcindex.keywords",
                                                                      "mcindex.summary"))
    with _open(tmp_path / "s") as ix:
        ids = [c for d in ix.store.documents for c in ix.store.documents[d].chunk_ids]
        assert len(ids) == est["chunks"]
        assert all(ix.corpus.title(d) for d in ix.store.documents)
        for view in ("keywords", "summary"):
            assert ix.store.has_bm25_view(view)
        assert ix.search("keeper lamp", retriever="bm25", view="summary", k=1)[0].doc_id == "lighthouse"


def test_llm_chunker(use_endpoint, tmp_path, capsys):
    docs = _docs(tmp_path, radium=RADIUM)
    argv = ["index", str(docs), "--store", str(tmp_path / "s"), "--no-dense", "--chunker", "llm"]
    est = _estimate(capsys, argv)["chunker"]["estimate"]
    assert use_endpoint.calls() == 0
    assert main(argv) == 0
    capsys.readouterr()
    # by hand: both paragraphs hold two sentences, so both are asked (re-asked at most once each)
    assert est["llm_calls"] == 2 and est["llm_calls_max"] == 4
    assert est["llm_calls"] <= use_endpoint.asked("momoka.llm_chunk") == use_endpoint.calls() <= est["llm_calls_max"]
    with _open(tmp_path / "s") as ix:
        chunks = [ix.store.chunks.get(c) for c in ix.store.documents["radium"].chunk_ids]
        assert est["chunks_min"] <= len(chunks) <= est["chunks_max"]
        _tiles(RADIUM, [(c.start, c.end) for c in chunks])
        assert all(RADIUM[c.start:c.end] == c.text for c in chunks)


def test_jerr_relator(use_endpoint, tmp_path, capsys):
    docs = _docs(tmp_path, radium=RADIUM)
    argv = ["index", str(docs), "--store", str(tmp_path / "s"), "--no-dense", "--relate", "jerr",
            "-o", "jerr.max_tokens=32"]
    est = _estimate(capsys, argv)["relators"]["jerr"]
    assert use_endpoint.calls() == 0
    assert main(argv) == 0
    capsys.readouterr()
    n = est["units"]
    assert n == 1  # by hand: the whole text is one unit of under 600 tokens
    asked = {p: use_endpoint.asked(p) for p in ("jerr.synopsis", "jerr.entities", "jerr.elements",
                                                "jerr.edge_attributes")}
    assert asked["jerr.synopsis"] == n and sum(asked.values()) == use_endpoint.calls()
    # the synopsis, entity and element questions per unit, then one edge question per pair of its (at most 3)
    # elements: between llm_calls and llm_calls_max
    assert est["llm_calls"] == 3 * n and est["llm_calls_max"] == 6 * n
    assert asked["jerr.edge_attributes"] <= 3 * n
    assert use_endpoint.calls() <= est["llm_calls_max"]
    from momoka.methods.jerr import read_graphs

    with _open(tmp_path / "s") as ix:
        ents, _ = read_graphs(ix.store, ["radium"])
        assert ents  # the entity graph of the unit was written


def test_paths_relator_with_the_llm_referee(use_endpoint, tmp_path, capsys):
    docs = _docs(tmp_path, radium=RADIUM)
    argv = ["index", str(docs), "--store", str(tmp_path / "s"), "--no-dense", "--chunker", "sentence",
            "-o", "sentence.n=1", "--relate", "paths", "-o", "paths.referee=llm", "-o", "paths.iterations=20"]
    est = _estimate(capsys, argv)["relators"]["paths"]
    assert use_endpoint.calls() == 0
    assert main(argv) == 0
    capsys.readouterr()
    # by hand: 4 chunks, each judged against the 3 others at most (20 iterations x 5 steps > 3), each
    # judgement asked again at most twice when the verdict is neither 0 nor 1
    assert est["referee_calls_max"] == 4 * 3 and est["llm_calls_max"] == 3 * 4 * 3
    assert use_endpoint.asked("momoka.referee") == use_endpoint.calls() <= est["llm_calls_max"]
    with _open(tmp_path / "s") as ix:
        assert len(ix.store.documents["radium"].chunk_ids) == est["chunks"] == 4


@pytest.mark.parametrize("chunker", ["meta", "moc"])
def test_meta_chunker_and_moc_router(use_endpoint, tmp_path, capsys, chunker):
    docs = _docs(tmp_path, radium=RADIUM)
    argv = ["index", str(docs), "--store", str(tmp_path / "s"), "--no-dense", "--chunker", chunker,
            "-o", f"{chunker}.max_tokens=48", "-o", f"{chunker}.max_reasks=1"]
    est = _estimate(capsys, argv)["chunker"]["estimate"]
    assert use_endpoint.calls() == 0
    assert main(argv) == 0
    capsys.readouterr()
    # by hand: the four sentences (139 characters) are one window of at most 1024; MoC routes it first
    routed = chunker == "moc"
    assert est["windows"] == est["llm_calls"] == 1 and est["router_calls"] == int(routed)
    assert est["llm_calls_max"] == 2 + int(routed)
    asked = use_endpoint.asked("moc.meta_chunker_sized" if routed else "moc.meta_chunker")
    assert est["llm_calls"] <= asked <= 2
    assert use_endpoint.asked("moc.router") == est["router_calls"]
    assert use_endpoint.calls() == asked + est["router_calls"] <= est["llm_calls_max"]
    with _open(tmp_path / "s") as ix:
        chunks = [ix.store.chunks.get(c) for c in ix.store.documents["radium"].chunk_ids]
        _tiles(RADIUM, [(c.start, c.end) for c in chunks])


@pytest.fixture
def plain_store(use_endpoint, tmp_path, capsys):
    """A store of the two documents with no LLM component (nothing asked while building it)."""
    docs = _docs(tmp_path, paris=PARIS, radium=RADIUM)
    assert main(["index", str(docs), "--store", str(tmp_path / "s")]) == 0
    capsys.readouterr()
    assert use_endpoint.calls() == 0
    return tmp_path / "s"


def _ask(capsys, argv):
    assert main(["ask", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_ask_with_the_llm_reader(use_endpoint, plain_store, capsys):
    argv = [str(plain_store), "Who discovered radium?", "--retriever", "bm25", "--budget", "300",
            "-o", "llm.max_tokens=16"]
    est = _ask(capsys, argv + ["--estimate"])
    assert use_endpoint.calls() == 0
    assert est["reader"]["name"] == "llm"
    assert est["reader"]["estimate"]["llm_calls"] == 1 and est["reader"]["estimate"]["completion_tokens_max"] == 16
    ans = _ask(capsys, argv + ["--json"])
    assert use_endpoint.calls() == use_endpoint.calls("/chat/completions") == 1
    assert ans["kind"] != "evidence" and ans["answer"].strip() and ans["model"] and ans["context"]
    texts = {"paris": PARIS, "radium": RADIUM}
    for c in ans["context"] + ans["citations"]:  # every passage given or cited is an exact span of a document
        assert texts[c["doc_id"]][c["start"]:c["end"]] == c["text"]
    assert ans["context"][0]["doc_id"] == "radium"


def test_ask_with_the_ets_refiner_reading_through_the_endpoint(use_endpoint, plain_store, capsys):
    argv = [str(plain_store), "Who discovered radium?", "--retriever", "bm25", "--budget", "300",
            "--refine", "ets", "--reader", "evidence", "-o", "ets.n=3", "-o", "ets.expansion=2", "-o", "ets.beam=2",
            "-o", "ets.max_depth=2"]
    est = _ask(capsys, argv + ["--estimate"])["refiner"]["estimate"]
    assert use_endpoint.calls() == 0
    # by hand: 1 node at depth 0 and min(2, 2) at depth 1, each valuing at most 2 children: 6 evidence
    # sets (as many as the 3 + 3 sets of one or two of 3 candidates); two requests each
    assert est["nodes_max"] == 3 and est["value_calls_max"] == 6 and est["llm_calls_max"] == 12
    assert est["reader"] == use_endpoint.url
    ans = _ask(capsys, argv + ["--json"])
    chat, scored = use_endpoint.calls("/chat/completions"), use_endpoint.calls("/v1/completions")
    assert chat >= 1 and scored <= chat  # an answer per valued set, scored unless empty
    assert use_endpoint.asked("ets.answering") == chat
    assert chat + scored == use_endpoint.calls() <= est["llm_calls_max"]
    texts = {"paris": PARIS, "radium": RADIUM}
    assert ans["citations"]
    for c in ans["citations"]:
        assert texts[c["doc_id"]][c["start"]:c["end"]] == c["text"]


@pytest.fixture
def jerr_store(use_endpoint, tmp_path, capsys):
    """The two documents with the JERR graph built offline (nothing asked while building it)."""
    docs = _docs(tmp_path, paris=PARIS, radium=RADIUM)
    assert main(["index", str(docs), "--store", str(tmp_path / "s"), "--no-dense", "--relate", "jerr",
                 "-o", "jerr.backend=offline"]) == 0
    capsys.readouterr()
    assert use_endpoint.calls() == 0
    return tmp_path / "s"


def _exact_spans(items):
    texts = {"paris": PARIS, "radium": RADIUM}
    for it in items:
        assert texts[it["doc_id"]][it["start"]:it["end"]] == it["text"], it


# by hand (offline graph): the radium document's nodes are Marie Curie, Warsaw, Paris and Pierre Curie, one edge
# Marie Curie -> Warsaw ("born"); the question's keywords (discovered, radium, marie, curie) make Marie Curie
# (2 matches) the start node and its one neighbour, Warsaw, the only node found: one page (the document is one
# unit of under 600 tokens) shown to one look-up request
JERR_Q = "Who discovered radium with Marie Curie?"


def test_ask_with_the_jerr_retriever_looking_up_key_chunks(use_endpoint, jerr_store, capsys):
    argv = [str(jerr_store), JERR_Q, "--retriever", "jerr", "--reader", "llm", "--budget", "300",
            "-o", "jerr.max_tokens=24", "-o", "llm.max_tokens=16"]
    est = _ask(capsys, argv + ["--estimate"])
    assert use_endpoint.calls() == 0  # the estimate runs the offline search and asks nothing
    rest = est["retriever"]["estimate"]
    assert est["retriever"]["name"] == "jerr" and rest["backend"] == "llm" and rest["endpoint"] == use_endpoint.url
    assert rest["nodes_found"] == 1 and rest["pages"] == 1
    assert rest["llm_calls"] == 1 and rest["completion_tokens_max"] == 24
    assert est["reader"]["estimate"]["llm_calls"] == 1
    ans = _ask(capsys, argv + ["--json"])
    (body,) = use_endpoint.bodies("jerr.lookup")  # the look-up: exactly the estimated request, then the reader's
    assert len(body["messages"]) == 1 and len(body["messages"][0]["content"]) == rest["prompt_chars"]
    assert body["max_tokens"] == rest["completion_tokens_max"]
    assert "<Page 1>" in body["messages"][0]["content"] and "<Page 2>" not in body["messages"][0]["content"]
    assert use_endpoint.calls() == use_endpoint.calls("/chat/completions") == rest["llm_calls"] + 1
    assert ans["kind"] != "evidence" and ans["context"]
    assert {c["doc_id"] for c in ans["context"]} == {"radium"}
    _exact_spans(ans["context"] + ans["citations"])


def test_query_with_the_jerr_retriever(use_endpoint, jerr_store, capsys):
    argv = [str(jerr_store), JERR_Q, "--retriever", "jerr", "--reader", "evidence"]
    rest = _ask(capsys, argv + ["--estimate"])["retriever"]["estimate"]
    assert use_endpoint.calls() == 0
    assert main(["query", str(jerr_store), JERR_Q, "--retriever", "jerr", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert use_endpoint.calls() == len(use_endpoint.bodies("jerr.lookup")) == rest["llm_calls"] == 1
    assert res["stats"]["key_chunks"]["by"] == "llm:smollm2"
    assert res["stats"]["key_chunks"]["pages"] == rest["pages"] == 1
    (item,) = res["items"]  # the one node found, Warsaw, with the chunk naming it
    assert item["provenance"]["entity"] == "Warsaw"
    assert item["members"] and all("Warsaw" in m["text"] for m in item["members"])
    _exact_spans(item["members"])
    # a question naming no node: the search finds none, so nothing is asked, as estimated
    q = "What colour is the sky at noon?"
    rest = _ask(capsys, [str(jerr_store), q, "--retriever", "jerr", "--reader", "evidence", "--estimate"])
    assert rest["retriever"]["estimate"]["llm_calls"] == 0 and rest["retriever"]["estimate"]["nodes_found"] == 0
    assert main(["query", str(jerr_store), q, "--retriever", "jerr", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["items"] == []
    assert use_endpoint.calls() == 1
