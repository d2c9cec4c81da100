"""Global document titles T_D (Momoka-RAG section 3.1).

A title is generated once per document by an LLM (the ``momoka.title``
prompt, through the LLM layer: batched, cached) or taken from the document
itself. It is stored per document and prepended to chunk text only for
embedding and reranking; it is never spliced into ``Chunk.text``.

An LLM answer is kept as the title only when it passes three checks:

1. **One short line** (:func:`clean_title`): one non-empty line of at most
   :data:`MAX_TITLE_CHARS` characters and :data:`MAX_TITLE_WORDS` words.
2. **Grounded in its document** (:func:`~momoka.methods.grounding.grounding_problem`):
   at least :data:`~momoka.methods.grounding.MIN_GROUNDED_SHARE` (half) of the
   title's distinct content terms occur among the document's content terms, and
   it has at least one. Content terms are BM25's analyser output
   (:func:`~momoka.methods.grounding.content_terms`: Porter stems, English stop
   words dropped: ``"Zebras Migrating"`` gives ``zebra``, ``migrat``; every CJK
   character is a term of its own).
3. **Not the same answer for unrelated documents** (:class:`TitleLedger`):
   the same title (same lower-cased words) given to two documents whose opening
   texts (the part shown to the LLM) share less than
   :data:`~momoka.methods.grounding.RELATED_JACCARD` of their content terms
   (Jaccard) is a fallback for the later document, and for both when they are in
   the same batch. The ledger remembers the last :data:`LEDGER_TITLES` titles of
   a run.

The checks of 2 and 3 are :mod:`momoka.methods.grounding`'s, shared with
MC-indexing's keyword and summary views.

A title the LLM fails to produce (a request error, or an answer rejected by
any check) falls back to the document's own title, else its first heading,
else its first sentence; each fallback is counted in :class:`TitleStats`
(and, given one, in a :class:`~momoka.methods.fallbacks.FallbackTally`, which
bounds their share by ``--llm-max-failed`` and records them so a rerun asks
again). A rejected answer is not kept in the LLM cache, so asking again
reaches the model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import ConfigError, LLMResponseError
from ...stats import Stats, examples
from ..grounding import AnswerLedger, content_terms, grounding_problem, sketch

#: Title modes of :func:`make_titles`.
TITLE_MODES = ("llm", "document", "prefer-document", "none")
#: Characters of the document shown to the LLM (the opening of the document).
DEFAULT_TITLE_CONTEXT = 4000
#: Longest accepted title (characters); longer answers are not titles.
MAX_TITLE_CHARS = 200
#: Most words (whitespace-separated) of an accepted title; longer answers are sentences or summaries.
MAX_TITLE_WORDS = 20
#: Titles a :class:`TitleLedger` remembers (least recently seen forgotten first).
LEDGER_TITLES = 10_000
#: Fallback titles (first sentence) are cut to this many characters at a word boundary.
FALLBACK_CHARS = 120

_QUOTES = "\"'`\u201c\u201d\u2018\u2019*#"
_LABEL = re.compile(r"^(title|global title|document title)\s*[:：]\s*", re.IGNORECASE)


@dataclass
class TitleStats(Stats):
    """How the titles of a batch were obtained; ``failures``: ``(doc_id, reason)`` of the first 20 failed LLM
    titles."""

    llm: int = 0
    document: int = 0
    heading: int = 0
    sentence: int = 0
    failed_llm: int = 0
    failures: list = examples(20)


def clean_title(answer: Any) -> str | None:
    """The title in an LLM answer, or None when the answer is not a usable title.

    Accepts one non-empty line (a ``Title:`` label, surrounding quotes and
    Markdown emphasis removed) of at most :data:`MAX_TITLE_CHARS` characters
    and :data:`MAX_TITLE_WORDS` words that contains at least one letter or digit and does not end with ``:``
    (a label such as ``"Summary of the document:"`` announces a title, it is none).
    """
    if not isinstance(answer, str):
        return None
    lines = [ln.strip() for ln in answer.strip().splitlines() if ln.strip()]
    if not lines:
        return None
    t = _LABEL.sub("", lines[0]).strip().strip(_QUOTES).strip()
    t = _LABEL.sub("", t).strip().strip(_QUOTES).strip()
    if not t or len(t) > MAX_TITLE_CHARS or len(t.split()) > MAX_TITLE_WORDS or not any(ch.isalnum() for ch in t) \
            or t.endswith(":"):
        return None
    return t


class TitleLedger(AnswerLedger):
    """The LLM titles a run gave, to find the same title given to unrelated documents (check 3 of the module):
    an :class:`~momoka.methods.grounding.AnswerLedger` of titles and documents remembering ``capacity``
    titles."""

    def __init__(self, capacity: int = LEDGER_TITLES):
        super().__init__(capacity, what="title", of="document")


def _title_parser(answer: str) -> str:
    """:func:`clean_title` as a :meth:`complete_parsed` parser (raises for an answer that is no title)."""
    t = clean_title(answer)
    if t is None:
        raise LLMResponseError("the answer is not a one-line title")
    return t


def _cut(text: str, n: int = FALLBACK_CHARS) -> str:
    text = " ".join(text.split())
    if len(text) <= n:
        return text
    cut = text[:n]
    sp = cut.rfind(" ")
    return (cut[:sp] if sp > n // 2 else cut).rstrip(" ,;:") + "..."


def fallback_title(document) -> tuple[str, str]:
    """``(title, source)`` from the document alone: its title, first heading or first sentence."""
    if isinstance(getattr(document, "title", None), str) and document.title.strip():
        return " ".join(document.title.split()), "document"
    for s in getattr(document, "sections", ()) or ():
        if s.title and s.title.strip():
            return _cut(s.title), "heading"
    sents = document.sentences
    if len(sents):
        s, e = int(sents[0][0]), int(sents[0][1])
        return _cut(document.text[s:e]), "sentence"
    return _cut(document.text), "sentence"  # pragma: no cover - every document has a sentence


#: Characters per token of the pre-run estimates (:func:`estimate_titles`).
CHARS_PER_TOKEN = 4
#: The answer limit of an LLM title (:func:`make_titles`'s ``max_tokens``).
TITLE_MAX_TOKENS = 48


def estimate_titles(documents: Sequence[Any], mode: str, *, context_chars: int = DEFAULT_TITLE_CONTEXT,
                    max_tokens: int = TITLE_MAX_TOKENS) -> dict:
    """Pre-run estimate of what :func:`make_titles` would ask an LLM (4 characters per token).

    ``"llm"`` asks once per document, ``"prefer-document"`` once per document without a title of its
    own, the other modes never: ``{"mode", "documents", "llm_calls", "prompt_tokens", "completion_tokens_max"}``.
    """
    from ...llm import prompts  # start-up: momoka.llm.prompts

    docs = list(documents)
    if mode == "llm":
        asked = docs
    elif mode == "prefer-document":
        asked = [d for d in docs if not (isinstance(getattr(d, "title", None), str) and d.title.strip())]
    else:
        asked = []
    tmpl = len(prompts.get("momoka.title").template)
    tok = sum((min(len(d.text), context_chars) + tmpl) // CHARS_PER_TOKEN for d in asked)
    return {"mode": mode, "documents": len(docs), "llm_calls": len(asked), "prompt_tokens": int(tok),
            "completion_tokens_max": len(asked) * max_tokens}


def make_titles(
    documents: Sequence[Any],
    *,
    mode: str = "llm",
    llm: Any = None,
    context_chars: int = DEFAULT_TITLE_CONTEXT,
    max_tokens: int = TITLE_MAX_TOKENS,
    fallbacks: Any = None,
    ledger: TitleLedger | None = None,
) -> tuple[list[str | None], list[str], TitleStats]:
    """Titles T_D for ``documents``: ``(titles, sources, stats)``.

    Modes:
        ``"llm"``: generate every title with ``llm`` (one batched
        ``complete_batch`` call, method label ``"title"``, temperature 0).
        ``"prefer-document"``: the document's own title when it has one, the LLM otherwise.
        ``"document"``: never call an LLM (own title, first heading, first sentence).
        ``"none"``: no titles (all None, source ``"none"``).

    ``sources[i]`` is ``"llm"``, ``"document"``, ``"heading"``, ``"sentence"`` or ``"none"``.
    A failed LLM title (a request error, or an answer that is not one short line
    (:func:`clean_title`), not grounded in its document (:func:`grounding_problem`) or
    the same title as an unrelated document's (``ledger``, a :class:`TitleLedger`
    remembering earlier batches; default: a new one, this call only)) falls back to
    :func:`fallback_title` and is counted in ``stats.failed_llm``; a rejected answer is
    removed from the LLM cache. ``fallbacks`` (a
    :class:`~momoka.methods.fallbacks.FallbackTally`) counts each document asked and each
    fallback (item ``"title"``).
    """
    if mode not in TITLE_MODES:
        raise ConfigError(f"title mode must be one of {', '.join(TITLE_MODES)}, not {mode!r}")
    docs = list(documents)
    stats = TitleStats()
    titles: list[str | None] = [None] * len(docs)
    sources = ["none"] * len(docs)
    if mode == "none":
        return titles, sources, stats
    ask: list[int] = []
    for i, d in enumerate(docs):
        own = getattr(d, "title", None)
        if mode == "document" or (mode == "prefer-document" and isinstance(own, str) and own.strip()):
            titles[i], sources[i] = fallback_title(d)
        else:
            ask.append(i)
    if ask:
        if llm is None:
            raise ConfigError("title mode 'llm' needs an LLM client (or use mode='document')")
        from ...llm import prompts  # start-up: momoka.llm.prompts

        batch = [prompts.messages("momoka.title", document=docs[i].text[:context_chars]) for i in ask]
        params = {"temperature": 0, "max_tokens": max_tokens, "method": "title"}
        results = llm.complete_parsed(batch, _title_parser, max_reasks=0, **params)
        rejected: dict[int, str] = {}  # position in ask -> why a parsed title is not kept
        grounded: list[int] = []
        for n, (i, res) in enumerate(zip(ask, results)):
            if res.ok:
                why = grounding_problem(res.value, content_terms(docs[i].text), what="title", where="document")
                if why is None:
                    grounded.append(n)
                else:
                    rejected[n] = why
        repeated = (ledger if ledger is not None else TitleLedger()).check(
            [(getattr(docs[ask[n]], "doc_id", None) or f"#{ask[n]}", results[n].value,
              sketch(content_terms(docs[ask[n]].text[:context_chars]))) for n in grounded])
        rejected.update((grounded[m], why) for m, why in repeated.items())
        for n, (i, res) in enumerate(zip(ask, results)):
            doc_id = getattr(docs[i], "doc_id", None)
            if fallbacks is not None:
                fallbacks.ask(doc_id)
            if res.ok and n not in rejected:
                titles[i], sources[i] = res.value, "llm"
                continue
            stats.failed_llm += 1
            unusable = res.raw is not None and isinstance(res.error, LLMResponseError)
            if n in rejected:
                reason = f"title {res.value[:60]!r} rejected: {rejected[n]}"
            else:
                reason = f"unusable answer {str(res.raw)[:60]!r}" if unusable else str(res.error)
            stats.example("failures", (doc_id, reason))
            if fallbacks is not None:
                fallbacks.fail(doc_id, "title", res.raw if (unusable or n in rejected) else res.error)
            titles[i], sources[i] = fallback_title(docs[i])
        forget = getattr(llm, "forget", None)
        if rejected and callable(forget):  # parsed but not kept: out of the cache, so a rerun asks again
            forget([results[n].messages for n in sorted(rejected) if results[n].messages is not None], **params)
    for s in sources:
        if s in ("llm", "document", "heading", "sentence"):
            stats.count(s)
    return titles, sources, stats


def with_title(title: str | None, text: str, sep: str = "\n") -> str:
    """The text to embed or rerank: ``title + sep + text`` (just ``text`` without a title)."""
    return f"{title}{sep}{text}" if title else text
