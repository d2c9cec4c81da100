"""The native decoder (``MOMOKA_LLM_RUNTIME=native``, ``cpp/include/momoka/llama_decode.hpp``).

References: the matrix kernels against numpy's float64 product with the weights dequantised by
:func:`momoka.models.gguf_quant.dequantize` (the converter's reader, no shared kernel), for every kernel
set this CPU has, token counts that hit every tile and remainder, and each GGUF block type; the whole
decoder against momoka's onnxruntime graph of the same GGUF (an independent forward pass: ONNX operators,
MatMulNBits) and against the float64 numpy forward pass of ``conftest.NumpyLlama`` (the gguf package's
dequantisation, llama.cpp's row order and rope), logits after a prompt and after each further token;
greedy generation against the exact onnxruntime argmax of the same prefix.
"""

from __future__ import annotations

import numpy as np
import pytest

from momoka import _core
from momoka.errors import InputTooLargeError, ModelError
from momoka.models import causal_native
from momoka.models import gguf_quant as gq
from momoka.models.causal_generate import OnnxDecoder
from momoka.models.causal_lm import CausalLM
from momoka.models.causal_native import NativeDecoder

#: The kernel sets this CPU runs: the plain loops always, then AVX2 and AVX-512 where it has them.
LEVELS = ("scalar", "avx2", "avx512")
KERNELS = LEVELS[: LEVELS.index(_core.llama_simd()) + 1]


def _blocks(t: int, rows: int, k: int, rng) -> np.ndarray:
    """Random raw GGUF rows of type ``t`` (scales of either sign, all codes)."""
    nb = k // 32
    raw = rng.integers(0, 256, size=(rows, nb, gq.BLOCK_BYTES[t]), dtype=np.uint8)
    d = rng.uniform(-0.05, 0.05, size=(rows, nb)).astype("<f2")
    raw[..., 0:2] = d.view(np.uint8).reshape(rows, nb, 2)
    if t in (gq.Q4_1, gq.Q5_1):
        m = rng.uniform(-0.2, 0.2, size=(rows, nb)).astype("<f2")
        raw[..., 2:4] = m.view(np.uint8).reshape(rows, nb, 2)
    return raw.reshape(rows, -1)


@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("qtype", [gq.Q4_0, gq.Q4_1, gq.Q5_0, gq.Q5_1, gq.Q8_0, gq.F16])
def test_matrix_kernels_against_numpy(kernels, qtype):
    rng = np.random.default_rng(qtype)
    rows, k = 37, 96  # an odd row count (a row pair and a last row), three blocks
    if qtype == gq.F16:
        raw = rng.normal(size=(rows, k)).astype("<f2").view(np.uint8)
    else:
        raw = _blocks(qtype, rows, k, rng)
    w = gq.dequantize(raw, qtype, k).astype(np.float64)
    mat = gq.native_matrix(raw, qtype, k)
    for n in (1, 3, 8, 9, 21, 130):  # one token; a tile's remainder; a tile; both; past a token block
        x = rng.normal(size=(n, k)).astype(np.float32)
        ref = x.astype(np.float64) @ w.T
        got = _core.llama_matmul(mat, x, kernels)
        assert got.shape == (n, rows)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
    mat["bias"] = rng.normal(size=rows).astype(np.float32)
    x = rng.normal(size=(2, k)).astype(np.float32)
    np.testing.assert_allclose(_core.llama_matmul(mat, x, kernels), x.astype(np.float64) @ w.T + mat["bias"],
                               rtol=1e-5, atol=1e-4)


def test_bad_matrices_are_refused():
    rng = np.random.default_rng(0)
    mat = gq.native_matrix(_blocks(gq.Q4_1, 4, 64, rng), gq.Q4_1, 64)
    with pytest.raises(ValueError, match="codes must be"):
        _core.llama_matmul({**mat, "codes": "u3"}, np.zeros((1, 64), np.float32))
    with pytest.raises(ValueError, match="wrong code or scale count"):
        _core.llama_matmul({**mat, "rows": 5}, np.zeros((1, 64), np.float32))
    with pytest.raises(ValueError, match=r"x must be \(n, cols\)"):
        _core.llama_matmul(mat, np.zeros((1, 32), np.float32))
    with pytest.raises(ValueError, match="simd must be"):
        _core.llama_matmul(mat, np.zeros((1, 64), np.float32), "neon")


# ------------------------------------------------------------------------------------------ the decoder


@pytest.fixture(scope="module")
def native(smollm_gguf):
    return NativeDecoder(smollm_gguf, n_ctx=512, threads=2)


def _ids(lm, n: int) -> list[int]:
    text = ("The Normans were the people who in the 10th and 11th centuries gave their name to Normandy, a region "
            "in France. They were descended from Norse raiders and pirates from Denmark, Iceland and Norway. ") * 8
    return lm.encode(text)[:n]


def test_logits_match_the_onnx_graph(native, lm_onnx):
    ids = _ids(lm_onnx, 150)
    onnx = OnnxDecoder(lm_onnx)
    a, b = onnx.start(ids[:140]), native.start(ids[:140])
    assert b.shape == a.shape and b.dtype == np.float32
    assert np.abs(a - b).max() < 1e-3 * np.abs(a).max()
    assert a.argmax() == b.argmax()
    for tok in ids[140:]:  # the cache grown token by token
        a, b = onnx.step(tok), native.step(tok)
        assert np.abs(a - b).max() < 1e-3 * np.abs(a).max()
        assert a.argmax() == b.argmax()


