"""Scoring with :class:`~momoka.models.causal_lm.CausalLM`: token log-probs of texts (batched, or streamed through
the KV cache), prefix states run once for many suffixes, perplexity and conditional perplexity.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..errors import ConfigError, EmptyInputError, InputError, InputTooLargeError
from .runtime import length_groups

from .causal_session import CausalSession, PrefixState, _Cache, _state_of, log_softmax


class CausalScoring(CausalSession):
    """Log-probs and perplexity (part of :class:`~momoka.models.causal_lm.CausalLM`)."""

    def score_ids(
        self,
        batch: Sequence[tuple[Sequence[int], Sequence[int]]],
        *,
        batch_tokens: int = 4096,
        progress: Callable[[int, int], None] | None = None,
    ) -> list[np.ndarray]:
        """Log P of each target id given its context ids, for many (context, target) pairs.

        Each context must hold at least one id (a document start token, for
        example).  Short pairs run together in padded batches of about
        ``batch_tokens`` tokens; pairs longer than ``block`` stream through the cache.
        ``progress(tokens_done, tokens_total)`` is called after each run.
        """
        for ctx, _ in batch:
            if len(ctx) < 1:
                raise InputError("a scoring context needs at least one token")
        total = sum(len(c) + len(t) for c, t in batch)
        done = 0

        def advance(n: int) -> None:
            nonlocal done
            done += n
            if progress is not None:
                progress(done, total)

        results: list[np.ndarray | None] = [None] * len(batch)
        short: list[int] = []
        for i, (ctx, tgt) in enumerate(batch):
            if len(tgt) == 0:
                results[i] = np.empty(0, dtype=np.float64)
                advance(len(ctx))
            elif len(ctx) + len(tgt) > self.block:
                results[i] = self._stream(list(ctx) + list(tgt), n_scored=len(tgt), on_block=advance)[0]
            else:
                short.append(i)
        short.sort(key=lambda i: len(batch[i][0]) + len(batch[i][1]))
        for group in length_groups(short, lambda i: len(batch[i][0]) + len(batch[i][1]), batch_tokens):
            seqs = [list(batch[i][0]) + list(batch[i][1]) for i in group]
            for i, r in zip(group, self._batch(seqs, [len(batch[i][1]) for i in group])):
                results[i] = r
            advance(sum(len(x) for x in seqs))
        return results  # type: ignore[return-value]

    def prefix_state(self, prefix: Sequence[int]) -> PrefixState:
        """Run ``prefix`` (at least one id, at most ``window``) once; its cache, for :meth:`prefix_batch`."""
        prefix = list(prefix)
        if not prefix:
            raise InputError("a prefix needs at least one token")
        if len(prefix) > self.window:
            raise InputTooLargeError(f"prefix of {len(prefix)} tokens exceeds the window ({self.window})")
        if self.native_only:  # the decoder keeps the cache; the state is the ids (run again if it moved on)
            _, last, _, _ = self._stream(prefix, n_scored=0)
            return PrefixState({"ids": np.asarray(prefix, np.int64)}, np.asarray(last, np.float32), len(prefix))
        _, last, cache, _ = self._stream(prefix, n_scored=0)
        return _state_of(cache, last)

    def prefix_states(self, prefixes: Sequence[Sequence[int]], *, batch_tokens: int = 4096) -> list[PrefixState]:
        """:meth:`prefix_state` for many prefixes, the short ones run together.

        Prefixes of at most ``block`` tokens run in right-padded batches of about
        ``batch_tokens`` tokens (sorted by length, so little padding); each row's
        cache is cut to its own length, which under causal attention with right
        padding is exactly its single run's cache (float rounding of the batched
        matrix products aside). Longer prefixes stream one by one.
        """
        seqs = [list(p) for p in prefixes]
        for p in seqs:
            if not p:
                raise InputError("a prefix needs at least one token")
        if self.native_only:
            return [self.prefix_state(p) for p in seqs]
        out: list[PrefixState | None] = [None] * len(seqs)
        short = sorted((i for i, p in enumerate(seqs) if len(p) <= self.block), key=lambda i: len(seqs[i]))
        for i, p in enumerate(seqs):
            if len(p) > self.block:
                out[i] = self.prefix_state(p)
        for group in length_groups(short, lambda i: len(seqs[i]), batch_tokens):
            b, s = len(group), max(len(seqs[i]) for i in group)
            ids = np.full((b, s), self.pad_id, dtype=np.int64)
            mask = np.zeros((b, s), dtype=np.int64)
            for r, i in enumerate(group):
                ids[r, :len(seqs[i])] = seqs[i]
                mask[r, :len(seqs[i])] = 1
            pos = np.broadcast_to(np.arange(s, dtype=np.int64), (b, s))
            logits, cache = self._forward(ids, mask, pos, self._empty_cache(b))
            host = {k: (v.numpy() if hasattr(v, "numpy") else np.asarray(v)) for k, v in cache.values.items()}
            for r, i in enumerate(group):
                n = len(seqs[i])
                kv = {k: np.ascontiguousarray(v[r:r + 1, :, :n]) for k, v in host.items()}
                out[i] = PrefixState(kv, np.asarray(logits[r, n - 1], dtype=np.float32), n)
        return out  # type: ignore[return-value]

    def extend_state(self, state: PrefixState, ids: Sequence[int]) -> PrefixState:
        """The state of ``state``'s prefix followed by ``ids``, from one run of ``ids`` on its cache.

        ``state`` is not changed (its host arrays are copied into the run), so
        one state can be extended several ways: the incremental decoding of a
        search that branches (ETS's early-terminating beam search). The result
        must fit in ``window`` tokens.
        """
        import onnxruntime as ort  # start-up: onnxruntime

        ids = [int(t) for t in ids]
        if not ids:
            raise InputError("extend_state needs at least one token")
        P, S = state.length, len(ids)
        if P + S > self.window:
            raise InputTooLargeError(f"state ({P}) + {S} tokens exceed the window ({self.window})")
        if self.native_only:
            held = [int(t) for t in state.kv["ids"]]
            self._native_hold(held)
            logits = self._native_decoder().rows(ids, 1)[-1]
            return PrefixState({"ids": np.asarray(held + ids, np.int64)}, logits, P + S)
        vals = {k: np.array(v) for k, v in state.kv.items()}
        if self._cpu:
            vals = {k: ort.OrtValue.ortvalue_from_numpy(v) for k, v in vals.items()}
        logits, cache = self._forward(np.asarray([ids], dtype=np.int64), np.ones((1, P + S), dtype=np.int64),
                                      np.arange(P, P + S, dtype=np.int64)[None, :], _Cache(vals, P))
        return _state_of(cache, logits[0, -1])

    def prefix_batch(
        self,
        prefix: Sequence[int] | PrefixState,
        suffixes: Sequence[Sequence[int]],
        *,
        batch_tokens: int = 1024,
        want: str = "logprobs",
        return_prefix: bool = False,
    ):
        """Run ``prefix`` once and every suffix after it, reusing the prefix's KV cache.

        The prefix (at least one id) goes through the cache once; the suffixes are
        then run in right-padded batches of about ``batch_tokens`` tokens on a copy
        of that cache, with positions continuing after the prefix (so RoPE
        positions are those of ``prefix + suffix``).  With ``want="logprobs"``
        entry ``i`` is ``log P(suffix_i[t] | prefix + suffix_i[:t])`` for every
        token of suffix ``i`` (float64); with ``want="last_logits"`` it is the
        logits after the suffix's last token (float32, vocabulary-sized), the
        next-token distribution a prompt ends on.  ``len(prefix) + len(suffix)``
        must fit in ``window``.  This is the KV reuse of MoC's O(n^2) metrics
        (one context chunk, all its targets in one batch) and of MSP/router
        prompts sharing a template prefix.  With ``return_prefix=True`` the result
        is ``(entries, prefix_logprobs)``, the second ``log P(prefix[t] | prefix[:t])``
        for ``t >= 1``: the prefix's own score, from the same run. ``prefix`` may
        also be a :meth:`prefix_state` made earlier (not with ``return_prefix``),
        so a prefix used with several batches (a passage scored against the
        questions of many calls) runs once.
        """
        import onnxruntime as ort  # start-up: onnxruntime

        if want not in ("logprobs", "last_logits"):
            raise ConfigError(f"want must be 'logprobs' or 'last_logits', not {want!r}")
        if isinstance(prefix, PrefixState):
            if return_prefix:
                raise ConfigError("return_prefix needs the prefix ids, not a prefix state")
        else:
            prefix = list(prefix)
            if not prefix:
                raise InputError("prefix_batch needs a prefix of at least one token")
        n_prefix = prefix.length if isinstance(prefix, PrefixState) else len(prefix)
        longest = max((len(s) for s in suffixes), default=0)
        if n_prefix + longest > self.window:
            raise InputTooLargeError(f"prefix ({n_prefix}) + suffix ({longest}) tokens exceed the window ({self.window})")
        out: list[np.ndarray | None] = [None] * len(suffixes)
        todo = [i for i, s in enumerate(suffixes) if len(s)]
        for i, s in enumerate(suffixes):
            if not len(s):
                out[i] = np.empty(0, np.float64) if want == "logprobs" else None
        n_pre = len(prefix) - 1 if return_prefix else 0
        if not todo:
            if return_prefix:
                return out, self._stream(prefix, n_scored=n_pre)[0]
            return out  # type: ignore[return-value]
        if self.native_only:
            return self._native_prefix_batch(prefix, suffixes, todo, out, want, return_prefix, n_pre)
        if isinstance(prefix, PrefixState):
            state, pre_lp = prefix, None
        else:
            pre_lp, last, cache, _ = self._stream(prefix, n_scored=n_pre)
            state = _state_of(cache, last)
        host, last, P = state.kv, state.last_logits, state.length
        todo.sort(key=lambda i: len(suffixes[i]))
        for group in length_groups(todo, lambda i: len(suffixes[i]), batch_tokens):
            b = len(group)
            S = max(len(suffixes[i]) for i in group)
            ids = np.full((b, S), self.pad_id, dtype=np.int64)
            mask = np.zeros((b, P + S), dtype=np.int64)
            mask[:, :P] = 1
            for r, i in enumerate(group):
                ids[r, :len(suffixes[i])] = suffixes[i]
                mask[r, P:P + len(suffixes[i])] = 1
            pos = np.broadcast_to(np.arange(P, P + S, dtype=np.int64), (b, S))
            vals = {k: np.repeat(v, b, axis=0) for k, v in host.items()}
            if self._cpu:
                vals = {k: ort.OrtValue.ortvalue_from_numpy(v) for k, v in vals.items()}
            logits, _ = self._forward(ids, mask, pos, _Cache(vals, P))
            for r, i in enumerate(group):
                s = list(suffixes[i])
                n = len(s)
                if want == "last_logits":
                    out[i] = logits[r, n - 1].copy()
                    continue
                rows = np.concatenate([last[None, :], logits[r, :n - 1]], axis=0)
                lp = log_softmax(rows)
                out[i] = lp[np.arange(n), np.asarray(s)].astype(np.float64)
        return (out, pre_lp) if return_prefix else out  # type: ignore[return-value]

    def _native_prefix_batch(self, prefix, suffixes, todo, out, want, return_prefix, n_pre):
        """:meth:`prefix_batch` on the native decoder: the prefix runs once (or not at all when the decoder
        still holds it), each suffix after it, then what the suffix added is dropped."""
        if isinstance(prefix, PrefixState):
            ids, last, pre_lp = [int(t) for t in prefix.kv["ids"]], prefix.last_logits, None
            self._native_hold(ids)
        else:
            ids = list(prefix)
            pre_lp, last, _, _ = self._stream(ids, n_scored=n_pre)
        dec = self._native_decoder()
        P = len(ids)
        for i in todo:
            s = [int(t) for t in suffixes[i]]
            dec.keep(P)
            if want == "last_logits":
                out[i] = dec.rows(s, 1)[-1].copy()
                continue
            logits = dec.rows(s, len(s))
            rows = np.concatenate([np.asarray(last)[None, :], logits[:-1]], axis=0)
            out[i] = log_softmax(rows)[np.arange(len(s)), np.asarray(s)].astype(np.float64)
        dec.keep(P)
        return (out, pre_lp) if return_prefix else out

    def stream_logprobs(self, ids: Sequence[int], *, n_scored: int | None = None, on_block=None) -> np.ndarray:
        """log P(ids[j] | ids[:j]) for the last ``n_scored`` ids (default all but the first), streamed.

        Tokens run once, in blocks of ``block`` through the KV cache; past
        ``window`` tokens the cache is rebuilt from the last ``window // 2`` tokens
        with fresh positions (no in-place trimming of a RoPE cache).
        ``on_block(n_tokens)`` is called after each block.
        """
        return self._stream(list(ids), n_scored=n_scored, on_block=on_block)[0]

    # -------------------------------------------------------------- scoring
    def context_ids(self, context: str | None) -> list[int]:
        """The ids a scored text is conditioned on: the document start token, then ``context``."""
        ids = [self.doc_start_id]
        if context:
            ids += self.encode(context)
        return ids

    def token_logprobs(self, text: str, *, context: str | None = None, progress=None) -> np.ndarray:
        """log P of each token of ``text`` given ``context`` (or the document start token).

        Returns a float64 array with one entry per token of ``self.encode(text)``.
        """
        ids = self.encode(text)
        if not ids:
            raise EmptyInputError("cannot score an empty text")
        return self.score_ids([(self.context_ids(context), ids)], progress=progress)[0]

    def token_logprobs_batch(
        self, texts: Sequence[str], contexts: Sequence[str | None] | None = None, *, progress=None
    ) -> list[np.ndarray]:
        """:meth:`token_logprobs` for many texts at once (batched); ``progress`` as in :meth:`score_ids`."""
        if contexts is not None and len(contexts) != len(texts):
            raise InputError("texts and contexts must have the same length")
        pairs = []
        for i, t in enumerate(texts):
            ids = self.encode(t)
            if not ids:
                raise EmptyInputError(f"text {i} is empty: cannot score it")
            pairs.append((self.context_ids(contexts[i] if contexts is not None else None), ids))
        return self.score_ids(pairs, progress=progress)

    def text_logprobs(self, text: str) -> tuple[list[tuple[int, int]], np.ndarray]:
        """Every token of ``text`` with its character span and log P given the tokens before it.

        ``text`` is tokenised whole (as a server tokenises an echoed prompt) and
        conditioned on the document start token only, so the first token has a
        log-probability too. Returns ``(spans, logprobs)``: one ``(start, end)``
        character span of ``text`` and one float64 per token.
        """
        if not isinstance(text, str):
            raise InputError(f"expected a str, got {type(text).__name__}")
        enc = self.tokenizer.encode(text, add_special_tokens=False)
        if not enc.ids:
            raise EmptyInputError("cannot score an empty text")
        lps = self.score_ids([([self.doc_start_id], enc.ids)])[0]
        return [(int(a), int(b)) for a, b in enc.offsets], lps

    def perplexity(self, texts: str | Sequence[str], *, progress=None) -> np.ndarray:
        """Perplexity ``exp(-mean log p)`` of each text (given the document start token).

        An empty list gives an empty array; an empty text raises EmptyInputError.
        """
        if isinstance(texts, str):
            texts = [texts]
        lps = self.token_logprobs_batch(list(texts), progress=progress)
        return np.asarray([float(np.exp(-lp.mean())) for lp in lps], dtype=np.float64)

    def conditional_perplexity(self, q: str, d: str) -> float:
        """ppl(q | d): perplexity of ``q``'s tokens when ``d`` precedes them (MoC's Edge(q|d))."""
        lp = self.token_logprobs(q, context=d)
        return float(np.exp(-lp.mean()))

    def conditional_perplexities(self, qs: Sequence[str], ds: Sequence[str]) -> np.ndarray:
        """Batched :meth:`conditional_perplexity` over pairs ``(qs[i], ds[i])``."""
        lps = self.token_logprobs_batch(list(qs), list(ds))
        return np.asarray([float(np.exp(-lp.mean())) for lp in lps], dtype=np.float64)

    def continuation_logprob(self, prompt: str, continuation: str, *, mean: bool = False) -> float:
        """Sum (or with ``mean=True`` the mean) of log P(continuation tokens | prompt)."""
        lp = self.token_logprobs(continuation, context=prompt)
        return float(lp.mean() if mean else lp.sum())

    # ------------------------------------------------------------ chat
