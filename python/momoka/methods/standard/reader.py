"""The LLM reader: answer a question from retrieved passages, citing them by number.

The passages of a :class:`~momoka.methods.base.Result` are numbered ``[1]``,
``[2]`` ... in rank order (an item of several chunks gives one passage per
member, so every citation points at one exact span), cut to a character
budget, and sent with the question to any :mod:`momoka.llm` client: the local
model by default, or an OpenAI-compatible endpoint. The numbers the answer
cites are mapped back to their spans. Small local models often answer without
``[n]`` markers: then the passages that hold most of the answer's content words
are cited instead (``Answer.cited_by == "overlap"``), and an answer none of whose
words occur in any passage cites nothing (``"none"``). Every passage the model
was given is listed in ``Answer.context``.
"""

from __future__ import annotations

import re
from typing import Any

from ...errors import ConfigError, InputError
from ...index.bm25 import ENGLISH_STOPWORDS
from ..base import Answer, Citation, Result
from ..registry import register

#: The reader's instructions (system message).
SYSTEM_PROMPT = (
    "Answer the question using only the numbered passages. Be brief. After each statement, cite the "
    "passages it comes from as [n]. If the passages do not contain the answer, say so."
)
_CITE = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")
_WORD = re.compile(r"\w+")
#: A passage is cited by overlap when it holds at least this share of the answer's content words.
OVERLAP_SHARE = 0.5
_STOP_WORDS = frozenset(ENGLISH_STOPWORDS)


def overlap_citations(answer: str, context: list[Citation], share: float = OVERLAP_SHARE) -> list[Citation]:
    """The passages holding at least ``share`` of the answer's content words, best first (at most 2).

    Content words are the lower-cased word tokens of the answer that are not
    stop words; a passage's score is the share of them it contains.
    """
    words = {w for w in _WORD.findall(answer.lower()) if w not in _STOP_WORDS}
    if not words:
        return []
    scored = []
    for c in context:
        have = set(_WORD.findall(c.text.lower()))
        s = len(words & have) / len(words)
        if s >= share:
            scored.append((-s, c.number, c))
    return [c for _, _, c in sorted(scored)[:2]]


class LLMReader:
    """Answer from retrieved passages with an LLM client, citing exact spans.

    Args:
        llm: a :mod:`momoka.llm` client (default :func:`momoka.llm.client_from_env`:
            the endpoint of ``MOMOKA_LLM_BASE_URL`` when set, else the local model).
        max_context_chars: most characters of passage text sent (whole passages;
            at least the first one, cut at this length).
        max_tokens: most tokens of the answer.
    """

    name = "llm"

    def __init__(self, llm: Any = None, *, max_context_chars: int = 3000, max_tokens: int = 128):
        for nm, v in (("max_context_chars", max_context_chars), ("max_tokens", max_tokens)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{nm} must be a positive integer, got {v!r}")
        self._llm = llm
        self.max_context_chars = max_context_chars
        self.max_tokens = max_tokens

    @property
    def llm(self):
        """The LLM client (built on first use)."""
        if self._llm is None:
            from ...llm import client_from_env

            self._llm = client_from_env()
        return self._llm

    def context(self, result: Result) -> list[Citation]:
        """The numbered passages sent to the model: one per member chunk, in rank order, within the budget."""
        out: list[Citation] = []
        used = 0
        seen: set = set()
        for item in result:
            for m in item.members:
                if m.span in seen:
                    continue
                if out and used + len(m.text) > self.max_context_chars:
                    return out
                seen.add(m.span)
                text = m.text if out else m.text[: self.max_context_chars]
                # A cut first passage keeps its exact span: end moves with the cut.
                out.append(Citation(len(out) + 1, m.doc_id, m.start, m.start + len(text), text))
                used += len(text)
        return out

    def messages(self, question: str, context: list[Citation]) -> list[dict]:
        """The chat messages for ``question`` over ``context``."""
        passages = "\n\n".join(f"[{c.number}] ({c.doc_id}) {' '.join(c.text.split())}" for c in context)
        return [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": f"Passages:\n{passages}\n\nQuestion: {question}\nAnswer:"}]

    def answer(self, question: str, result: Result) -> Answer:
        """Answer ``question`` from ``result``; citations are the passages the answer names by number."""
        if not isinstance(question, str) or not question.strip():
            raise InputError("the question is empty")
        context = self.context(result)
        if not context:
            raise InputError("nothing was retrieved to answer from")
        text = self.llm.complete(self.messages(question, context), max_tokens=self.max_tokens, temperature=0)
        text = (text or "").strip()
        cited: list[int] = []
        for m in _CITE.finditer(text):
            for n in m.group(1).split(","):
                n = int(n)
                if 1 <= n <= len(context) and n not in cited:
                    cited.append(n)
        citations = [context[n - 1] for n in cited]
        cited_by = "model"
        if not citations:
            citations = overlap_citations(text, context)
            cited_by = "overlap" if citations else "none"
        return Answer(question, text, tuple(citations), tuple(context),
                      model=getattr(self.llm, "model", None) or type(self.llm).__name__, cited_by=cited_by)


@register("reader", "llm", summary="answer with the local model or an OpenAI-compatible endpoint, citing [n]")
def _llm_reader(**options: Any) -> LLMReader:
    return LLMReader(**options)
