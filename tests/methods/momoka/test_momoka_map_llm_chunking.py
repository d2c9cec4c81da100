"""LLM chunking (Figure 3) against a scripted HTTP server: exact offsets, edited items, sentence fallback."""

from __future__ import annotations

import json
import re

import pytest
from momoka.errors import LLMError, LLMFallbackError
from momoka.llm import OpenAIClient
from momoka.llm.testing import Reply, ScriptedServer, Status
from momoka.methods.momoka import LLMChunker
from momoka.text import Document

P1 = "The river rose in March. Farmers moved their cattle uphill. The town council met twice."
P2 = "Solar panels were installed on the school. They cut the power bill by half."
P3 = "A comet passed by. Nobody saw it. The sky was cloudy all week."
P4 = "Short paragraph only."
TEXT = "\n\n".join([P1, P2, P3, P4])


def _paragraph(body) -> str:
    msg = body["messages"][0]["content"]
    return re.search(r"\*\*Text Paragraph\*\*: (.*?)\n\nNotes:", msg, re.DOTALL).group(1)


def script(body, i):
    par = _paragraph(body)
    if par.startswith("The river"):
        # two chunks, the second with edits (a dropped letter and a changed word)
        return Reply(json.dumps(["The river rose in March. Farmers moved their cattle uphill.",
                                 "The town councl met two times."]))
    if par.startswith("Solar"):
        # wrapped in a code fence, one chunk
        return Reply("```json\n" + json.dumps([par]) + "\n```")
    # P3: a hallucinated item that is nowhere in the paragraph -> sentence fallback
    return Reply(json.dumps(["A comet passed by.", "Dinosaurs returned to Berlin in a yellow submarine yesterday."]))


def test_llm_chunks_are_exact_spans_and_unplaceable_paragraphs_fall_back(tmp_path):
    doc = Document.from_text(TEXT, doc_id="d")
    with ScriptedServer(script) as srv:
        llm = OpenAIClient("scripted", base_url=srv.base_url, api_key="x", cache=str(tmp_path / "c.sqlite"))
        ch = LLMChunker(llm, max_failed=0.5)  # 1 of 3 answers is unusable: allowed here (default bound 25 %)
        chunks = ch(doc)
        # the short one-sentence paragraph P4 is not sent (nothing to split)
        assert srv.count == 3
        assert "master of text segmentation" in srv.chat_bodies()[0]["messages"][0]["content"]
    texts = [c.text for c in chunks]
    assert texts == [
        "The river rose in March. Farmers moved their cattle uphill.",
        "The town council met twice.",       # the edited item is placed on the source text
        P2,
        "A comet passed by.", "Nobody saw it.", "The sky was cloudy all week.",  # sentence fallback
        P4,
    ]
    for c in chunks:
        assert doc.text[c.start : c.end] == c.text
    assert [c.metadata["llm_chunk"] for c in chunks] == ["llm", "llm", "llm", "sentence", "sentence", "sentence",
                                                         "whole"]
    # p_i, s_i of each chunk: its first character's paragraph and sentence (computed independently here)
    para_starts = [TEXT.index(p) for p in (P1, P2, P3, P4)]
    for c in chunks:
        assert c.paragraph == max(k for k, s in enumerate(para_starts) if s <= c.start)
    assert [c.sentence for c in chunks] == [0, 2, 3, 5, 6, 7, 8]
    st = ch.stats
    assert (st.paragraphs, st.llm_paragraphs, st.short_paragraphs) == (4, 2, 1)
    assert st.fallback_unplaced == 1 and st.fallback_parse == 0 and st.fallback == 1
    assert st.edited_items >= 1 and st.chunks == 7


def test_unparseable_answer_falls_back_and_is_counted(tmp_path):
    # the model never answers with a JSON list: re-asked once, then the paragraph is cut into sentences
    doc = Document.from_text(P3, doc_id="d")
    with ScriptedServer(lambda body, i: Reply("I would split it after the first sentence.")) as srv:
        llm = OpenAIClient("scripted", base_url=srv.base_url, api_key="x", cache=False)
        ch = LLMChunker(llm, max_reasks=1, max_failed=1.0)  # any share of fallbacks allowed
        chunks = ch(doc)
        assert srv.count == 2
        assert llm.accounting.by_method["llm_chunking"].parse_failures == 1
        with pytest.raises(LLMFallbackError, match=r"llm chunker: 1 of 1 answers \(100.0 %\) were unusable"):
            LLMChunker(llm, max_reasks=1)(doc)  # the default bound (25 %) stops it
    assert [c.text for c in chunks] == ["A comet passed by.", "Nobody saw it.", "The sky was cloudy all week."]
    assert ch.stats.fallback_parse == 1 and (ch.fallbacks.asked, ch.fallbacks.failed) == (1, 1)
    assert ch.fallbacks.take("d") == {"asked": 1, "fallbacks": [[0, len(P3)]]}


