"""Meta-Chunking's perplexity (PPL) chunking with exact offsets (METHODS 1.3, 1.6, 1.7).

Per sentence, the mean negative log-likelihood (nats) of its tokens under a
causal LM; a sentence whose score is a local minimum (strict, or the start of a
plateau) by at least ``threshold`` ends a chunk.

What momoka does (the default):

* the real text is tokenised once, with offsets; a token belongs to the
  sentence holding its first non-space character (METHODS 1.7.2), and every
  token is scored (the document start token precedes the text);
* the document is scored in segments of ``segment`` tokens, each after the
  ``context`` tokens before it, with fresh positions from 0 (a sliding window
  with recompute, METHODS 1.7.4 option (a): RoPE positions are never shifted
  under a trimmed cache); a segment's log-probs are cached on disk, so an
  interrupted run resumes and a re-chunk with another threshold is free;
* a chunk is ``text[start:end]`` of whole sentences, never truncated;
* dynamic merge to ``merge_target`` characters or tokens, without the empty first chunk.

``reference_compat=True`` reproduces the reference scoring on short texts:
each (stripped) sentence tokenised on its own, the ids concatenated with no
separator and no BOS, the first token unscored, sentences of more than 512
words truncated as the reference does (for scoring only; chunks stay exact).
:func:`ppl_boundaries` is the boundary rule, :meth:`PPLChunker.scores` the
per-sentence scores to tune ``threshold`` with.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ConfigError, InputTooLargeError
from ...progress import Progress
from ...stats import Stats
from ...text import make_chunks
from ._common import as_document, dynamic_merge, groups_to_spans, length_fn, sentence_spans

__all__ = ["PPLChunkStats", "PPLChunker", "ppl_boundaries", "reference_truncate"]


def ppl_boundaries(scores: Sequence[float], threshold: float = 0.0) -> list[int]:
    """Indices of the sentences that end a chunk: strict minima and plateau starts (METHODS 1.3).

    For interior ``i``: ``s[i] < s[i-1] and s[i] < s[i+1]`` with the larger drop
    ``>= threshold``, or ``s[i] < s[i-1] and s[i] == s[i+1]`` with the left drop
    ``>= threshold``. The first and last sentence are never minima; NaN never is.
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.size < 3:
        return []
    mid, left, right = s[1:-1], s[:-2], s[2:]
    with np.errstate(invalid="ignore"):
        dl, dr = left - mid, right - mid
        strict = (mid < left) & (mid < right) & (np.fmax(dl, dr) >= threshold)
        plateau = (mid < left) & (mid == right) & (dl >= threshold)
    return (np.nonzero(strict | plateau)[0] + 1).tolist()


def reference_truncate(sentence: str) -> str:
    """The reference's guard on long English sentences (what its LM scores, METHODS 1.2)."""
    words = sentence.split(" ")
    if len(words) > 1024:
        return " ".join(words[:256]) + "..."
    if len(words) > 512:
        return " ".join(words[:512]) + "..."
    return sentence


def default_cache_dir() -> Path:
    """Where the ppl chunker keeps its token log-probs: ``ppl-logprobs`` in the computed cache,
    ``$MOMOKA_CACHE_DIR`` or ``momoka_home()/cache`` (``momoka cache info`` lists it,
    ``momoka cache clear computed`` empties it)."""
    from ...models import computed_cache_dir  # start-up: momoka.models

    return computed_cache_dir() / "ppl-logprobs"


@dataclass
class PPLChunkStats(Stats):
    """Counts over the documents a :class:`PPLChunker` has chunked: ``tokens`` of the documents,
    ``tokens_scored`` by the model and ``cached_segments`` read from the cache instead."""

    documents: int = 0
    tokens: int = 0
    tokens_scored: int = 0
    cached_segments: int = 0


