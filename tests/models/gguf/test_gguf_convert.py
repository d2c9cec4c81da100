"""GGUF -> ONNX conversion: dequantisation, MatMulNBits mapping, graph fidelity, KV cache, bad files."""

from __future__ import annotations

import json

import numpy as np
import pytest
from momoka.errors import ConfigError, ModelError, UnsupportedModelError
from momoka.models import gguf_quant as gq

pytestmark = pytest.mark.models

SAMPLE = "The quick brown fox jumps over the lazy dog. In 1969, humans first walked on the Moon."


def _tensor(reader, name):
    return next(t for t in reader.tensors if t.name == name)


# ---------------------------------------------------------------- quantisation


@pytest.mark.parametrize("qname", ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "F16", "BF16"])
def test_dequantize_matches_gguf_package(qname):
    """momoka's numpy dequantisation equals the gguf package's reference code for every supported type."""
    import gguf
    from gguf.quants import dequantize, quantize

    qt = gguf.GGMLQuantizationType[qname]
    rng = np.random.default_rng(1)
    w = (rng.standard_normal((6, 96)) * rng.uniform(0.01, 3, size=(6, 1))).astype(np.float32)
    w[0, :32] = 0.25  # a constant block (scale 0 for the affine types)
    raw = quantize(w, qt)
    want = dequantize(raw, qt).reshape(6, 96)
    got = gq.dequantize(raw.view(np.uint8).reshape(6, -1), int(qt), 96)
    np.testing.assert_array_equal(got, want)


