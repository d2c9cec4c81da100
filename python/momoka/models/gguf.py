"""GGUF to ONNX conversion without torch.

:func:`convert_gguf` reads a GGUF file (llama.cpp's model format) with
:class:`~momoka.models.gguf_file.GGUFFile` and numpy, and writes a directory that
:class:`momoka.models.causal_lm.CausalLM` loads:

* ``model.onnx`` (+ ``model.onnx.data``): a Llama-architecture graph with a KV
  cache (see :mod:`momoka.models.gguf_graph` for its inputs and outputs);
* ``tokenizer.json``: the GGUF vocabulary and merges as a ``tokenizers`` BPE;
* ``config.json``: dimensions, rope settings, special token ids, the chat
  template and how the weights were stored.

Weights (``weights=``):

* ``"fp32"``: every matrix dequantised to float32 (largest, the reference);
* ``"int8"``: ``MatMulNBits`` 8-bit blocks of 32 holding the GGUF's own codes and
  scales (exact weights for every block type; float offsets as integer zero points
  plus a per-block correction), run with int8 activations (onnxruntime's
  accuracy level 4, its only fast 8-bit CPU path);
* ``"int4"``: ``MatMulNBits`` 4-bit blocks of 32 with float32 activations, exact:
  Q4_0/Q4_1 codes directly; tensors stored with more than 4 bits in the GGUF (a
  Q8_0 output head, Q5_x) as two 4-bit planes (high and low nibbles) summed.

Float tensors (F32/F16/BF16) become 8-bit blocks in the quantised formats.

The token embedding lookup is always a float32 ``Gather``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .._files import sha256_file
from ..errors import ConfigError, ModelError, UnsupportedModelError
from . import gguf_quant as gq
from .gguf_file import GGUFFile

WEIGHTS = ("fp32", "int8", "int4")
SUPPORTED_ARCHITECTURES = ("llama",)
#: Architectures momoka's native decoder runs (:mod:`momoka.models.causal_native`): ``qwen2`` is a Llama with
#: biases on the queries, keys and values and rotate-half ("NeoX") rotary embeddings stored as is.
NATIVE_ARCHITECTURES = ("llama", "qwen2")
FORMAT_VERSION = 2
MODEL_FILE = "model.onnx"

ProgressFn = Callable[[int, int, str], None]
_MISSING = object()




class GGUFModel:
    """Metadata and raw tensors of a GGUF file, checked for completeness (read by
    :class:`~momoka.models.gguf_file.GGUFFile`: metadata decoded on first use, tensors memory-mapped)."""

    def __init__(self, path: str | os.PathLike):
        self.file = GGUFFile(path)
        self.path = self.file.path
        self.tensors = self.file.tensors
        self.arch = str(self.get("general.architecture", ""))

    def get(self, key: str, default=None, *, required: bool = False):
        """A metadata value (decoded on first use); ``required`` raises ModelError when missing."""
        value = self.file.get(key, _MISSING)
        if value is _MISSING:
            if required:
                raise ModelError(f"{self.path.name}: GGUF metadata {key!r} is missing")
            return default
        return value

    def length(self, key: str) -> int | None:
        """The number of elements of an array metadata value, without decoding it (None when not an array)."""
        return self.file.array_length(key)

    def arch_key(self, suffix: str, default=None, *, required: bool = False):
        """``{architecture}.{suffix}`` metadata."""
        return self.get(f"{self.arch}.{suffix}", default, required=required)

    def raw(self, name: str) -> tuple[np.ndarray, int, int]:
        """(raw uint8 rows, GGML type id, row width K) of a tensor."""
        t = self.tensors.get(name)
        if t is None:
            raise ModelError(f"{self.path.name}: tensor {name!r} is missing")
        qtype = int(t.tensor_type)
        gq.check_supported(qtype, name)
        k = int(t.shape[0])
        rows = int(np.prod([int(s) for s in t.shape[1:]])) if len(t.shape) > 1 else 1
        return self.file.data(name).reshape(rows, -1), qtype, k  # GGUFFile sized it as rows of row_bytes

    def has(self, name: str) -> bool:
        """Whether the file holds a tensor of that name."""
        return name in self.tensors


def _unpermute_rows(raw: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo llama.cpp's Q/K row interleaving (GGUF -> Hugging Face rotate-half order).

    llama.cpp's converter stores, per head, HF rows ``[r_0..r_{d/2-1}, r_{d/2}..r_{d-1}]``
    as ``[r_0, r_{d/2}, r_1, r_{d/2+1}, ...]``; rows are output features, so this is a
    row permutation and quantisation blocks (along the input dimension) stay intact.
    """
    rows = raw.shape[0]
    d = rows // n_heads
    return np.ascontiguousarray(
        raw.reshape(n_heads, d // 2, 2, *raw.shape[1:]).swapaxes(1, 2).reshape(raw.shape)
    )


def read_dims(m: GGUFModel, architectures: tuple[str, ...] = SUPPORTED_ARCHITECTURES):
    """Llama dimensions from GGUF metadata (raises on unsupported settings); ``architectures`` are the
    ``general.architecture`` values accepted (the ONNX converter's by default)."""
    from .gguf_graph import LlamaDims  # start-up: momoka.models.gguf_graph

    if m.arch not in architectures:
        raise UnsupportedModelError(
            f"GGUF architecture {m.arch or '(none)'!r} is not supported "
            f"(supported: {', '.join(architectures)})"
        )
    n_layers = int(m.arch_key("block_count", required=True))
    hidden = int(m.arch_key("embedding_length", required=True))
    n_heads = int(m.arch_key("attention.head_count", required=True))
    n_kv = int(m.arch_key("attention.head_count_kv", n_heads))
    head_dim = int(m.arch_key("attention.key_length", hidden // n_heads))
    rope_dim = int(m.arch_key("rope.dimension_count", head_dim))
    if head_dim * n_heads != hidden or rope_dim != head_dim or n_heads % n_kv:
        raise UnsupportedModelError(
            f"unsupported attention shape: hidden {hidden}, heads {n_heads}/{n_kv}, "
            f"head dim {head_dim}, rotary dim {rope_dim}"
        )
    scaling = str(m.arch_key("rope.scaling.type", "none") or "none")
    factor = float(m.arch_key("rope.scaling.factor", 1.0) or 1.0)
    if scaling not in ("none", "linear"):
        raise UnsupportedModelError(f"rope scaling {scaling!r} is not supported (supported: none, linear)")
    n_tokens = m.length("tokenizer.ggml.tokens")
    if n_tokens is None:
        raise ModelError(f"{m.path.name}: GGUF metadata 'tokenizer.ggml.tokens' is missing")
    return LlamaDims(
        n_layers=n_layers,
        hidden=hidden,
        n_heads=n_heads,
        n_kv_heads=n_kv,
        head_dim=head_dim,
        ffn=int(m.arch_key("feed_forward_length", required=True)),
        vocab=int(m.arch_key("vocab_size", n_tokens)),
        eps=float(m.arch_key("attention.layer_norm_rms_epsilon", 1e-5)),
        rope_theta=float(m.arch_key("rope.freq_base", 10000.0)),
        rope_linear_factor=factor if scaling == "linear" else 1.0,
    )


def _weight_source(m: GGUFModel, dims, weights: str, stats: dict):
    bits = {"fp32": 0, "int8": 8, "int4": 4}[weights]

    def weight(name: str):
        if name == "output.tied":
            name_src = "token_embd.weight"
        else:
            name_src = name
        if not m.has(name_src):
            if name.endswith(".bias") or name == "output.weight":
                return None
            raise ModelError(f"{m.path.name}: tensor {name_src!r} is missing")
        raw, qtype, k = m.raw(name_src)
        if ".attn_q." in name:
            raw = _unpermute_rows(raw, dims.n_heads)
        elif ".attn_k." in name:
            raw = _unpermute_rows(raw, dims.n_kv_heads)
        is_matrix = raw.shape[0] > 1 and name != "token_embd.weight"
        if not is_matrix:
            return gq.dequantize(raw, qtype, k).reshape(-1) if raw.shape[0] == 1 else gq.dequantize(raw, qtype, k)
        if bits == 0:
            stats["fp32"] = stats.get("fp32", 0) + 1
            return gq.dequantize(raw, qtype, k)
        nb = gq.to_nbits(raw, qtype, k, bits)
        planes = "2x4-bit" if nb.extra is not None else f"{nb.bits}-bit"
        key = f"{planes} {'exact' if nb.exact else 're-quantised'} from {gq.type_name(qtype)}"
        stats[key] = stats.get(key, 0) + 1
        return nb

    return weight


def _shape_fields(dims) -> dict:
    """The model's shape as config.json records it (both model folders: ONNX and native)."""
    return {"hidden_size": dims.hidden, "num_hidden_layers": dims.n_layers, "num_attention_heads": dims.n_heads,
            "num_key_value_heads": dims.n_kv_heads, "head_dim": dims.head_dim, "intermediate_size": dims.ffn,
            "vocab_size": dims.vocab}


def _token_fields(m, dims, tokens) -> dict:
    """Norm, rotary base, head tying, special tokens and chat template as config.json records them."""
    return {"rms_norm_eps": dims.eps, "rope_theta": dims.rope_theta, "tie_word_embeddings": not m.has("output.weight"),
            "bos_token": _special_token(m, "bos", tokens), "eos_token": _special_token(m, "eos", tokens),
            "pad_token": _special_token(m, "padding", tokens), "unk_token": _special_token(m, "unknown", tokens),
            "add_bos_token": bool(m.get("tokenizer.ggml.add_bos_token", False)),
            "chat_template": m.get("tokenizer.chat_template")}


def _special_token(m: GGUFModel, key: str, tokens) -> dict | None:
    tid = m.get(f"tokenizer.ggml.{key}_token_id")
    if tid is None or not (0 <= int(tid) < len(tokens)):
        return None
    return {"id": int(tid), "content": tokens[int(tid)]}


def _atomic_write(path: Path, data: bytes | str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(tmp, mode, **({} if isinstance(data, bytes) else {"encoding": "utf-8"})) as f:
        f.write(data)
    os.replace(tmp, path)


def convert_gguf(
    gguf_path: str | os.PathLike,
    out_dir: str | os.PathLike,
    weights: str = "int8",
    *,
    progress: ProgressFn | None = None,
) -> Path:
    """Convert a Llama GGUF file into an ONNX model directory; return ``out_dir``.

    ``weights`` is ``"fp32"``, ``"int8"`` or ``"int4"`` (see the module docstring).
    ``progress(step, total, message)`` is called as layers are written.
    Raises :class:`UnsupportedModelError` for an unsupported architecture, tokenizer
    or quantisation type (named in the message) and :class:`ModelError` for a
    corrupted or truncated file.
    """
    import onnx  # start-up: onnx

    from .gguf_graph import build_llama_graph  # start-up: momoka.models.gguf_graph
    from .gguf_tokenizer import build_tokenizer  # start-up: momoka.models.gguf_tokenizer

    if weights not in WEIGHTS:
        raise ConfigError(f"weights must be one of {', '.join(WEIGHTS)}, not {weights!r}")
    m = GGUFModel(gguf_path)
    dims = read_dims(m)
    tokens = list(m.get("tokenizer.ggml.tokens", required=True))
    if dims.vocab != len(tokens):
        raise ModelError(f"{m.path.name}: vocab_size {dims.vocab} but {len(tokens)} tokens")
    tokenizer = build_tokenizer(
        str(m.get("tokenizer.ggml.model", "gpt2")),
        m.get("tokenizer.ggml.pre"),
        tokens,
        list(m.get("tokenizer.ggml.merges", [])),
        m.get("tokenizer.ggml.token_type"),
    )
    # check every tensor type up front, so an unsupported one fails before any work
    for name, t in m.tensors.items():
        gq.check_supported(int(t.tensor_type), name)

    stats: dict[str, int] = {}
    model = build_llama_graph(dims, _weight_source(m, dims, weights, stats), progress=progress,
                              name=str(m.get("general.name", "llama")))

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data_name = MODEL_FILE + ".data"
    # write graph + data into a scratch directory, then move both into place
    scratch = Path(tempfile.mkdtemp(prefix=".convert-", dir=out))
    try:
        onnx.save_model(model, str(scratch / MODEL_FILE), save_as_external_data=True,
                        all_tensors_to_one_file=True, location=data_name, size_threshold=1024)
        del model
        for f in (scratch / data_name, scratch / MODEL_FILE):
            f.chmod(0o644)
        os.replace(scratch / data_name, out / data_name)
        os.replace(scratch / MODEL_FILE, out / MODEL_FILE)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    _atomic_write(out / "tokenizer.json", tokenizer.to_str())
    config = {
        "momoka_format": FORMAT_VERSION,
        "architecture": m.arch,
        "model_type": "llama",
        "name": m.get("general.name"),
        "onnx_file": MODEL_FILE,
        "weights": weights,
        "weights_detail": stats,
        **_shape_fields(dims),
        "max_position_embeddings": int(m.arch_key("context_length", 2048)),
        "rope_scaling": None if dims.rope_linear_factor == 1.0 else {"type": "linear", "factor": dims.rope_linear_factor},
        **_token_fields(m, dims, tokens),
        "source": {
            "file": m.path.name,
            "sha256": sha256_file(m.path),
            "file_type": gq.type_name(int(m.get("general.file_type", -1))) if m.get("general.file_type") is not None else None,
        },
    }
    _atomic_write(out / "config.json", json.dumps(config, indent=2, ensure_ascii=False))
    if progress:
        progress(dims.n_layers + 1, dims.n_layers + 1, "done")
    return out


#: The window momoka runs a native-only model with (tokens of prompt plus answer, and of a scored text before
#: the sliding window starts): a model's own context may be far longer (Qwen2.5: 32,768), and its key/value
#: cache grows with the tokens held.
NATIVE_CONTEXT = 8192


def write_native_model(gguf_path: str | os.PathLike, out_dir: str | os.PathLike, *, sha256: str | None = None) -> Path:
    """Describe a GGUF that sits in ``out_dir`` for :class:`~momoka.models.causal_lm.CausalLM` without converting
    it: ``tokenizer.json`` (the GGUF's vocabulary and merges) and ``config.json`` (dimensions, special tokens,
    chat template, ``"gguf_file"``: the file's name, no ONNX graph), so that it generates and scores on the
    native decoder (:mod:`momoka.models.causal_native`). ``sha256``: the file's, when already known.

    Raises UnsupportedModelError for an architecture, tokenizer or tensor type the native decoder does not run.
    """
    from .gguf_tokenizer import build_tokenizer  # start-up: momoka.models.gguf_tokenizer

    m = GGUFModel(gguf_path)
    dims = read_dims(m, NATIVE_ARCHITECTURES)
    out = Path(out_dir)
    if m.path.parent.resolve() != out.resolve():
        raise ConfigError(f"{m.path} must sit in {out}")
    tokens = list(m.get("tokenizer.ggml.tokens", required=True))
    if dims.vocab != len(tokens):
        raise ModelError(f"{m.path.name}: vocab_size {dims.vocab} but {len(tokens)} tokens")
    for name, t in m.tensors.items():
        gq.check_supported(int(t.tensor_type), name)
    tokenizer = build_tokenizer(str(m.get("tokenizer.ggml.model", "gpt2")), m.get("tokenizer.ggml.pre"), tokens,
                                list(m.get("tokenizer.ggml.merges", [])), m.get("tokenizer.ggml.token_type"))
    _atomic_write(out / "tokenizer.json", tokenizer.to_str())
    context = int(m.arch_key("context_length", 2048))
    config = {
        "momoka_format": FORMAT_VERSION,
        "architecture": m.arch,
        "model_type": m.arch,
        "name": m.get("general.name"),
        "gguf_file": m.path.name,
        "runtime": "native",
        **_shape_fields(dims),
        "context_length": context,
        "max_position_embeddings": min(context, NATIVE_CONTEXT),
        **_token_fields(m, dims, tokens),
        "source": {
            "file": m.path.name,
            "sha256": sha256 or sha256_file(m.path),
            "general.file_type": m.get("general.file_type"),  # llama.cpp's file type number (15: Q4_K_M)
        },
    }
    _atomic_write(out / "config.json", json.dumps(config, indent=2, ensure_ascii=False))
    return out
