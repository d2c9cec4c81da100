"""Meta-Chunking's margin-sampling (MSP) chunking (METHODS 1.5, 1.7.6).

For consecutive text ``a`` (the current chunk, or only the previous sentence in
``mode="pair"``) and the next sentence ``b``, the model is asked whether to
split ``a b`` (option 1) or keep it (option 2); the margin is
``P("2") - P("1")`` from a softmax over the full vocabulary at the first
assistant position, with the model's own chat template. ``b`` joins the chunk
when the margin exceeds θ, which starts at 0 and becomes the mean of the last 5
margins once 5 are known.

Differences from the reference: the chat template is the model's (not
hard-coded ChatML); the label ids are the single tokens of "1" and "2" and a
tokenizer that splits either is refused (:class:`ModelError`); ``a`` is capped to
its last ``max_context_tokens`` tokens. ``mode="chunk"`` is sequential (one
forward pass per sentence); ``mode="pair"`` scores every margin in one batched
pass on the shared prompt prefix's KV cache, then runs the θ recursion.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import ConfigError, ModelError
from ...progress import Progress
from ...text import make_chunks
from ._common import as_document, dynamic_merge, groups_to_spans, length_fn, sentence_spans

__all__ = ["MSPChunker", "label_ids", "msp_boundaries"]


def label_ids(lm: Any, labels: Sequence[str] = ("1", "2")) -> list[int]:
    """The single token id of each label; :class:`ModelError` when a label is not one token."""
    out = []
    for lab in labels:
        ids = lm.encode(lab)
        if len(ids) != 1:
            raise ModelError(f"this model's tokenizer encodes {lab!r} as {len(ids)} tokens {ids}; MSP chunking and "
                             f"the granularity router need single-token labels {list(labels)}")
        dec = getattr(lm, "decode", None)
        if dec is not None and dec([ids[0]]).strip() != lab:
            # one token, but not the label's own (an unknown-token id): its probability is not P(label)
            raise ModelError(f"this model's tokenizer has no token for {lab!r} (it encodes as {ids}, which decodes "
                             f"to {dec([ids[0]])!r}); MSP chunking and the granularity router need single-token "
                             f"labels {list(labels)}")
        out.append(ids[0])
    return out


def msp_boundaries(margins: Sequence[float], *, window: int = 5) -> list[int]:
    """Indices ``i`` (margin ``i`` decides sentence ``i + 1``) where the text is split: margin <= θ.

    θ starts at 0 and, once ``window`` margins are known, is the mean of the
    last ``window`` margins including the one just compared (METHODS 1.5).
    """
    theta = 0.0
    out = []
    seen: list[float] = []
    for i, m in enumerate(margins):
        seen.append(float(m))
        if not m > theta:
            out.append(i)
        if len(seen) >= window:
            theta = float(np.mean(seen[-window:]))
    return out


def _common_prefix(seqs: Sequence[Sequence[int]]) -> int:
    if not seqs:
        return 0
    n = min(len(s) for s in seqs)
    first = seqs[0]
    k = 0
    while k < n and all(s[k] == first[k] for s in seqs):
        k += 1
    return k


def next_token_logits(lm: Any, prompts_ids: Sequence[Sequence[int]], *, batch_tokens: int = 2048) -> list[np.ndarray]:
    """Logits after each prompt, with the prompts' common token prefix run once (KV reuse)."""
    if not prompts_ids:
        return []
    k = min(_common_prefix(prompts_ids), min(len(p) for p in prompts_ids) - 1)
    k = max(k, 1)
    return lm.prefix_batch(list(prompts_ids[0][:k]), [list(p[k:]) for p in prompts_ids],
                           want="last_logits", batch_tokens=batch_tokens)


