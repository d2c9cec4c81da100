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
it stopped. :meth:`ViewEnricher.estimate` gives the LLM calls and tokens before a run.

With the LLM back-end an answer is checked before it is kept (the checks of
:mod:`momoka.methods.grounding`, shared with the document titles; content terms
are BM25's analyser output, the source is the section name and text shown to
the LLM):

* **keywords**: each keyword of the JSON list must be grounded in its source
  (at least :data:`~momoka.methods.grounding.MIN_GROUNDED_SHARE`, half, of its
  content terms occur there); the others are dropped (``stats["keywords_dropped"]``).
  An answer without a JSON list after the re-asks, or with no grounded keyword,
  is unusable.
* **summary**: an empty answer is unusable, and so is one of which less than
  :data:`MIN_SUMMARY_SHARE` of its distinct content terms occur in its source.
* **both**: the same keyword list (the kept keywords) or the same summary for
  two chunks whose texts share less than
  :data:`~momoka.methods.grounding.RELATED_JACCARD` of their content terms is
  unusable for both (the enricher's :class:`~momoka.methods.grounding.AnswerLedger`
  remembers the answers of a run).

An unusable answer falls back to the chunk's own text (its raw vector is
copied) and follows :mod:`momoka.methods.fallbacks`: counted in ``fallbacks``,
bounded by ``--llm-max-failed``, recorded per document (items: the chunk's
``[start, end]``), never kept in the view cache and removed from the LLM cache,
so a rerun asks exactly those again. ``failures`` lists the first 20
``(chunk, reason)``.
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
from ..grounding import AnswerLedger, answer_key, content_terms, grounding_problem, sketch
from ..sources import load_embedder
from . import offline

__all__ = ["BACKENDS", "KeywordsEnricher", "SummaryEnricher", "ViewEnricher"]

