"""The LLM reader: answer a question from retrieved passages, citing them by number.

The passages of a :class:`~momoka.methods.base.Result` are numbered ``[1]``,
``[2]`` ... in rank order (an item of several chunks gives one passage per
member, so every citation points at one exact span), cut to a character
budget (``max_context_chars``, the ``--budget`` of ``momoka ask``, default
:data:`~momoka.methods.base.DEFAULT_BUDGET`), and sent with the question to any
:mod:`momoka.llm` client: the endpoint of ``MOMOKA_LLM_BASE_URL``, else the
local model (reader ``local`` always uses the local model). When the client
knows its context window (the local model does), passages are cut from the end
until prompt and answer fit, with a :class:`ContextTrimmedWarning` saying how
much was cut. The numbers the answer cites are mapped back to their spans.
Small local models often answer without
``[n]`` markers: then the passages that hold most of the answer's content words
are cited instead (``Answer.cited_by == "overlap"``), and an answer none of whose
words occur in any passage cites nothing (``"none"``). Every passage the model
was given is listed in ``Answer.context``.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any

from ... import settings
from ..._validate import check_int
from ...errors import InputError, InputTooLargeError
from ...store.bm25 import ENGLISH_STOPWORDS
from .._backend import endpoint_of
from ..base import DEFAULT_BUDGET, Answer, Citation, Result, check_budget
from ...registry import create, register

#: The reader's instructions (system message) for answers in sentences (``style="sentence"``).
SYSTEM_PROMPT = (
    "Answer the question using only the numbered passages. Be brief. After each statement, cite the "
    "passages it comes from as [n]. If the passages do not contain the answer, say so."
)
#: What the reader asks the model to reply when the passages do not hold the answer (``style="short"``).
NOT_IN_PASSAGES = "not in the passages"
#: The reader's instructions (system message) for short answers (``style="short"``, the default). No ``[n]``
#: is asked for: small models asked for one often write only the marker; the answer's passages are found by
#: its words instead (:func:`overlap_citations`).
SHORT_PROMPT = (
    "Answer the question using only the passages. Give only the answer: the shortest span of words copied "
    "exactly from the passages that answers it, usually one to five words. No sentence, no explanation. For "
    "a why or how question, copy the phrase that gives the reason or the way. Reply "
    f'"{NOT_IN_PASSAGES}" only if no passage gives the answer.'
)
#: The last line of the user message in the short style.
SHORT_CUE = "Answer:"
#: The answer styles of :class:`LLMReader`.
STYLES = ("short", "sentence")
_CITE = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")
#: Replies that say the passages do not hold the answer (matched on the lower-cased reply).
_NOT_FOUND = re.compile(
    r"\bnot (?:\w+ )?(?:in|found in|contained in|mentioned in|given in|stated in|provided in|present in) the "
    r"(?:given |provided |numbered )?(?:passages?|context|text)\b"
    r"|\b(?:passages?|context|text) (?:do|does) not (?:contain|mention|say|state|provide|include|specify|give)\b"
    r"|\b(?:passages?|context|text) (?:contains?|provides?|gives?|mentions?) no (?:information|answer|mention)\b"
    r"|\bno (?:information|answer|mention) (?:in|from) the (?:given |provided |numbered )?(?:passages?|context|text)\b"
    r"|\bcannot be (?:answered|found|determined) (?:from|in|with|based on)\b"
    r"|^\s*(?:unanswerable|not answerable|unknown)\W*$")
_LEAD = re.compile(r"^\s*(?:answer\s*:\s*)", re.IGNORECASE)
_WORD = re.compile(r"\w+")
#: A passage is cited by overlap when it holds at least this share of the answer's content words.
OVERLAP_SHARE = 0.5
_STOP_WORDS = frozenset(ENGLISH_STOPWORDS)


class ContextTrimmedWarning(UserWarning):
    """The passages were cut to fit the model's context window (the message says how much)."""


def default_reader() -> str:
    """The reader ``ask`` uses when none is named: ``llm`` when an endpoint is configured
    (``MOMOKA_LLM_BASE_URL``), else ``evidence`` (quoted sentences; the local 135M model answers
    only when asked for, as reader ``local``)."""
    from ...llm.openai_client import ENV_BASE_URL  # start-up: momoka.llm.openai_client

    return "llm" if settings.get_text(ENV_BASE_URL) else "evidence"


