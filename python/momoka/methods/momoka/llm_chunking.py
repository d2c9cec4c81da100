"""LLM chunking (Momoka-RAG section 3.1, Figure 3 prompt), with exact offsets.

Each natural paragraph of a document is sent to the LLM with the paper's
prompt, which answers with a JSON list of chunk strings. The strings are
placed back onto the paragraph by the native span locator
(:func:`momoka.kernels.recover_outlines`, edit-distance alignment), so a
chunk is always an exact span of the source even when the model edited a
few characters. A paragraph whose answer cannot be used (no JSON list after
the re-asks, or an item that cannot be placed within ``max_error`` edits) is
cut into its sentences instead, and counted in ``stats`` and in ``fallbacks``
(:class:`~momoka.methods.fallbacks.FallbackTally`: above ``--llm-max-failed``
the batch raises :class:`~momoka.errors.LLMFallbackError`; an answer that
parsed but could not be placed is removed from the LLM cache, so asking again
reaches the model).

A paragraph of fewer than ``min_sentences`` sentences is one chunk without
an LLM call (the prompt forbids splitting sentences, so the answer is known).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import ConfigError, LLMError, LLMResponseError
from ...stats import examples
from ...text import make_chunks
from ..base import FallbackCounts
from ..fallbacks import FallbackTally

#: A mask token that never occurs in text: every LLM item is located as a whole chunk.
_NO_MASK = ("\x00\x00momoka-no-mask\x00\x00",)


@dataclass
class LLMChunkStats(FallbackCounts):
    """Counts of one or more :meth:`LLMChunker.batch` runs."""

    documents: int = 0
    paragraphs: int = 0
    llm_paragraphs: int = 0
    short_paragraphs: int = 0
    long_paragraphs: int = 0
    edited_items: int = 0
    chunks: int = 0
    fallback_examples: list = examples(10)  # [doc_id, paragraph start, reason, answer], the first 10


class LLMChunker:
    """The paper's LLM chunker: ``chunker(document) -> list[Chunk]`` with exact offsets.

    Args:
        llm: a :mod:`momoka.llm` client (default ``client_from_env()``).
        max_error: an item may differ from the source by up to this fraction of
            its length in edits and still be placed.
        min_sentences: paragraphs with fewer sentences are kept whole without a call.
        max_paragraph_chars: longer paragraphs (e.g. a whole text without blank
            lines) are sent as runs of whole sentences of at most this many characters
            (counted in ``long_paragraphs``).
        max_reasks: re-asks of an answer that is not a JSON list.
        max_failed: the share of unusable answers above which a batch raises
            :class:`~momoka.errors.LLMFallbackError` (None: ``$MOMOKA_LLM_MAX_FAILED``,
            else 0.25; an :class:`~momoka.Index` given ``llm_max_failed`` sets it).

    ``stats`` (:class:`LLMChunkStats`) accumulates over calls; ``fallbacks`` counts the
    unusable answers per document (items: the ``[start, end]`` of the paragraph) and
    bounds their share. Chunks get the
    ``paragraph``/``sentence`` indices of their first character (p_i, s_i) and
    ``metadata["llm_chunk"]`` = ``"llm"``, ``"whole"`` or ``"sentence"`` (fallback).
    """

    name = "llm"
    #: Chunking runs a model or an LLM: ``momoka index --estimate`` prices it instead of running it.
    runs_model = True

    def __init__(self, llm: Any = None, *, max_error: float = 0.3, min_sentences: int = 2,
                 max_paragraph_chars: int = 8000, max_reasks: int = 1, batch_size: int = 256,
                 max_failed: float | None = None):
        if not 0 <= max_error < 1:
            raise ConfigError(f"max_error must be in [0, 1), got {max_error!r}")
        if llm is None:
            from ...llm import client_from_env  # start-up: momoka.llm

            llm = client_from_env()
        self.llm = llm
        self.max_error = float(max_error)
        self.min_sentences = int(min_sentences)
        self.max_paragraph_chars = int(max_paragraph_chars)
        self.max_reasks = int(max_reasks)
        self.batch_size = int(batch_size)
        self.stats = LLMChunkStats()
        self.fallbacks = FallbackTally("llm chunker", "chunker", "answers",
                                       "those paragraphs were chunked by sentences", max_failed=max_failed)

    def params(self) -> dict:
        return {"max_error": self.max_error, "min_sentences": self.min_sentences,
                "max_paragraph_chars": self.max_paragraph_chars, "max_reasks": self.max_reasks,
                "model": getattr(self.llm, "model", None)}

    def __call__(self, document) -> list:
        return self.batch([document])[0]

    def batch(self, documents: Sequence[Any]) -> list[list]:
        """Chunk many documents; all their paragraphs go to the LLM in shared batches."""
        from ...llm import JSONListParser, prompts  # start-up: momoka.llm.prompts

        docs = list(documents)
        plans: list[list[list]] = [self._plan(d, count=True) for d in docs]
        asks = [(di, k) for di, plan in enumerate(plans) for k, slot in enumerate(plan) if slot[2] == "ask"]
        for di, _ in asks:
            self.fallbacks.ask(getattr(docs[di], "doc_id", None))
        parser = JSONListParser(min_items=1)
        unplaced: list = []  # conversations whose (parsed) answers could not be placed: not kept in the cache
        for s in range(0, len(asks), self.batch_size):
            part = asks[s : s + self.batch_size]
            batch = [prompts.messages("momoka.llm_chunk", item=docs[di].text[plans[di][k][0]:plans[di][k][1]])
                     for di, k in part]
            res = self.llm.complete_parsed(batch, parser, max_reasks=self.max_reasks, temperature=0,
                                           method="llm_chunking")
            for (di, k), p in zip(part, res):
                slot = plans[di][k]
                if not p.ok:
                    if p.error is not None and not isinstance(p.error, LLMResponseError):
                        raise LLMError(f"LLM chunking request failed: {p.error}") from p.error
                    self.stats.fallback_parse += 1
                    self._example(docs[di], slot, "no JSON list", p.raw)
                    self.fallbacks.fail(getattr(docs[di], "doc_id", None), slot[:2], p.raw or p.error)
                    slot[2] = "sentence"
                    continue
                placed = self._place(docs[di].text, slot[0], slot[1], p.value)
                if placed is None:
                    self.stats.fallback_unplaced += 1
                    self._example(docs[di], slot, "unplaceable item", p.raw)
                    self.fallbacks.fail(getattr(docs[di], "doc_id", None), slot[:2], p.raw)
                    if p.messages is not None:
                        unplaced.append(p.messages)
                    slot[2] = "sentence"
                else:
                    slot[2], slot[3] = "llm", placed
                    self.stats.llm_paragraphs += 1
        forget = getattr(self.llm, "forget", None)
        if unplaced and callable(forget):
            forget(unplaced, temperature=0, method="llm_chunking")
        self.fallbacks.check()

        out = []
        for d, plan in zip(docs, plans):
            spans, meta = [], []
            for ps, pe, kind, payload in plan:
                if kind == "whole":
                    spans.append((ps, pe))
                    meta.append({"llm_chunk": "whole"})
                else:
                    for a, b in payload:
                        spans.append((a, b))
                        meta.append({"llm_chunk": "llm" if kind == "llm" else "sentence"})
            chunks = make_chunks(d, spans, metadata=meta)
            self.stats.documents += 1
            self.stats.chunks += len(chunks)
            out.append(chunks)
        return out

    def _plan(self, d, *, count: bool = False) -> list[list]:
        """``[start, end, kind, sentence spans]`` per prompt-sized part of each paragraph of ``d``:
        kind ``"ask"`` (sent to the LLM) or ``"whole"`` (fewer than ``min_sentences`` sentences).

        ``count``: add the paragraphs to :attr:`stats` (a run does, an :meth:`estimate` does not).
        """
        sents = np.asarray(d.sentences)
        plan = []
        for ps, pe in np.asarray(d.paragraphs).tolist():
            inside = sents[(sents[:, 0] >= ps) & (sents[:, 1] <= pe)] if len(sents) else sents
            spans = [(int(a), int(b)) for a, b in inside.tolist()] or [(ps, pe)]
            if count:
                self.stats.paragraphs += 1
            if pe - ps > self.max_paragraph_chars and len(spans) > 1:
                # a paragraph too long for one prompt (e.g. a text without blank lines): sent as
                # consecutive runs of whole sentences of at most max_paragraph_chars each
                if count:
                    self.stats.long_paragraphs += 1
                groups, cur = [], [spans[0]]
                for sp in spans[1:]:
                    if sp[1] - cur[0][0] > self.max_paragraph_chars:
                        groups.append(cur)
                        cur = [sp]
                    else:
                        cur.append(sp)
                groups.append(cur)
            else:
                groups = [spans]
            for g in groups:
                gs, ge = (g[0][0], g[-1][1]) if len(groups) > 1 else (ps, pe)
                ask = len(g) >= self.min_sentences
                if count and not ask and len(groups) == 1:
                    self.stats.short_paragraphs += 1
                plan.append([gs, ge, "ask" if ask else "whole", g])
        return plan

    def estimate(self, documents: Sequence[Any]) -> dict:
        """What chunking ``documents`` would cost, from their text alone (no LLM call).

        ``llm_calls``: the paragraphs (or prompt-sized runs of sentences) that are
        sent, before re-asks (at most ``max_reasks`` more each); tokens at 4
        characters per token: the prompt holds the template and the part, the
        answer repeats the part as a JSON list. ``chunks_min``: the parts kept whole
        plus one chunk per part sent (the answer has at least one item);
        ``chunks_max``: one chunk per sentence of the parts sent.
        """
        from ...llm import prompts  # start-up: momoka.llm.prompts

        template = len(prompts.get("momoka.llm_chunk").template)
        calls = whole = sentences = prompt_chars = answer_chars = 0
        for d in documents:
            for gs, ge, kind, g in self._plan(d):
                if kind == "ask":
                    calls += 1
                    sentences += len(g)
                    prompt_chars += template + (ge - gs)
                    answer_chars += (ge - gs) + 4 * len(g)  # the text again, quoted and comma-separated
                else:
                    whole += 1
        return {"llm_calls": calls, "llm_calls_max": calls * (1 + self.max_reasks),
                "prompt_tokens": prompt_chars // 4, "completion_tokens": answer_chars // 4,
                "chunks_min": whole + calls, "chunks_max": whole + sentences}

    def _example(self, doc, slot, reason: str, raw) -> None:
        self.stats.example("fallback_examples", [getattr(doc, "doc_id", None), slot[0], reason, str(raw)[:80]])

    def _place(self, text: str, ps: int, pe: int, items: list) -> list[tuple[int, int]] | None:
        """Exact ``(start, end)`` spans of the items in ``text[ps:pe]``, or None when one cannot be placed."""
        from ...kernels import recover_outlines  # start-up: momoka.kernels

        par = text[ps:pe]
        rec = recover_outlines(par, [str(x) for x in items], mask=_NO_MASK, max_error=self.max_error)
        if not rec or not all(r.placed for r in rec):
            return None
        spans = []
        for r, item in zip(rec, items):
            if r.head_distance > 0:
                self.stats.edited_items += 1
            a, b = r.start, r.end
            seg = par[a:b]
            a += len(seg) - len(seg.lstrip())
            b -= len(seg) - len(seg.rstrip())
            if b > a:
                spans.append((ps + a, ps + b))
        return spans or None
