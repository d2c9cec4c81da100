"""The session of :class:`~momoka.models.causal_lm.CausalLM`: loading the ONNX model and its tokenizer, the KV
cache and the forward pass, streaming long inputs through the cache (see the scoring conventions in
:mod:`momoka.models.causal_lm`). Scoring (:mod:`momoka.models.causal_score`) and generation
(:mod:`momoka.models.causal_generate`) build on it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import ConfigError, InputError, ModelError
from .causal_llama import RUNTIMES
from .runtime import open_session, resolve_device, resolve_providers


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



#: Tokens per run when a native-only model streams a text it scores: each run returns the logits of its
#: tokens (vocabulary-sized rows: 128 rows of Qwen2.5's 151,936 are 78 MB).
NATIVE_BLOCK = 128


class CausalSession:
    """The ONNX session, tokenizer and KV-cache forward pass of :class:`~momoka.models.causal_lm.CausalLM`
    (which documents the arguments). A model folder whose ``config.json`` names a ``gguf_file`` and no ONNX
    graph (:func:`momoka.models.gguf.write_native_model`) is *native-only*: it generates and scores on the
    native decoder (:mod:`momoka.models.causal_native`), on the CPU."""


    def __init__(
        self,
        model_dir: str | os.PathLike,
        *,
        device: str | None = None,
        threads: int | None = None,
        block: int = 512,
        window: int | None = None,
        runtime: str | None = None,
    ):
        import onnxruntime as ort  # start-up: onnxruntime
        from tokenizers import Tokenizer  # start-up: tokenizers

        if runtime is not None and runtime not in RUNTIMES:
            raise ConfigError(f"runtime must be one of {', '.join(RUNTIMES)}, got {runtime!r}")
        self.runtime = runtime
        self.threads = threads

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
        self.native_only = bool(self.config.get("gguf_file")) and not self.config.get("onnx_file")
        if self.native_only:
            self.block = min(self.block, NATIVE_BLOCK)

        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if threads:
            opts.intra_op_num_threads = int(threads)
            opts.inter_op_num_threads = 1
        onnx_path = self.model_dir / (self.config.get("onnx_file") or "model.onnx")
        if self.native_only:
            gguf = self.model_dir / str(self.config["gguf_file"])
            if not gguf.is_file():
                raise ModelError(f"{gguf} is missing")
            if resolve_device(device) != "cpu":
                raise ConfigError(f"{self.model_dir.name} runs on the native decoder, on the CPU only "
                                  f"(device {device!r} asked for)")
        elif not onnx_path.is_file():
            raise ModelError(f"{onnx_path} is missing")
        self._onnx_path, self._opts, self._device = onnx_path, opts, device
        self._present = [f"present.{i}.{kv}" for i in range(self.n_layers) for kv in ("key", "value")]
        self._past = [f"past_key_values.{i}.{kv}" for i in range(self.n_layers) for kv in ("key", "value")]
        resolve_providers(device)  # an unknown or unusable device fails here, not at the first forward pass
        # where the forward pass runs and the I/O-bound path keeps the KV cache (onnxruntime's OrtDevice names)
        resolved = resolve_device(device)
        self._cpu = resolved == "cpu"
        self._device_type = "cpu" if self._cpu else "cuda"
        self._device_id = 0 if self._cpu else int(resolved.partition(":")[2] or 0)
        self._session = None
        self._opening = threading.Lock()
        if not self._cpu:  # a GPU runs everything through the graph: open it (and check the CUDA provider) now
            self._open()

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

    @property
    def session(self):
        """The onnxruntime session, opened on first use on the CPU: generation on the native decoder or
        llama.cpp never needs it (opening it costs about 0.35 s). A native-only model has none (ModelError)."""
        if self.native_only:
            raise ModelError(f"{self.model_dir.name} has no ONNX graph: it runs on the native decoder only")
        if self._session is None:
            with self._opening:
                if self._session is None:
                    self._open()
        return self._session

    @property
    def providers(self) -> list[str]:
        """The session's execution providers, best first (opens the session)."""
        return self.session.get_providers()

    def _open(self) -> None:
        try:
            session = open_session(self._onnx_path, self._opts, self._device)
        except ConfigError:
            raise
        except Exception as exc:
            raise ModelError(f"cannot load {self._onnx_path} (corrupted or incompatible): {exc}") from exc
        self._check_io(session)
        self._session = session

    # ------------------------------------------------------------------ basics
    def _check_io(self, session) -> None:
        names = {i.name for i in session.get_inputs()}
        outs = {o.name for o in session.get_outputs()}
        need = {"input_ids", "attention_mask", "position_ids", *self._past}
        need_out = {"logits", *self._present}
        missing = sorted(need - names) + sorted(need_out - outs)
        if missing:
            raise ModelError(
                f"{self.model_dir}: the ONNX graph's inputs/outputs do not match a KV-cache causal LM "
                f"(missing {', '.join(missing[:4])}{'...' if len(missing) > 4 else ''})"
            )

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no BOS added; special-token markup is recognised)."""
        if not isinstance(text, str):
            raise InputError(f"expected a str, got {type(text).__name__}")
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = True) -> str:
        """Text of token ids."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def _empty_cache(self, batch: int) -> _Cache:
        import onnxruntime as ort  # start-up: onnxruntime

        z = np.zeros((batch, self.n_kv_heads, 0, self.head_dim), dtype=np.float32)
        v = ort.OrtValue.ortvalue_from_numpy(z) if self._cpu else z
        return _Cache({name: v for name in self._past}, 0)

    def _forward(self, ids: np.ndarray, mask: np.ndarray, pos: np.ndarray, cache: _Cache) -> tuple[np.ndarray, _Cache]:
        """One run: ids/pos [B, S], mask [B, cache + S]; returns logits [B, S, V] and the new cache."""
        import onnxruntime as ort  # start-up: onnxruntime

        feeds = dict(cache.values)
        if not self._cpu:
            return self._forward_bound(ids, mask, pos, cache, feeds)
        # CPU: the cache stays in onnxruntime's OrtValues between runs (no numpy round trip)
        feeds["input_ids"] = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(ids, dtype=np.int64))
        feeds["attention_mask"] = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(mask, dtype=np.int64))
        feeds["position_ids"] = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(pos, dtype=np.int64))
        outs = self.session.run_with_ort_values(["logits"] + self._present, feeds)
        logits = outs[0].numpy()
        values = {past: o for past, o in zip(self._past, outs[1:])}
        return logits, _Cache(values, cache.length + ids.shape[1])

    def _forward_bound(self, ids, mask, pos, cache: _Cache, feeds: dict) -> tuple[np.ndarray, _Cache]:
        """:meth:`_forward` on a device provider: the KV cache stays in device memory between runs
        (onnxruntime's I/O binding); only the token ids go in and the logits come back to the host."""
        binding = self.session.io_binding()
        for name, v in feeds.items():  # past keys/values: device OrtValues, or host arrays (empty or restored)
            if isinstance(v, np.ndarray):
                binding.bind_cpu_input(name, np.ascontiguousarray(v, dtype=np.float32))
            else:
                binding.bind_ortvalue_input(name, v)
        binding.bind_cpu_input("input_ids", np.ascontiguousarray(ids, dtype=np.int64))
        binding.bind_cpu_input("attention_mask", np.ascontiguousarray(mask, dtype=np.int64))
        binding.bind_cpu_input("position_ids", np.ascontiguousarray(pos, dtype=np.int64))
        binding.bind_output("logits", "cpu")
        for name in self._present:
            binding.bind_output(name, self._device_type, self._device_id)
        self.session.run_with_iobinding(binding)
        outs = binding.get_outputs()
        values = {past: o for past, o in zip(self._past, outs[1:])}
        return outs[0].numpy(), _Cache(values, cache.length + ids.shape[1])

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
        if self.native_only:
            return self._stream_native(ids, n_scored, on_block)
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

    def _stream_native(self, ids: Sequence[int], n_scored: int, on_block=None):
        """:meth:`_stream` on the native decoder (a native-only model): the same blocks, window and results;
        the returned cache only counts the tokens the decoder holds (it keeps them itself)."""
        dec = self._native_decoder()
        n = len(ids)
        first_scored = n - n_scored
        out = np.empty(n_scored, dtype=np.float64)
        dec.keep(0)
        prev_logits: np.ndarray | None = None
        start = 0
        while start < n:
            stop = min(n, start + self.block)
            if len(dec.ids) + (stop - start) > self.window:
                keep = list(dec.ids[-(self.window // 2):])
                dec.keep(0)
                for ks in range(0, len(keep), self.block):
                    dec.rows(keep[ks:ks + self.block], 1)
            lo = max(first_scored, start, 1)
            first_row = max(lo - 1, start) if lo < stop else stop - 1  # the rows this block's scores need
            logits = dec.rows(list(ids[start:stop]), stop - first_row)  # after positions first_row .. stop - 1
            if on_block is not None:
                on_block(stop - start)
            if lo < stop:
                j0 = max(lo, start + 1)
                parts = [prev_logits[None, :]] if lo == start else []
                parts.append(logits[j0 - 1 - first_row:stop - 1 - first_row])
                lp = log_softmax(np.concatenate(parts, axis=0) if len(parts) > 1 else parts[0])
                targets = np.asarray(ids[lo:stop])
                out[lo - first_scored:stop - first_scored] = lp[np.arange(len(targets)), targets]
            prev_logits = logits[-1]
            start = stop
        return out, prev_logits, _Cache({}, len(dec.ids)), list(dec.ids)

    def _native_hold(self, ids: Sequence[int]) -> None:
        """Make the native decoder hold exactly ``ids``: what it holds beyond their longest common prefix is
        dropped and the rest of ``ids`` run (a prefix it already holds costs nothing)."""
        dec = self._native_decoder()
        ids = [int(t) for t in ids]
        held = dec.ids
        common = 0
        for a, b in zip(held, ids):
            if a != b:
                break
            common += 1
        dec.keep(common)
        for ks in range(common, len(ids), self.block):
            dec.rows(ids[ks:ks + self.block], 1)

    def _run_one(self, chunk: Sequence[int], cache: _Cache):
        s = len(chunk)
        ids = np.asarray([chunk], dtype=np.int64)
        pos = np.arange(cache.length, cache.length + s, dtype=np.int64)[None, :]
        mask = np.ones((1, cache.length + s), dtype=np.int64)
        return self._forward(ids, mask, pos, cache)

    def _batch(self, seqs: list[list[int]], n_scored: list[int]) -> list[np.ndarray]:
        """Score short sequences together (right padding, one run; one after another on the native decoder)."""
        if self.native_only:
            return [self._stream_native(x, k)[0] for x, k in zip(seqs, n_scored)]
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