def make_reader(name: str, options: dict, budget: int | None, embedder: Callable[[], Any]) -> Any:
    """Reader ``name`` with ``options`` for :meth:`momoka.Index.ask`: its context capped at ``budget``
    characters (``max_context_chars``) unless the options say otherwise; ``evidence`` gets the index's
    embedder (``embedder()``, asked only then); an LLM reader given no client and no endpoint answers with
    the local model, installed on first use."""
    opts = dict(options)
    opts.setdefault("max_context_chars", budget)
    if name == "evidence":
        opts.setdefault("embedder", embedder())
    elif "llm" not in opts and (name == "local" or default_reader() != "llm"):
        from ...models.installer import local_causal_lm_dir  # start-up: momoka.models.installer

        local_causal_lm_dir()  # the default model like the embedder, installed on first use (an opt-in one: never)
    return create("reader", name, **opts)


def budget_context(result: Result, max_chars: int | None) -> list[Citation]:
    """The numbered passages of ``result`` within ``max_chars`` characters (``None``: all of them).

    One passage per member chunk, in rank order, repeated spans once; whole
    passages while they fit, and at least the first one, cut at ``max_chars``
    (a cut passage keeps its exact span: its end moves with the cut).
    """
    out: list[Citation] = []
    used = 0
    seen: set = set()
    for item in result:
        for m in item.members:
            if m.span in seen:
                continue
            if max_chars is not None and out and used + len(m.text) > max_chars:
                return out
            seen.add(m.span)
            text = m.text if out or max_chars is None else m.text[:max_chars]
            out.append(Citation(len(out) + 1, m.doc_id, m.start, m.start + len(text), text, m.section))
            used += len(text)
    return out


def _cut(context: list[Citation], chars: int) -> list[Citation]:
    """The first ``chars`` characters of ``context`` (passages in order; the last one kept is cut)."""
    out: list[Citation] = []
    for c in context:
        room = chars - sum(len(x.text) for x in out)
        if room <= 0:
            break
        text = c.text[:room]
        out.append(Citation(c.number, c.doc_id, c.start, c.start + len(text), text, c.section))
    return out


def says_not_in_passages(reply: str) -> bool:
    """Whether ``reply`` says the passages do not hold the answer ("not in the passages", "the passages do not
    mention ...", "cannot be answered from ...", "unanswerable"; case-insensitive)."""
    return bool(_NOT_FOUND.search(reply.lower()))


