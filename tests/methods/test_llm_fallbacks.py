"""One rule for LLM fallbacks (momoka.methods.fallbacks), through ``momoka index`` as a user runs it.

A scripted OpenAI-compatible server on 127.0.0.1 answers HTTP 200 with prose
where JSON (or a title) is expected: above --llm-max-failed the command stops
with exit 2 before storing the stage's output; below it, it exits 0 with one
warning line naming the share, the store records which outputs are fallbacks,
and rerunning the same command against a working server asks exactly those
again (counted at the server) without --overwrite.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from momoka import Index
from momoka.errors import ConfigError, LLMFallbackError
from momoka.llm.testing import Reply, last_user
from momoka.methods.fallbacks import FALLBACKS_KEY, FallbackTally, has_fallbacks, set_record, summarize

from _oracles.index_cli import index_with_llm
TOPICS = ["cat", "owl", "fog", "ship", "bee"]


def _paragraphs(topic: str) -> list[str]:
    return [f"The {topic} woke at dawn. The {topic} looked around the farm.",
            f"Later the {topic} slept again. Nobody saw the {topic} until noon."]


def _docs(root: Path, n: int) -> dict[str, str]:
    root.mkdir()
    texts = {}
    for t in TOPICS[:n]:
        texts[t] = "\n\n".join(_paragraphs(t)) + "\n"
        (root / f"{t}.txt").write_text(texts[t])
    return texts


def _index(tmp_path: Path, url: str, *extra: str) -> subprocess.CompletedProcess:
    return index_with_llm(tmp_path, url, *extra)


def _paragraph_of(body: dict) -> str:
    return re.search(r"\*\*Text Paragraph\*\*: (.*?)\n\nNotes:", body["messages"][0]["content"], re.DOTALL).group(1)


def _whole(body, i):
    """A working server: each paragraph is one chunk."""
    return Reply(json.dumps([_paragraph_of(body)]))


def _warnings(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("momoka: warning:")]


def _manifest(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "s" / "manifest.json").read_text())


# ------------------------------------------------------------------ the llm chunker


def test_llm_chunker_against_garbage_stops_with_exit_2_and_stores_nothing(tmp_path, make_server):
    # issue 30, failure 1: every answer is prose, not a JSON list; this used to exit 0 with every
    # paragraph silently cut into sentences and a manifest claiming chunker llm
    _docs(tmp_path / "docs", 3)
    srv = make_server(lambda body, i: Reply("Sure! I would split this paragraph after its first sentence."))
    p = _index(tmp_path, srv.base_url, "--chunker", "llm")
    assert p.returncode == 2, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last == ("momoka: error: llm chunker: 6 of 6 answers (100.0 %) were unusable, more than "
                    "--llm-max-failed 25 %; e.g. 'Sure! I would split this paragraph after its first sentence.'; "
                    "nothing of this stage was committed (is --llm-url serving a chat model? --llm-max-failed "
                    "raises the bound)")
    assert not (tmp_path / "s" / "manifest.json").exists()  # nothing committed


def test_llm_chunker_fallbacks_below_the_bound_warn_are_recorded_and_a_rerun_redoes_them(tmp_path, make_server):
    texts = _docs(tmp_path / "docs", 5)
    fog2 = _paragraphs("fog")[1]
    bee1 = _paragraphs("bee")[0]

    def flaky(body, i):
        par = _paragraph_of(body)
        if par == fog2:
            return Reply("I cannot do that.")  # no JSON list (re-asked once, still none)
        if par == bee1:
            return Reply(json.dumps(["Whales sang in the deep blue sea all night long."]))  # nowhere in the text
        return _whole(body, i)

    srv = make_server(flaky)
    p = _index(tmp_path, srv.base_url, "--chunker", "llm")
    assert p.returncode == 0, p.stderr
    assert _warnings(p.stderr) == ["momoka: warning: llm chunker: 2 of 10 answers (20.0 %) were unusable; "
                                   "those paragraphs were chunked by sentences"]
    # the manifest gives the share, each document which paragraphs fell back (offsets found here by str.index)
    assert _manifest(tmp_path)["pipeline"][FALLBACKS_KEY] == {
        "chunker": {"asked": 10, "fallbacks": 2, "documents": 2, "share": 0.2}}
    with Index.open(tmp_path / "s") as ix:
        recs = {d: ix.store.documents[d].metadata.get(FALLBACKS_KEY) for d in ix.corpus.doc_ids}
        fog_chunks = [ix.store.chunks.text(c) for c in ix.store.documents["fog"].chunk_ids]
    a, b = texts["fog"].index(fog2), texts["bee"].index(bee1)
    assert recs["fog"] == {"chunker": {"asked": 2, "fallbacks": [[a, a + len(fog2)]]}}
    assert recs["bee"] == {"chunker": {"asked": 2, "fallbacks": [[b, b + len(bee1)]]}}
    assert all(recs[t] == {"chunker": {"asked": 2, "fallbacks": []}} for t in ("cat", "owl", "ship"))
    assert fog_chunks == [_paragraphs("fog")[0], "Later the fog slept again.", "Nobody saw the fog until noon."]

    # the server is fixed; the same command again (no --overwrite): exactly the 2 fallback paragraphs are asked
    srv.script = _whole
    srv.reset()
    p = _index(tmp_path, srv.base_url, "--chunker", "llm")
    assert p.returncode == 0, p.stderr
    assert sorted(_paragraph_of(b) for b in srv.chat_bodies()) == sorted([fog2, bee1])
    assert _warnings(p.stderr) == [] and "2 redone" in p.stdout
    with Index.open(tmp_path / "s") as ix:
        assert not any(has_fallbacks(ix.store.documents[d].metadata) for d in ix.corpus.doc_ids)
        assert [ix.store.chunks.text(c) for c in ix.store.documents["fog"].chunk_ids] == _paragraphs("fog")
        assert len(ix) == 5
    assert _manifest(tmp_path)["pipeline"][FALLBACKS_KEY]["chunker"]["fallbacks"] == 0
    srv.reset()
    p = _index(tmp_path, srv.base_url, "--chunker", "llm")  # healed: nothing more to ask
    assert p.returncode == 0 and srv.count == 0, p.stderr


# ------------------------------------------------------------------ LLM titles


def _title_of(body) -> str:
    words = last_user(body).split()
    return f"On the {next(t for t in TOPICS if t in words)}"


def test_llm_titles_that_all_fail_stop_with_exit_2(tmp_path, make_server):
    # issue 30, failure 2: 3 of 3 titles unusable used to exit 0 (visible only as "failed_llm 3")
    _docs(tmp_path / "docs", 3)
    srv = make_server(lambda body, i: Reply("Title:"))
    p = _index(tmp_path, srv.base_url, "--chunker", "paragraph", "--enrich", "title", "-o", "title.mode=llm")
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith(
        "momoka: error: title: 3 of 3 titles (100.0 %) were unusable, more than --llm-max-failed 25 %; e.g. 'Title:'")


def test_fallback_titles_are_redone_by_a_rerun_without_overwrite(tmp_path, make_server):
    # issue 30, failure 2: a rerun against a good server made 0 requests and kept the fallback titles
    _docs(tmp_path / "docs", 3)
    srv = make_server(lambda body, i: Reply("Title:"))
    args = ("--chunker", "paragraph", "--enrich", "title", "-o", "title.mode=llm", "--llm-max-failed", "1")
    p = _index(tmp_path, srv.base_url, *args)
    assert p.returncode == 0, p.stderr
    assert _warnings(p.stderr) == ["momoka: warning: title: 3 of 3 titles (100.0 %) were unusable; those "
                                   "documents got their own title, first heading or first sentence"]
    with Index.open(tmp_path / "s") as ix:
        md = {d: ix.store.documents[d].metadata for d in ix.corpus.doc_ids}
    assert {d: m["momoka_title"] for d, m in md.items()} == {t: f"The {t} woke at dawn." for t in TOPICS[:3]}
    assert all(m[FALLBACKS_KEY] == {"title": {"asked": 1, "fallbacks": ["title"]}} for m in md.values())

    srv.script = lambda body, i: Reply(_title_of(body))
    srv.reset()
    p = _index(tmp_path, srv.base_url, *args)
    assert p.returncode == 0, p.stderr
    assert srv.count == 3 and _warnings(p.stderr) == []  # one request per fallback title
    with Index.open(tmp_path / "s") as ix:
        md = {d: ix.store.documents[d].metadata for d in ix.corpus.doc_ids}
    assert {d: (m["momoka_title"], m["momoka_title_source"]) for d, m in md.items()} == {
        t: (f"On the {t}", "llm") for t in TOPICS[:3]}
    assert not any(has_fallbacks(m) for m in md.values())
    assert _manifest(tmp_path)["pipeline"][FALLBACKS_KEY] == {
        "title": {"asked": 3, "fallbacks": 0, "documents": 0, "share": 0.0}}


def test_one_fallback_title_of_five_is_the_only_request_of_the_rerun(tmp_path, make_server):
    _docs(tmp_path / "docs", 5)
    srv = make_server(lambda body, i: Reply("   ") if "owl" in last_user(body).split() else Reply(_title_of(body)))
    args = ("--chunker", "paragraph", "--enrich", "title", "-o", "title.mode=llm")
    p = _index(tmp_path, srv.base_url, *args)
    assert p.returncode == 0, p.stderr
    assert _warnings(p.stderr) == ["momoka: warning: title: 1 of 5 titles (20.0 %) were unusable; those "
                                   "documents got their own title, first heading or first sentence"]
    srv.script = lambda body, i: Reply(_title_of(body))
    srv.reset()
    p = _index(tmp_path, srv.base_url, *args)
    assert p.returncode == 0, p.stderr
    assert srv.count == 1 and "owl" in last_user(srv.chat_bodies()[0]).split()


# ------------------------------------------------------------------ the parts, in Python


def test_tally_counts_bounds_and_words():
    t = FallbackTally("llm chunker", "chunker", "answers", "those paragraphs were chunked by sentences",
                      max_failed=0.25)
    for i in range(40):
        t.ask("a" if i < 20 else "b")
    for k in range(3):
        t.fail("b", [k, k + 1], "  no\n list ")
    t.check()  # 7.5 % <= 25 %
    assert t.warning() == ("llm chunker: 3 of 40 answers (7.5 %) were unusable; those paragraphs were chunked "
                           "by sentences")
    assert t.take("a") == {"asked": 20, "fallbacks": []} and t.take("a") is None
    assert t.take("b") == {"asked": 20, "fallbacks": [[0, 1], [1, 2], [2, 3]]}
    for _ in range(8):
        t.fail("b", [9, 9], "x")
    with pytest.raises(LLMFallbackError) as e:  # 11 of 40 = 27.5 % > 25 %
        t.check()
    assert e.value.stage == "llm chunker" and e.value.share == pytest.approx(11 / 40)
    assert "11 of 40 answers (27.5 %)" in str(e.value) and "e.g. 'no list'" in str(e.value)
    t.reset(0.5)
    assert (t.asked, t.failed, t.warning(), t.bound) == (0, 0, None, 0.5)


def test_records_and_sums():
    class E:
        def __init__(self, md):
            self.metadata = md

    a, b = {}, {"other": 1}
    set_record(a, "title", {"asked": 1, "fallbacks": ["title"]})
    set_record(a, "chunker", {"asked": 4, "fallbacks": [[0, 5]]})
    set_record(b, "chunker", {"asked": 4, "fallbacks": []})
    assert has_fallbacks(a) and not has_fallbacks(b)
    assert summarize([E(a), E(b)]) == {"title": {"asked": 1, "fallbacks": 1, "documents": 1, "share": 1.0},
                                       "chunker": {"asked": 8, "fallbacks": 1, "documents": 1, "share": 0.125}}
    set_record(a, "title", None)
    set_record(a, "chunker", None)
    assert a == {}


def test_llm_max_failed_is_checked_in_python(tmp_path):
    with pytest.raises(ConfigError, match="llm_max_failed"):
        Index.build([{"doc_id": "a", "text": "One. Two."}], embedder=None, llm_max_failed=1.5)


def _first_sentence(body: dict) -> str:
    """The first sentence of the section a summary request quotes."""
    return last_user(body).split("Section Text:\n", 1)[1].split(". ")[0] + "."


def test_keyword_and_summary_views_follow_the_rule(tmp_path, make_server):
    from momoka.llm import OpenAIClient
    from momoka.methods.mcindex import KeywordsEnricher, SummaryEnricher

    docs = [{"doc_id": t, "text": "\n\n".join(_paragraphs(t))} for t in TOPICS]
    srv = make_server(lambda body, i: Reply("No list here."))
    llm = OpenAIClient("scripted", base_url=srv.base_url, api_key="x", cache=str(tmp_path / "llm.sqlite"))
    kw = KeywordsEnricher("llm", llm=llm, cache=str(tmp_path / "views.sqlite"))
    with pytest.raises(LLMFallbackError, match=r"^keywords: 10 of 10 answers \(100.0 %\) were unusable"):
        Index.build(docs, chunker="paragraph", embedder=None, enrich=[kw], progress=False)

    # summaries: 1 empty answer of 5 (sections over min_words=3 words) -> warned, recorded, asked again later;
    # the others answer the section's first sentence (a summary grounded in its section, one per section)
    srv.script = lambda body, i: Reply("" if "owl" in last_user(body).split() else _first_sentence(body))
    sm = SummaryEnricher("llm", llm=llm, cache=str(tmp_path / "views.sqlite"), min_words=3)
    with pytest.warns(UserWarning, match=r"^summary: 2 of 10 answers \(20.0 %\) were unusable; those chunks are "
                                         r"their own summary$"):
        ix = Index.build(docs, chunker="paragraph", embedder=None, enrich=[sm], progress=False)
    owl = ix.store.documents["owl"].metadata[FALLBACKS_KEY]["summary"]
    text = "\n\n".join(_paragraphs("owl"))
    assert owl == {"asked": 2, "fallbacks": [[0, len(_paragraphs("owl")[0])],
                                             [text.index(_paragraphs("owl")[1]), len(text)]]}
    srv.reset()
    srv.script = lambda body, i: Reply(_first_sentence(body))
    ix.add(docs, existing="skip")
    assert srv.count == 2 and ix.report.redone == ["owl"]
    assert not has_fallbacks(ix.store.documents["owl"].metadata)


# ------------------------------------------------------------------ JERR extraction


def _topic(body) -> str:
    """The topic of a request (its first user message: re-asks append the model's answer and a reminder)."""
    first = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return next(t for t in TOPICS if re.search(rf"\b{t}\b", first))


def _jerr_kind(body) -> str:
    user = last_user(body)
    for marker, kind in (("Please transfer", "synopsis"), ("information atoms", "atoms"),
                         ("core components", "elements"), ("attributes between", "edge")):
        if marker in user:
            return kind
    raise AssertionError(user[:80])


def _jerr_answer(body, i):
    """A working server: the paper's answers for a unit about one topic."""
    t, kind = _topic(body), _jerr_kind(body)
    return Reply({"synopsis": f"The {t} woke and slept on the farm.",
                  "atoms": f"1. The {t} woke at dawn.\n2. The {t} slept until noon.",
                  "elements": json.dumps([f"The {t}", "the farm", "noon"]),
                  "edge": "woke on"}[kind])


def _jerr_index(llm, max_failed=None):
    from momoka.methods.jerr import JerrRelator

    docs = [{"doc_id": t, "text": "\n\n".join(_paragraphs(t))} for t in TOPICS]
    return Index.build(docs, chunker="paragraph", embedder=None, relate=[JerrRelator("llm", llm=llm)],
                       progress=False, llm_max_failed=max_failed)


def test_jerr_extraction_follows_the_rule(tmp_path, make_server):
    from momoka.llm import OpenAIClient
    from momoka.methods.jerr import read_graphs

    # every element list is prose: 5 of 5 units (one per document) unusable -> stop before storing a graph
    srv = make_server(lambda body, i: Reply("The core components are hard to say.") if _jerr_kind(body) == "elements"
                      else _jerr_answer(body, i))
    llm = OpenAIClient("scripted", base_url=srv.base_url, api_key="x", cache=str(tmp_path / "llm.sqlite"))
    with pytest.raises(LLMFallbackError, match=r"^jerr extraction: 5 of 5 units \(100.0 %\) were unusable, more "
                                               r"than --llm-max-failed 25 %; e.g. 'The core components"):
        _jerr_index(llm)

    # only the owl's element list is prose: 1 of 5 (20 %) -> warned, recorded, the owl's unit extracted offline
    srv.script = lambda body, i: (Reply("Sorry, I cannot list any core components of this paragraph.") if _jerr_kind(body) == "elements"
                                  and _topic(body) == "owl" else _jerr_answer(body, i))
    with pytest.warns(UserWarning, match=r"^jerr extraction: 1 of 5 units \(20.0 %\) were unusable; those units "
                                         r"were extracted offline \(no LLM\)$"):
        ix = _jerr_index(llm)
    text = "\n\n".join(_paragraphs("owl"))
    md = {d: ix.store.documents[d].metadata for d in ix.corpus.doc_ids}
    assert md["owl"][FALLBACKS_KEY] == {"jerr": {"asked": 1, "fallbacks": [[0, len(text)]]}}
    assert all(md[t][FALLBACKS_KEY] == {"jerr": {"asked": 1, "fallbacks": []}} for t in TOPICS if t != "owl")
    assert md["owl"]["jerr"]["backends"] == ["offline-fallback"]
    assert ix.corpus.pipeline[FALLBACKS_KEY]["jerr"] == {"asked": 5, "fallbacks": 1, "documents": 1, "share": 0.2}

    # the server is fixed: adding the same documents again asks only the owl's unusable element list (the
    # owl's synopsis and atoms were usable: read from the cache) and then the owl's 3 edge questions
    srv.script = _jerr_answer
    srv.reset()
    ix.add([{"doc_id": t, "text": "\n\n".join(_paragraphs(t))} for t in TOPICS], existing="skip")
    asked = sorted((_topic(b), _jerr_kind(b)) for b in srv.chat_bodies())
    assert asked == [("owl", "edge")] * 3 + [("owl", "elements")]
    assert ix.report.redone == ["owl"] and not has_fallbacks(ix.store.documents["owl"].metadata)
    ents, _ = read_graphs(ix.store, ["owl"])
    assert {e["name"] for e in ents} == {"The owl", "the farm", "noon"}


# ------------------------------------------------------------------ the Momoka-Map LLM referee


def _pair_of(body) -> tuple[str, str]:
    m = re.search(r"Initial Chunk: (.*?)\n\nNew Chunk: (.*?)\n\nOutput format", body["messages"][0]["content"],
                  re.DOTALL)
    return m.group(1), m.group(2)


def _verdict(body, i):
    """A working referee: 1 when the new chunk is the paragraph after the initial one, else 0."""
    a, b = _pair_of(body)
    return Reply("1" if a.startswith("The ") and b.startswith("Later") else "0")


def _paths_index(llm):
    from momoka.methods.momoka.components import PathRelator

    docs = [{"doc_id": t, "text": "\n\n".join(_paragraphs(t))} for t in TOPICS]
    return Index.build(docs, chunker="paragraph", embedder=None, progress=False,
                       relate=[PathRelator("llm", llm=llm, iterations=10, rollout=2)])


def test_llm_referee_follows_the_rule(tmp_path, make_server):
    from momoka.llm import OpenAIClient

    # every verdict is prose: 10 of 10 pairs (2 per two-paragraph document) malformed -> stop, nothing stored
    srv = make_server(lambda body, i: Reply("It is hard to say whether it completes it."))
    llm = OpenAIClient("scripted", base_url=srv.base_url, api_key="x", cache=str(tmp_path / "llm.sqlite"))
    with pytest.raises(LLMFallbackError, match=r"^referee: 10 of 10 verdicts \(100.0 %\) were unusable, more than "
                                               r"--llm-max-failed 25 %; e.g. 'It is hard to say"):
        _paths_index(llm)

    # only the owl's (first paragraph, second paragraph) verdict is prose: 1 of 10 -> warned, scored 0, recorded
    owl1, owl2 = _paragraphs("owl")

    def one_bad(body, i):
        return Reply("maybe") if _pair_of(body) == (owl1, owl2) else _verdict(body, i)

    srv.script = one_bad
    srv.reset()
    with pytest.warns(UserWarning, match=r"^referee: 1 of 10 verdicts \(10.0 %\) were unusable; those pairs were "
                                         r"scored 0$"):
        ix = _paths_index(llm)
    assert sum(_pair_of(b) == (owl1, owl2) for b in srv.chat_bodies()) == 3  # asked, then re-asked twice
    md = {d: ix.store.documents[d].metadata for d in ix.corpus.doc_ids}
    assert md["owl"][FALLBACKS_KEY] == {"referee": {"asked": 2, "fallbacks": [[[0], 1]]}}
    assert all(md[t][FALLBACKS_KEY] == {"referee": {"asked": 2, "fallbacks": []}} for t in TOPICS if t != "owl")
    assert ix.corpus.pipeline[FALLBACKS_KEY]["referee"] == {"asked": 10, "fallbacks": 1, "documents": 1, "share": 0.1}

    # a working server (it says 0 for that pair): the same documents again ask exactly that verdict, once
    srv.script = lambda body, i: Reply("0") if _pair_of(body) == (owl1, owl2) else _verdict(body, i)
    srv.reset()
    ix.add([{"doc_id": t, "text": "\n\n".join(_paragraphs(t))} for t in TOPICS], existing="skip")
    assert [_pair_of(b) for b in srv.chat_bodies()] == [(owl1, owl2)]
    assert ix.report.redone == ["owl"] and not has_fallbacks(ix.store.documents["owl"].metadata)
    srv.reset()
    ix.add([{"doc_id": t, "text": "\n\n".join(_paragraphs(t))} for t in TOPICS], existing="skip")
    assert srv.count == 0 and ix.report.redone == []


# ------------------------------------------------------------------ the MoC meta-chunker


def _window_of(body) -> str:
    first = next(m["content"] for m in body["messages"] if "Document content: " in m["content"])
    return first.split("Document content: ", 1)[1]


def _outlines(body, i):
    """A working meta-chunker: one outline (head [MASK] tail) per paragraph of the window."""
    return Reply(json.dumps([f"{p[:12]}[MASK]{p[-12:]}" for p in _window_of(body).split("\n\n")]))


def _meta_script(bad: dict):
    """Prose for the windows about the topics in ``bad`` ("prose"), or an outline found nowhere ("absent")."""
    def script(body, i):
        t = _topic(body)
        if bad.get(t) == "prose":
            return Reply("Here is how I would segment it: after the first paragraph.")
        if bad.get(t) == "absent":
            return Reply(json.dumps(["Whales sang[MASK]all night long."]))
        return _outlines(body, i)
    return script


def test_meta_chunker_follows_the_rule(tmp_path, make_server):
    from momoka.llm import OpenAIClient
    from momoka.methods.moc import MetaChunker

    docs = [{"doc_id": t, "text": "\n\n".join(_paragraphs(t))} for t in TOPICS]  # one window per document
    srv = make_server(_meta_script({t: "prose" for t in TOPICS}))
    llm = OpenAIClient("scripted", base_url=srv.base_url, api_key="x", cache=str(tmp_path / "llm.sqlite"))
    with pytest.raises(LLMFallbackError, match=r"^meta chunker: 5 of 5 windows \(100.0 %\) were unusable, more than "
                                               r"--llm-max-failed 25 %; e.g. 'Here is how I would segment it"):
        Index.build(docs, chunker=MetaChunker(llm), embedder=None, progress=False)

    # the owl's answer is prose, the bee's outline is nowhere in its window: 2 of 5 (bound 50 %) -> warned,
    # recorded (the window is the whole document), those windows cut into merged sentences
    srv.script = _meta_script({"owl": "prose", "bee": "absent"})
    with pytest.warns(UserWarning, match=r"^meta chunker: 2 of 5 windows \(40.0 %\) were unusable; those windows "
                                         r"were cut into merged whole sentences$"):
        ix = Index.build(docs, chunker=MetaChunker(llm), embedder=None, progress=False, llm_max_failed=0.5)
    md = {d: ix.store.documents[d].metadata for d in ix.corpus.doc_ids}
    whole = len(docs[0]["text"])  # every document is as long as the cat's
    assert {t: md[t][FALLBACKS_KEY] for t in TOPICS} == {
        t: {"chunker": {"asked": 1, "fallbacks": [[0, whole]] if t in ("owl", "bee") else []}} for t in TOPICS}
    assert [ix.store.chunks.text(c) for c in ix.store.documents["cat"].chunk_ids] == _paragraphs("cat")

    # the server is fixed: adding the same documents asks exactly the owl's and the bee's windows again (the
    # bee's placed-nowhere answer had parsed, and was removed from the cache all the same)
    srv.script = _outlines
    srv.reset()
    ix.add(docs, existing="skip")
    assert sorted(_topic(b) for b in srv.chat_bodies()) == ["bee", "owl"]
    assert sorted(ix.report.redone) == ["bee", "owl"]
    assert [ix.store.chunks.text(c) for c in ix.store.documents["owl"].chunk_ids] == _paragraphs("owl")
    assert not any(has_fallbacks(ix.store.documents[t].metadata) for t in TOPICS)


def test_eval_chunking_names_the_meta_row_by_its_fallback_share(tmp_path, make_server, capsys, monkeypatch):
    # issue 27: a `meta` row that was mostly its sentence fallback must say so
    from momoka.cli import main
    from momoka.eval.chunk_compare import compare_chunkers, format_comparison
    from momoka.eval.datasets import Dataset, DocRecord
    from momoka.llm import OpenAIClient

    srv = make_server(_meta_script({"owl": "prose", "bee": "absent"}))
    llm = OpenAIClient("scripted", base_url=srv.base_url, api_key="x", cache=str(tmp_path / "llm.sqlite"))
    ds = Dataset("toy", tmp_path, [DocRecord(t, None, "\n\n".join(_paragraphs(t)), {}) for t in TOPICS], [], None,
                 None)
    report = compare_chunkers(ds, ["meta", "sentence"], metrics=[], retrieval=False, target_chars=60,
                              options={"meta": {"llm": llm, "max_failed": 1.0}})
    assert report["chunkers"]["meta"]["fallbacks"] == {"asked": 5, "fallbacks": 2, "share": 0.4}
    rows = format_comparison(report).splitlines()[3:5]  # title, header, rule, then one row per chunker
    assert rows[0].startswith("meta (40.0 % fallback) ") and rows[1].startswith("sentence ")

    # the plain mode of `momoka eval-chunking` names it too (its --llm-* options set these; restored after)
    for k in ("MOMOKA_LLM_BASE_URL", "MOMOKA_LLM_MODEL", "MOMOKA_LLM_MAX_FAILED"):
        monkeypatch.setenv(k, "")  # remembers the value before, restored after the test
        monkeypatch.delenv(k)
    root = tmp_path / "set"
    root.mkdir()
    (root / "documents.jsonl").write_text("".join(json.dumps({"doc_id": t, "text": "\n\n".join(_paragraphs(t))})
                                                  + "\n" for t in TOPICS))
    (root / "questions.jsonl").write_text("")
    rc = main(["eval-chunking", "--data", str(root), "--chunker", "meta", "--llm-url", srv.base_url,
               "--llm-model", "scripted", "--llm-max-failed", "1"])
    out = capsys.readouterr().out
    assert rc == 0 and out.splitlines()[0] == "chunker meta (40.0 % fallback)", out
