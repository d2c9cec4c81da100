"""The LLM reader's answer styles: short answers (the default) whose text is the answer alone, sentence answers
citing ``[n]``, and replies saying the passages do not hold the answer (``Answer.no_answer``).

References: the expected answer texts, citations and not-found decisions are written by hand for each scripted
reply; the scripted OpenAI-compatible server on 127.0.0.1 (:mod:`momoka.llm.testing`) returns the reply the
test names, so the parsing is checked on what a real endpoint sends. The real-model test asks the installed
Qwen2.5 1.5B about passages whose answer is known by hand, and about questions whose kind of answer (a colour,
a language) the passages do not hold.
"""

from __future__ import annotations

import json

import pytest

from momoka.errors import InputError
from momoka.methods.base import Item, Member, Result
from momoka.methods.standard import LLMReader
from momoka.methods.standard.reader import (NOT_IN_PASSAGES, SHORT_PROMPT, SYSTEM_PROMPT, says_not_in_passages,
                                            short_answer)

P1 = "The lighthouse on the north cape was automated in 1986."
P2 = "Its last keeper, Anna Holm, kept the light from 1951 until the automation."
DOC = P1 + " " + P2
DOC2 = "The harbour froze in the winter of 1902."


def _result() -> Result:
    m1 = Member(0, "light", 0, len(P1), P1)
    m2 = Member(1, "light", len(P1) + 1, len(DOC), P2)
    m3 = Member(0, "harbour", 0, len(DOC2), DOC2)
    return Result("q", (Item((m1,), 0.9, 1), Item((m2,), 0.8, 2), Item((m3,), 0.5, 3)), "t")


class Scripted:
    """An LLM client that answers ``reply`` and records the messages."""

    model = "scripted"

    def __init__(self, reply: str):
        self.reply = reply
        self.messages = None

    def complete(self, messages, **kw):
        self.messages = messages
        return self.reply


@pytest.mark.parametrize("reply, text", [
    ("1986", "1986"),
    ("Answer: Anna Holm [2].", "Anna Holm"),
    ("[2]\nAnna Holm", "Anna Holm"),                 # the first line with words
    ("in 1986 [1]\nThe lighthouse was automated then.", "in 1986"),
    ("  [1]  ", ""),
    ('"not in the passages"', "not in the passages"),
])
def test_short_answer_is_the_first_line_with_words_without_markers(reply, text):
    assert short_answer(reply) == text


@pytest.mark.parametrize("reply", [
    NOT_IN_PASSAGES, "Not in the passages.", "The passages do not mention who built it.",
    "This is not stated in the given passages.", "The question cannot be answered from the passages.",
    "The context does not say.", "Unanswerable", "There is no information in the passages about this.",
])
def test_replies_that_say_the_answer_is_missing(reply):
    assert says_not_in_passages(reply)


@pytest.mark.parametrize("reply", [
    "Anna Holm", "1986", "not in the winter", "the passage of time", "The lighthouse was not automated until 1986.",
    "Unknown Pleasures", "It is not in the harbour but on the north cape.",
])
def test_answers_that_are_not_a_refusal(reply):
    assert not says_not_in_passages(reply)


def test_short_is_the_default_and_its_text_is_the_answer_alone():
    llm = Scripted("Anna Holm [2]")
    ans = LLMReader(llm).answer("Who was the last keeper?", _result())
    assert llm.messages[0] == {"role": "system", "content": SHORT_PROMPT}
    assert llm.messages[-1]["content"].endswith("Question: Who was the last keeper?\nAnswer:")
    assert ans.text == "Anna Holm" and not ans.no_answer
    assert [(c.number, c.doc_id, c.start, c.end) for c in ans.citations] == [(2, "light", len(P1) + 1, len(DOC))]
    assert ans.cited_by == "model"


def test_a_short_answer_without_markers_cites_the_passages_holding_it():
    ans = LLMReader(Scripted("1902")).answer("When did the harbour freeze?", _result())
    assert ans.text == "1902" and ans.cited_by == "overlap"
    assert [(c.number, c.doc_id) for c in ans.citations] == [(3, "harbour")]
    assert ans.citations[0].text == DOC2


def test_not_in_the_passages_gives_no_answer_and_no_citation():
    ans = LLMReader(Scripted("not in the passages")).answer("Who designed the lamp?", _result())
    assert ans.no_answer and ans.citations == () and ans.cited_by == "none"
    assert ans.text == NOT_IN_PASSAGES
    assert [c.number for c in ans.context] == [1, 2, 3]        # what the model was given is still listed
    assert ans.to_dict()["no_answer"] is True


