"""``qwen2`` GGUFs on the native decoder: K-quant blocks, biases, NeoX rope, a separate head, native-only scoring.

References: a tiny ``qwen2`` GGUF planted (``_oracles.qwen2``) with the ``gguf`` package's writer (random weights; Q4_K and
Q6_K blocks packed by hand with sane scales, Q5_0 and Q8_0 by ``gguf.quants.quantize``; F32 biases and
norms), whose tensors are dequantised by ``gguf.quants.dequantize`` (the package's numpy code, not momoka's)
and run through a float64 numpy forward pass (biases added, rotate-half rope as llama.cpp's
NeoX rope, no row permutation). The Qwen2 tokenizer is checked against llama.cpp's own (llama-cpp-python,
``vocab_only``) on the installed 1.5B model's vocabulary, when both are there.
"""

from __future__ import annotations

import numpy as np
import pytest

from momoka import _core
from momoka.errors import ModelError
from momoka.models import gguf_quant as gq

gguf = pytest.importorskip("gguf")
from gguf.quants import dequantize as ref_dequantize  # noqa: E402

from _oracles.qwen2 import TOKENS, NumpyQwen2, q4k_rows, q6k_rows, write_planted  # noqa: E402

@pytest.fixture(autouse=True)
def _float32_activations(monkeypatch):
    """These tests check the exact path (float32 activations); the 8-bit one is test_gguf_kquant_int8.py's."""
    monkeypatch.setenv("MOMOKA_LLM_ACTIVATIONS", "float32")


LEVELS = ("scalar", "avx2", "avx512")
KERNELS = LEVELS[: LEVELS.index(_core.llama_simd()) + 1]


