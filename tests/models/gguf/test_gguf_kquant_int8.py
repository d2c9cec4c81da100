"""Q4_K and Q6_K weights times 8-bit activations on the native decoder (``llama_kquant.hpp``).

References, all independent of momoka's code: the ``gguf`` package's numpy dequantisation of the weights; the
activations through :func:`_oracles.qwen2.q8k`, a numpy restatement of llama.cpp's Q8_K quantisation; products
and the planted ``qwen2`` model's forward pass in float64 (``NumpyQwen2``, with ``int8`` the same 8-bit
activations, without it the exact float one).
"""

from __future__ import annotations

import numpy as np
import pytest

from momoka import _core
from momoka.models import gguf_quant as gq

gguf = pytest.importorskip("gguf")
from gguf.quants import dequantize as ref_dequantize  # noqa: E402

from _oracles.qwen2 import NumpyQwen2, q4k_rows, q6k_rows, q8k, write_planted  # noqa: E402

LEVELS = ("scalar", "avx2", "avx512")
KERNELS = LEVELS[: LEVELS.index(_core.llama_simd()) + 1]
PROMPT = [5, 70, 200, 33, 258, 1, 99, 140, 7, 7, 7, 250, 31, 64, 128, 255, 17, 240, 91, 3]


def _rows(qtype, rows, k, rng):
    raw = q4k_rows(rows, k, rng) if qtype == gq.Q4_K else q6k_rows(rows, k, rng)
    return raw, ref_dequantize(raw, qtype).reshape(rows, k).astype(np.float64)


def _activations(n, k, rng):
    x = rng.standard_normal((n, k)).astype(np.float32)
    x[:, 7] *= 30  # an outlier channel, as real activations have
    x[0, 256:512] = 0  # an all-zero superblock (scale 0)
    return x


@pytest.mark.parametrize("qtype", [gq.Q4_K, gq.Q6_K])
@pytest.mark.parametrize("kernels", KERNELS)
def test_int8_products_are_the_integer_math(kernels, qtype):
    """Every kernel set computes W times the Q8_K-quantised activations: the float64 product of the
    dequantised weights and activations, up to float32 rounding of the per-superblock combination."""
    rng = np.random.default_rng(10 + int(qtype))
    rows, k = 37, 768
    raw, w = _rows(qtype, rows, k, rng)
    m = gq.native_matrix(raw, qtype, k, kquant=True)
    assert m["codes"] == ("q4k" if qtype == gq.Q4_K else "q6k")
    m["bias"] = rng.standard_normal(rows).astype(np.float32)
    for n in (1, 3, 4, 9, 70):  # a decode step, the prompt tiles and their remainders, two token blocks
        x = _activations(n, k, rng)
        got = _core.llama_matmul(m, x, kernels)
        xq = q8k(x)
        want = xq @ w.T + m["bias"]
        scale = np.abs(xq) @ np.abs(w).T + np.abs(m["bias"])
        assert np.all(np.abs(got - want) <= 2e-6 * scale + 1e-7), np.abs(got - want).max()


@pytest.mark.parametrize("qtype", [gq.Q4_K, gq.Q6_K])
def test_int8_error_is_bounded_by_the_activation_rounding(qtype):
    """Against the float activations the error is at most half an activation step per value times the
    weight's magnitude (the bound of rounding to the nearest code), and it is there (8-bit activations)."""
    rng = np.random.default_rng(20 + int(qtype))
    rows, k = 16, 512
    raw, w = _rows(qtype, rows, k, rng)
    m = gq.native_matrix(raw, qtype, k, kquant=True)
    x = _activations(5, k, rng)
    got = _core.llama_matmul(m, x)
    exact = x.astype(np.float64) @ w.T
    b = x.reshape(5, -1, 256).astype(np.float64)
    step = np.abs(b).max(-1) / 127  # the activation scale of each superblock
    bound = np.einsum("tb,rb->tr", step / 2, np.abs(w).reshape(rows, -1, 256).sum(-1))
    err = np.abs(got - exact)
    assert np.all(err <= bound * 1.001 + 1e-6 * np.abs(exact).max())
    assert err.max() > 1e-4 * np.abs(exact).max()


def test_kquant_matrices_are_checked():
    rng = np.random.default_rng(3)
    m = gq.native_matrix(q6k_rows(4, 256, rng), gq.Q6_K, 256, kquant=True)
    with pytest.raises(ValueError, match="bytes"):
        _core.llama_matmul({**m, "rows": 5}, np.zeros((1, 256), np.float32))
    with pytest.raises(ValueError, match="256"):
        _core.llama_matmul({**m, "cols": 128, "rows": 8}, np.zeros((1, 128), np.float32))


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    path = tmp_path_factory.mktemp("qwen2-int8") / "tiny-qwen2.gguf"
    write_planted(path)
    return path


