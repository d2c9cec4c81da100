"""The readers: the LLM reader sends what the budget says (cut to the window with a warning), and the
evidence reader quotes the best sentences with exact spans."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from momoka.errors import ConfigError, InputTooLargeError
from momoka.methods.base import Item, Member, Result
from momoka.methods.standard import ContextTrimmedWarning, EvidenceReader, LLMReader, default_reader
from momoka.methods.standard.evidence import term_scores


class Recorder:
    """An LLM client that records the prompt; optionally tells a window and counts tokens (4 chars each)."""

    model = "recorder"

    def __init__(self, window=None):
        self.messages = None
        if window is not None:
            self.context_window = window

    def count_tokens(self, messages):
        return sum(len(m["content"]) for m in messages) // 4

    def complete(self, messages, **kw):
        self.messages = messages
        return "an answer [1]"


def _passages(n: int, length: int):
    """``n`` passages of ``length`` characters, each an exact span of one document ``d``."""
    doc = "".join(chr(ord("a") + i) * (length - 1) + " " for i in range(n))
    members = [Member(i, "d", i * length, (i + 1) * length, doc[i * length:(i + 1) * length]) for i in range(n)]
    return doc, Result("q", tuple(Item((m,), 1.0 - i / 10, i + 1) for i, m in enumerate(members)), "t")


def test_reader_sends_the_default_budget_not_3000_chars():
    # 5 passages of 900 characters = 4,500 <= 5,000: all five reach the model (the old cap of 3,000 sent 3)
    _, res = _passages(5, 900)
    llm = Recorder()
    ans = LLMReader(llm).answer("q?", res)
    assert [c.number for c in ans.context] == [1, 2, 3, 4, 5]
    prompt = llm.messages[-1]["content"]
    assert all(f"[{i}] (d) " in prompt for i in range(1, 6))
    # 1,900 characters: whole passages while they fit -> 2 of them
    assert len(LLMReader(Recorder(), max_context_chars=1900).answer("q?", res).context) == 2
    # None: no character budget
    _, res = _passages(8, 900)
    assert len(LLMReader(Recorder(), max_context_chars=None).answer("q?", res).context) == 8


def test_reader_cuts_to_the_window_and_says_how_much():
    doc, res = _passages(5, 900)
    llm = Recorder(window=1000)  # 1,000 tokens of 4 characters, 128 of them for the answer
    with pytest.warns(ContextTrimmedWarning) as w:
        ans = LLMReader(llm).answer("q?", res)
    sent = sum(len(c.text) for c in ans.context)
    assert llm.count_tokens(llm.messages) <= 1000 - 128
    # the most characters that fit: one more character would not (the count is monotone in the text)
    longer = LLMReader(llm).messages("q?", [*ans.context[:-1], type(ans.context[-1])(
        ans.context[-1].number, "d", ans.context[-1].start, ans.context[-1].end + 4,
        doc[ans.context[-1].start:ans.context[-1].end + 4])])
    assert llm.count_tokens(longer) > 1000 - 128
    for c in ans.context:  # the cut passage keeps an exact span
        assert doc[c.start:c.end] == c.text
    msg = str(w[0].message)
    assert f"from 4,500 to {sent:,} characters ({4500 - sent:,} cut" in msg and "window of 1000 tokens" in msg
    # a window too small for the prompt alone is an error, not an empty context
    with pytest.raises(InputTooLargeError):
        LLMReader(Recorder(window=140)).answer("q?", res)
    # within the window: no warning, nothing cut
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(LLMReader(Recorder(window=4000)).answer("q?", res).context) == 5


def test_reader_budget_checked():
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ConfigError):
            LLMReader(Recorder(), max_context_chars=bad)
        with pytest.raises(ConfigError):
            EvidenceReader(max_context_chars=bad)


def test_local_client_window_and_token_count():
    from momoka.llm.local import LocalClient

    class LM:
        max_context = 64

        def prompt_ids(self, messages):
            return list(range(sum(len(m["content"].split()) for m in messages) + 3))

        def generate(self, *a, **k):
            raise AssertionError("not called")

        def continuation_logprob(self, *a, **k):
            raise AssertionError("not called")

    c = LocalClient(LM(), cache=False)
    try:
        assert c.context_window == 64
        assert c.count_tokens([{"role": "user", "content": "two words"}]) == 5
    finally:
        c.close()


# --------------------------------------------------------------------- evidence reader

DOC = ("The lighthouse was automated in 1986. Keepers left the island that year. "
       "The light is red and white. A foghorn sounded in fog.")


class KeywordEmbedder:
    """Vectors counting four words (hand-checkable cosines)."""

    model_id = "keywords"
    words = ("lighthouse", "keepers", "island", "light")

    def embed(self, texts):
        return np.asarray([[t.lower().count(w) for w in self.words] for t in texts], dtype=np.float32) + 1e-3


def _doc_result():
    m = [Member(0, "d", 0, 73, DOC[:73]), Member(1, "d", 37, len(DOC), DOC[37:])]  # overlapping chunks
    return Result("q", (Item((m[0],), 0.9, 1), Item((m[1],), 0.5, 2)), "t")


def test_term_scores_hand_computed():
    sents = ["The lighthouse was automated in 1986.", "Keepers left the island that year.", "The light is red."]
    # question terms (stemmed, stop words out): lighthous, autom; each in sentence 0 only: idf ln(1 + 3/1)
    assert term_scores("When was the lighthouse automated?", sents).tolist() == [1.0, 0.0, 0.0]
    # "keepers", "island", "light": df 1 each -> sentence 1 holds 2 of 3 equal weights, sentence 2 holds 1
    s = term_scores("keepers island light", sents)
    assert s.tolist() == pytest.approx([0.0, 2 / 3, 1 / 3])
    assert term_scores("the of and", sents).tolist() == [0.0, 0.0, 0.0]


def test_evidence_quotes_best_sentences_with_exact_spans():
    r = EvidenceReader(KeywordEmbedder(), sentences=2)
    ans = r.answer("When was the lighthouse automated?", _doc_result())
    assert ans.kind == "evidence" and ans.cited_by == "evidence"
    first = ans.citations[0]
    assert (first.doc_id, first.start, first.end) == ("d", 0, 37) and ans.text == DOC[0:37]
    for c in ans.citations:
        assert DOC[c.start:c.end] == c.text
    # the overlap of the two chunks is segmented once: 4 sentences, none repeated
    assert ans.usage["sentences"] == 4 and len({(c.start, c.end) for c in ans.citations}) == 2
    # hand-computed score of sentence 0: cosine of (1,0,0,1)+eps ("lighthouse" holds "light") and the question's
    # (1,0,0,1)+eps is 1; its term share is 1 -> 1 + 0.5
    assert ans.usage["scores"][0] == pytest.approx(1.5, abs=1e-3)


def test_evidence_term_weight_decides_against_the_embedder():
    # the embedder prefers "Keepers left the island" for "keepers automated"; the terms split 1/2 : 1/2 ...
    q = "Were keepers there when it was automated?"
    emb_only = EvidenceReader(KeywordEmbedder(), term_weight=0.0, sentences=1).answer(q, _doc_result())
    assert emb_only.citations[0].start == 38
    terms_only = EvidenceReader(None, sentences=1)
    with pytest.warns(UserWarning, match="no embedder"):
        a = terms_only.answer(q, _doc_result())
    # keepers (df 1), autom (df 1): sentence 0 and 1 tie at 1/2; the earlier sentence wins ties
    assert a.citations[0].start == 0 and a.usage["scores"][0] == pytest.approx(0.5 * 0.5)
    assert math.isclose(term_scores(q, [DOC[0:37], DOC[38:72]])[1], 0.5)


@pytest.mark.filterwarnings("ignore:no embedder")
def test_evidence_respects_the_budget():
    _, res = _passages(5, 900)
    ans = EvidenceReader(None, max_context_chars=1900).answer("aaa", res)
    assert len(ans.context) == 2


def test_default_reader_follows_the_endpoint(monkeypatch):
    monkeypatch.delenv("MOMOKA_LLM_BASE_URL", raising=False)
    assert default_reader() == "evidence"
    monkeypatch.setenv("MOMOKA_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    assert default_reader() == "llm"


def test_ask_offline_quotes_evidence(tmp_path, capsys, monkeypatch):
    """``momoka ask`` with no endpoint on a BM25-only store: quoted sentences with exact spans and a warning
    that only the question's words ranked them; ``Index.ask`` is the same in Python."""
    import json

    from momoka import Index
    from momoka.cli import main

    monkeypatch.delenv("MOMOKA_LLM_BASE_URL", raising=False)
    (tmp_path / "d.txt").write_text(DOC, encoding="utf-8")
    Index.build([tmp_path / "d.txt"], store=tmp_path / "s", embedder=None).close()
    assert main(["ask", str(tmp_path / "s"), "When was the lighthouse automated?"]) == 0
    out, err = capsys.readouterr()
    assert "no answer was generated" in out and '[1] d [0:37]  "The lighthouse was automated in 1986."' in out
    assert "momoka: warning: no embedder" in err
    assert main(["ask", str(tmp_path / "s"), "When was the lighthouse automated?", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["kind"] == "evidence" and d["citations"][0]["start"] == 0 and d["answer"] == DOC[0:37]
    ix = Index.open(tmp_path / "s")
    a = ix.ask("When was the lighthouse automated?", options={"evidence": {"sentences": 1}})
    assert a.kind == "evidence" and len(a.citations) == 1 and a.citations[0].end == 37
