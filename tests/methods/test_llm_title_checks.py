"""LLM titles are checked before they are kept (issue 51, item 2), through ``momoka index`` as a user runs it.

A scripted OpenAI-compatible server on 127.0.0.1 answers the title requests. A title is kept only when it is
one short line, grounded in its document (at least half of its content words occur there) and not the same
title as an unrelated document's; otherwise it is a fallback under ``--llm-max-failed``, recorded, and asked
again by a rerun. Every expected title below is written by hand from the documents.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from momoka import Index
from momoka.llm import OpenAIClient
from momoka.llm.testing import Reply, last_user
from momoka.methods.fallbacks import FALLBACKS_KEY, has_fallbacks
from momoka.methods.grounding import content_terms, grounding, grounding_problem, jaccard, sketch
from momoka.methods.momoka.title import TitleLedger, clean_title, make_titles
from momoka.text import Document

from _oracles.index_cli import index_with_llm

# four documents about unrelated things (apollo and tides share one content word, "moon")
DOCS = {
    "apollo": "Apollo 11 landed on the Moon in July 1969. Neil Armstrong and Buzz Aldrin walked on the lunar "
              "surface while Michael Collins orbited above.\n",
    "bees": "Honey bees build wax combs inside the hive. Worker bees collect nectar and pollen from flowers and "
            "turn the nectar into honey.\n",
    "tides": "Ocean tides rise and fall twice a day. The pull of the Moon and the Sun on the sea causes high and "
             "low tides along the coast.\n",
    "chess": "Chess players move pieces across sixty-four squares. A pawn that reaches the last rank becomes a "
             "queen, rook, bishop or knight.\n",
}
# what a working model answers (each title's words occur in its document)
GOOD = {"apollo": "Apollo 11 Moon Landing", "bees": "Honey Bees and the Hive", "tides": "Ocean Tides",
        "chess": "Chess Pieces and Pawn Promotion"}
# the fallback: each document's first sentence (none has a title or a heading)
FIRST = {"apollo": "Apollo 11 landed on the Moon in July 1969.", "bees": "Honey bees build wax combs inside the hive.",
         "tides": "Ocean tides rise and fall twice a day.",
         "chess": "Chess players move pieces across sixty-four squares."}
CANNED = "Sure! Here is a short title that captures the main idea."


def _doc_of(body) -> str:
    """Which document a title request is about (its prompt quotes the document)."""
    text = last_user(body)
    return next(d for d, t in DOCS.items() if t.strip() in text)


def _good(body, i):
    return Reply(GOOD[_doc_of(body)])


def _write(root: Path, names) -> None:
    root.mkdir()
    for n in names:
        (root / f"{n}.txt").write_text(DOCS[n])


def _index(tmp_path: Path, url: str, *extra: str) -> subprocess.CompletedProcess:
    return index_with_llm(tmp_path, url, "--chunker", "paragraph", "--enrich", "title", "-o", "title.mode=llm", *extra)


def _warnings(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("momoka: warning:")]


def _titles(tmp_path: Path) -> dict:
    with Index.open(tmp_path / "s") as ix:
        return {d: (ix.store.documents[d].metadata["momoka_title"], ix.store.documents[d].metadata["momoka_title_source"])
                for d in ix.corpus.doc_ids}


def _records(tmp_path: Path) -> dict:
    with Index.open(tmp_path / "s") as ix:
        return {d: ix.store.documents[d].metadata.get(FALLBACKS_KEY) for d in ix.corpus.doc_ids}


# ------------------------------------------------------------------ through the CLI


def test_a_canned_sentence_for_every_document_stops_with_exit_2_and_keeps_no_title(tmp_path, make_server):
    # issue 51, item 2: this used to give every document the canned sentence as its title, exit 0
    _write(tmp_path / "docs", ["apollo", "bees", "tides"])
    srv = make_server(lambda body, i: Reply(CANNED))
    p = _index(tmp_path, srv.base_url)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith(
        f"momoka: error: title: 3 of 3 titles (100.0 %) were unusable, more than --llm-max-failed 25 %; e.g. "
        f"{CANNED!r}; nothing of this stage was committed")
    assert srv.count == 3
    assert not (tmp_path / "s" / "manifest.json").exists()


def test_canned_titles_below_the_bound_warn_are_recorded_and_a_rerun_heals_exactly_those(tmp_path, make_server):
    _write(tmp_path / "docs", list(DOCS))
    srv = make_server(lambda body, i: Reply(CANNED) if _doc_of(body) in ("tides", "chess") else _good(body, i))
    p = _index(tmp_path, srv.base_url, "--llm-max-failed", "0.5")
    assert p.returncode == 0, p.stderr
    assert _warnings(p.stderr) == ["momoka: warning: title: 2 of 4 titles (50.0 %) were unusable; those documents "
                                   "got their own title, first heading or first sentence"]
    assert _titles(tmp_path) == {"apollo": (GOOD["apollo"], "llm"), "bees": (GOOD["bees"], "llm"),
                                 "tides": (FIRST["tides"], "sentence"), "chess": (FIRST["chess"], "sentence")}
    recs = _records(tmp_path)
    assert recs["tides"] == recs["chess"] == {"title": {"asked": 1, "fallbacks": ["title"]}}
    assert recs["apollo"] == recs["bees"] == {"title": {"asked": 1, "fallbacks": []}}

    # the server is fixed; the same command again asks exactly the two rejected titles
    srv.script = _good
    srv.reset()
    p = _index(tmp_path, srv.base_url, "--llm-max-failed", "0.5")
    assert p.returncode == 0, p.stderr
    assert sorted(_doc_of(b) for b in srv.chat_bodies()) == ["chess", "tides"]
    assert _warnings(p.stderr) == [] and "2 redone" in p.stdout
    assert _titles(tmp_path) == {d: (GOOD[d], "llm") for d in DOCS}
    assert not any(has_fallbacks({FALLBACKS_KEY: r}) for r in _records(tmp_path).values())
    srv.reset()
    p = _index(tmp_path, srv.base_url, "--llm-max-failed", "0.5")  # healed: nothing more to ask
    assert p.returncode == 0 and srv.count == 0, p.stderr


def test_good_titles_are_kept(tmp_path, make_server):
    _write(tmp_path / "docs", list(DOCS))
    srv = make_server(_good)
    p = _index(tmp_path, srv.base_url)
    assert p.returncode == 0 and _warnings(p.stderr) == [], p.stderr
    assert _titles(tmp_path) == {d: (GOOD[d], "llm") for d in DOCS}
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert manifest["pipeline"][FALLBACKS_KEY] == {"title": {"asked": 4, "fallbacks": 0, "documents": 0, "share": 0.0}}


def test_one_grounded_title_for_unrelated_documents_is_a_fallback(tmp_path, make_server):
    # "The Moon" occurs in the apollo and the tides documents (grounded in both), but they share 1 content word
    # of about 30: the same answer for both is no title of either. For bees it is not grounded at all.
    _write(tmp_path / "docs", ["apollo", "bees", "tides"])
    srv = make_server(lambda body, i: Reply("The Moon"))
    p = _index(tmp_path, srv.base_url)
    assert p.returncode == 2, p.stderr
    assert "title: 3 of 3 titles (100.0 %) were unusable" in p.stderr.strip().splitlines()[-1]

    srv.script = lambda body, i: Reply("The Moon") if _doc_of(body) != "bees" else _good(body, i)
    srv.reset()
    p = _index(tmp_path, srv.base_url, "--llm-max-failed", "1")
    assert p.returncode == 0, p.stderr
    assert _warnings(p.stderr) == ["momoka: warning: title: 2 of 3 titles (66.7 %) were unusable; those documents "
                                   "got their own title, first heading or first sentence"]
    assert _titles(tmp_path) == {"apollo": (FIRST["apollo"], "sentence"), "bees": (GOOD["bees"], "llm"),
                                 "tides": (FIRST["tides"], "sentence")}
    srv.script = _good
    srv.reset()
    p = _index(tmp_path, srv.base_url, "--llm-max-failed", "1")
    assert p.returncode == 0 and sorted(_doc_of(b) for b in srv.chat_bodies()) == ["apollo", "tides"], p.stderr
    assert _titles(tmp_path) == {d: (GOOD[d], "llm") for d in ("apollo", "bees", "tides")}


# ------------------------------------------------------------------ the checks, in Python


def test_grounding_counts_content_words_by_hand():
    terms = content_terms("Zebras migrate across the Serengeti each year. They follow the rain.")
    # Porter stems, stop words ("across" is none; "the", "each", "they" are) dropped
    assert terms == {"zebra", "migrat", "across", "serengeti", "year", "follow", "rain"}
    assert grounding("Zebra Migration", terms) == (2, 2)          # zebra, migrat
    assert grounding("Zebra Herds of Kenya", terms) == (1, 3)     # zebra; herd, kenya are not in it
    assert grounding_problem("Zebra Herds", terms) is None        # 1 of 2: half is enough (the default share)
    assert grounding_problem("Zebra Herds of Kenya", terms, what="title", where="document") == \
        "only 1 of the title's 3 content words occur in the document"
    assert grounding_problem("Zebra Herds of Kenya", terms, 1 / 3) is None  # a lower share: 1 of 3 is enough
    assert grounding_problem("What It Is", terms, what="title") == "the title has no content word"
    # scripts without spaces: every CJK character is a term
    zh = content_terms("长城是中国古代的军事防御工程。")
    assert grounding("长城", zh) == (2, 2) and grounding("黄河", zh) == (0, 2)


def test_titles_are_short():
    assert clean_title(" ".join(["word"] * 20)) == " ".join(["word"] * 20)
    assert clean_title(" ".join(["word"] * 21)) is None  # 21 words: a sentence, not a title


def test_jaccard_of_small_sets_is_exact():
    a, b = {"a", "b", "c", "d"}, {"c", "d", "e"}
    assert jaccard(sketch(a), sketch(b)) == pytest.approx(2 / 5)
    assert jaccard(sketch(a), sketch(a)) == 1.0
    assert jaccard(sketch(a), sketch({"x"})) == 0.0


def test_ledger_remembers_titles_across_batches():
    ap, ti = content_terms(DOCS["apollo"]), content_terms(DOCS["tides"])
    # apollo: 11 1969 aldrin apollo armstrong buzz collin juli land lunar michael moon neil orbit surfac walk (16);
    # tides: 15 terms, moon the only one shared: Jaccard 1/30
    assert len(ap) == 16 and len(ti) == 15 and ap & ti == {"moon"}
    led = TitleLedger()
    assert led.check([("apollo", "The Moon", sketch(ap))]) == {}
    # a second version of the apollo document (one sentence more: crew, return, earth, 24) may share its title:
    # Jaccard 16/20
    ap2 = content_terms(DOCS["apollo"] + "The crew returned to Earth on July 24.")
    assert led.check([("apollo-v2", "The Moon", sketch(ap2))]) == {}
    # a later batch: the same title (case and punctuation aside) for an unrelated document
    out = led.check([("tides", "the moon!", sketch(ti))])
    assert out == {0: "the same title was given to document 'apollo', which shares less than 0.25 of its "
                      "content words"}
    # in one batch, both unrelated documents are rejected
    assert sorted(TitleLedger().check([("apollo", "The Moon", sketch(ap)), ("tides", "The Moon", sketch(ti))])) == [0, 1]


def test_make_titles_rejects_and_forgets_ungrounded_answers(tmp_path, make_server):
    docs = [Document.from_text(DOCS[d], doc_id=d) for d in ("apollo", "bees")]
    srv = make_server(lambda body, i: Reply("Quarterly Revenue Report") if _doc_of(body) == "bees" else _good(body, i))
    llm = OpenAIClient("scripted", base_url=srv.base_url, api_key="x", cache=str(tmp_path / "llm.sqlite"))
    titles, sources, st = make_titles(docs, mode="llm", llm=llm)
    assert titles == [GOOD["apollo"], FIRST["bees"]] and sources == ["llm", "sentence"]
    assert st.failed_llm == 1
    assert st.failures == [("bees", "title 'Quarterly Revenue Report' rejected: only 0 of the title's 3 content "
                                    "words occur in the document")]
    # asked again: the kept title comes from the cache, the rejected one reaches the server
    srv.reset()
    make_titles(docs, mode="llm", llm=llm)
    assert [_doc_of(b) for b in srv.chat_bodies()] == ["bees"]