def test_a_refusal_that_cites_a_passage_is_an_answer():
    # "the passages do not say when, but ..." with a citation: the model answered something; not a refusal
    ans = LLMReader(Scripted("The passages do not say the month; the year is 1986 [1]"), style="sentence").answer(
        "When was it automated?", _result())
    assert not ans.no_answer and [c.number for c in ans.citations] == [1]


def test_sentence_style_keeps_the_reply_and_its_markers():
    reply = "The lighthouse was automated in 1986 [1]. Anna Holm was its last keeper [2]."
    llm = Scripted(reply)
    ans = LLMReader(llm, style="sentence").answer("Tell me about the lighthouse.", _result())
    assert llm.messages[0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert ans.text == reply and [c.number for c in ans.citations] == [1, 2] and not ans.no_answer
    ans = LLMReader(Scripted("The passages do not contain the answer."), style="sentence").answer("q?", _result())
    assert ans.no_answer and ans.citations == ()


def test_the_jerr_reader_keeps_its_prompt_and_reads_sentences():
    from momoka.methods.jerr.components import JerrReader

    reply = "Anna Holm kept the light [2]."
    llm = Scripted(reply)
    ans = JerrReader(llm).answer("Who kept the light?", _result())
    assert llm.messages[0]["role"] == "user" and SHORT_PROMPT not in llm.messages[0]["content"]
    assert ans.text == reply and [c.number for c in ans.citations] == [2]


def test_unknown_style_is_an_input_error():
    with pytest.raises(InputError, match="style must be one of short, sentence"):
        LLMReader(Scripted("x"), style="long")


def _store(tmp_path):
    from momoka import Index

    d = tmp_path / "docs"
    d.mkdir()
    (d / "light.md").write_text(DOC + "\n", encoding="utf-8")
    (d / "harbour.md").write_text(DOC2 + "\n", encoding="utf-8")
    store = tmp_path / "s.store"
    Index.build([d], store=store, embedder=None).close()
    return store


@pytest.mark.parametrize("reply, text, no_answer", [
    ("Anna Holm [1]", "Anna Holm", False),
    ("Not in the passages.", "Not in the passages", True),
])
def test_ask_through_a_scripted_endpoint(tmp_path, capsys, monkeypatch, make_server, reply, text, no_answer):
    from momoka.cli import main
    from momoka.llm.testing import Reply

    store = _store(tmp_path)
    srv = make_server(lambda req, i: Reply(reply))
    monkeypatch.setenv("MOMOKA_LLM_BASE_URL", srv.base_url)
    monkeypatch.setenv("MOMOKA_LLM_MODEL", "m")
    capsys.readouterr()
    assert main(["ask", str(store), "Who kept the light?", "--retriever", "bm25", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    body = srv.chat_bodies()[-1]
    assert body["messages"][0]["content"] == SHORT_PROMPT
    assert out["answer"] == text and out["no_answer"] is no_answer
    if no_answer:
        assert out["citations"] == []
    else:
        c = out["citations"][0]
        assert c["number"] == 1 and c["doc_id"] == out["context"][0]["doc_id"]
    assert main(["ask", str(store), "Who kept the light?", "--retriever", "bm25"]) == 0
    printed = capsys.readouterr()
    assert printed.out.startswith(text + "\n")
    assert ("found no answer in the passages" in printed.err) is no_answer


@pytest.mark.models
@pytest.mark.slow
def test_the_installed_qwen_answers_briefly_and_says_when_the_passages_lack_the_answer():
    from momoka.llm.local import LocalClient
    from momoka.models.catalog import installed_models
    from momoka.models.installer import model_dir

    if "llm-qwen2.5-1.5b" not in installed_models():
        pytest.skip("llm-qwen2.5-1.5b is not installed (`momoka models install --model llm-qwen2.5-1.5b`)")
    llm = LocalClient(model_dir=model_dir("llm-qwen2.5-1.5b", auto_install=False), cache=False, progress=False)
    reader = LLMReader(llm, max_tokens=24)
    ans = reader.answer("Who was the last keeper of the lighthouse?", _result())
    assert ans.text.lower().removeprefix("the ").strip() in {"anna holm"} and not ans.no_answer
    assert 2 in [c.number for c in ans.citations]
    # no colour and no language in the passages: the model says so. (Asked who designed the lamp, it names
    # the one person they mention: the wrong-article measurement of docs/ask.md counts such answers.)
    for question in ("What colour was the lamp of the lighthouse?", "Which language is spoken in Brazil?"):
        ans = reader.answer(question, _result())
        assert ans.no_answer and ans.citations == (), (question, ans.text)
