"""MC-indexing's LLM keyword and summary views are checked before they are kept (issue 51, item 2).

A scripted OpenAI-compatible server on 127.0.0.1 answers the keyword and summary requests, through
``momoka index`` as a user runs it. A keyword is kept only when it is grounded in its chunk (at least half of
its content words occur there), a summary only when at least 0.3 of its content words do, and neither when
the same answer was given to an unrelated chunk; an answer with nothing left is a fallback under
``--llm-max-failed``, recorded, and asked again by a rerun. Every expected value below is written by hand.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from momoka import Index
from momoka.llm import OpenAIClient
from momoka.llm.testing import Reply
from momoka.methods.fallbacks import FALLBACKS_KEY, has_fallbacks
from momoka.methods.grounding import content_terms, grounding, grounding_problem
from momoka.methods.mcindex import KeywordsEnricher, SummaryEnricher
from momoka.methods.mcindex.views import MIN_SUMMARY_SHARE

from _oracles.index_cli import index_with_llm

# four one-paragraph documents about unrelated things (apollo and tides share one content word, "moon");
# the paragraph chunker makes one chunk of each
DOCS = {
    "apollo": "Apollo 11 landed on the Moon in July 1969. Neil Armstrong and Buzz Aldrin walked on the lunar "
              "surface while Michael Collins orbited above.",
    "bees": "Honey bees build wax combs inside the hive. Worker bees collect nectar and pollen from flowers and "
            "turn the nectar into honey.",
    "tides": "Ocean tides rise and fall twice a day. The pull of the Moon and the Sun on the sea causes high and "
             "low tides along the coast.",
    "chess": "Chess players move pieces across sixty-four squares. A pawn that reaches the last rank becomes a "
             "queen, rook, bishop or knight.",
}
# what a working model answers: every keyword's words and most of each summary's occur in its document
GOOD_KEYWORDS = {"apollo": ["Apollo 11", "Moon landing", "Neil Armstrong", "Buzz Aldrin"],
                 "bees": ["honey bees", "wax combs", "nectar", "pollen"],
                 "tides": ["ocean tides", "Moon", "high and low tides"],
                 "chess": ["chess pieces", "pawn", "sixty-four squares"]}
GOOD_SUMMARY = {
    "apollo": "In July 1969 Apollo 11 landed on the Moon: Armstrong and Aldrin walked on its surface while Collins "
              "stayed in orbit.",
    "bees": "Worker honey bees gather nectar and pollen, build wax combs in the hive and make honey from the nectar.",
    "tides": "The Moon and the Sun pull on the sea, so coastal tides rise and fall twice daily.",
    "chess": "Chess players move pieces over 64 squares, and a pawn reaching the last rank is promoted.",
}
CANNED_KEYWORDS = '["quarterly revenue", "market share", "growth strategy"]'
CANNED_SUMMARY = "Sure! Here is a concise summary of the section's main points."


def _kind(body) -> str:
    prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")  # re-asks: the first prompt
    return "keywords" if "keyword extractor" in prompt else "summary"


def _doc_of(body) -> str:
    """Which document a request is about (its prompt quotes the chunk)."""
    prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return next(d for d, t in DOCS.items() if t in prompt)


def _good(body, i):
    d = _doc_of(body)
    return Reply(json.dumps(GOOD_KEYWORDS[d]) if _kind(body) == "keywords" else GOOD_SUMMARY[d])


def _canned(body, i):
    return Reply(CANNED_KEYWORDS if _kind(body) == "keywords" else CANNED_SUMMARY)


def _write(root: Path, names) -> None:
    root.mkdir()
    for n in names:
        (root / f"{n}.txt").write_text(DOCS[n] + "\n")


def _index(tmp_path: Path, url: str, enrich: str, *extra: str) -> subprocess.CompletedProcess:
    opts = {"keywords": ["-o", "keywords.backend=llm"],
            "summary": ["-o", "summary.backend=llm", "-o", "summary.min_words=3"]}
    return index_with_llm(tmp_path, url, "--chunker", "paragraph", "--enrich", enrich,
                          *(o for e in enrich.split(",") for o in opts[e]), *extra)


def _warnings(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("momoka: warning:")]


def _records(tmp_path: Path) -> dict:
    with Index.open(tmp_path / "s") as ix:
        return {d: ix.store.documents[d].metadata.get(FALLBACKS_KEY) for d in ix.corpus.doc_ids}


def _view_docs(tmp_path: Path, view: str, word: str) -> int:
    """In how many chunks' ``view`` text ``word`` occurs (the view's BM25 document frequency)."""
    with Index.open(tmp_path / "s") as ix:
        bm = ix.store.bm25_view(view).index
        (term,) = bm.tokenize(word)
        return bm.doc_freq(term)


def _span(d: str) -> list[int]:
    return [0, len(DOCS[d])]


# ------------------------------------------------------------------ through the CLI


@pytest.mark.parametrize("enrich, canned, example, requests", [
    ("keywords", CANNED_KEYWORDS, CANNED_KEYWORDS, 3),
    ("summary", CANNED_SUMMARY, CANNED_SUMMARY, 3),
    # no JSON list at all: asked once and re-asked twice per chunk, still unusable
    ("keywords", CANNED_SUMMARY, CANNED_SUMMARY, 9),
])
def test_a_canned_answer_for_every_chunk_stops_with_exit_2_and_keeps_nothing(tmp_path, make_server, enrich, canned,
                                                                             example, requests):
    # issue 51, item 2: a canned keyword list or summary used to become every chunk's view, exit 0
    _write(tmp_path / "docs", ["apollo", "bees", "tides"])
    srv = make_server(lambda body, i: Reply(canned))
    p = _index(tmp_path, srv.base_url, enrich)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith(
        f"momoka: error: {enrich}: 3 of 3 answers (100.0 %) were unusable, more than --llm-max-failed 25 %; e.g. "
        f"{example!r}; nothing of this stage was committed")
    assert srv.count == requests
    assert not (tmp_path / "s" / "manifest.json").exists()


def test_canned_views_below_the_bound_warn_are_recorded_and_a_rerun_heals_exactly_those(tmp_path, make_server):
    _write(tmp_path / "docs", list(DOCS))
    srv = make_server(lambda body, i: _canned(body, i) if _doc_of(body) in ("tides", "chess") else _good(body, i))
    p = _index(tmp_path, srv.base_url, "keywords,summary", "--llm-max-failed", "0.5")
    assert p.returncode == 0, p.stderr
    assert _warnings(p.stderr) == [
        "momoka: warning: keywords: 2 of 4 answers (50.0 %) were unusable; those chunks' keyword views are their "
        "own text",
        "momoka: warning: summary: 2 of 4 answers (50.0 %) were unusable; those chunks are their own summary"]
    recs = _records(tmp_path)
    for d in ("tides", "chess"):
        assert recs[d] == {"keywords": {"asked": 1, "fallbacks": [_span(d)]},
                           "summary": {"asked": 1, "fallbacks": [_span(d)]}}
    for d in ("apollo", "bees"):
        assert recs[d] == {"keywords": {"asked": 1, "fallbacks": []}, "summary": {"asked": 1, "fallbacks": []}}
    # nothing of the canned answers is kept; the two fallbacks are their chunk's text ("twice": tides only)
    for view in ("keywords", "summary"):
        assert _view_docs(tmp_path, view, "quarterly") == _view_docs(tmp_path, view, "concise") == 0
        assert _view_docs(tmp_path, view, "twice") == 1 and _view_docs(tmp_path, view, "pollen") == 1
    assert _view_docs(tmp_path, "keywords", "surface") == 0  # apollo's keywords are the model's, not its text

    # the server is fixed; the same command again asks exactly the four rejected answers
    srv.script = _good
    srv.reset()
    p = _index(tmp_path, srv.base_url, "keywords,summary", "--llm-max-failed", "0.5")
    assert p.returncode == 0, p.stderr
    assert sorted((_kind(b), _doc_of(b)) for b in srv.chat_bodies()) == [
        ("keywords", "chess"), ("keywords", "tides"), ("summary", "chess"), ("summary", "tides")]
    assert _warnings(p.stderr) == [] and "2 redone" in p.stdout
    assert not any(has_fallbacks({FALLBACKS_KEY: r}) for r in _records(tmp_path).values())
    # "twice" is in the tides text and its good summary, not in its good keywords
    assert _view_docs(tmp_path, "keywords", "twice") == 0 and _view_docs(tmp_path, "summary", "twice") == 1
    srv.reset()
    p = _index(tmp_path, srv.base_url, "keywords,summary", "--llm-max-failed", "0.5")  # healed: nothing to ask
    assert p.returncode == 0 and srv.count == 0, p.stderr


def test_good_views_are_kept(tmp_path, make_server):
    _write(tmp_path / "docs", list(DOCS))
    srv = make_server(_good)
    p = _index(tmp_path, srv.base_url, "keywords,summary")
    assert p.returncode == 0 and _warnings(p.stderr) == [], p.stderr
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert manifest["pipeline"][FALLBACKS_KEY] == {
        "keywords": {"asked": 4, "fallbacks": 0, "documents": 0, "share": 0.0},
        "summary": {"asked": 4, "fallbacks": 0, "documents": 0, "share": 0.0}}
    assert _view_docs(tmp_path, "keywords", "armstrong") == 1 and _view_docs(tmp_path, "summary", "stayed") == 1


def test_one_grounded_answer_for_unrelated_chunks_is_a_fallback(tmp_path, make_server):
    # "Moon" occurs in the apollo and the tides chunks (grounded in both), but they share 1 content word of 30:
    # the same keyword list or summary for both describes neither. For bees it is not grounded at all.
    _write(tmp_path / "docs", ["apollo", "bees", "tides"])
    srv = make_server(lambda body, i: Reply('["Moon"]' if _kind(body) == "keywords" else "The Moon.")
                      if _doc_of(body) != "bees" else _good(body, i))
    p = _index(tmp_path, srv.base_url, "keywords,summary", "--llm-max-failed", "1")
    assert p.returncode == 0, p.stderr
    assert _warnings(p.stderr) == [
        "momoka: warning: keywords: 2 of 3 answers (66.7 %) were unusable; those chunks' keyword views are their "
        "own text",
        "momoka: warning: summary: 2 of 3 answers (66.7 %) were unusable; those chunks are their own summary"]
    recs = _records(tmp_path)
    assert recs["apollo"]["keywords"]["fallbacks"] == [_span("apollo")] and recs["bees"]["summary"]["fallbacks"] == []


# ------------------------------------------------------------------ the checks, in Python


def test_keywords_are_kept_one_by_one():
    kw = KeywordsEnricher("llm")
    terms = content_terms(DOCS["apollo"])
    # "Saturn V rocket": none of its words is in the text; "the": no content word; "apollo 11" again: a repeat
    assert kw.grounded_keywords(["Apollo 11", "Saturn V rocket", "apollo 11", "the", "lunar landing"], terms) == (
        ["Apollo 11", "lunar landing"], None)
    assert kw.stats["keywords_dropped"] == 3
    assert kw.grounded_keywords(["quarterly revenue", "market share"], terms) == (
        [], "none of its 2 keywords is grounded in the text ('quarterly revenue': only 0 of the keyword's 2 "
            "content words occur in the text)")


def test_the_summary_share_is_a_share_of_content_words():
    source = {"apollo", "land", "moon"}
    # 10 content terms (apollo land moon rocket fuel engin crew orbit launch pad), 3 in the source: 0.3 exactly
    ten = "Apollo landing moon rocket fuel engine crew orbit launch pad"
    assert grounding(ten, source) == (3, 10) and MIN_SUMMARY_SHARE == 0.3
    assert grounding_problem(ten, source, MIN_SUMMARY_SHARE) is None
    assert grounding_problem(ten.replace("moon", "comet"), source, MIN_SUMMARY_SHARE, what="summary",
                             where="text") == "only 2 of the summary's 10 content words occur in the text"


def test_view_texts_keep_checked_answers_and_forget_the_rejected_ones(tmp_path, make_server):
    docs = [{"doc_id": d, "text": DOCS[d]} for d in ("apollo", "bees")]

    def script(body, i):
        if _doc_of(body) == "bees":
            return Reply('["quarterly revenue", "honey"]' if _kind(body) == "keywords" else CANNED_SUMMARY)
        return Reply(json.dumps(GOOD_KEYWORDS["apollo"] + ["Saturn V rocket"]) if _kind(body) == "keywords"
                     else GOOD_SUMMARY["apollo"])

    srv = make_server(script)
    llm = OpenAIClient("scripted", base_url=srv.base_url, api_key="x", cache=str(tmp_path / "llm.sqlite"))
    kw = KeywordsEnricher("llm", llm=llm, cache=str(tmp_path / "views.sqlite"))
    sm = SummaryEnricher("llm", llm=llm, cache=str(tmp_path / "views.sqlite"), min_words=3)
    with pytest.warns(UserWarning) as warned:
        ix = Index.build(docs, chunker="paragraph", embedder=None, enrich=[kw, sm], progress=False,
                         llm_max_failed=1)
    assert [str(w.message) for w in warned if issubclass(w.category, UserWarning)] == [
        "summary: 1 of 2 answers (50.0 %) were unusable; those chunks are their own summary"]
    ids = ix.store.chunks.ids()
    by_doc = {ix.store.chunks.doc_id(c): c for c in ids}
    kw_texts = dict(zip(ids, kw.view_texts(ix.corpus, ids)))
    sm_texts = dict(zip(ids, sm.view_texts(ix.corpus, ids)))
    # apollo: "Saturn V rocket" dropped; bees: "honey" kept, "quarterly revenue" dropped (a kept list: no fallback)
    assert kw_texts[by_doc["apollo"]] == "Apollo 11, Moon landing, Neil Armstrong, Buzz Aldrin"
    assert kw_texts[by_doc["bees"]] == "honey"
    assert sm_texts == {by_doc["apollo"]: GOOD_SUMMARY["apollo"], by_doc["bees"]: DOCS["bees"]}
    # the canned summary's content words: sure, concis, summari, section, main, point
    assert sm.failures[0] == (f"bees [0, {len(DOCS['bees'])}]",
                              "only 0 of the summary's 6 content words occur in the text")
    # built, then asked once more by view_texts: the kept answers come from the view cache, the rejected
    # summary reached the server again (it was not kept in the LLM cache either)
    assert [(_kind(b), _doc_of(b)) for b in srv.chat_bodies()][4:] == [("summary", "bees")]


# ------------------------------------------------------------------ the summary threshold on shared-set text

SHARED = Path(__file__).resolve().parents[3] / ".." / "shared" / "data"
# words 300 to 560 of five documents (a section of about 260 words), and a summary of each written by hand
# the way the summary prompt asks (at most 10 sentences or 200 words, in its own words)
SECTIONS = {
    ("dragonball_finance_en", "dragonball_fin_en_040"):
        "In 2021 Acme Government Solutions grew through several strategic moves: it bought a 51% stake in "
        "Government IT Solutions, put $30 million into a public infrastructure modernization project, cut its "
        "debt by $15 million through a restructuring and reorganized its assets to run more efficiently. These "
        "events shaped its financial results: operating income of $100 million, net profit of $20 million, total "
        "assets of $500 million against liabilities of $200 million, shareholder equity of $300 million and cash "
        "flow of $50 million.",
    ("leval_qasper", "leval_qasper_000"):
        "The paper addresses detecting Twitter accounts that spread propaganda, hoaxes and clickbait, rather than "
        "verifying individual claims as earlier rumor-detection work does. The authors gather a large collection "
        "of tweets from such accounts and present what they believe is the first account-level factuality "
        "detector based on text. Their method orders each account's tweets chronologically, splits them into "
        "chunks, extracts semantic and lexicon-based features per chunk and feeds the sequence to a recurrent "
        "neural network. Ablations and comparisons with baselines that ignore tweet order show the sequential "
        "approach works best.",
    ("quality_leval", "quality_leval_000"):
        "Korvin is imprisoned alone on the planet Tr'en with nothing to occupy him. Each night the guards teach "
        "him the local language while he is unconscious, so he can now talk about anything but has no one to talk "
        "to. Well fed and rested but desperately bored, he is ready to say anything for some conversation. Then "
        "the cell door opens and a tall, greenish, roughly humanoid Tr'en walks in.",
    ("quality_leval", "quality_leval_003"):
        "The passage describes the bleak settlement where Kirk lives. Half-buried sod huts of the Hans dot the "
        "land between fields and gullies, many of them abandoned as people died. Further up the plain live the "
        "Engineers, who direct the planting without working the soil, amid ruins of old metal, and beyond them the "
        "Officers. Inside Kirk's crowded hut his mother shouts and the children fight over a bone while he stares "
        "sullenly up the plain.",
}


def _section(dataset: str, doc_id: str) -> str:
    path = SHARED / dataset / "documents.jsonl"
    if not path.exists():
        pytest.skip(f"the shared data set {dataset} is not beside the checkout")
    with path.open(encoding="utf-8") as f:
        doc = next(d for d in map(json.loads, f) if d["doc_id"] == doc_id)
    return " ".join(doc["text"].split()[300:560])


def test_the_summary_threshold_keeps_paraphrases_of_real_sections_and_rejects_other_sections():
    terms = {key: content_terms(_section(*key)) for key in SECTIONS}
    for key, summary in SECTIONS.items():
        found, total = grounding(summary, terms[key])
        assert found / total >= MIN_SUMMARY_SHARE, (key, found, total)  # its own section: kept
        for other in SECTIONS:
            if other[0] != key[0]:  # a section of another set: rejected
                f, t = grounding(summary, terms[other])
                assert f / t < MIN_SUMMARY_SHARE, (key, other, f, t)
    # an answer about the text rather than of it: at most 1 of its 6 content words ("main", in the paper)
    for key in SECTIONS:
        assert grounding(CANNED_SUMMARY, terms[key])[0] <= 1


def test_views_cached_before_the_checks_are_not_read_back(tmp_path, make_server):
    # a view cache written by a version without the checks holds a canned keyword list for the apollo chunk
    from momoka.llm import ResponseCache, make_key

    old_settings = {"prompt": "mcindex.keywords", "max_chars": 6000, "max_tokens": 256}  # no "checks"
    old = ResponseCache(str(tmp_path / "views.sqlite"))
    old.put_many([(make_key("mcindex.keywords", "llm:scripted", {"settings": old_settings, "text": DOCS["apollo"]}),
                   "mcindex.keywords", "llm:scripted", {"text": "quarterly revenue, market share"})])
    old.close()
    srv = make_server(_good)
    llm = OpenAIClient("scripted", base_url=srv.base_url, api_key="x", cache=False)
    kw = KeywordsEnricher("llm", llm=llm, cache=str(tmp_path / "views.sqlite"))
    ix = Index.build([{"doc_id": "apollo", "text": DOCS["apollo"]}], chunker="paragraph", embedder=None, enrich=[kw],
                     progress=False)
    assert srv.count == 1 and kw.stats.get("cached", 0) == 0
    ids = ix.store.chunks.ids()
    assert kw.view_texts(ix.corpus, ids) == ["Apollo 11, Moon landing, Neil Armstrong, Buzz Aldrin"]  # now from the cache
    assert srv.count == 1