def _run_plane(nb, k, a):
    """Run one MatMulNBits node on ``a`` (the kernel the converted graphs use)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    n = nb.packed.shape[0]
    node = helper.make_node("MatMulNBits", ["A", "B", "S", "Z"], ["Y"], domain="com.microsoft",
                            K=k, N=n, bits=nb.bits, block_size=32, accuracy_level=0 if nb.bits == 4 else 4)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("A", TensorProto.FLOAT, [None, k])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, n])],
                          [numpy_helper.from_array(nb.packed, "B"), numpy_helper.from_array(nb.scales, "S"),
                           numpy_helper.from_array(nb.zero_points, "Z")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                          ir_version=9)
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"A": a})[0]


@pytest.mark.parametrize("qname,bits,planes", [("Q4_1", 4, [4]), ("Q4_0", 4, [4]), ("Q8_0", 4, [4, 4]),
                                               ("Q5_1", 4, [4, 4]), ("Q8_0", 8, [8]), ("Q4_1", 8, [8]),
                                               ("Q5_0", 8, [8])])
def test_nbits_layout_is_exact_and_kernel_agrees(qname, bits, planes):
    """GGUF blocks map exactly onto MatMulNBits planes (+ block corrections), and onnxruntime's
    CPU kernel multiplies by the values the layout stands for."""
    import gguf
    from gguf.quants import dequantize, quantize

    qt = gguf.GGMLQuantizationType[qname]
    rng = np.random.default_rng(2)
    n, k = 40, 160  # 5 blocks per row: an odd count exercises zero-point nibble padding
    w = rng.standard_normal((n, k)).astype(np.float32)
    w[3, 32:64] = -0.5  # constant block
    raw = quantize(w, qt).view(np.uint8).reshape(n, -1)
    ref = dequantize(raw, qt).reshape(n, k).astype(np.float64)
    nb = gq.to_nbits(raw, int(qt), k, bits)
    got_planes = [nb.bits] + ([nb.extra.bits] if nb.extra is not None else [])
    assert got_planes == planes and nb.exact
    np.testing.assert_allclose(gq.nbits_dequantize(nb, k), ref, rtol=0, atol=1e-6 * np.abs(ref).max())

    a = rng.standard_normal((5, k)).astype(np.float32)
    for plane in [nb] + ([nb.extra] if nb.extra is not None else []):
        bare = gq.NBits(plane.bits, plane.packed, plane.scales, plane.zero_points, True)
        want = a.astype(np.float64) @ gq.nbits_dequantize(bare, k).T
        y = _run_plane(bare, k, a)
        # 4-bit planes run with float activations (exact up to rounding); 8-bit with int8 activations
        tol = 2e-4 if plane.bits == 4 else 2e-2
        np.testing.assert_allclose(y, want, atol=tol * np.abs(want).max())


def test_float_sources_requantise_to_8_bits():
    w = np.random.default_rng(3).standard_normal((8, 64)).astype(np.float32)
    nb = gq.to_nbits(w.view(np.uint8).reshape(8, -1), gq.F32, 64, 4)
    assert nb.bits == 8 and not nb.exact
    assert np.abs(gq.nbits_dequantize(nb, 64) - w).max() <= (w.max() - w.min()) / 255


def test_file_tensors_dequantize_like_gguf_package(gguf_reader, smollm_gguf):
    """Every tensor type present in the SmolLM2 file (Q4_1, Q8_0, F32) reads identically."""
    from gguf.quants import dequantize
    from momoka.models.gguf import GGUFModel

    m = GGUFModel(smollm_gguf)
    for name in ["token_embd.weight", "blk.0.attn_q.weight", "blk.7.ffn_down.weight", "blk.3.attn_norm.weight"]:
        t = _tensor(gguf_reader, name)
        raw, qtype, k = m.raw(name)
        got = gq.dequantize(raw, qtype, k)
        want = dequantize(t.data, t.tensor_type).reshape(got.shape)
        np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------- graph fidelity


def _onnx_logits(lm, ids):
    n = len(ids)
    logits, _ = lm._forward(np.asarray([ids]), np.ones((1, n), np.int64), np.arange(n)[None], lm._empty_cache(1))
    return logits[0]


@pytest.fixture(scope="module")
def sample_ids(lm_fp32):
    return lm_fp32.encode(SAMPLE)[:24]


@pytest.fixture(scope="module")
def ref_logits(numpy_llama, sample_ids):
    return numpy_llama.logits(sample_ids)


def test_fp32_graph_matches_numpy_reference(lm_fp32, sample_ids, ref_logits):
    """The fp32 ONNX graph reproduces an independent numpy Llama forward pass to ~1e-3 on the logits."""
    got = _onnx_logits(lm_fp32, sample_ids)
    assert got.shape == ref_logits.shape == (len(sample_ids), 49152)
    assert np.abs(got - ref_logits).max() < 2e-3
    assert (got.argmax(-1) == ref_logits.argmax(-1)).all()


def test_int4_graph_is_exact_requantisation(smollm_int4, lm_int4, sample_ids, ref_logits):
    """int4 keeps Q4_1 blocks exactly (float zero points), so it matches the reference like fp32."""
    cfg = json.loads((smollm_int4 / "config.json").read_text())
    assert cfg["weights_detail"] == {"4-bit exact from Q4_1": 210, "2x4-bit exact from Q8_0": 1}
    got = _onnx_logits(lm_int4, sample_ids)
    assert np.abs(got - ref_logits).max() < 5e-3


def test_int8_graph_is_close(lm_int8, sample_ids, ref_logits):
    """int8 keeps the weights exactly but runs with int8 activations: close, same top token almost everywhere."""
    got = _onnx_logits(lm_int8, sample_ids)
    lp_ref = ref_logits - np.log(np.exp(ref_logits - ref_logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) - ref_logits.max(-1, keepdims=True)
    lp = got - np.log(np.exp(got - got.max(-1, keepdims=True)).sum(-1, keepdims=True)) - got.max(-1, keepdims=True)
    tok = np.asarray(sample_ids[1:])
    # log-probs of the actual next tokens: measured max 0.42, mean 0.075 nats
    diff = np.abs(lp[np.arange(len(tok)), tok] - lp_ref[np.arange(len(tok)), tok])
    assert diff.max() < 0.7 and diff.mean() < 0.15
    assert (got.argmax(-1) == ref_logits.argmax(-1)).mean() >= 0.85


def test_kv_cache_incremental_equals_full_pass(lm_fp32, sample_ids):
    """Feeding tokens through the cache (3 + 1 + 1 + rest) gives the full pass's logits."""
    lm = lm_fp32
    ids = np.asarray(sample_ids[:12])
    n = len(ids)
    full, _ = lm._forward(ids[None], np.ones((1, n), np.int64), np.arange(n)[None], lm._empty_cache(1))
    cache = lm._empty_cache(1)
    parts = []
    for a, b in [(0, 3), (3, 4), (4, 5), (5, n)]:
        lg, cache = lm._forward(ids[None, a:b], np.ones((1, b), np.int64), np.arange(a, b)[None], cache)
        parts.append(lg[0])
    assert cache.length == n
    np.testing.assert_allclose(np.concatenate(parts), full[0], atol=1e-3)


def test_left_padded_batch_row_equals_unpadded(lm_fp32, sample_ids):
    """A left-padded row (mask 0 on the pads, positions from 0 at the first real token) is unaffected by padding."""
    lm = lm_fp32
    a = np.asarray(sample_ids[:10])
    b = np.asarray(sample_ids[3:7])
    ids = np.stack([a, np.concatenate([np.full(6, 2), b])])
    mask = np.stack([np.ones(10, np.int64), np.r_[np.zeros(6, np.int64), np.ones(4, np.int64)]])
    pos = np.stack([np.arange(10), np.r_[np.zeros(6, np.int64), np.arange(4)]])
    lg, _ = lm._forward(ids, mask, pos, lm._empty_cache(2))
    single, _ = lm._forward(b[None], np.ones((1, 4), np.int64), np.arange(4)[None], lm._empty_cache(1))
    np.testing.assert_allclose(lg[1, 6:], single[0], atol=1e-3)


