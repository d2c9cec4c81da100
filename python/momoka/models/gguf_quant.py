"""GGUF tensor blocks in numpy: dequantisation and re-packing for MatMulNBits.

GGUF stores a 2-D weight as rows of ``K`` values (``K`` = input features, the
contiguous dimension), one row per output feature, each row cut into blocks
of 32 values.  This module reads those blocks without any native helper:

* :func:`dequantize` turns the raw rows of a supported type into float32.
* :func:`native_matrix` lays a tensor out for momoka's native decoder, exactly: the
  K-quant superblocks of 256 values map onto its blocks of 32 without loss (Q4_K's
  ``d * sc * q - dmin * m`` per sub-block of 32 is a 4-bit code with one scale
  ``d * sc`` and offset ``-dmin * m``; Q6_K's ``d * sc * (q - 32)`` per sub-block of
  16 is a signed 8-bit code ``q - 32`` with a scale ``d * sc`` per 16 values; both
  products are exact in float32).
* :func:`to_nbits` maps a tensor onto onnxruntime's ``MatMulNBits`` layout
  (``B`` packed ``[N, n_blocks, blob]``, ``scales`` and integer ``zero_points``
  per block, plus an optional per-block correction).  Block-quantised sources
  map exactly: Q4_1's ``d * q + m`` becomes ``(q - z) * d + (m + d * z)`` with
  the integer ``z`` nearest to ``-m / d``.  (onnxruntime's CPU kernel also
  accepts float zero points, but only on a slow path that dequantises the whole
  matrix on every call, so they are not used.)  Float sources are re-quantised
  to asymmetric 8-bit blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UnsupportedModelError

QK = 32  # values per block of the legacy types (and per sub-block of Q4_K)
QK_K = 256  # values per superblock of the K-quant types

# GGML type ids (ggml.h); names are used in error messages.
F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, BF16 = 0, 1, 2, 3, 6, 7, 8, 30
Q4_K, Q6_K = 12, 14
TYPE_NAMES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0",
    9: "Q8_1", 10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K",
    16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S",
    22: "IQ2_S", 23: "IQ4_XS", 24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64",
    29: "IQ1_M", 30: "BF16", 34: "TQ1_0", 35: "TQ2_0",
}
# bytes per block of QK values
BLOCK_BYTES = {Q4_0: 18, Q4_1: 20, Q5_0: 22, Q5_1: 24, Q8_0: 34}
# bytes per superblock of QK_K values
K_BLOCK_BYTES = {Q4_K: 144, Q6_K: 210}
SUPPORTED = (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q6_K)


def block_values(t: int) -> int:
    """Values per block of type ``t`` (1 for the float types)."""
    t = int(t)
    return QK if t in BLOCK_BYTES else QK_K if t in K_BLOCK_BYTES else 1


def type_name(t: int) -> str:
    """The GGML name of a tensor type id (``"Q4_1"``), or ``"type <id>"``."""
    return TYPE_NAMES.get(int(t), f"type {int(t)}")


def check_supported(t: int, tensor: str) -> None:
    """Raise :class:`UnsupportedModelError` unless type ``t`` can be read."""
    if int(t) not in SUPPORTED:
        names = ", ".join(type_name(s) for s in SUPPORTED)
        raise UnsupportedModelError(
            f"tensor {tensor!r} uses the unsupported GGUF quantisation type {type_name(t)} "
            f"(supported: {names})"
        )


def row_bytes(t: int, k: int) -> int:
    """Bytes of one row of ``k`` values of type ``t``."""
    t = int(t)
    if t == F32:
        return 4 * k
    if t in (F16, BF16):
        return 2 * k
    if t in K_BLOCK_BYTES:
        return (k // QK_K) * K_BLOCK_BYTES[t]
    return (k // QK) * BLOCK_BYTES[t]


def _kblocks(raw: np.ndarray, t: int, k: int) -> np.ndarray:
    if k % QK_K:
        raise UnsupportedModelError(f"{type_name(t)} rows of {k} values are not whole superblocks of {QK_K}")
    return np.asarray(raw, dtype=np.uint8).reshape(raw.shape[0], k // QK_K, K_BLOCK_BYTES[t])


def q4k_values(raw: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Codes, scales and offsets of Q4_K rows per sub-block of 32 (ggml's ``dequantize_row_q4_K``).

    Returns ``(q, d, m)``: ``q`` uint8 ``(rows, k // 32, 32)`` codes 0..15 in value order, ``d`` and ``m``
    float32 ``(rows, k // 32)`` with ``value = d * q + m`` (``d`` = superblock ``d`` times the 6-bit scale,
    ``m`` = minus superblock ``dmin`` times the 6-bit min; both products exact in float32).
    """
    b = _kblocks(raw, Q4_K, k)
    d = _f16(b[..., 0:2])[..., 0]
    dmin = _f16(b[..., 2:4])[..., 0]
    sc = b[..., 4:16].astype(np.uint8)
    # 6-bit scales and mins of the 8 sub-blocks (ggml's get_scale_min_k4)
    scale = np.empty(sc.shape[:-1] + (8,), np.uint8)
    mins = np.empty_like(scale)
    scale[..., :4] = sc[..., 0:4] & 63
    mins[..., :4] = sc[..., 4:8] & 63
    scale[..., 4:] = (sc[..., 8:12] & 0x0F) | ((sc[..., 0:4] >> 6) << 4)
    mins[..., 4:] = (sc[..., 8:12] >> 4) | ((sc[..., 4:8] >> 6) << 4)
    qs = b[..., 16:144].reshape(b.shape[0], b.shape[1], 4, 32)  # 4 chunks of 64 values: low nibbles, high
    q = np.empty(qs.shape[:3] + (2, 32), np.uint8)
    np.bitwise_and(qs, 0x0F, out=q[..., 0, :])
    np.right_shift(qs, 4, out=q[..., 1, :])
    q = q.reshape(b.shape[0], b.shape[1] * 8, 32)
    dd = (d[..., None] * scale.astype(np.float32)).reshape(b.shape[0], -1)
    mm = -(dmin[..., None] * mins.astype(np.float32)).reshape(b.shape[0], -1)
    return q, dd.astype(np.float32), mm.astype(np.float32)