class MSPChunker:
    """Margin-sampling chunking: ``chunker(document) -> list[Chunk]`` (see the module docstring).

    Args:
        lm: a causal LM with a chat template (default: the local default model).
        language: ``"en"`` (prompt ``metachunking.msp_en``, ``a + " " + b``) or ``"zh"``.
        mode: ``"chunk"`` (the current chunk is the context) or ``"pair"`` (the previous sentence).
        max_context_tokens: ``a`` keeps only its last tokens.
        merge_target, merge_unit: dynamic merge as in :class:`PPLChunker`.
        progress: a progress line per sentence boundary judged
            (:class:`momoka.progress.Progress`; None: its default rules, False: silent).

    ``last_margins`` holds the margins of the last document.
    """

    name = "msp"
    #: Chunking runs a model or an LLM: ``momoka index --estimate`` prices it instead of running it.
    runs_model = True

    def __init__(self, lm: Any = None, *, language: str = "en", mode: str = "chunk", max_context_tokens: int = 1024,
                 merge_target: int | None = None, merge_unit: str = "chars", progress: bool | None = None):
        if language not in ("en", "zh"):
            raise ConfigError(f"language must be 'en' or 'zh', not {language!r}")
        if mode not in ("chunk", "pair"):
            raise ConfigError(f"mode must be 'chunk' or 'pair', not {mode!r}")
        length_fn("", merge_unit, encode=len)
        self._lm = lm
        self.language = language
        self.mode = mode
        self.max_context_tokens = int(max_context_tokens)
        self.merge_target = merge_target
        self.merge_unit = merge_unit
        self.progress = progress
        self.last_margins: list[float] = []
        if lm is not None:
            label_ids(lm)

    @property
    def lm(self):
        """The causal LM (the default one is loaded on first use)."""
        if self._lm is None:
            from ...models import default_causal_lm  # start-up: momoka.models

            self._lm = default_causal_lm()
            label_ids(self._lm)
        return self._lm

    def params(self) -> dict:
        """The settings."""
        return {"language": self.language, "mode": self.mode, "max_context_tokens": self.max_context_tokens,
                "merge_target": self.merge_target, "merge_unit": self.merge_unit}

    def _cap(self, a: str) -> str:
        ids = self.lm.encode(a)
        return a if len(ids) <= self.max_context_tokens else self.lm.decode(ids[-self.max_context_tokens:])

    def prompt_ids(self, a: str, b: str) -> list[int]:
        """Token ids of the templated prompt asking whether to split ``a`` | ``b``."""
        from ...llm import prompts  # start-up: momoka.llm.prompts

        a = self._cap(a)
        sep = " " if self.language == "en" else ""
        msgs = prompts.messages(f"metachunking.msp_{self.language}", ab=a + sep + b, a=a, b=b)
        return self.lm.encode(self.lm.apply_chat_template(msgs, add_generation_prompt=True))

    def margins(self, prompts_ids: Sequence[Sequence[int]]) -> np.ndarray:
        """``P("2") - P("1")`` after each prompt (softmax over the full vocabulary)."""
        one, two = label_ids(self.lm)
        out = []
        for lg in next_token_logits(self.lm, prompts_ids):
            z = lg.astype(np.float64)
            p = np.exp(z - z.max())
            p /= p.sum()
            out.append(p[two] - p[one])
        return np.asarray(out, dtype=np.float64)

    def chunk_spans(self, document: Any) -> list[tuple[int, int]]:
        """The chunk spans of ``document``."""
        doc = as_document(document)
        sents = sentence_spans(doc)
        text = doc.text
        st = [text[a:b] for a, b in sents]
        sep = " " if self.language == "en" else ""
        if len(sents) < 2:
            self.last_margins = []
            return groups_to_spans(sents, [])

        with Progress("msp margins", total=len(st) - 1, unit="boundaries",
                      enabled=self.progress) as bar:
            bar.postfix["mode"] = self.mode
            if self.mode == "pair":
                m = self.margins([self.prompt_ids(st[i - 1], st[i]) for i in range(1, len(st))])
                bar.update(len(m))
                self.last_margins = m.tolist()
                ends = msp_boundaries(m)
            else:
                theta, seen, ends, cur = 0.0, [], [], st[0]
                for i in range(1, len(st)):
                    m = float(self.margins([self.prompt_ids(cur, st[i])])[0])
                    bar.update()
                    seen.append(m)
                    if m > theta:
                        cur = cur + sep + st[i]
                    else:
                        ends.append(i - 1)
                        cur = st[i]
                    if len(seen) >= 5:
                        theta = float(np.mean(seen[-5:]))
                self.last_margins = seen
        spans = groups_to_spans(sents, ends)
        return dynamic_merge(spans, self.merge_target,
                             length_fn(text, self.merge_unit, self.lm.encode if self.merge_unit == "tokens" else None))

    def __call__(self, document: Any) -> list:
        """Chunk ``document``."""
        doc = as_document(document)
        return make_chunks(doc, self.chunk_spans(doc))