def test_conversions_are_kept_where_cache_info_shows_them(smollm_fp32, smollm_int4, capsys, monkeypatch):
    # in the session's computed cache (removed at the session's end), which `momoka cache info` lists;
    # not in the checkout and not in the models of $MOMOKA_HOME
    import os
    from pathlib import Path

    from momoka.cli import main
    from momoka.models import models_dir

    if os.environ.get("MOMOKA_TEST_CACHE"):
        pytest.skip("MOMOKA_TEST_CACHE keeps the conversions in a folder of its own")
    monkeypatch.setenv("MOMOKA_PROGRESS", "0")
    assert main(["cache", "info", "--json"]) == 0
    computed = json.loads(capsys.readouterr().out)["computed"]
    root = Path(computed["path"]).resolve()
    for d in (smollm_fp32, smollm_int4):
        assert Path(d).resolve().is_relative_to(root), (d, root)
    size = sum(f.stat().st_size for d in (smollm_fp32, smollm_int4) for f in Path(d).rglob("*") if f.is_file())
    assert computed["bytes"] >= size > 0
    checkout = Path(__file__).resolve().parents[3]
    assert not root.is_relative_to(checkout) and not root.is_relative_to(models_dir().resolve())


def test_config_and_files(smollm_fp32, gguf_sha):
    cfg = json.loads((smollm_fp32 / "config.json").read_text())
    assert cfg["num_hidden_layers"] == 30 and cfg["hidden_size"] == 576
    assert cfg["num_attention_heads"] == 9 and cfg["num_key_value_heads"] == 3
    assert cfg["vocab_size"] == 49152 and cfg["tie_word_embeddings"] is True
    assert cfg["rope_theta"] == 100000.0 and cfg["max_position_embeddings"] == 8192
    assert cfg["eos_token"] == {"id": 2, "content": "<|im_end|>"}
    assert cfg["source"]["sha256"] == gguf_sha
    assert cfg["chat_template"].startswith("{% for message in messages %}")


# ---------------------------------------------------------------- bad input