def test_logits_match_the_float64_numpy_reference(native, lm_onnx, numpy_llama):
    # the gguf package's own dequantisation, llama.cpp's row order and adjacent-pair rope, float64
    ids = _ids(lm_onnx, 24)
    ref = numpy_llama.logits(np.asarray(ids))
    got = native.start(ids[:20])
    assert np.abs(got - ref[19]).max() < 1e-3 * np.abs(ref[19]).max()
    for i in range(20, 24):
        got = native.step(ids[i])
        assert np.abs(got - ref[i]).max() < 1e-3 * np.abs(ref[i]).max()
        assert int(got.argmax()) == int(ref[i].argmax())


def test_a_prompt_in_one_run_equals_it_token_by_token(native, lm_onnx):
    ids = _ids(lm_onnx, 40)
    whole = native.start(ids)
    native.start(ids[:25])
    for tok in ids[25:]:
        steps = native.step(tok)
    np.testing.assert_allclose(steps, whole, rtol=0, atol=1e-4 * np.abs(whole).max())


@pytest.mark.parametrize("kernels", KERNELS)
def test_every_kernel_set_and_thread_count_gives_the_same_logits(native, lm_onnx, smollm_gguf, kernels):
    ids = _ids(lm_onnx, 30)
    ref = native.start(ids)
    for threads in (1, 3):
        other = NativeDecoder(smollm_gguf, n_ctx=64, threads=threads, simd=kernels)
        assert other.simd == kernels and other.threads == threads
        got = other.start(ids[:29])
        got = other.step(ids[29])
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-4 * np.abs(ref).max())


def test_the_context_and_the_vocabulary_are_limits(smollm_gguf):
    dec = NativeDecoder(smollm_gguf, n_ctx=8, threads=1)
    dec.start([1, 2, 3, 4, 5, 6, 7, 8])
    with pytest.raises(InputTooLargeError, match="more than the model's context of 8"):
        dec.step(9)
    with pytest.raises(ModelError, match="outside the vocabulary"):
        dec.start([1, 10 ** 6])
    dec.start([1, 2])  # a refused call leaves the decoder usable
    with pytest.raises(ValueError, match="no tokens"):
        dec._dec.forward(np.zeros(0, np.int32))


def test_generation_follows_the_exact_argmax(model_with_gguf, lm_onnx):
    lm = CausalLM(model_with_gguf, threads=2, runtime="native")
    assert lm.runtime_key() == "native"
    msgs = [{"role": "user", "content": "Where is Normandy? Answer in one sentence."}]
    res = lm.generate(msgs, max_new_tokens=24)
    ref = lm_onnx.generate(msgs, max_new_tokens=24)
    assert isinstance(lm.decoder_for(10, 10), NativeDecoder)
    # teacher forcing: one onnxruntime pass over the prompt and the native tokens gives every step's logits
    prompt = lm_onnx.encode(lm_onnx.apply_chat_template(msgs))
    onnx = OnnxDecoder(lm_onnx)
    logits = onnx.start(prompt)
    for tok in res.token_ids:
        assert tok == int(logits.argmax())
        logits = onnx.step(tok)
    assert res.token_ids == ref.token_ids and res.text == ref.text


def test_native_generation_never_opens_the_onnx_graph(model_with_gguf, lm_onnx, tmp_path):
    # the same model with its graph replaced by garbage: the native decoder generates as before, and the
    # damaged graph is reported when something needs it (scoring), not when the model is opened
    d = tmp_path / "damaged"
    d.mkdir()
    for f in model_with_gguf.iterdir():
        if f.name == "model.onnx":
            (d / f.name).write_bytes(b"not an onnx graph" * 64)
        else:
            (d / f.name).symlink_to(f.resolve())
    lm = CausalLM(d, threads=2, runtime="native")
    res = lm.generate("The capital of France is", max_new_tokens=6)
    assert res.token_ids == lm_onnx.generate("The capital of France is", max_new_tokens=6).token_ids
    assert lm._session is None
    with pytest.raises(ModelError, match="corrupted or incompatible"):
        lm.perplexity(["The cat sat on the mat."])
    with pytest.raises(ModelError, match="corrupted or incompatible"):  # and again: nothing half-opened
        lm.token_logprobs("Hello")


def test_auto_runs_the_native_decoder_where_it_can(model_with_gguf, smollm_int4, monkeypatch):
    auto = CausalLM(model_with_gguf, threads=2, runtime="auto")
    if causal_native.simd() == "scalar":
        assert auto.runtime_key() != "native"
    else:
        assert auto.runtime_key() == "native"
        assert isinstance(auto.decoder_for(1000, 100), NativeDecoder)
    monkeypatch.setattr(causal_native, "simd", lambda: "scalar")
    assert CausalLM(model_with_gguf, threads=2, runtime="auto").runtime_key() != "native"
    # no GGUF beside the model (the test cache keeps none): auto does not pick it, native says what is missing
    assert CausalLM(smollm_int4, threads=2, runtime="auto").runtime_key() != "native"
    with pytest.raises(ModelError, match="the native generation runtime needs .*momoka models install"):
        CausalLM(smollm_int4, threads=2, runtime="native").generate("Hello", max_new_tokens=2)