def test_request_failure_raises(tmp_path):
    # a server that refuses the request (HTTP 400) is an error, not a silent fallback
    doc = Document.from_text(P1, doc_id="d")
    with ScriptedServer(lambda body, i: Status(400)) as srv:
        llm = OpenAIClient("scripted", base_url=srv.base_url, api_key="x", cache=False)
        with pytest.raises(LLMError):
            LLMChunker(llm)(doc)


def test_long_paragraph_is_sent_in_runs_of_whole_sentences(tmp_path):
    # A text without blank lines is one long paragraph: it is sent as runs of whole sentences of at most
    # max_paragraph_chars characters; the scripted model returns each run as one chunk.
    sents = ["Alpha beta gamma delta.", "Epsilon zeta eta.", "Theta iota kappa lambda mu.", "Nu xi omicron.",
             "Pi rho sigma tau."]
    text = " ".join(sents)
    doc = Document.from_text(text, doc_id="long")
    with ScriptedServer(lambda body, i: Reply(json.dumps([_paragraph(body)]))) as srv:
        llm = OpenAIClient("scripted", base_url=srv.base_url, api_key="x", cache=False)
        ch = LLMChunker(llm, max_paragraph_chars=45)
        chunks = ch(doc)
        sent = [_paragraph(b) for b in srv.chat_bodies()]
    # independent grouping: greedy runs whose span (first start .. last end) stays within 45 characters
    starts = [text.index(s) for s in sents]
    runs, cur = [], [0]
    for k in range(1, len(sents)):
        if starts[k] + len(sents[k]) - starts[cur[0]] > 45:
            runs.append(cur)
            cur = [k]
        else:
            cur.append(k)
    runs.append(cur)
    want = [text[starts[r[0]] : starts[r[-1]] + len(sents[r[-1]])] for r in runs]
    assert [c.text for c in chunks] == want
    assert sent == [w for w, r in zip(want, runs) if len(r) >= 2]  # single-sentence runs are not sent
    assert ch.stats.long_paragraphs == 1 and ch.stats.fallback == 0
    for c in chunks:
        assert doc.text[c.start : c.end] == c.text


def test_batch_chunks_several_documents_like_one_by_one(tmp_path):
    # the registered "llm" chunker's batch() sends the paragraphs of several documents together and gives,
    # per document, the chunks the single-document call gives (expected lists as in the first test)
    from momoka import registry

    docs = [Document.from_text(TEXT, doc_id="d"), Document.from_text(P3, doc_id="e")]
    with ScriptedServer(script) as srv:
        llm = OpenAIClient("scripted", base_url=srv.base_url, api_key="x", cache=False)
        ch = registry.create("chunker", "llm", llm=llm, max_failed=1.0)  # P3 falls back in both documents
        assert isinstance(ch, LLMChunker)
        got = ch.batch(docs)
        assert srv.count == 3  # P1, P2, P3 (shared by d and e: asked once); the short P4 is not sent
    assert [c.text for c in got[0]] == [
        "The river rose in March. Farmers moved their cattle uphill.", "The town council met twice.", P2,
        "A comet passed by.", "Nobody saw it.", "The sky was cloudy all week.", P4]
    assert [c.text for c in got[1]] == ["A comet passed by.", "Nobody saw it.", "The sky was cloudy all week."]
    for d, cs in zip(docs, got):
        assert all(d.text[c.start : c.end] == c.text for c in cs)
    assert ch.stats.chunks == 10 and ch.stats.fallback_unplaced == 2
    assert ch.params() == {"max_error": 0.3, "min_sentences": 2, "max_paragraph_chars": 8000, "max_reasks": 1,
                           "model": "scripted"}
