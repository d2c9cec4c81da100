"""MoC's meta-chunker (outlines ``head [MASK] tail``) and its granularity router (METHODS 2.3, 2.4, 2.6).

The document is cut into windows of whole sentences (at most ``window_chars``
characters; a longer sentence is a window of its own, never an empty window).
Each window goes to an LLM (local or any OpenAI-compatible endpoint) with the
Table 7 prompt (``moc.meta_chunker``; ``moc.meta_chunker_zh`` is the original
training prompt); the reply is parsed by the tolerant JSON-list parser (code
fences, trailing commas, smart quotes, an unterminated last item) with bounded
re-asks, and the outlines are recovered onto the window by the native,
sequence-aware :func:`momoka.kernels.recover_outlines` (exact offsets, the
window fully covered). A window whose reply is not a JSON list after the
re-asks, or none of whose outlines can be placed, falls back to whole
sentences merged to the window's target length: no text is ever lost. The
fallbacks follow the rule of :mod:`momoka.methods.fallbacks`: ``stats`` and
``fallbacks`` count them (items: the window's ``[start, end]``), a batch raises
:class:`~momoka.errors.LLMFallbackError` above ``--llm-max-failed``, and an
answer that parsed but could not be placed is removed from the LLM cache.

With ``router=True`` each window is first classed into one of MoC's four
granularities (mean chunk length (0,120], (120,150], (150,180], >180 chars):
on a local causal LM by the argmax of the four digit-token logits at the first
assistant position of the router prompt, one batched forward pass over all
windows on their shared prompt prefix; on an endpoint by a one-token reply
(class 0 when it is not a digit 0-3, as the reference does). The window then
goes to the class's expert: ``expert_models[c]`` on the endpoint when given,
else the same model with the class's target length in the prompt
(``moc.meta_chunker_sized``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...errors import ConfigError, LLMError, LLMResponseError
from ...text import make_chunks
from ..base import FallbackCounts
from ..fallbacks import FallbackTally
from ._common import as_document, dynamic_merge, greedy_runs, length_fn, sentence_spans
from .msp import label_ids, next_token_logits

__all__ = ["CLASS_BOUNDS", "CLASS_TARGETS", "MetaChunkStats", "MetaChunker", "sentence_windows"]

#: Upper bounds (chars) of the router's four classes (the last is open).
CLASS_BOUNDS = (120, 150, 180, None)
#: The target length (chars) told to an expert and used by the fallback, per class.
CLASS_TARGETS = (100, 135, 165, 220)


@dataclass
class MetaChunkStats(FallbackCounts):
    """Counts over the documents a :class:`MetaChunker` has chunked."""

    documents: int = 0
    windows: int = 0
    llm_windows: int = 0
    outlines: int = 0
    outlines_unplaced: int = 0
    fuzzy_outlines: int = 0
    chunks: int = 0
    routed: list = field(default_factory=lambda: [0, 0, 0, 0])


def sentence_windows(sents: list[tuple[int, int]], max_chars: int) -> list[list[tuple[int, int]]]:
    """Greedy runs of whole sentences spanning at most ``max_chars`` (a longer sentence is alone)."""
    return [[sents[k] for k in run] for run in greedy_runs(sents, max_chars)]


class MetaChunker:
    """The MoC meta-chunker: ``chunker(document) -> list[Chunk]`` (see the module docstring).

    Args:
        llm: a :mod:`momoka.llm` client (default ``client_from_env()``: the endpoint in
            ``MOMOKA_LLM_BASE_URL`` or the local model).
        window_chars: the most characters of a window.
        prompt: ``"moc.meta_chunker"`` (Table 7, English) or ``"moc.meta_chunker_zh"``.
        router: route each window to a granularity expert.
        expert_models: four model names on the endpoint (one per class), with ``router``.
        max_reasks: re-asks of a reply that is not a JSON list.
        max_error: outline heads/tails may differ from the text by this fraction in edits.
        max_tokens: tokens generated per window.
        fallback_target: target length (chars) of the fallback when no router class is known.
        merge_target, merge_unit: dynamic merge of the final chunks (None: off).
        max_failed: the share of windows without a usable outline above which a batch raises
            :class:`~momoka.errors.LLMFallbackError` (None: ``$MOMOKA_LLM_MAX_FAILED``, else 0.25;
            an :class:`~momoka.Index` given ``llm_max_failed`` sets it).

    ``stats`` (:class:`MetaChunkStats`) accumulates over calls; ``fallbacks`` counts the
    windows whose outline fell back, per document, and bounds their share.
    """

    name = "meta"
    #: Chunking runs a model or an LLM: ``momoka index --estimate`` prices it instead of running it.
    runs_model = True

    def __init__(self, llm: Any = None, *, window_chars: int = 1024, prompt: str = "moc.meta_chunker",
                 router: bool = False, expert_models: Any = None, max_reasks: int = 2, max_error: float = 0.3,
                 max_tokens: int = 512, fallback_target: int = 150, merge_target: int | None = None,
                 merge_unit: str = "chars", max_failed: float | None = None):
        if prompt not in ("moc.meta_chunker", "moc.meta_chunker_zh", "moc.meta_chunker_sized"):
            raise ConfigError(f"prompt must be moc.meta_chunker or moc.meta_chunker_zh, not {prompt!r}")
        if window_chars < 1 or max_reasks < 0 or not 0 <= max_error < 1:
            raise ConfigError("window_chars must be >= 1, max_reasks >= 0 and max_error in [0, 1)")
        if expert_models is not None and (not router or len(list(expert_models)) != 4):
            raise ConfigError("expert_models takes four model names (classes 0-3) and needs router=True")
        length_fn("", merge_unit, encode=len)
        self._llm = llm
        self.window_chars = int(window_chars)
        self.prompt = prompt
        self.router = bool(router)
        self.expert_models = list(expert_models) if expert_models is not None else None
        self.max_reasks = int(max_reasks)
        self.max_error = float(max_error)
        self.max_tokens = int(max_tokens)
        self.fallback_target = int(fallback_target)
        self.merge_target = merge_target
        self.merge_unit = merge_unit
        self.stats = MetaChunkStats()
        self.fallbacks = FallbackTally("meta chunker", "chunker", "windows",
                                       "those windows were cut into merged whole sentences", max_failed=max_failed)
        self._experts: dict[int, Any] = {}

    @property
    def llm(self):
        """The LLM client (``client_from_env()`` on first use)."""
        if self._llm is None:
            from ...llm import client_from_env  # start-up: momoka.llm

            self._llm = client_from_env()
        return self._llm

    def params(self) -> dict:
        """The settings."""
        return {"window_chars": self.window_chars, "prompt": self.prompt, "router": self.router,
                "expert_models": self.expert_models, "max_reasks": self.max_reasks, "max_error": self.max_error,
                "max_tokens": self.max_tokens, "merge_target": self.merge_target,
                "model": getattr(self._llm, "model", None)}

    # ----------------------------------------------------------------- router
    def _local_lm(self):
        return getattr(self.llm, "lm", None) if hasattr(getattr(self.llm, "lm", None), "prefix_batch") else None

    def route(self, windows: list[str]) -> list[int]:
        """The granularity class (0-3) of each window."""
        from ...llm import prompts  # start-up: momoka.llm.prompts

        if not windows:
            return []
        name = "moc.router_zh" if self.prompt == "moc.meta_chunker_zh" else "moc.router"
        lm = self._local_lm()
        if lm is not None:
            digits = label_ids(lm, ("0", "1", "2", "3"))
            ids = [lm.encode(lm.apply_chat_template(prompts.messages(name, window=w))) for w in windows]
            return [int(lg[digits].argmax()) for lg in next_token_logits(lm, ids)]
        res = self.llm.complete_batch([prompts.messages(name, window=w) for w in windows], temperature=0,
                                      max_tokens=1, method="moc_router")
        out = []
        for c in res:
            t = (getattr(c, "text", "") or "").strip()
            out.append(int(t) if t in ("0", "1", "2", "3") else 0)
        return out

    def _expert(self, cls: int):
        if self.expert_models is None:
            return self.llm
        if cls not in self._experts:
            from ...llm import OpenAIClient  # start-up: momoka.llm

            self._experts[cls] = OpenAIClient(model=self.expert_models[cls],
                                              base_url=getattr(self.llm, "base_url", None))
        return self._experts[cls]

    # ----------------------------------------------------------------- chunks
    def _messages(self, window: str, cls: int | None) -> list[dict]:
        from ...llm import prompts  # start-up: momoka.llm.prompts

        if self.prompt == "moc.meta_chunker_zh":
            return prompts.messages(self.prompt, window=window)
        if cls is not None and self.expert_models is None:
            return prompts.messages("moc.meta_chunker_sized", target=CLASS_TARGETS[cls], text=window)
        return prompts.messages("moc.meta_chunker", text=window)

    def _place(self, window: str, outlines: list) -> list[tuple[int, int]] | None:
        from ...kernels import recover_outlines  # start-up: momoka.kernels

        outlines = [str(o) for o in outlines if str(o).strip()]
        if not outlines:
            return None
        rec = recover_outlines(window, outlines, max_error=self.max_error)
        self.stats.outlines += len(rec)
        self.stats.outlines_unplaced += sum(not r.placed for r in rec)
        self.stats.fuzzy_outlines += sum(r.placed and (r.head_distance > 0 or r.tail_distance > 0) for r in rec)
        if not any(r.placed for r in rec):
            return None
        cuts = sorted({r.end for r in rec if r.placed and 0 < r.end < len(window)})
        spans, a = [], 0
        for b in cuts + [len(window)]:
            seg = window[a:b]
            s0, s1 = a + len(seg) - len(seg.lstrip()), b - (len(seg) - len(seg.rstrip()))
            if s1 > s0:
                spans.append((s0, s1))
            a = b
        return spans

    def chunk_spans_batch(self, documents: list) -> list[list[tuple[int, int]]]:
        """Chunk spans of many documents; all their windows go to the LLM in one batch per expert."""
        from ...llm import JSONListParser  # start-up: momoka.llm

        docs = [as_document(d) for d in documents]
        plans = []  # (doc index, window sentences, window start, window end)
        for di, d in enumerate(docs):
            for w in sentence_windows(sentence_spans(d), self.window_chars):
                plans.append((di, w, w[0][0], w[-1][1]))
        texts = [docs[di].text[a:b] for di, _, a, b in plans]
        classes = self.route(texts) if self.router else [None] * len(plans)
        for c in classes:
            if c is not None:
                self.stats.routed[c] += 1
        placed: list[list[tuple[int, int]] | None] = [None] * len(plans)
        parser = JSONListParser(min_items=1)
        groups: dict[Any, list[int]] = {}
        for k, c in enumerate(classes):
            groups.setdefault(c if self.expert_models is not None else None, []).append(k)
        doc_id = [getattr(docs[di], "doc_id", None) for di, *_ in plans]
        for k in range(len(plans)):
            self.fallbacks.ask(doc_id[k])
        for c, ks in groups.items():
            llm = self._expert(c) if c is not None else self.llm
            params = {"temperature": 0, "max_tokens": self.max_tokens, "method": "meta_chunker"}
            res = llm.complete_parsed([self._messages(texts[k], classes[k]) for k in ks], parser,
                                      max_reasks=self.max_reasks, **params)
            unplaced = []  # conversations whose (parsed) answers could not be placed: not kept in the cache
            for k, p in zip(ks, res):
                if not p.ok:
                    if p.error is not None and not isinstance(p.error, LLMResponseError):
                        raise LLMError(f"meta-chunker request failed: {p.error}") from p.error
                    self.stats.fallback_parse += 1
                    self.fallbacks.fail(doc_id[k], list(plans[k][2:]), p.raw or p.error)
                    continue
                spans = self._place(texts[k], p.value)
                if spans is None:
                    self.stats.fallback_unplaced += 1
                    self.fallbacks.fail(doc_id[k], list(plans[k][2:]), p.raw)
                    if p.messages is not None:
                        unplaced.append(p.messages)
                else:
                    self.stats.llm_windows += 1
                    placed[k] = spans
            forget = getattr(llm, "forget", None)
            if unplaced and callable(forget):
                forget(unplaced, **params)
        self.fallbacks.check()
        out: list[list[tuple[int, int]]] = [[] for _ in docs]
        for k, (di, sents, a, _) in enumerate(plans):
            self.stats.windows += 1
            if placed[k] is not None:
                out[di] += [(a + s, a + e) for s, e in placed[k]]
            else:
                target = CLASS_TARGETS[classes[k]] if classes[k] is not None else self.fallback_target
                out[di] += dynamic_merge(sents, target, lambda x, y: y - x)
        for di, d in enumerate(docs):
            out[di] = dynamic_merge(out[di], self.merge_target,
                                    length_fn(d.text, self.merge_unit, None if self.merge_unit == "chars" else
                                              (lambda t: t.split())))
            self.stats.documents += 1
            self.stats.chunks += len(out[di])
        return out

    def estimate(self, documents: list) -> dict:
        """What chunking ``documents`` would cost, from their text alone (no LLM call, no model loaded).

        ``windows``: the sentence windows, one request each (``llm_calls``); ``llm_calls_max``: with every
        answer re-asked ``max_reasks`` times, plus the router's one-token request per window when
        ``router`` is on (an endpoint answers it; the local model reads the class from one forward pass, no
        request). Tokens at 4 characters per token: the prompt holds the template and the window; an
        answer is at most ``max_tokens``.
        """
        from ...llm import prompts  # start-up: momoka.llm.prompts

        docs = [as_document(d) for d in documents]
        spans = [(w[0][0], w[-1][1], d) for d in docs for w in sentence_windows(sentence_spans(d), self.window_chars)]
        n = len(spans)
        tmpl = prompts.get(self.prompt)
        head = len(tmpl.template) + len(getattr(tmpl, "system", None) or "")
        router = n if self.router else 0
        asks = 1 + self.max_reasks
        return {"windows": n, "llm_calls": n, "router_calls": router, "llm_calls_max": n * asks + router,
                "prompt_tokens": sum(head + b - a for a, b, _ in spans) // 4,
                "completion_tokens_max": n * asks * self.max_tokens + router}

    def batch(self, documents: list) -> list[list]:
        """Chunk many documents (one LLM batch)."""
        docs = [as_document(d) for d in documents]
        return [make_chunks(d, s) for d, s in zip(docs, self.chunk_spans_batch(docs))]

    def __call__(self, document: Any) -> list:
        """Chunk ``document``."""
        return self.batch([document])[0]
