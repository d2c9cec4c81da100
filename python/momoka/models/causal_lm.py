"""A small causal language model on onnxruntime: log-probs, perplexity, generation.

:class:`CausalLM` loads a directory written by :func:`momoka.models.gguf.convert_gguf`
(``model.onnx`` with a KV cache, ``tokenizer.json``, ``config.json``)::

    lm = CausalLM("~/.cache/momoka/models/smollm2-135m-instruct")
    lm.perplexity(["The cat sat on the mat."])          # array([...])
    lm.conditional_perplexity("Who sat?", "The cat sat.")  # ppl(q | d), MoC's edge score
    lm.generate([{"role": "user", "content": "Hi"}], max_new_tokens=32).text

Scoring conventions
-------------------
* A text is scored after a *document start* token (``<|endoftext|>`` when the
  vocabulary has it, else the BOS token), so every token of the text gets a
  log-probability.  A ``context`` is placed between that token and the text; the
  context and the text are tokenised separately and their ids concatenated.
* Long inputs are streamed through the KV cache in blocks of ``block`` tokens,
  each token run once.  When the cache would exceed ``window`` tokens (default:
  the model's context length), the cache is rebuilt from the last ``window // 2``
  tokens with fresh positions starting at 0, and streaming goes on: a sliding
  window with recompute, so every token is scored with at least ``window // 2``
  tokens of context (or all preceding tokens) and rotary positions never exceed
  the trained range.  Short texts are scored together in padded batches.
* Log-probabilities are natural logs (nats); perplexity is ``exp(-mean log p)``.

Device: CPU by default; ``device="cuda"`` or the environment variable
``MOMOKA_DEVICE=cuda`` selects onnxruntime's CUDA provider (onnxruntime-gpu).

Length: one model class, a little over 500 lines: loading, the KV-cache forward pass, log-probs,
perplexity and generation share the session and the cache layout.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import (
    ConfigError,
    EmptyInputError,
    InputError,
    InputTooLargeError,
    ModelError,
)
from .runtime import length_groups, open_session

__all__ = ["CausalLM", "GenerationResult", "log_softmax"]


@dataclass
class GenerationResult:
    """The outcome of :meth:`CausalLM.generate`.

    ``finish_reason`` is ``"stop"`` (an end token or a stop string) or ``"length"``
    (``max_new_tokens`` or the context length reached).
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    token_ids: list[int] = field(default_factory=list)


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Numerically stable log-softmax over the last axis (float32 in, float32 out)."""
    mx = logits.max(axis=-1, keepdims=True)
    z = logits - mx
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


class _Cache:
    """KV cache of one or more sequences: OrtValues per layer plus its length."""

    __slots__ = ("length", "values")

    def __init__(self, values: dict, length: int):
        self.values = values
        self.length = length


class PrefixState:
    """The KV cache of a prefix run once (host arrays), to run many suffixes after it.

    ``length`` tokens, ``last_logits`` the next-token logits after the prefix,
    ``nbytes`` the memory its cache holds. Made by :meth:`CausalLM.prefix_state`.
    """

    __slots__ = ("kv", "last_logits", "length")

    def __init__(self, kv: dict, last_logits: np.ndarray, length: int):
        self.kv, self.last_logits, self.length = kv, last_logits, length

    @property
    def nbytes(self) -> int:
        return sum(v.nbytes for v in self.kv.values()) + self.last_logits.nbytes


def _state_of(cache: _Cache, last_logits: np.ndarray) -> PrefixState:
    """A :class:`PrefixState` holding ``cache`` as host arrays."""
    host = {k: (v.numpy() if hasattr(v, "numpy") else np.asarray(v)) for k, v in cache.values.items()}
    return PrefixState(host, np.asarray(last_logits, dtype=np.float32), cache.length)


class CausalLM:
    """A Llama-architecture ONNX causal LM with a KV cache (see the module docstring).

    ``model_dir`` holds ``model.onnx``, ``tokenizer.json`` and ``config.json``;
    ``device`` is ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` (default: ``MOMOKA_DEVICE`` or cpu;
    see :mod:`momoka.models.runtime`);
    ``threads`` sets onnxruntime's intra-op thread count (default: onnxruntime's).
    ``block`` is the number of tokens run per call when streaming (at most
    ``window // 2``), ``window`` the most tokens the KV cache holds (default: the
    model's context length).
    """

    def __init__(
        self,
        model_dir: str | os.PathLike,
        *,
        device: str | None = None,
        threads: int | None = None,
        block: int = 512,
        window: int | None = None,
    ):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.model_dir = Path(model_dir).expanduser()
        cfg_path = self.model_dir / "config.json"
        if not cfg_path.is_file():
            raise ModelError(f"{self.model_dir} is not a causal LM directory (no config.json)")
        try:
            self.config = json.loads(cfg_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ModelError(f"{cfg_path} is not valid JSON: {exc}") from exc
        try:
            self.tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        except Exception as exc:
            raise ModelError(f"cannot load {self.model_dir / 'tokenizer.json'}: {exc}") from exc
        try:
            self.n_layers = int(self.config["num_hidden_layers"])
            self.n_kv_heads = int(self.config["num_key_value_heads"])
            self.head_dim = int(self.config["head_dim"])
            self.vocab_size = int(self.config["vocab_size"])
            self.max_context = int(self.config.get("max_position_embeddings", 2048))
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelError(f"{cfg_path} lacks model dimensions: {exc}") from exc
        if block < 1:
            raise ConfigError("block must be at least 1")
        self.window = int(window or self.max_context)
        if self.window < 2:
            raise ConfigError("window must be at least 2 tokens")
        self.block = min(int(block), self.window // 2)

        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if threads:
            opts.intra_op_num_threads = int(threads)
            opts.inter_op_num_threads = 1
        onnx_path = self.model_dir / self.config.get("onnx_file", "model.onnx")
        if not onnx_path.is_file():
            raise ModelError(f"{onnx_path} is missing")
        try:
            self.session = open_session(onnx_path, opts, device)
        except ConfigError:
            raise
        except Exception as exc:
            raise ModelError(f"cannot load {onnx_path} (corrupted or incompatible): {exc}") from exc
        self._check_io()
        self.providers = self.session.get_providers()
        self._cpu = self.providers[0] == "CPUExecutionProvider"

        tok = self.tokenizer
        self.bos_id = (self.config.get("bos_token") or {}).get("id")
        self.eos_id = (self.config.get("eos_token") or {}).get("id")
        eot = tok.token_to_id("<|endoftext|>")
        self.doc_start_id = eot if eot is not None else self.bos_id
        if self.doc_start_id is None:
            raise ModelError("the model has neither <|endoftext|> nor a BOS token to start a document with")
        self.pad_id = (self.config.get("pad_token") or {}).get("id", self.eos_id) or 0
        stops = {self.eos_id, eot, tok.token_to_id("<|im_end|>"), tok.token_to_id("<|eot_id|>")}
        self.stop_ids = {s for s in stops if s is not None}

    # ------------------------------------------------------------------ basics
    def _check_io(self) -> None:
        names = {i.name for i in self.session.get_inputs()}
        outs = {o.name for o in self.session.get_outputs()}
        need = {"input_ids", "attention_mask", "position_ids"}
        need |= {f"past_key_values.{i}.{kv}" for i in range(self.n_layers) for kv in ("key", "value")}
        need_out = {"logits"} | {f"present.{i}.{kv}" for i in range(self.n_layers) for kv in ("key", "value")}
        missing = sorted(need - names) + sorted(need_out - outs)
        if missing:
            raise ModelError(
                f"{self.model_dir}: the ONNX graph's inputs/outputs do not match a KV-cache causal LM "
                f"(missing {', '.join(missing[:4])}{'...' if len(missing) > 4 else ''})"
            )
        self._present = [f"present.{i}.{kv}" for i in range(self.n_layers) for kv in ("key", "value")]
        self._past = [f"past_key_values.{i}.{kv}" for i in range(self.n_layers) for kv in ("key", "value")]

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no BOS added; special-token markup is recognised)."""
        if not isinstance(text, str):
            raise InputError(f"expected a str, got {type(text).__name__}")
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = True) -> str:
        """Text of token ids."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def _empty_cache(self, batch: int) -> _Cache:
        import onnxruntime as ort

        z = np.zeros((batch, self.n_kv_heads, 0, self.head_dim), dtype=np.float32)
        v = ort.OrtValue.ortvalue_from_numpy(z) if self._cpu else z
        return _Cache({name: v for name in self._past}, 0)

    def _forward(self, ids: np.ndarray, mask: np.ndarray, pos: np.ndarray, cache: _Cache) -> tuple[np.ndarray, _Cache]:
        """One run: ids/pos [B, S], mask [B, cache + S]; returns logits [B, S, V] and the new cache."""
        import onnxruntime as ort

        feeds = dict(cache.values)
        if not self._cpu:
            # other providers: plain numpy feeds and fetches (onnxruntime copies to and from the device)
            feeds.update(input_ids=np.ascontiguousarray(ids, dtype=np.int64),
                         attention_mask=np.ascontiguousarray(mask, dtype=np.int64),
                         position_ids=np.ascontiguousarray(pos, dtype=np.int64))
            outs = self.session.run(["logits"] + self._present, feeds)
            return outs[0], _Cache(dict(zip(self._past, outs[1:])), cache.length + ids.shape[1])
        # CPU: the cache stays in onnxruntime's OrtValues between runs (no numpy round trip)
        feeds["input_ids"] = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(ids, dtype=np.int64))
        feeds["attention_mask"] = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(mask, dtype=np.int64))
        feeds["position_ids"] = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(pos, dtype=np.int64))
        outs = self.session.run_with_ort_values(["logits"] + self._present, feeds)
        logits = outs[0].numpy()
        values = {past: o for past, o in zip(self._past, outs[1:])}
        return logits, _Cache(values, cache.length + ids.shape[1])

    # ------------------------------------------------------------- streaming
    def _stream(self, ids: Sequence[int], *, n_scored: int | None = None, on_block=None):
        """Run ``ids`` (one sequence) through the cache in blocks.

        Returns ``(logprobs, last_logits, cache, cache_ids)``: ``logprobs[j]`` is
        log P(ids[j] | ids[:j]) for the last ``n_scored`` positions (j >= 1),
        ``last_logits`` the logits after the final token, and the cache with the
        token ids it holds (for continuing generation).
        """
        n = len(ids)
        n_scored = n - 1 if n_scored is None else n_scored
        if not 0 <= n_scored <= n - 1:
            raise InputError("can score at most all tokens but the first")
        first_scored = n - n_scored
        out = np.empty(n_scored, dtype=np.float64)
        cache = self._empty_cache(1)
        cache_ids: list[int] = []
        prev_logits: np.ndarray | None = None  # logits predicting ids[start]
        start = 0
        while start < n:
            stop = min(n, start + self.block)
            if cache.length + (stop - start) > self.window:
                keep = cache_ids[-(self.window // 2):]
                cache = self._empty_cache(1)
                cache_ids = []
                for ks in range(0, len(keep), self.block):
                    chunk = keep[ks:ks + self.block]
                    _, cache = self._run_one(chunk, cache)
                    cache_ids.extend(chunk)
            chunk = list(ids[start:stop])
            logits, cache = self._run_one(chunk, cache)
            cache_ids.extend(chunk)
            if on_block is not None:
                on_block(len(chunk))
            # log P(ids[j] | ids[:j]) for j in [lo, stop): j == start comes from the
            # previous block's last row, j > start from row j - start - 1 of this block
            lo = max(first_scored, start, 1)
            if lo < stop:
                parts = []
                if lo == start:
                    parts.append(prev_logits[None, :])
                row0 = max(lo, start + 1) - start - 1
                parts.append(logits[0, row0:stop - start - 1])
                lp = log_softmax(np.concatenate(parts, axis=0) if len(parts) > 1 else parts[0])
                targets = np.asarray(ids[lo:stop])
                out[lo - first_scored:stop - first_scored] = lp[np.arange(len(targets)), targets]
            prev_logits = logits[0, -1]
            start = stop
        return out, prev_logits, cache, cache_ids

    def _run_one(self, chunk: Sequence[int], cache: _Cache):
        s = len(chunk)
        ids = np.asarray([chunk], dtype=np.int64)
        pos = np.arange(cache.length, cache.length + s, dtype=np.int64)[None, :]
        mask = np.ones((1, cache.length + s), dtype=np.int64)
        return self._forward(ids, mask, pos, cache)

    def _batch(self, seqs: list[list[int]], n_scored: list[int]) -> list[np.ndarray]:
        """Score short sequences together (right padding, one run)."""
        b = len(seqs)
        s = max(len(x) for x in seqs)
        ids = np.full((b, s), self.pad_id, dtype=np.int64)
        mask = np.zeros((b, s), dtype=np.int64)
        for i, x in enumerate(seqs):
            ids[i, :len(x)] = x
            mask[i, :len(x)] = 1
        pos = np.broadcast_to(np.arange(s, dtype=np.int64), (b, s))
        logits, _ = self._forward(ids, mask, pos, self._empty_cache(b))
        res = []
        for i, x in enumerate(seqs):
            n = len(x)
            k = n_scored[i]
            lp = log_softmax(logits[i, n - 1 - k:n - 1])
            res.append(lp[np.arange(k), np.asarray(x[n - k:])].astype(np.float64))
        return res

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
        import onnxruntime as ort

        ids = [int(t) for t in ids]
        if not ids:
            raise InputError("extend_state needs at least one token")
        P, S = state.length, len(ids)
        if P + S > self.window:
            raise InputTooLargeError(f"state ({P}) + {S} tokens exceed the window ({self.window})")
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
        import onnxruntime as ort

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
    def apply_chat_template(self, messages: Sequence[dict], add_generation_prompt: bool = True) -> str:
        """Render chat messages with the model's template (ChatML for SmolLM2).

        ChatML templates are rendered natively: a default system message (taken
        from the template) is inserted when the first message is not a system
        message, then ``<|im_start|>{role}\\n{content}<|im_end|>\\n`` per message,
        then ``<|im_start|>assistant\\n`` when ``add_generation_prompt``.  Other
        templates need ``jinja2``.
        """
        if not isinstance(messages, (list, tuple)) or not messages:
            raise InputError("messages must be a non-empty list of {'role', 'content'} dicts")
        for m in messages:
            if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
                raise InputError(f"bad chat message {m!r}: need str 'role' and 'content'")
        template = self.config.get("chat_template") or ""
        # the ChatML loop body (with real newlines inside the quotes, or escaped ones)
        chatml_body = "'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'"
        tnorm = template.replace("\\n", "\n")
        if not template or chatml_body in tnorm:
            default_system = None
            mt = re.search(r"!= 'system' %\}\{\{ '<\|im_start\|>system\n(.*?)<\|im_end\|>", tnorm, re.DOTALL)
            if mt:
                default_system = mt.group(1)
            parts = []
            if default_system is not None and messages[0]["role"] != "system":
                parts.append(f"<|im_start|>system\n{default_system}<|im_end|>\n")
            for m in messages:
                parts.append(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n")
            if add_generation_prompt:
                parts.append("<|im_start|>assistant\n")
            return "".join(parts)
        try:
            import jinja2
        except ImportError as exc:
            raise ModelError("this model's chat template is not ChatML; rendering it needs jinja2") from exc
        env = jinja2.Environment(undefined=jinja2.StrictUndefined)
        return env.from_string(template).render(
            messages=list(messages), add_generation_prompt=add_generation_prompt,
            bos_token=(self.config.get("bos_token") or {}).get("content", ""),
            eos_token=(self.config.get("eos_token") or {}).get("content", ""),
        )

    # ------------------------------------------------------------ generation
    def prompt_ids(self, prompt_or_messages: str | Sequence[dict]) -> list[int]:
        """The token ids :meth:`generate` runs for a prompt (a str, used as is) or a chat (templated)."""
        prompt = prompt_or_messages if isinstance(prompt_or_messages, str) else self.apply_chat_template(prompt_or_messages)
        ids = self.encode(prompt)
        if self.config.get("add_bos_token") and self.bos_id is not None:
            ids = [self.bos_id] + ids
        if not ids:
            ids = [self.doc_start_id]
        return ids

    def generate(
        self,
        prompt_or_messages: str | Sequence[dict],
        *,
        max_new_tokens: int = 128,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        stop: str | Iterable[str] | None = None,
    ) -> GenerationResult:
        """Continue a prompt (a str, used as is) or a chat (a list of messages, templated).

        ``temperature=0`` is greedy decoding; otherwise tokens are sampled from
        ``softmax(logits / temperature)`` restricted to the top-``top_p`` nucleus,
        with ``seed`` for reproducibility.  Generation stops at an end-of-turn token,
        a ``stop`` string (cut from the text), ``max_new_tokens`` or the context length.
        """
        if temperature < 0 or not (0 < top_p <= 1):
            raise ConfigError("temperature must be >= 0 and top_p in (0, 1]")
        if max_new_tokens < 0:
            raise ConfigError("max_new_tokens must be >= 0")
        ids = self.prompt_ids(prompt_or_messages)
        if len(ids) >= self.max_context:
            raise InputTooLargeError(f"prompt has {len(ids)} tokens; the model's context is {self.max_context}")
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        rng = np.random.default_rng(seed)
        _, logits, cache, _ = self._stream(ids, n_scored=0)
        out: list[int] = []
        finish = "length"
        budget = min(max_new_tokens, self.max_context - len(ids))
        text = ""
        while len(out) < budget:
            tok = self._pick(logits, temperature, top_p, rng)
            if tok in self.stop_ids:
                finish = "stop"
                break
            out.append(tok)
            if stops:
                text = self.decode(out)
                cut = min((text.find(s) for s in stops if s and s in text), default=-1)
                if cut >= 0:
                    text = text[:cut]
                    finish = "stop"
                    break
            if len(out) >= budget:
                break
            lg, cache = self._forward(
                np.asarray([[tok]], dtype=np.int64),
                np.ones((1, cache.length + 1), dtype=np.int64),
                np.asarray([[cache.length]], dtype=np.int64),
                cache,
            )
            logits = lg[0, -1]
        if finish != "stop" or not stops or not text:
            text = self.decode(out)
            if stops:
                cut = min((text.find(s) for s in stops if s and s in text), default=-1)
                if cut >= 0:
                    text, finish = text[:cut], "stop"
        return GenerationResult(text, len(ids), len(out), finish, out)

    @staticmethod
    def _pick(logits: np.ndarray, temperature: float, top_p: float, rng: np.random.Generator) -> int:
        if temperature == 0:
            return int(np.argmax(logits))
        z = logits.astype(np.float64) / temperature
        p = np.exp(z - z.max())
        p /= p.sum()
        if top_p < 1.0:
            order = np.argsort(-p)
            cum = np.cumsum(p[order])
            keep = order[: int(np.searchsorted(cum, top_p) + 1)]
            q = np.zeros_like(p)
            q[keep] = p[keep]
            p = q / q.sum()
        return int(rng.choice(p.size, p=p))