def short_answer(reply: str) -> str:
    """The answer of a reply in the short style: its first line that has words once the ``[n]`` markers and a
    leading ``Answer:`` are removed, without surrounding punctuation or double quotes ("" when none has words)."""
    for line in reply.splitlines():
        text = " ".join(_CITE.sub(" ", _LEAD.sub("", line)).split()).strip(" .,;:\"\u201c\u201d")
        if _WORD.search(text):
            return text
    return ""


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
            at least the first one, cut at this length; ``None``: every passage),
            before the cut to the model's window.
        max_tokens: most tokens of the answer.
        style: ``"short"`` (the default): the model is asked for the shortest words of the passages that
            answer (:data:`SHORT_PROMPT`, no ``[n]`` asked for); ``Answer.text`` is those words (the
            first line that has any, ``[n]`` markers removed); the citations are the passages its
            markers name if it wrote any, else those holding its words (:func:`overlap_citations`).
            ``"sentence"``: the model answers in sentences citing ``[n]`` after each
            (:data:`SYSTEM_PROMPT`); ``Answer.text`` is the whole reply, markers included.
            In both, a reply that says the passages do not hold the answer
            (:func:`says_not_in_passages`) and cites none gives ``Answer.no_answer == True``
            and no citations.
    """

    name = "llm"

    def __init__(self, llm: Any = None, *, max_context_chars: int | None = DEFAULT_BUDGET, max_tokens: int = 128,
                 style: str = "short"):
        check_budget(max_context_chars, name="max_context_chars", optional=True)
        max_tokens = check_int(max_tokens, "max_tokens", minimum=1)
        if style not in STYLES:
            raise InputError(f"style must be one of {', '.join(STYLES)}, not {style!r}")
        self._llm = llm
        self.max_context_chars = max_context_chars
        self.max_tokens = max_tokens
        self.style = style

    @property
    def llm(self):
        """The LLM client (built on first use)."""
        if self._llm is None:
            from ...llm import client_from_env  # start-up: momoka.llm

            self._llm = client_from_env()
        return self._llm

    def context(self, result: Result) -> list[Citation]:
        """The numbered passages sent to the model: one per member chunk, in rank order, within the budget."""
        return budget_context(result, self.max_context_chars)

    def fit_window(self, question: str, context: list[Citation]) -> list[Citation]:
        """``context`` cut from its end until the prompt plus ``max_tokens`` fit the client's window.

        Applies when the client tells its window and counts tokens (``context_window``
        and ``count_tokens(messages)``, as :class:`~momoka.llm.LocalClient` does);
        otherwise ``context`` is sent as is. A cut warns (:class:`ContextTrimmedWarning`)
        with the characters sent and cut; :class:`~momoka.errors.InputTooLargeError`
        when not even the question fits.
        """
        window = getattr(self.llm, "context_window", None)
        count = getattr(self.llm, "count_tokens", None)
        if not window or not callable(count):
            return context
        limit = int(window) - self.max_tokens
        n = count(self.messages(question, context))
        if n <= limit:
            return context
        total = sum(len(c.text) for c in context)
        lo, hi, best = 0, total, None  # the most characters that fit: binary search on the cut
        while lo <= hi:
            mid = (lo + hi) // 2
            cut = _cut(context, mid)
            if cut and count(self.messages(question, cut)) <= limit:
                best, lo = cut, mid + 1
            else:
                hi = mid - 1
        if best is None:
            raise InputTooLargeError(f"the question and the reader's prompt take more than the model's window of "
                                     f"{window} tokens less {self.max_tokens} for the answer")
        sent = sum(len(c.text) for c in best)
        dropped = len(context) - len(best)
        warnings.warn(ContextTrimmedWarning(
            f"the context was cut from {total:,} to {sent:,} characters ({total - sent:,} cut"
            + (f", {dropped} of {len(context)} passages left out" if dropped else "")
            + f") to fit the model's window of {window} tokens with {self.max_tokens} for the answer"), stacklevel=2)
        return best

    def estimate(self, question: str = "") -> dict:
        """Pre-run cost of answering one question: one request, its prompt at most the template, the
        question and ``max_context_chars`` of passages (4 characters per token), its answer at most
        ``max_tokens``; on the local model (no endpoint configured) no request."""
        remote = endpoint_of(self._llm)
        ctx = self.max_context_chars if self.max_context_chars is not None else None
        tmpl = len("".join(str(m.get("content", "")) for m in self.messages(question, [])))
        return {"per": "question", "llm_calls": 1 if remote else 0, "endpoint": remote or None,
                "prompt_tokens_max": None if ctx is None else (tmpl + ctx) // 4,
                "completion_tokens_max": self.max_tokens}

    def messages(self, question: str, context: list[Citation]) -> list[dict]:
        """The chat messages for ``question`` over ``context``."""
        passages = "\n\n".join(f"[{c.number}] ({c.doc_id}) {' '.join(c.text.split())}" for c in context)
        if self.style == "sentence":
            return [{"role": "system", "content": SYSTEM_PROMPT},
                    {"role": "user", "content": f"Passages:\n{passages}\n\nQuestion: {question}\nAnswer:"}]
        return [{"role": "system", "content": SHORT_PROMPT},
                {"role": "user", "content": f"Passages:\n{passages}\n\nQuestion: {question}\n{SHORT_CUE}"}]

    def answer(self, question: str, result: Result) -> Answer:
        """Answer ``question`` from ``result``; citations are the passages the answer names by number."""
        if not isinstance(question, str) or not question.strip():
            raise InputError("the question is empty")
        context = self.context(result)
        if not context:
            raise InputError("nothing was retrieved to answer from")
        context = self.fit_window(question, context)
        reply = self.llm.complete(self.messages(question, context), max_tokens=self.max_tokens, temperature=0)
        reply = (reply or "").strip()
        text = short_answer(reply) if self.style == "short" else reply
        cited: list[int] = []
        for m in _CITE.finditer(reply):
            for n in m.group(1).split(","):
                n = int(n)
                if 1 <= n <= len(context) and n not in cited:
                    cited.append(n)
        citations = [context[n - 1] for n in cited]
        cited_by = "model"
        no_answer = not citations and says_not_in_passages(text)
        if not citations and not no_answer:
            citations = overlap_citations(text, context)
            cited_by = "overlap" if citations else "none"
        elif no_answer:
            cited_by = "none"
        return Answer(question, text, tuple(citations), tuple(context),
                      model=getattr(self.llm, "model", None) or type(self.llm).__name__, cited_by=cited_by,
                      no_answer=no_answer)


@register("reader", "llm", summary="answer with the OpenAI-compatible endpoint if one is set (--llm-url, "
          "$MOMOKA_LLM_BASE_URL), else the local model, citing [n]")
def _llm_reader(**options: Any) -> LLMReader:
    return LLMReader(**options)


@register("reader", "local", summary="answer with the local model (SmolLM2-135M unless MOMOKA_LLM_LOCAL_MODEL picks another), citing [n]")
def _local_reader(**options: Any) -> LLMReader:
    if options.get("llm") is None:
        from ...llm.local import LocalClient  # start-up: momoka.llm.local

        options["llm"] = LocalClient()
    return LLMReader(**options)