class PPLChunker:
    """Perplexity chunking: ``chunker(document) -> list[Chunk]`` (see the module docstring).

    Args:
        lm: a :class:`momoka.models.causal_lm.CausalLM` (default: the local default model).
        threshold: θ in nats on the mean-NLL scores (larger → fewer boundaries).
        merge_target: dynamic merge to at most this length (None: off).
        merge_unit: ``"chars"`` or ``"tokens"`` (the LM's tokens).
        reference_compat: score as the reference does (short texts only).
        segment, context: tokens scored per segment and context tokens before each.
        cache: a directory for per-segment log-probs, True (momoka's cache
            directory) or False.
        progress: a progress line per token scored (:class:`momoka.progress.Progress`;
            None: its default rules, False: silent).

    After a call, ``last_scores`` and ``last_sentences`` hold the document's
    per-sentence scores and sentence spans; ``stats`` (:class:`PPLChunkStats`) counts tokens scored and
    segments read from the cache.
    """

    name = "ppl"
    #: Chunking runs a model or an LLM: ``momoka index --estimate`` prices it instead of running it.
    runs_model = True

    def __init__(self, lm: Any = None, *, threshold: float = 0.0, merge_target: int | None = None,
                 merge_unit: str = "chars", reference_compat: bool = False, segment: int = 4096,
                 context: int = 1024, cache: Any = True, progress: bool | None = None):
        if not isinstance(threshold, (int, float)) or isinstance(threshold, bool) or np.isnan(threshold):
            raise ConfigError(f"threshold must be a number (nats), got {threshold!r}")
        if segment < 1 or context < 0:
            raise ConfigError("segment must be >= 1 and context >= 0 tokens")
        length_fn("", merge_unit, encode=len)  # validates the unit
        self._lm = lm
        self.threshold = float(threshold)
        self.merge_target = merge_target
        self.merge_unit = merge_unit
        self.reference_compat = bool(reference_compat)
        self.segment = int(segment)
        self.context = int(context)
        self.cache = cache
        self.progress = progress
        self.last_scores: np.ndarray = np.zeros(0)
        self.last_sentences: list[tuple[int, int]] = []
        self.stats = PPLChunkStats()

    @property
    def lm(self):
        """The causal LM (the default one is loaded on first use)."""
        if self._lm is None:
            from ...models import default_causal_lm  # start-up: momoka.models

            self._lm = default_causal_lm()
        return self._lm

    def params(self) -> dict:
        """The settings (as recorded in a store's manifest)."""
        return {"threshold": self.threshold, "merge_target": self.merge_target, "merge_unit": self.merge_unit,
                "reference_compat": self.reference_compat, "segment": self.segment, "context": self.context,
                "model": str(getattr(self._lm, "model_dir", "default"))}

    # ----------------------------------------------------------------- scores
    def _cache_dir(self) -> Path | None:
        if self.cache is False or self.cache is None:
            return None
        if self.cache is True:
            return default_cache_dir()
        return Path(self.cache)

    def token_logprobs(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """``(logprobs, offsets)`` of every token of ``text`` (momoka scoring), streamed by segment."""
        lm = self.lm
        enc = lm.tokenizer.encode(text, add_special_tokens=False)
        ids = list(enc.ids)
        offsets = np.asarray(enc.offsets, dtype=np.int64).reshape(-1, 2)
        out = np.empty(len(ids), dtype=np.float64)
        cdir = self._cache_dir()
        model_key = str(getattr(lm, "model_dir", type(lm).__name__)).encode()
        with Progress("ppl scoring", total=len(ids), unit="tokens", enabled=self.progress) as bar:
            for s in range(0, len(ids), self.segment):
                seg = ids[s:s + self.segment]
                # the segment's context: the document start and all before it, or the last `context` tokens
                ctx = [lm.doc_start_id] + ids[:s] if s <= self.context else ids[s - self.context:s]
                path = None
                if cdir is not None:
                    h = hashlib.sha256(model_key + np.asarray(ctx + [-1] + seg, dtype=np.int64).tobytes())
                    path = cdir / f"{h.hexdigest()[:40]}.npy"
                    if path.is_file():
                        try:
                            lp = np.load(path)
                            if lp.shape == (len(seg),):
                                out[s:s + len(seg)] = lp
                                self.stats.cached_segments += 1
                                bar.update(len(seg))
                                continue
                        except (OSError, ValueError):
                            pass
                done = [0]

                def tick(d: int, total: int) -> None:
                    bar.update(max(0, int(d * len(seg) / max(total, 1)) - done[0]))
                    done[0] = max(done[0], int(d * len(seg) / max(total, 1)))

                lp = lm.score_ids([(ctx, seg)], progress=tick)[0]
                bar.update(len(seg) - done[0])
                out[s:s + len(seg)] = lp
                self.stats.tokens_scored += len(seg)
                if path is not None:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    tmp = path.with_suffix(".tmp.npy")
                    np.save(tmp, lp)
                    tmp.replace(path)
        self.stats.tokens += len(ids)
        return out, offsets

    def scores(self, document: Any) -> tuple[np.ndarray, list[tuple[int, int]]]:
        """``(scores, sentence spans)``: the mean NLL (nats) of each sentence (NaN: no scored token)."""
        doc = as_document(document)
        sents = sentence_spans(doc)
        if not sents:
            return np.zeros(0), sents
        if self.reference_compat:
            return self._compat_scores(doc.text, sents), sents
        text = doc.text
        lp, offsets = self.token_logprobs(text)
        # first non-space character at or after each position (len(text) past the end)
        is_space = np.fromiter((c.isspace() for c in text), dtype=bool, count=len(text))
        idx = np.where(~is_space, np.arange(len(text)), len(text))
        next_ns = np.minimum.accumulate(np.append(idx, len(text))[::-1])[::-1]
        first = next_ns[np.minimum(offsets[:, 0], len(text))] if len(offsets) else np.zeros(0, np.int64)
        starts = np.asarray([a for a, _ in sents], dtype=np.int64)
        sid = np.clip(np.searchsorted(starts, first, side="right") - 1, 0, len(sents) - 1)
        tot = np.bincount(sid, weights=-lp, minlength=len(sents))
        cnt = np.bincount(sid, minlength=len(sents))
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(cnt > 0, tot / np.maximum(cnt, 1), np.nan), sents

    def _compat_scores(self, text: str, sents: list[tuple[int, int]]) -> np.ndarray:
        lm = self.lm
        pieces = [lm.encode(reference_truncate(text[a:b].strip())) for a, b in sents]
        ids = [t for p in pieces for t in p]
        if len(ids) > lm.window:
            raise InputTooLargeError(f"reference_compat scores texts of at most {lm.window} tokens "
                                     f"(this one has {len(ids)}); use the default mode for long documents")
        if len(ids) < 2:
            return np.full(len(sents), np.nan)
        loss = np.concatenate([[np.nan], -lm.stream_logprobs(ids)])  # token 0 is never scored
        out = np.full(len(sents), np.nan)
        pos = 0
        for k, p in enumerate(pieces):
            seg = loss[pos:pos + len(p)]
            seg = seg[~np.isnan(seg)]
            if len(seg):
                out[k] = seg.mean()
            pos += len(p)
        return out

    # ----------------------------------------------------------------- chunks
    def chunk_spans(self, document: Any, *, threshold: float | None = None,
                    merge_target: int | None | str = "default") -> list[tuple[int, int]]:
        """The chunk spans (``threshold`` and ``merge_target`` override the chunker's own for this call)."""
        doc = as_document(document)
        sc, sents = self.scores(doc)
        self.last_scores, self.last_sentences = sc, sents
        self.stats.documents += 1
        th = self.threshold if threshold is None else float(threshold)
        spans = groups_to_spans(sents, ppl_boundaries(sc, th))
        target = self.merge_target if merge_target == "default" else merge_target
        return dynamic_merge(spans, target, length_fn(doc.text, self.merge_unit, self.lm.encode
                                                      if self.merge_unit == "tokens" else None))

    def __call__(self, document: Any) -> list:
        """Chunk ``document`` (a :class:`momoka.text.Document` or a str)."""
        doc = as_document(document)
        return make_chunks(doc, self.chunk_spans(doc))