def q6k_values(raw: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Codes and scales of Q6_K rows per sub-block of 16 (ggml's ``dequantize_row_q6_K``).

    Returns ``(q, d)``: ``q`` int8 ``(rows, k // 16, 16)`` codes -32..31 in value order and ``d`` float32
    ``(rows, k // 16)`` with ``value = d * q`` (``d`` = superblock ``d`` times the int8 scale, exact in float32).
    """
    b = _kblocks(raw, Q6_K, k)
    rows, nsb = b.shape[0], b.shape[1]
    ql = b[..., 0:128].reshape(rows, nsb, 2, 64)  # two halves of 128 values
    qh = b[..., 128:192].reshape(rows, nsb, 2, 32)
    sc = np.ascontiguousarray(b[..., 192:208]).view(np.int8)
    d = _f16(b[..., 208:210])[..., 0]
    lo, hi = ql[..., :32], ql[..., 32:]
    q = np.empty((rows, nsb, 2, 4, 32), np.uint8)  # (half, 4 groups of 32, 32): value order
    for g, (low, shift) in enumerate(((lo, None), (hi, None), (lo, 4), (hi, 4))):
        out = q[:, :, :, g]
        if shift is None:
            np.bitwise_and(low, 0x0F, out=out)
        else:
            np.right_shift(low, 4, out=out)
        out |= ((qh >> (2 * g)) & 3) << 4
    q -= 32  # 0..63 -> -32..31 as two's complement bytes
    q = q.view(np.int8).reshape(rows, nsb * 16, 16)
    dd = (d[..., None] * sc.astype(np.float32)).reshape(rows, -1)
    return q, dd.astype(np.float32)


def _f16(raw: np.ndarray) -> np.ndarray:
    """Little-endian float16 stored as 2 uint8 columns -> float32."""
    return np.ascontiguousarray(raw).view("<f2").astype(np.float32)


def _blocks(raw: np.ndarray, t: int, k: int) -> np.ndarray:
    rows = raw.shape[0]
    return np.asarray(raw, dtype=np.uint8).reshape(rows, k // QK, BLOCK_BYTES[t])


def _nibbles(qs: np.ndarray) -> np.ndarray:
    """16 bytes per block -> 32 values: low nibbles are values 0..15, high 16..31."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=-1)


def _high_bits(qh: np.ndarray) -> np.ndarray:
    """4 bytes per block (little-endian uint32) -> bit j of value j, as 0/16."""
    bits = np.unpackbits(qh, axis=-1, bitorder="little")  # (..., 32), bit j = value j
    return bits.astype(np.uint8) << 4


def quant_values(raw: np.ndarray, t: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Integer codes, scales and offsets of a block-quantised tensor.

    Returns ``(q, d, m)`` with ``q`` of shape ``(rows, n_blocks, 32)`` (uint8 for
    the unsigned types, int8 for Q8_0) and ``d``, ``m`` of shape ``(rows, n_blocks)``
    such that ``value = d * q + m`` (Q4_0: ``m = -8 d``; Q5_0: ``m = -16 d``; Q8_0: ``m = 0``).
    """
    t = int(t)
    b = _blocks(raw, t, k)
    d = _f16(b[..., 0:2])[..., 0]
    if t == Q8_0:
        q = np.ascontiguousarray(b[..., 2:34]).view(np.int8)
        return q, d, np.zeros_like(d)
    if t == Q4_0:
        return _nibbles(b[..., 2:18]), d, -8.0 * d
    if t == Q4_1:
        m = _f16(b[..., 2:4])[..., 0]
        return _nibbles(b[..., 4:20]), d, m
    if t == Q5_0:
        q = _nibbles(b[..., 6:22]) | _high_bits(b[..., 2:6])
        return q, d, -16.0 * d
    if t == Q5_1:
        m = _f16(b[..., 2:4])[..., 0]
        q = _nibbles(b[..., 8:24]) | _high_bits(b[..., 4:8])
        return q, d, m
    raise UnsupportedModelError(f"{type_name(t)} is not a block-quantised type")


def native_matrix(raw: np.ndarray, t: int, k: int, *, kquant: bool = False) -> dict:
    """A tensor as the native decoder takes it (``momoka._core.LlamaDecoder``): ``rows``, ``cols`` and
    ``codes`` ``"q4k"`` or ``"q6k"`` with ``raw``, the GGUF superblocks as the file stores them (Q4_K and Q6_K
    with ``kquant``: the decoder re-lays them and multiplies them with 8-bit activations), else
    ``codes`` ``"u4"`` (Q4_0, Q4_1: the 16 nibble bytes of each block as GGUF stores them; Q4_K: its sub-blocks
    of 32 repacked so), ``"i8h"`` (Q6_K: codes ``q - 32`` with a scale per 16 values, two per block), ``"i8"``
    (Q8_0; Q5_0 and Q5_1 as codes minus 16, their offsets moved by ``16 d``) or ``"f32"`` (F32, F16,
    BF16: the values, ``f``), with float32 scales ``d`` and offsets ``m`` (None when all are zero) per
    block, so that every value is ``d * code + m`` exactly as :func:`dequantize` gives it."""
    t = int(t)
    rows = int(raw.shape[0])
    out: dict = {"rows": rows, "cols": int(k)}
    if kquant and t in (Q4_K, Q6_K):
        _kblocks(raw, t, k)  # whole superblocks, else UnsupportedModelError
        out.update(codes="q4k" if t == Q4_K else "q6k", raw=np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1))
        return out
    if t == Q4_K:  # 4-bit codes with a scale and an offset per sub-block of 32
        q, d, m = q4k_values(raw, k)
        packed = q[..., :16] | (q[..., 16:] << 4)  # byte j: code j low, code j + 16 high
        out.update(codes="u4", q=np.ascontiguousarray(packed).reshape(-1), d=np.ascontiguousarray(d.reshape(-1)),
                   m=np.ascontiguousarray(m.reshape(-1)))
        return out
    if t == Q6_K:  # signed codes with a scale per 16 values: two per block of 32
        q, d = q6k_values(raw, k)
        out.update(codes="i8h", q=np.ascontiguousarray(q).reshape(-1).view(np.uint8),
                   d=np.ascontiguousarray(d.reshape(-1)), m=None)
        return out
    if t in (F32, F16, BF16):
        out.update(codes="f32", f=np.ascontiguousarray(dequantize(raw, t, k), dtype=np.float32))
        return out
    b = _blocks(raw, t, k)
    d = _f16(b[..., 0:2])[..., 0]
    if t in (Q4_0, Q4_1):
        qs = b[..., 2:18] if t == Q4_0 else b[..., 4:20]
        m = -8.0 * d if t == Q4_0 else _f16(b[..., 2:4])[..., 0]
        out.update(codes="u4", q=np.ascontiguousarray(qs).reshape(-1), m=np.ascontiguousarray(m, np.float32))
    elif t == Q8_0:
        out.update(codes="i8", q=np.ascontiguousarray(b[..., 2:34]).reshape(-1), m=None)
    else:  # Q5_0, Q5_1: unsigned 5-bit codes, stored shifted into int8
        q, d, m = quant_values(raw, t, k)
        shifted = (q.astype(np.int16) - 16).astype(np.int8)
        out.update(codes="i8", q=shifted.reshape(-1).view(np.uint8), m=np.ascontiguousarray(m + 16.0 * d, np.float32))
    out["d"] = np.ascontiguousarray(d, np.float32)
    return out


def dequantize(raw: np.ndarray, t: int, k: int) -> np.ndarray:
    """Float32 values ``(rows, k)`` of the raw GGUF rows ``raw`` of type ``t``."""
    t = int(t)
    if t == F32:
        return np.asarray(raw).view(np.float32).reshape(-1, k).astype(np.float32, copy=False)
    if t == F16:
        return np.asarray(raw).view("<f2").reshape(-1, k).astype(np.float32)
    if t == BF16:
        u = np.asarray(raw).view("<u2").reshape(-1, k).astype(np.uint32) << 16
        return u.view(np.float32)
    if t == Q4_K:
        q, d, m = q4k_values(raw, k)
        return (q.astype(np.float32) * d[..., None] + m[..., None]).reshape(raw.shape[0], k)
    if t == Q6_K:
        q, d = q6k_values(raw, k)
        return (q.astype(np.float32) * d[..., None]).reshape(raw.shape[0], k)
    q, d, m = quant_values(raw, t, k)
    v = q.astype(np.float32) * d[..., None] + m[..., None]
    return v.reshape(raw.shape[0], k)


@dataclass
class NBits:
    """A weight in onnxruntime ``MatMulNBits`` layout (``N`` outputs, ``K`` inputs).

    ``correction`` (float32 ``[N, n_blocks]`` or None) is a per-block constant
    added to every weight of the block: the exact weight is
    ``(q - zero_point) * scale + correction``.  The graph applies it as a small
    extra product of the activations' block sums (``K / 32`` columns), which lets
    Q4_1 / Q5_1 blocks (``d * q + m`` with a float offset ``m``) use the fast
    integer-zero-point kernels and stay exact.
    """

    bits: int
    packed: np.ndarray  # uint8 [N, n_blocks, blob]
    scales: np.ndarray  # float32 [N * n_blocks]
    zero_points: np.ndarray  # uint8: [N * ceil(n_blocks / 2)] packed nibbles (4-bit) or [N * n_blocks] (8-bit)
    exact: bool  # True when the represented values equal the GGUF's exactly
    correction: np.ndarray | None = None
    extra: NBits | None = None  # a second 4-bit plane whose product is added (exact 8-bit codes)


def _pack4(q: np.ndarray) -> np.ndarray:
    """(N, nb, 32) codes 0..15 -> (N, nb, 16) bytes, value 2i low nibble, 2i+1 high."""
    return (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)


def _pack_zp4(z: np.ndarray) -> np.ndarray:
    """(N, nb) zero points 0..15 -> N * ceil(nb / 2) bytes, two per byte, low nibble first."""
    n, nb = z.shape
    if nb % 2:
        z = np.concatenate([z, np.zeros((n, 1), dtype=z.dtype)], axis=1)
    z = z.reshape(n, -1, 2).astype(np.uint8)
    return (z[..., 0] | (z[..., 1] << 4)).reshape(-1)


def requant8(w: np.ndarray) -> NBits:
    """Asymmetric 8-bit blocks of 32 from float32 ``w`` of shape (N, K)."""
    n, k = w.shape
    blocks = w.reshape(n, k // QK, QK)
    mn = np.minimum(blocks.min(axis=-1), 0.0)
    mx = np.maximum(blocks.max(axis=-1), 0.0)
    scale = (mx - mn) / 255.0
    scale = np.where(scale == 0, 1.0, scale).astype(np.float32)
    zp = np.clip(np.rint(-mn / scale), 0, 255)
    q = np.clip(np.rint(blocks / scale[..., None]) + zp[..., None], 0, 255).astype(np.uint8)
    return NBits(8, q, scale.reshape(-1), zp.astype(np.uint8).reshape(-1), False)


def to_nbits(raw: np.ndarray, t: int, k: int, bits: int) -> NBits:
    """Map a GGUF tensor onto ``MatMulNBits`` blocks of 32 with ``bits`` 4 or 8.

    Block-quantised sources keep their integer codes and scales, so the result is
    exact: Q4_0/Q4_1 fit 4-bit blocks, every block type fits 8-bit blocks; a float
    offset (Q4_1, Q5_1) becomes the nearest integer zero point plus a per-block
    ``correction``.  A 4-bit request for a tensor with more than 4 bits of precision
    (Q5_x, Q8_0) is answered with two 4-bit planes (high and low nibble of the
    8-bit codes, the second in ``extra``), exact and on the fast 4-bit kernel.  Float tensors (F32/F16/BF16)
    are quantised to asymmetric 8-bit blocks (not exact).
    """
    t = int(t)
    if k % QK:
        raise UnsupportedModelError(f"input width {k} is not a multiple of {QK}")
    if t not in BLOCK_BYTES:  # float and K-quant tensors: re-quantised (not exact)
        return requant8(dequantize(raw, t, k))
    q, d, m = quant_values(raw, t, k)
    if t == Q8_0:
        q = (q.astype(np.int16) + 128).astype(np.uint8)
        m = -128.0 * d
    use_bits = 4 if (bits == 4 and t in (Q4_0, Q4_1)) else 8
    d64 = d.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(d64 != 0, np.rint(-m / np.where(d64 != 0, d64, 1.0)), 0.0)
    z = np.clip(z, 0, 2**use_bits - 1)
    corr = (m.astype(np.float64) + d64 * z).astype(np.float32)  # value = d*(q - z) + corr
    correction = corr if np.any(corr != 0) else None
    z = z.astype(np.uint8)
    q = q.astype(np.uint8)
    if use_bits == 4:
        return NBits(4, _pack4(q), d.astype(np.float32).reshape(-1), _pack_zp4(z), True, correction)
    if bits == 4:
        # 8-bit codes as two exact 4-bit planes: q = 16 hi + lo, z = 16 zh + zl, so
        # d (q - z) = 16 d (hi - zh) + d (lo - zl); both run on the fast 4-bit kernel
        hi = NBits(4, _pack4(q >> 4), (16.0 * d).astype(np.float32).reshape(-1), _pack_zp4(z >> 4), True, correction)
        hi.extra = NBits(4, _pack4(q & 0x0F), d.astype(np.float32).reshape(-1), _pack_zp4(z & 0x0F), True)
        return hi
    return NBits(8, q, d.astype(np.float32).reshape(-1), z.reshape(-1), True, correction)


def nbits_dequantize(nb: NBits, k: int) -> np.ndarray:
    """Float (N, K) values a ``MatMulNBits`` weight (with its correction) stands for."""
    n = nb.packed.shape[0]
    n_blocks = k // QK
    if nb.bits == 4:
        p = nb.packed
        q = np.empty(p.shape[:-1] + (p.shape[-1] * 2,), dtype=np.uint8)
        q[..., 0::2] = p & 0x0F
        q[..., 1::2] = p >> 4
        zb = nb.zero_points.reshape(n, -1)
        z = np.empty((n, zb.shape[1] * 2), dtype=np.uint8)
        z[:, 0::2] = zb & 0x0F
        z[:, 1::2] = zb >> 4
        z = z[:, :n_blocks]
    else:
        q = nb.packed
        z = nb.zero_points.reshape(n, n_blocks)
    s = nb.scales.reshape(n, n_blocks, 1).astype(np.float64)
    v = (q.astype(np.float64) - z[..., None]) * s
    if nb.correction is not None:
        v = v + nb.correction.reshape(n, n_blocks, 1)
    v = v.reshape(n, k)
    if nb.extra is not None:
        v = v + nbits_dequantize(nb.extra, k)
    return v