@pytest.mark.parametrize("kernels", KERNELS)
def test_int8_decoder_matches_the_int8_reference(planted, kernels):
    """The decoder with 8-bit activations equals the float64 forward pass whose K-quant products take the
    same Q8_K activations (up to a code that float32 rounding puts on the other side of a step), and stays
    near the exact float one: the greedy tokens are the same."""
    from momoka.models.causal_native import NativeDecoder

    dec = NativeDecoder(planted, n_ctx=64, threads=2, simd=kernels, activations="int8")
    ref8 = NumpyQwen2(planted, int8=True).logits(PROMPT + [11, 12])
    exact = NumpyQwen2(planted).logits(PROMPT + [11, 12])
    got = np.stack([dec.start(PROMPT), dec.step(11), dec.step(12)]).astype(np.float64)
    want8, want = ref8[len(PROMPT) - 1:], exact[len(PROMPT) - 1:]
    span = np.abs(want).max()
    np.testing.assert_allclose(got, want8, rtol=0, atol=2e-3 * span)
    # the 8-bit activations move these logits (random weights and codes, two layers) by up to 4% of their
    # range (measured), as the int8 reference does: the decoder's distance to it is 10 times smaller
    assert np.abs(got - want).max() < 6e-2 * span
    assert np.abs(got - want).max() > 10 * np.abs(got - want8).max()
    assert list(got.argmax(-1)) == list(want.argmax(-1))
    dec.keep(len(PROMPT))
    rows = dec.rows([40, 41, 42], 3)
    np.testing.assert_allclose(rows, NumpyQwen2(planted, int8=True).logits(PROMPT + [40, 41, 42])[len(PROMPT):],
                               rtol=0, atol=2e-3 * span)


def test_activations_setting_picks_the_path(planted, monkeypatch):
    from momoka.errors import ConfigError
    from momoka.models.causal_native import NativeDecoder

    monkeypatch.setenv("MOMOKA_LLM_ACTIVATIONS", "float32")
    assert NativeDecoder(planted, n_ctx=32, threads=1).activations == "float32"
    monkeypatch.delenv("MOMOKA_LLM_ACTIVATIONS")
    assert NativeDecoder(planted, n_ctx=32, threads=1).activations == "int8"
    with pytest.raises(ConfigError, match="int8"):
        NativeDecoder(planted, n_ctx=32, threads=1, activations="int4")


PROBES = [
    "What is the capital of Australia? Answer with one word.",
    "List the people and places in this sentence as JSON with keys \"people\" and \"places\": "
    "\"Marie Curie moved from Warsaw to Paris, where she worked with Pierre Curie.\"",
    "Is water's boiling point at sea level 100 degrees Celsius? Answer yes or no, then give one reason.",
    "用一句话解释什么是光合作用。",
]


def test_greedy_tokens_equal_llama_cpp_on_the_installed_1_5b():
    """On the installed 1.5B model, greedy generation with 8-bit activations equals llama.cpp's on the same
    GGUF (skips without the model or llama-cpp-python). A difference is allowed only where the native
    decoder's two candidates are within 0.05 of each other (a near tie either engine may break)."""
    pytest.importorskip("llama_cpp")
    from momoka.models.catalog import installed_models
    from momoka.models.causal_lm import CausalLM
    from momoka.models.installer import model_dir

    if "llm-qwen2.5-1.5b" not in installed_models():
        pytest.skip("llm-qwen2.5-1.5b is not installed (`momoka models install --model llm-qwen2.5-1.5b`)")
    d = model_dir("llm-qwen2.5-1.5b", auto_install=False)
    native = CausalLM(d, threads=2, runtime="native")
    llama = CausalLM(d, threads=2, runtime="llama")
    assert native.decoder_for(1, 1).activations == "int8"
    equal = 0
    for p in PROBES:
        msgs = [{"role": "user", "content": p}]
        a = native.generate(msgs, max_new_tokens=12).token_ids
        b = llama.generate(msgs, max_new_tokens=12).token_ids
        if a == b:
            equal += 1
            continue
        k = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
        logits = native.decoder_for(1, 1).start(native.prompt_ids(msgs) + a[:k])
        assert abs(float(logits[a[k]] - logits[b[k]])) < 0.05, (p, k)
    assert equal >= len(PROBES) - 1