def _close(got, want):
    """Float32 decoder against the float64 reference: within 1e-4 of the logits' range."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max())


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    d = tmp_path_factory.mktemp("qwen2-planted")
    path = d / "tiny-qwen2.gguf"
    write_planted(path)
    return path


@pytest.fixture(scope="module")
def reference(planted):
    return NumpyQwen2(planted)


PROMPT = [5, 70, 200, 33, 258, 1, 99, 140, 7, 7, 7, 250, 31, 64, 128, 255, 17, 240, 91, 3]


def test_k_quant_blocks_dequantise_as_the_gguf_package(planted):
    from momoka.models.gguf import GGUFModel

    m = GGUFModel(planted)
    r = {t.name: t for t in gguf.GGUFReader(str(planted)).tensors}
    seen = set()
    for name in m.tensors:
        raw, t, k = m.raw(name)
        want = ref_dequantize(r[name].data, r[name].tensor_type).reshape(raw.shape[0], k)
        np.testing.assert_array_equal(gq.dequantize(raw, t, k), want, err_msg=name)
        seen.add(gq.type_name(t))
    assert {"Q4_K", "Q6_K", "Q5_0", "Q8_0", "F32"} <= seen


@pytest.mark.parametrize("qtype", [gq.Q4_K, gq.Q6_K])
@pytest.mark.parametrize("kernels", KERNELS)
def test_k_quant_matrices_on_every_kernel_set(kernels, qtype):
    """The native layout (U4 per 32 for Q4_K, I8H with a scale per 16 for Q6_K) times activations equals the
    float64 product with the gguf package's dequantised weights, for a decode step and a prompt's tiles."""
    rng = np.random.default_rng(int(qtype))
    rows, k = 37, 512
    raw = q4k_rows(rows, k, rng) if qtype == gq.Q4_K else q6k_rows(rows, k, rng)
    want_w = ref_dequantize(raw, qtype).reshape(rows, k).astype(np.float64)
    m = gq.native_matrix(raw, qtype, k)
    assert m["codes"] == ("u4" if qtype == gq.Q4_K else "i8h")
    for n in (1, 3, 8, 19):
        x = rng.standard_normal((n, k)).astype(np.float32)
        got = _core.llama_matmul(m, x, kernels)
        want = x.astype(np.float64) @ want_w.T
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * np.abs(want).max())


def test_i8h_scales_are_checked():
    rng = np.random.default_rng(3)
    m = gq.native_matrix(q6k_rows(4, 256, rng), gq.Q6_K, 256)
    m["d"] = m["d"][: len(m["d"]) // 2]  # one scale per block of 32, not per 16
    with pytest.raises(ValueError, match="scale"):
        _core.llama_matmul(m, np.zeros((1, 256), np.float32))


@pytest.mark.parametrize("kernels", KERNELS)
def test_logits_match_the_float64_reference(planted, reference, kernels):
    from momoka.models.causal_native import NativeDecoder

    dec = NativeDecoder(planted, n_ctx=64, threads=2, simd=kernels)
    want = reference.logits(PROMPT + [11, 12])
    _close(dec.start(PROMPT), want[len(PROMPT) - 1])
    _close(dec.step(11), want[len(PROMPT)])
    _close(dec.step(12), want[len(PROMPT) + 1])
    dec.keep(len(PROMPT))  # drop the two steps: the prompt's cache serves another continuation
    _close(dec.rows([40, 41, 42], 3), reference.logits(PROMPT + [40, 41, 42])[len(PROMPT):])


def test_tied_head_uses_the_embedding(tmp_path):
    from momoka.models.causal_native import NativeDecoder

    path = tmp_path / "tied.gguf"
    write_planted(path, tied=True, seed=1)
    ref = NumpyQwen2(path)
    _close(NativeDecoder(path, n_ctx=32, threads=1).start(PROMPT[:7]), ref.logits(PROMPT[:7])[-1])


def test_a_qwen2_file_is_not_for_the_onnx_converter(planted, tmp_path):
    from momoka.errors import UnsupportedModelError
    from momoka.models.gguf import convert_gguf

    with pytest.raises(UnsupportedModelError, match="qwen2"):
        convert_gguf(planted, tmp_path / "out")


@pytest.fixture(scope="module")
def native_folder(planted, tmp_path_factory):
    """A native-only model folder (the planted GGUF, tokenizer.json, config.json), as the installer writes it."""
    import shutil

    from momoka.models.gguf import write_native_model

    d = tmp_path_factory.mktemp("qwen2-native-folder")
    shutil.copyfile(planted, d / planted.name)
    write_native_model(d / planted.name, d)
    return d


def test_native_only_scoring_matches_the_reference(native_folder, reference):
    from momoka.models.causal_lm import CausalLM

    lm = CausalLM(native_folder, threads=2, block=8)  # blocks of 8: the stream crosses several runs
    assert lm.native_only and lm.runtime_key() == "native"
    ids = PROMPT + PROMPT[::-1]
    ref_lp = reference.logits(ids)
    ref_lp = ref_lp - np.log(np.exp(ref_lp - ref_lp.max(-1, keepdims=True)).sum(-1, keepdims=True)) - ref_lp.max(-1, keepdims=True)
    want = ref_lp[np.arange(len(ids) - 1), ids[1:]]
    got = lm.stream_logprobs(ids)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-3)
    # the last 5 only, and a batch of short pairs (one after another on the decoder)
    np.testing.assert_allclose(lm.stream_logprobs(ids, n_scored=5), want[-5:], rtol=0, atol=1e-3)
    pairs = lm.score_ids([(ids[:4], ids[4:9]), (ids[:10], ids[10:12])])
    np.testing.assert_allclose(pairs[0], want[3:8], rtol=0, atol=1e-3)
    np.testing.assert_allclose(pairs[1], want[9:11], rtol=0, atol=1e-3)


def test_native_only_prefix_reuse_matches_the_reference(native_folder, reference):
    from momoka.models.causal_lm import CausalLM

    lm = CausalLM(native_folder, threads=1)
    prefix, sufs = PROMPT[:9], [[40, 41, 42], [7], [250, 251]]

    def ref_lp(seq, n):
        lg = reference.logits(seq)
        lg = lg - lg.max(-1, keepdims=True)
        lp = lg - np.log(np.exp(lg).sum(-1, keepdims=True))
        return lp[np.arange(len(seq) - n - 1, len(seq) - 1), seq[len(seq) - n:]]

    out = lm.prefix_batch(prefix, sufs)
    for s, got in zip(sufs, out):
        np.testing.assert_allclose(got, ref_lp(prefix + s, len(s)), rtol=0, atol=1e-3)
    state = lm.prefix_state(prefix)
    lm.stream_logprobs(PROMPT[::-1])  # the decoder moves on: the state runs its prefix again
    for s, got in zip(sufs, lm.prefix_batch(state, sufs)):
        np.testing.assert_allclose(got, ref_lp(prefix + s, len(s)), rtol=0, atol=1e-3)
    ext = lm.extend_state(state, [40, 41])
    _close(ext.last_logits, reference.logits(prefix + [40, 41])[-1])
    last = lm.prefix_batch(prefix, sufs, want="last_logits")
    _close(last[0], reference.logits(prefix + sufs[0])[-1])


def test_native_only_generation_and_chat(native_folder, reference):
    from momoka.models.causal_lm import CausalLM

    lm = CausalLM(native_folder, threads=1)
    ids = lm.prompt_ids([{"role": "user", "content": "the the"}])
    assert ids[0] == TOKENS.index("<|im_start|>") and TOKENS.index("Ġthe") in ids
    out = lm.generate([{"role": "user", "content": "the the"}], max_new_tokens=4)
    seq = list(ids)
    for tok in out.token_ids:  # every token is the float64 reference's argmax (random weights: no near ties here)
        assert tok == int(np.argmax(reference.logits(seq)[-1]))
        seq.append(tok)
    with pytest.raises(ModelError, match="native decoder only"):
        lm.session  # noqa: B018


def test_native_only_folder_refuses_a_gpu(native_folder):
    from momoka.errors import ConfigError
    from momoka.models.causal_lm import CausalLM

    with pytest.raises(ConfigError, match="CPU only"):
        CausalLM(native_folder, device="cuda")


def test_qwen2_tokenizer_matches_llama_cpp():
    """Token ids of the installed 1.5B model's vocabulary against llama.cpp's tokenizer (skips without them)."""
    llama_cpp = pytest.importorskip("llama_cpp")
    from momoka.models.catalog import SPLIT_FILES, installed_models
    from momoka.models.installer import model_dir

    if "llm-qwen2.5-1.5b" not in installed_models():
        pytest.skip("llm-qwen2.5-1.5b is not installed (`momoka models install --model llm-qwen2.5-1.5b`)")
    from tokenizers import Tokenizer

    d = model_dir("llm-qwen2.5-1.5b", auto_install=False)
    ours = Tokenizer.from_file(str(d / "tokenizer.json"))
    llm = llama_cpp.Llama(str(d / SPLIT_FILES["llm-qwen2.5-1.5b"].file), vocab_only=True, verbose=False)
    texts = ["Hello world! 12345 apples cost $3.50.", "  leading spaces\n\n\ttabs and\r\nCRLF   ",
             "它是一个中文句子。日本語もある", "I'm you're we'll DON'T it's", "naïve café ﬁ émigré Ω 𝔘𝔫𝔦",
             "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
             "def f(x):\n    return x**2  # comment", "1234567890 3.14159 1e-5 0x1F", "a\u00a0b\u2003c  \n"]
    for t in texts:
        assert ours.encode(t, add_special_tokens=False).ids == llm.tokenize(t.encode(), add_bos=False, special=True), t


def test_qwen_chat_template_renders_as_its_jinja_template():
    """The installed Qwen2.5 template rendered natively equals jinja2's rendering of it (no tools), with its
    default system message (skips without the model or jinja2)."""
    jinja2 = pytest.importorskip("jinja2")
    from momoka.models.catalog import installed_models
    from momoka.models.causal_lm import CausalLM
    from momoka.models.installer import model_dir

    have = [m for m in ("llm-qwen2.5-1.5b", "llm-qwen2.5-0.5b") if m in installed_models()]
    if not have:
        pytest.skip("no Qwen2.5 model is installed (`momoka models install --model llm-qwen2.5-0.5b`)")
    lm = CausalLM(model_dir(have[0], auto_install=False))
    template = jinja2.Environment().from_string(lm.config["chat_template"])
    for msgs in ([{"role": "user", "content": "Hi there"}],
                 [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q?"},
                  {"role": "assistant", "content": "A."}, {"role": "user", "content": "Again?"}]):
        assert lm.apply_chat_template(msgs) == template.render(messages=msgs, add_generation_prompt=True, tools=None)
    assert {lm.tokenizer.token_to_id("<|im_end|>"), lm.tokenizer.token_to_id("<|endoftext|>")} <= lm.stop_ids
