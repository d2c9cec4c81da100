"""MC-indexing's keyword and summary views as enrichers (``keywords``, ``summary``).

Each enricher computes one text per chunk and stores it as its own named views:
a BM25 view and (when the store has dense vectors) a vector view embedded by
the raw view's embedder (the paper embeds every view with the same retriever).
The view's ``source`` in the manifest says which back-end made it.

Back-ends (``backend=``):

* ``"offline"`` -- no LLM: KeyBERT-style keyphrases with MMR, or an extractive
  summary of the most central sentences (:mod:`.offline`), with the index's embedder;
* ``"llm"`` -- the paper's prompts (``mcindex.keywords``, ``mcindex.summary``,
  :mod:`momoka.llm.prompts`) through any :mod:`momoka.llm` client (the local
  model or an OpenAI-compatible endpoint), batched with ``complete_batch``;
* ``"auto"`` (default) -- ``llm`` when a client is given or
  ``MOMOKA_LLM_BASE_URL`` is set, else ``offline``.

Like the paper, sections of at most ``min_words`` words (200) are their own
summary (their raw vector is copied, not re-embedded). View texts are cached on
disk (:class:`momoka.llm.ResponseCache`, the LLM cache file by default) per
chunk text and settings, batch by batch, so an interrupted build resumes where
it stopped. With the LLM back-end, an unusable answer (keywords: no JSON list
after the re-asks, kept as its raw text; summary: an empty answer, the chunk is
its own summary) follows :mod:`momoka.methods.fallbacks`: counted in
``fallbacks``, bounded by ``--llm-max-failed``, recorded per document (items:
the chunk's ``[start, end]``) and never cached, so a rerun asks it again. :meth:`ViewEnricher.estimate` gives the LLM calls and tokens before a run.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..._validate import check_int
from ...errors import ConfigError, LLMError
from ...store.store import RAW_VIEW
from ...progress import Progress
from .._backend import LLMBacked
from ..fallbacks import FallbackTally, set_record
from ..sources import load_embedder
from . import offline

__all__ = ["BACKENDS", "KeywordsEnricher", "SummaryEnricher", "ViewEnricher"]

BACKENDS = ("auto", "offline", "llm")
#: Characters per token in the pre-run estimate.
CHARS_PER_TOKEN = 4


class ViewEnricher(LLMBacked):
    """Common part of the ``keywords`` and ``summary`` enrichers (see the module docstring).

    Args:
        backend: ``"auto"``, ``"offline"`` or ``"llm"``.
        llm: the LLM client (default :func:`momoka.llm.client_from_env`).
        cache: True (the default LLM cache file), a path, or False.
        batch: chunks per batch (per cache write and per LLM ``complete_batch``).
        max_chars: longest section text put into an LLM prompt (longer ones are
            cut there and counted in ``stats["llm_inputs_cut"]``).
        max_tokens: the LLM's answer limit.
        max_reasks: times an unusable answer is asked again (default :attr:`max_reasks` of the class: 2 for
            the keyword lists, 0 for summaries, which are used as they come).
    """

    name = "view"
    prompt = ""
    #: What an unusable LLM answer falls back to (the warning's end).
    outcome = "those chunks fell back"
    #: Times an unusable LLM answer is asked again (each one more request; priced by :meth:`estimate`).
    max_reasks = 0

    def __init__(self, backend: str = "auto", *, llm: Any = None, cache: Any = True, batch: int = 64,
                 max_chars: int = 6000, max_tokens: int = 256, max_reasks: int | None = None):
        if backend not in BACKENDS:
            raise ConfigError(f"{self.name}: backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
        batch = check_int(batch, f"{self.name}: batch", minimum=1)
        self.backend, self._llm, self.batch = backend, llm, batch
        self.max_chars, self.max_tokens = int(max_chars), int(max_tokens)
        if max_reasks is not None:
            self.max_reasks = check_int(max_reasks, f"{self.name}: max_reasks", minimum=0)
        self._cache_opt = cache
        self._cache = None
        self.view = self.name
        self.stats: dict[str, float] = {}
        self.fallbacks = FallbackTally(self.name, self.name, "answers", self.outcome)

    # ------------------------------------------------------------------ to implement

    def settings(self) -> dict:
        """The back-end settings that change the view text (part of the cache key)."""
        return {}

    def offline_texts(self, texts: list[str], embed: Any, doc_vecs: np.ndarray | None) -> list[str]:
        """View texts of ``texts`` by the offline back-end."""
        raise NotImplementedError

    def llm_texts(self, texts: list[str], names: list[str]) -> tuple[list[str], list[str | None]]:
        """View texts of ``texts`` (section names ``names``) by the LLM back-end, and per text the
        unusable answer it fell back from (None when the answer was used)."""
        raise NotImplementedError

    def needs_text(self, text: str) -> bool:
        """False when the chunk is its own view text (short sections and the summary)."""
        return True

    # ------------------------------------------------------------------ parts


    def backend_id(self, index: Any) -> str:
        """Who makes the view text: ``offline:<embedder>`` or ``llm:<model>``."""
        if self.effective_backend == "llm":
            return f"llm:{getattr(self.llm, 'model', '') or type(self.llm).__name__}"
        emb = self._embedder(index)
        return f"offline:{getattr(emb, 'model_id', type(emb).__name__)}"

    def _embedder(self, index: Any):
        if index.store.has_vector_view(RAW_VIEW):
            return index.embedder

        if getattr(self, "_own_embedder", None) is None:
            self._own_embedder = load_embedder(None)
        return self._own_embedder

    def _open_cache(self):
        if self._cache is None and self._cache_opt:
            from ...llm import ResponseCache, default_cache_path  # start-up: momoka.llm

            path = default_cache_path() if self._cache_opt is True else self._cache_opt
            self._cache = ResponseCache(path)
        return self._cache

    def _count(self, key: str, v: float) -> None:
        self.stats[key] = self.stats.get(key, 0) + v

    def _source(self, index: Any) -> dict:
        return {"text": f"{self.name} of the chunk", "by": self.name, "backend": self.backend_id(index),
                "settings": self.settings()}

    # ------------------------------------------------------------------ enrich

    def view_texts(self, index: Any, ids: list[int]) -> list[str]:
        """The view text of every chunk id (cached, in batches, with progress)."""
        from ...llm import make_key  # start-up: momoka.llm

        store = index.store
        texts = [store.chunks.text(c) for c in ids]
        backend, bid = self.effective_backend, self.backend_id(index)
        cache = self._open_cache()
        kind = f"mcindex.{self.name}"
        keys = [make_key(kind, bid, {"settings": self.settings(), "text": t}) for t in texts]
        out: list[str | None] = [t if not self.needs_text(t) else None for t in texts]
        self._count("copied_from_raw", sum(o is not None for o in out))
        if cache is not None:
            hit = cache.get_many([k for k, o in zip(keys, out) if o is None])
            for i, k in enumerate(keys):
                if out[i] is None and k in hit:
                    out[i] = hit[k]["text"]
                    self._count("cached", 1)
        todo = [i for i, o in enumerate(out) if o is None]
        asked = [i for i, t in enumerate(texts) if self.needs_text(t)] if backend == "llm" else []
        for i in asked:
            self.fallbacks.ask(store.chunks.doc_id(ids[i]))
        raw = store.vector_view(RAW_VIEW) if store.has_vector_view(RAW_VIEW) else None
        with Progress(f"{self.name} view ({backend})", total=len(todo), unit="chunks",
                      enabled=index.progress) as pr:
            for a in range(0, len(todo), self.batch):
                part = todo[a : a + self.batch]
                t0 = time.perf_counter()
                if backend == "llm":
                    names = [" > ".join(store.chunks.get(ids[i]).section) or (index.title(store.chunks.doc_id(ids[i]))
                                                                              or "") for i in part]
                    got, bad = self.llm_texts([texts[i] for i in part], names)
                    for i, b in zip(part, bad):
                        if b is not None:
                            doc_id, start, end = store.chunks.span(ids[i])
                            self.fallbacks.fail(doc_id, [start, end], b)
                else:
                    bad = [None] * len(part)
                    dv = raw.get([ids[i] for i in part]) if raw is not None else None
                    got = self.offline_texts([texts[i] for i in part], self._embedder(index).embed, dv)
                self._count("seconds_text", time.perf_counter() - t0)
                self._count("computed", len(part))
                for i, g in zip(part, got):
                    out[i] = g
                if cache is not None:  # fallbacks are not kept: a rerun asks them again
                    cache.put_many([(keys[i], kind, bid, {"text": out[i]}) for i, b in zip(part, bad) if b is None])
                pr.update(len(part))
        self.fallbacks.check()
        return [o or "" for o in out]

    def enrich(self, index: Any, doc_ids: Sequence[str]) -> None:
        """Compute the view texts of the documents' chunks and add them to the BM25 and vector views."""
        store = index.store
        ids = [c for d in doc_ids for c in store.documents[d].chunk_ids]
        t0 = time.perf_counter()
        vt = self.view_texts(index, ids)
        self.prepare(index)
        store.bm25_view(self.view).add(ids, [t or " " for t in vt])
        if store.has_vector_view(RAW_VIEW):
            raw = store.vector_view(RAW_VIEW)
            same = [i for i, (c, t) in enumerate(zip(ids, vt)) if t == store.chunks.text(c)]
            other = [i for i in range(len(ids)) if i not in set(same)]
            vecs = np.zeros((len(ids), int(raw.info["embedder"]["dim"])), np.float32)
            if same:
                vecs[same] = raw.get([ids[i] for i in same])
            t1 = time.perf_counter()
            if other:
                vecs[other] = index.embed([vt[i] or " " for i in other], view=self.view,
                                          label=f"embedding the {self.name} view")
            self._count("seconds_embed", time.perf_counter() - t1)
            self._count("embedded", len(other))
            store.vector_view(self.view).add(ids, vecs)
        if self.effective_backend == "llm":
            for d in doc_ids:
                set_record(store.documents[d].metadata, self.fallbacks.key, self.fallbacks.take(d))
        self._count("chunks", len(ids))
        self._count("seconds", time.perf_counter() - t0)

    def prepare(self, batch: Any) -> None:
        """Create BM25 view :attr:`view` and, when the index has raw vectors, vector view :attr:`view` (the raw
        view's embedder) in ``batch.store`` when they are missing."""
        store = batch.store
        if store.has_bm25_view(self.view) and (store.has_vector_view(self.view) or not store.has_vector_view(RAW_VIEW)):
            return
        src = self._source(batch)
        if not store.has_bm25_view(self.view):
            store.add_bm25_view(self.view, params=store.bm25_view(RAW_VIEW).params, source=src)
        if store.has_vector_view(RAW_VIEW) and not store.has_vector_view(self.view):
            raw = store.vector_view(RAW_VIEW)
            store.add_vector_view(self.view, embedder=raw.info["embedder"], dtype=raw.dtype, source=src)

    def estimate(self, documents: Sequence[Any], chunks: Sequence[Sequence[Any]]) -> dict:
        """Pre-run estimate of LLM calls and tokens (4 characters per token; answers at most ``max_tokens``);
        the offline backend makes none. ``llm_calls``: one per chunk that needs a view text;
        ``llm_calls_max``: with every answer re-asked :attr:`max_reasks` times (an unusable keyword list)."""
        from ...llm import prompts  # start-up: momoka.llm.prompts

        tmpl = len(prompts.get(self.prompt).template)
        texts = [c.text for cs in chunks for c in cs]
        need = [t for t in texts if self.needs_text(t)]
        tok = sum((min(len(t), self.max_chars) + tmpl) // CHARS_PER_TOKEN for t in need)
        if self.effective_backend != "llm":
            return {"view": self.name, "backend": self.effective_backend, "chunks": len(texts), "llm_calls": 0}
        asks = 1 + self.max_reasks
        return {"view": self.name, "backend": "llm", "chunks": len(texts), "llm_calls": len(need),
                "llm_calls_max": len(need) * asks, "prompt_tokens": int(tok),
                "completion_tokens_max": len(need) * asks * self.max_tokens,
                "inputs_cut": sum(len(t) > self.max_chars for t in need)}

    def describe(self) -> dict:
        """Settings and counts (recorded in the manifest)."""
        st = dict(self.stats)
        if st.get("computed"):
            st["seconds_per_chunk_text"] = st["seconds_text"] / st["computed"]
        if st.get("embedded"):
            st["seconds_per_chunk_embed"] = st["seconds_embed"] / st["embedded"]
        return {"view": self.view, "backend": self.effective_backend, "settings": self.settings(), "stats": st}

    def _prompted(self, texts: list[str], names: list[str]) -> list:
        from ...llm import prompts  # start-up: momoka.llm.prompts

        cut = [t[: self.max_chars] for t in texts]
        self._count("llm_inputs_cut", sum(len(t) > self.max_chars for t in texts))
        self._count("llm_calls", len(texts))
        return [prompts.messages(self.prompt, section_name=n, section_text=t) for n, t in zip(names, cut)]


class KeywordsEnricher(ViewEnricher):
    """The keyword view: offline KeyBERT-style keyphrases (``n``, ``diversity``, ``candidates``) or the Figure 9 prompt."""

    name = "keywords"
    prompt = "mcindex.keywords"
    outcome = "those chunks' keyword views are the raw answers"
    max_reasks = 2

    def __init__(self, backend: str = "auto", *, n: int = 10, diversity: float = 0.5, candidates: int = 40,
                 **options: Any):
        super().__init__(backend, **options)
        if not (isinstance(n, int) and n >= 1) or not (0 <= float(diversity) <= 1):
            raise ConfigError("keywords: n must be a positive integer and diversity within [0, 1]")
        self.n, self.diversity, self.candidates = n, float(diversity), int(candidates)

    def settings(self) -> dict:
        if self.effective_backend == "llm":
            return {"prompt": self.prompt, "max_chars": self.max_chars, "max_tokens": self.max_tokens}
        return {"n": self.n, "diversity": self.diversity, "candidates": self.candidates, "ngrams": 3}

    def offline_texts(self, texts, embed, doc_vecs):
        kws = offline.keyphrases(texts, embed, doc_vecs=doc_vecs, n=self.n, diversity=self.diversity,
                                 top=self.candidates)
        return [", ".join(k) for k in kws]

    def llm_texts(self, texts, names):
        from ...llm import JSONListParser  # start-up: momoka.llm

        res = self.llm.complete_parsed(self._prompted(texts, names), JSONListParser(min_items=1), temperature=0,
                                       max_tokens=self.max_tokens, max_reasks=self.max_reasks,
                                       method="mcindex.keywords")
        out, bad = [], []
        for p in res:
            if p.ok:
                out.append(", ".join(str(v).strip() for v in p.value))
                bad.append(None)
            elif p.raw:  # unparsable list: its words still describe the section (a counted fallback)
                self._count("parse_failures", 1)
                out.append(p.raw.strip())
                bad.append(p.raw)
            else:
                raise LLMError(f"keywords request failed: {p.error}")
        return out, bad


class SummaryEnricher(ViewEnricher):
    """The summary view: an extractive summary (``max_words``, ``max_sentences``) or the paper's summary prompt.

    Sections of at most ``min_words`` words are their own summary (the paper
    summarises sections over 200 tokens only). The offline summary keeps to
    ``max_words`` (150) words so that it fits the default embedder's 256-token
    window; the paper's prompt asks the LLM for at most 200 words.
    """

    name = "summary"
    prompt = "mcindex.summary"
    outcome = "those chunks are their own summary"

    def __init__(self, backend: str = "auto", *, min_words: int = 200, max_words: int = 150,
                 max_sentences: int = 10, max_tokens: int = 400, **options: Any):
        super().__init__(backend, max_tokens=max_tokens, **options)
        self.min_words, self.max_words, self.max_sentences = int(min_words), int(max_words), int(max_sentences)

    def needs_text(self, text: str) -> bool:
        return len(text.split()) > self.min_words

    def settings(self) -> dict:
        base = {"min_words": self.min_words}
        if self.effective_backend == "llm":
            return {**base, "prompt": self.prompt, "max_chars": self.max_chars, "max_tokens": self.max_tokens}
        return {**base, "max_words": self.max_words, "max_sentences": self.max_sentences, "method": "centroid"}

    def offline_texts(self, texts, embed, doc_vecs):
        return offline.extractive_summary(texts, embed, max_words=self.max_words, max_sentences=self.max_sentences)

    def llm_texts(self, texts, names):
        msgs = self._prompted(texts, names)
        params = {"temperature": 0, "max_tokens": self.max_tokens, "method": "mcindex.summary"}
        res = self.llm.complete_batch(msgs, **params)
        out, bad, empty = [], [], []
        for t, m, r in zip(texts, msgs, res):
            if not r.ok:
                raise LLMError(f"summary request failed: {r.error}")
            self._count("prompt_tokens", r.prompt_tokens)
            self._count("completion_tokens", r.completion_tokens)
            if not (r.text or "").strip():
                self._count("empty_answers", 1)
                out.append(t)
                bad.append(r.text or "")
                empty.append(m)
            else:
                out.append(r.text.strip())
                bad.append(None)
        forget = getattr(self.llm, "forget", None)
        if empty and callable(forget):
            forget(empty, **params)  # an empty answer is not kept in the LLM cache either
        return out, bad
