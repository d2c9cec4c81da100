"""Global document titles T_D (Momoka-RAG section 3.1).

A title is generated once per document by an LLM (the ``momoka.title``
prompt, through the LLM layer: batched, cached) or taken from the document
itself. It is stored per document and prepended to chunk text only for
embedding and reranking; it is never spliced into ``Chunk.text``.

An LLM answer is kept as the title only when it passes three checks:

1. **One short line** (:func:`clean_title`): one non-empty line of at most
   :data:`MAX_TITLE_CHARS` characters and :data:`MAX_TITLE_WORDS` words.
2. **Grounded in its document** (:func:`grounding`): at least
   :data:`MIN_GROUNDED_SHARE` (half) of the title's distinct content terms occur
   among the document's content terms, and it has at least one. Content terms
   are BM25's analyser output (:func:`momoka.store.bm25.tokenize` with Porter
   stems and English stop words dropped: ``"Zebras Migrating"`` gives
   ``zebra``, ``migrat``; every CJK character is a term of its own).
3. **Not the same answer for unrelated documents** (:class:`TitleLedger`):
   the same title (same lower-cased words, :func:`title_key`) given to two
   documents whose opening texts (the part shown to the LLM) share less than
   :data:`RELATED_JACCARD` of their content terms (Jaccard) is a fallback for
   the later document, and for both when they are in the same batch. The
   ledger remembers the last :data:`LEDGER_TITLES` titles of a run.

A title the LLM fails to produce (a request error, or an answer rejected by
any check) falls back to the document's own title, else its first heading,
else its first sentence; each fallback is counted in :class:`TitleStats`
(and, given one, in a :class:`~momoka.methods.fallbacks.FallbackTally`, which
bounds their share by ``--llm-max-failed`` and records them so a rerun asks
again). A rejected answer is not kept in the LLM cache, so asking again
reaches the model.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import ConfigError, LLMResponseError
from ...stats import Stats, examples

#: Title modes of :func:`make_titles`.
TITLE_MODES = ("llm", "document", "prefer-document", "none")
#: Characters of the document shown to the LLM (the opening of the document).
DEFAULT_TITLE_CONTEXT = 4000
#: Longest accepted title (characters); longer answers are not titles.
MAX_TITLE_CHARS = 200
#: Most words (whitespace-separated) of an accepted title; longer answers are sentences or summaries.
MAX_TITLE_WORDS = 20
#: Share of a title's distinct content terms that must occur in its document (:func:`grounding`).
MIN_GROUNDED_SHARE = 0.5
#: Two documents are related when the content terms of their openings overlap at least this much (Jaccard).
RELATED_JACCARD = 0.25
#: Content terms kept per document for the Jaccard estimate (bottom-k sketch; exact up to this many terms).
SKETCH_TERMS = 64
#: Titles a :class:`TitleLedger` remembers (least recently seen forgotten first).
LEDGER_TITLES = 10_000
#: Documents remembered per title by a :class:`TitleLedger`.
LEDGER_PER_TITLE = 8
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


def content_terms(text: str) -> set[str]:
    """The distinct content terms of ``text``: BM25's tokens with Porter stems, English stop words dropped."""
    from ...store.bm25 import tokenize  # start-up: momoka.store.bm25

    return set(tokenize(text, stem=True, stopwords="english"))


def grounding(title: str, document_terms: set[str]) -> tuple[int, int]:
    """``(found, total)``: how many of ``title``'s distinct content terms occur in ``document_terms``."""
    terms = content_terms(title)
    return len(terms & document_terms), len(terms)


def grounding_problem(title: str, document_terms: set[str]) -> str | None:
    """Why ``title`` is not grounded in a document with ``document_terms`` (None when it is): it needs a
    content term, and at least :data:`MIN_GROUNDED_SHARE` of its content terms must occur in the document."""
    found, total = grounding(title, document_terms)
    if total == 0:
        return "the title has no content word"
    if found < MIN_GROUNDED_SHARE * total:
        return f"only {found} of the title's {total} content words occur in the document"
    return None


def title_key(title: str) -> tuple[str, ...]:
    """What makes two titles "the same": their lower-cased words (BM25's tokens, stop words kept, no stems)."""
    from ...store.bm25 import tokenize  # start-up: momoka.store.bm25

    return tuple(tokenize(title))


def sketch(terms: set[str], k: int = SKETCH_TERMS) -> np.ndarray:
    """The bottom-``k`` sketch of a term set: the ``k`` smallest 64-bit hashes (BLAKE2b) of its terms, sorted."""
    hs = np.fromiter((int.from_bytes(hashlib.blake2b(t.encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                                     "little") for t in terms), dtype=np.uint64, count=len(terms))
    hs.sort()
    return hs[:k].copy()


def jaccard(a: np.ndarray, b: np.ndarray, k: int = SKETCH_TERMS) -> float:
    """Jaccard similarity of two term sets from their bottom-``k`` sketches (:func:`sketch`): exact when the
    two sets together have at most ``k`` terms, else the bottom-k estimate (1.0 for two empty sets)."""
    union = np.union1d(a, b)[:k]
    if len(union) == 0:
        return 1.0
    both = np.intersect1d(a, b, assume_unique=True)
    return float(np.isin(union, both, assume_unique=True).sum()) / len(union)


class TitleLedger:
    """The LLM titles a run gave, to find the same title given to unrelated documents (check 3 of the module).

    Remembers, per title (:func:`title_key`), up to :data:`LEDGER_PER_TITLE` documents with a sketch of the
    content terms of their openings; at most ``capacity`` titles (least recently seen forgotten first).
    """

    def __init__(self, capacity: int = LEDGER_TITLES):
        self.capacity = int(capacity)
        self._titles: OrderedDict = OrderedDict()

    def __len__(self) -> int:
        return len(self._titles)

    def check(self, entries: Sequence[tuple[Any, str, np.ndarray]]) -> dict[int, str]:
        """Check a batch of ``(doc_id, title, sketch)`` and remember them; ``{position: reason}`` of the
        entries whose title was also given to a document unrelated to theirs (in this batch or earlier)."""
        keys = [title_key(t) for _, t, _ in entries]
        groups: dict[tuple, list[int]] = {}
        for i, k in enumerate(keys):
            groups.setdefault(k, []).append(i)
        out: dict[int, str] = {}
        for k, members in groups.items():
            earlier = list(self._titles.get(k, ()))
            for i in members:
                doc_id, _, sk = entries[i]
                others = earlier + [(entries[j][0], entries[j][2]) for j in members if j != i]
                for other_id, other_sk in others:
                    if other_id != doc_id and jaccard(sk, other_sk) < RELATED_JACCARD:
                        out[i] = (f"the same title was given to document {other_id!r}, which shares less than "
                                  f"{RELATED_JACCARD:g} of its content words")
                        break
            held = self._titles.setdefault(k, [])
            self._titles.move_to_end(k)
            for i in members:
                if len(held) < LEDGER_PER_TITLE and all(entries[i][0] != d for d, _ in held):
                    held.append((entries[i][0], entries[i][2]))
        while len(self._titles) > self.capacity:
            self._titles.popitem(last=False)
        return out


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
                why = grounding_problem(res.value, content_terms(docs[i].text))
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