def _tiny_gguf(path, arch="llama", qtype=None, *, vocab=None, n_layers=1, tied=True, seed=0, H=64, FF=96):
    """A tiny random model written with the gguf package's writer."""
    import gguf

    rng = np.random.default_rng(seed)
    NH, NKV = 4, 2
    D = H // NH
    if vocab is None:
        vocab = [chr(c) for c in range(33, 127)] + ["Ġ", "Ġt", "he", "Ġthe", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    merges = ["Ġ t", "h e", "Ġt he"]
    V = len(vocab)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(n_layers)
    w.add_context_length(128)
    w.add_embedding_length(H)
    w.add_feed_forward_length(FF)
    w.add_head_count(NH)
    w.add_head_count_kv(NKV)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(D)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(vocab)
    types = [1] * V
    for i, t in enumerate(vocab):
        if t.startswith("<|"):
            types[i] = 3
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(V - 2)
    w.add_eos_token_id(V - 1)

    def mat(name, n, k):
        a = (rng.standard_normal((n, k)) * 0.2).astype(np.float32)
        if qtype is None:
            w.add_tensor(name, a)
        elif qtype in (gguf.GGMLQuantizationType.Q4_K, gguf.GGMLQuantizationType.Q5_K):
            # no numpy quantiser: random bytes of the right size (bytes per 256-value super-block)
            nbytes = k // 256 * {gguf.GGMLQuantizationType.Q4_K: 144, gguf.GGMLQuantizationType.Q5_K: 176}[qtype]
            w.add_tensor(name, rng.integers(0, 256, size=(n, nbytes), dtype=np.uint8), raw_dtype=qtype)
        else:
            q = gguf.quants.quantize(a, qtype)
            w.add_tensor(name, q, raw_dtype=qtype)

    w.add_tensor("token_embd.weight", (rng.standard_normal((V, H)) * 0.5).astype(np.float32))
    w.add_tensor("output_norm.weight", (1 + 0.1 * rng.standard_normal(H)).astype(np.float32))
    if not tied:
        mat("output.weight", V, H)
    for i in range(n_layers):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", (1 + 0.1 * rng.standard_normal(H)).astype(np.float32))
        w.add_tensor(p + "ffn_norm.weight", (1 + 0.1 * rng.standard_normal(H)).astype(np.float32))
        mat(p + "attn_q.weight", H, H)
        mat(p + "attn_k.weight", NKV * D, H)
        mat(p + "attn_v.weight", NKV * D, H)
        mat(p + "attn_output.weight", H, H)
        mat(p + "ffn_gate.weight", FF, H)
        mat(p + "ffn_up.weight", FF, H)
        mat(p + "ffn_down.weight", H, FF)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize("weights", ["fp32", "int8", "int4"])
def test_tiny_untied_q8_model_matches_reference(tmp_path, weights):
    """A crafted 2-layer GGUF with an untied Q8_0 head converts and matches the numpy reference."""
    import gguf
    from momoka.models.causal_lm import CausalLM
    from momoka.models.gguf import convert_gguf

    from .conftest import NumpyLlama

    src = _tiny_gguf(tmp_path / "tiny.gguf", qtype=gguf.GGMLQuantizationType.Q8_0, n_layers=2, tied=False)
    out = convert_gguf(src, tmp_path / "out", weights)
    ref = NumpyLlama(gguf.GGUFReader(str(src)))
    ids = [5, 40, 93, 94, 7, 1, 60, 2]
    lm = CausalLM(out)
    got, _ = lm._forward(np.asarray([ids]), np.ones((1, 8), np.int64), np.arange(8)[None], lm._empty_cache(1))
    want = ref.logits(ids)
    tol = 2e-3 if weights != "int8" else 0.1 * np.abs(want).max()  # int8: int8 activations
    np.testing.assert_allclose(got[0], want, atol=tol)


def test_missing_file(tmp_path):
    from momoka.models.gguf import convert_gguf

    # a path that does not exist
    with pytest.raises(ModelError, match="not found"):
        convert_gguf(tmp_path / "nope.gguf", tmp_path / "out")


def test_not_a_gguf(tmp_path):
    from momoka.models.gguf import convert_gguf

    # random bytes with no GGUF magic
    p = tmp_path / "junk.gguf"
    p.write_bytes(b"this is not a model" * 100)
    with pytest.raises(ModelError, match="not a readable GGUF"):
        convert_gguf(p, tmp_path / "out")


def test_truncated_file(tmp_path):
    from momoka.models.gguf import convert_gguf

    # a valid file cut 1000 bytes short: metadata intact, the last tensor's data missing
    data = _tiny_gguf(tmp_path / "full.gguf").read_bytes()
    p = tmp_path / "cut.gguf"
    p.write_bytes(data[:-1000])
    with pytest.raises(ModelError, match="truncated|corrupted"):
        convert_gguf(p, tmp_path / "out")
    # cut inside the metadata (the token list)
    p.write_bytes(data[:600])
    with pytest.raises(ModelError):
        convert_gguf(p, tmp_path / "out")


def test_unsupported_architecture(tmp_path):
    from momoka.models.gguf import convert_gguf

    # a well-formed GGUF declaring the 'qwen2' architecture
    p = _tiny_gguf(tmp_path / "q.gguf", arch="qwen2")
    with pytest.raises(UnsupportedModelError, match="'qwen2'"):
        convert_gguf(p, tmp_path / "out")


def test_unsupported_quantisation(tmp_path):
    import gguf
    from momoka.models.gguf import convert_gguf

    # llama tensors stored as Q5_K (256-value super-blocks), which momoka does not read
    p = _tiny_gguf(tmp_path / "k.gguf", qtype=gguf.GGMLQuantizationType.Q5_K, H=256, FF=256)
    with pytest.raises(UnsupportedModelError, match="Q5_K"):
        convert_gguf(p, tmp_path / "out")


def test_bad_weights_option(tmp_path):
    from momoka.models.gguf import convert_gguf

    # a weight format that does not exist
    with pytest.raises(ConfigError, match="weights"):
        convert_gguf(tmp_path / "x.gguf", tmp_path / "out", "int3")


def test_cli_convert(tmp_path, capsys):
    from momoka.cli import main

    src = _tiny_gguf(tmp_path / "tiny.gguf")
    assert main(["models", "convert-gguf", str(src), str(tmp_path / "o"), "--weights", "int4"]) == 0
    assert str(tmp_path / "o") in capsys.readouterr().out
    cfg = json.loads((tmp_path / "o" / "config.json").read_text())
    assert cfg["weights"] == "int4" and cfg["architecture"] == "llama"
    assert (tmp_path / "o" / "model.onnx").is_file() and (tmp_path / "o" / "tokenizer.json").is_file()


def test_cli_convert_help():
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "momoka", "models", "convert-gguf", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert "--weights" in out.stdout and "FILE" in out.stdout