BACKENDS = ("auto", "offline", "llm")
#: Characters per token in the pre-run estimate.
CHARS_PER_TOKEN = 4
#: Share of an LLM summary's distinct content terms that must occur in its source. Lower than a title's
#: half because summaries paraphrase: summaries written for seven shared-set sections (finance reports,
#: papers, stories) had 0.39 to 0.94 of their content terms in their own section, at most 0.23 in another
#: document's (except two reports from one template: 0.43), and answers about the text ("This section
#: summarizes the key points.") 0 to 0.17 (docs/mcindex.md).
MIN_SUMMARY_SHARE = 0.3
#: Rejected answers listed in :attr:`ViewEnricher.failures`.
MAX_FAILURES_LISTED = 20
#: Version of the answer checks, part of an LLM view's settings (so of its cache key): view texts cached
#: before the checks existed, or under other ones, are not read back unchecked.
VIEW_CHECKS = 1


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
    #: What one LLM answer is called in the reasons of :attr:`failures`.
    what = "answer"
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
        #: The answers kept in this run, to find one answer given to unrelated chunks.
        self.ledger = AnswerLedger(what=self.what, of="chunk")
        #: ``(chunk, reason)`` of the first :data:`MAX_FAILURES_LISTED` unusable LLM answers.
        self.failures: list[tuple[str, str]] = []

    # ------------------------------------------------------------------ to implement

    def settings(self) -> dict:
        """The back-end settings that change the view text (part of the cache key)."""
        return {}

    def offline_texts(self, texts: list[str], embed: Any, doc_vecs: np.ndarray | None) -> list[str]:
        """View texts of ``texts`` by the offline back-end."""
        raise NotImplementedError

    def llm_texts(self, texts: list[str], names: list[str], items: list[str]) -> tuple[list[str], list[str | None]]:
        """View texts of ``texts`` (section names ``names``, chunks named ``items`` in reasons) by the LLM
        back-end, and per text the unusable answer it fell back from (None when the answer was used)."""
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

    def _source_terms(self, text: str, name: str) -> set[str]:
        """The content terms an answer about ``text`` may use: those of the section name and text in the prompt."""
        return content_terms(f"{name}\n{text[: self.max_chars]}")

    def _settle(self, texts: list[str], items: list[str], answers: list[str | None], problems: list[str | None],
                raws: list[str | None], forget: list[Any], params: dict) -> tuple[list[str], list[str | None]]:
        """Keep or reject a batch of answers (see the module docstring).

        ``answers[i]``: the view text of a usable answer (else None, with ``problems[i]`` saying why);
        ``raws[i]``: the answer as received; ``forget[i]``: the conversation whose cached answer is removed
        when the answer is rejected (None: nothing to remove). Usable answers also pass the same-answer check
        (:attr:`ledger`). Returns the view texts (a rejected answer's is the chunk text) and, per text, the
        rejected answer (None when kept).
        """
        usable = [i for i, a in enumerate(answers) if a is not None and problems[i] is None]
        repeated = self.ledger.check([(items[i], answers[i], sketch(content_terms(texts[i][: self.max_chars])))
                                      for i in usable])
        for m, why in repeated.items():
            problems[usable[m]] = why
        self._count("rejected_repeated", len(repeated))
        out: list[str] = []
        bad: list[str | None] = []
        for i, t in enumerate(texts):
            if problems[i] is None:
                out.append(answers[i])  # type: ignore[arg-type]
                bad.append(None)
                continue
            out.append(t)
            bad.append(raws[i] if raws[i] is not None else "")
            if len(self.failures) < MAX_FAILURES_LISTED:
                self.failures.append((items[i], problems[i]))
        drop = [forget[i] for i, b in enumerate(bad) if b is not None and forget[i] is not None]
        llm_forget = getattr(self.llm, "forget", None)
        if drop and callable(llm_forget):  # not kept: out of the LLM cache, so a rerun asks again
            llm_forget(drop, **params)
        return out, bad

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
                    spans = [store.chunks.span(ids[i]) for i in part]
                    got, bad = self.llm_texts([texts[i] for i in part], names,
                                              [f"{d} [{a}, {b}]" for d, a, b in spans])
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
    outcome = "those chunks' keyword views are their own text"
    what = "keyword list"
    max_reasks = 2

    def __init__(self, backend: str = "auto", *, n: int = 10, diversity: float = 0.5, candidates: int = 40,
                 **options: Any):
        super().__init__(backend, **options)
        if not (isinstance(n, int) and n >= 1) or not (0 <= float(diversity) <= 1):
            raise ConfigError("keywords: n must be a positive integer and diversity within [0, 1]")
        self.n, self.diversity, self.candidates = n, float(diversity), int(candidates)

    def settings(self) -> dict:
        if self.effective_backend == "llm":
            return {"prompt": self.prompt, "max_chars": self.max_chars, "max_tokens": self.max_tokens,
                    "checks": VIEW_CHECKS}
        return {"n": self.n, "diversity": self.diversity, "candidates": self.candidates, "ngrams": 3}

    def offline_texts(self, texts, embed, doc_vecs):
        kws = offline.keyphrases(texts, embed, doc_vecs=doc_vecs, n=self.n, diversity=self.diversity,
                                 top=self.candidates)
        return [", ".join(k) for k in kws]

    def grounded_keywords(self, keywords: Sequence[Any], source_terms: set[str]) -> tuple[list[str], str | None]:
        """The keywords grounded in a source with ``source_terms`` (in order, each once: same lower-cased
        words) and, when there is none, why the first one is not."""
        kept, seen, first = [], set(), None
        for v in keywords:
            kw = " ".join(str(v).split())
            why = grounding_problem(kw, source_terms, what="keyword", where="text")
            if why is None and answer_key(kw) not in seen:
                seen.add(answer_key(kw))
                kept.append(kw)
            elif why is not None and first is None:
                first = f"{kw!r}: {why}"
        self._count("keywords_dropped", len(keywords) - len(kept))
        if kept:
            return kept, None
        return [], f"none of its {len(keywords)} keywords is grounded in the text ({first})"

    def llm_texts(self, texts, names, items):
        from ...llm import JSONListParser  # start-up: momoka.llm

        params = {"temperature": 0, "max_tokens": self.max_tokens, "method": "mcindex.keywords"}
        res = self.llm.complete_parsed(self._prompted(texts, names), JSONListParser(min_items=1),
                                       max_reasks=self.max_reasks, **params)
        answers: list[str | None] = []
        problems: list[str | None] = []
        forget: list[Any] = []
        for t, n, p in zip(texts, names, res):
            if p.ok:
                kept, why = self.grounded_keywords(p.value, self._source_terms(t, n))
                answers.append(", ".join(kept) if kept else None)
                problems.append(why)
                forget.append(p.messages)
                self._count("rejected_ungrounded", int(why is not None))
            elif p.raw is not None:  # no JSON list after the re-asks (complete_parsed forgot those answers)
                self._count("parse_failures", 1)
                answers.append(None)
                problems.append("the answer has no JSON list of keywords")
                forget.append(None)
            else:
                raise LLMError(f"keywords request failed: {p.error}")
        return self._settle(texts, items, answers, problems, [p.raw for p in res], forget, params)


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
    what = "summary"

    def __init__(self, backend: str = "auto", *, min_words: int = 200, max_words: int = 150,
                 max_sentences: int = 10, max_tokens: int = 400, **options: Any):
        super().__init__(backend, max_tokens=max_tokens, **options)
        self.min_words, self.max_words, self.max_sentences = int(min_words), int(max_words), int(max_sentences)

    def needs_text(self, text: str) -> bool:
        return len(text.split()) > self.min_words

    def settings(self) -> dict:
        base = {"min_words": self.min_words}
        if self.effective_backend == "llm":
            return {**base, "prompt": self.prompt, "max_chars": self.max_chars, "max_tokens": self.max_tokens,
                    "checks": VIEW_CHECKS}
        return {**base, "max_words": self.max_words, "max_sentences": self.max_sentences, "method": "centroid"}

    def offline_texts(self, texts, embed, doc_vecs):
        return offline.extractive_summary(texts, embed, max_words=self.max_words, max_sentences=self.max_sentences)

    def llm_texts(self, texts, names, items):
        msgs = self._prompted(texts, names)
        params = {"temperature": 0, "max_tokens": self.max_tokens, "method": "mcindex.summary"}
        res = self.llm.complete_batch(msgs, **params)
        answers: list[str | None] = []
        problems: list[str | None] = []
        for t, n, r in zip(texts, names, res):
            if not r.ok:
                raise LLMError(f"summary request failed: {r.error}")
            self._count("prompt_tokens", r.prompt_tokens)
            self._count("completion_tokens", r.completion_tokens)
            summary = (r.text or "").strip()
            if not summary:
                self._count("empty_answers", 1)
                answers.append(None)
                problems.append("the answer is empty")
                continue
            why = grounding_problem(summary, self._source_terms(t, n), MIN_SUMMARY_SHARE, what="summary",
                                    where="text")
            self._count("rejected_ungrounded", int(why is not None))
            answers.append(summary)
            problems.append(why)
        return self._settle(texts, items, answers, problems, [r.text or "" for r in res], msgs, params)
