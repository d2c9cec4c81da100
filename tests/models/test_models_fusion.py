"""The attention/GELU fusion of ``minilm-l6-v2-int8-fused`` (``momoka.models.fusion``) against independent
references: the unfused fp32 graph run by onnxruntime, each text run alone, and the graph's structure."""

from __future__ import annotations

import collections
import json
import shutil

import numpy as np
import onnx
import pytest

from momoka.errors import ModelError
from momoka.models import Embedder
from momoka.models.fusion import fuse_encoder

pytestmark = pytest.mark.models

LAYERS = 6  # all-MiniLM-L6-v2


@pytest.fixture(scope="module")
def fused_dir(fp32_dir, tmp_path_factory):
    """The fp32 graph with attention and GELU fused (before quantisation), with its tokenizer."""
    d = tmp_path_factory.mktemp("fused")
    report = fuse_encoder(fp32_dir / "model.onnx", d / "model.onnx", expect_layers=LAYERS)
    shutil.copyfile(fp32_dir / "tokenizer.json", d / "tokenizer.json")
    return d, report


@pytest.fixture(scope="module")
def fused(models_root):
    """The installed fused embedder (int8 ``QAttention``)."""
    return Embedder.from_registry("minilm-l6-v2-int8-fused")


@pytest.fixture(scope="module")
def paragraphs(squad_dir, fallback_paragraphs) -> list[str]:
    """48 real SQuAD paragraphs (20 to 180 words: short and long inputs, all within the 256-token limit), or
    without ../shared/data the first 48 paragraphs of ``fallback_paragraphs.txt`` (21 to 131 words, likewise)."""
    if squad_dir is None:
        assert len(fallback_paragraphs) >= 48
        return fallback_paragraphs[:48]
    out = []
    with open(squad_dir / "documents.jsonl", encoding="utf-8") as f:
        for line in f:
            out += [p for p in json.loads(line)["text"].split("\n\n") if 20 <= len(p.split()) <= 180]
            if len(out) >= 48:
                break
    return out[:48]


def _ops(path) -> collections.Counter:
    return collections.Counter(n.op_type for n in onnx.load(str(path)).graph.node)


# ---------------------------------------------------------------- structure


def test_fusion_replaces_every_block(fused_dir, fp32_dir):
    d, report = fused_dir
    before, after = _ops(fp32_dir / "model.onnx"), _ops(d / "model.onnx")
    assert before["Softmax"] == LAYERS and before["Erf"] == LAYERS  # the decomposed blocks exist
    assert (report.attention, report.gelu, report.num_heads, report.hidden) == (LAYERS, LAYERS, 12, 384)
    assert after["Attention"] == LAYERS and after["Gelu"] == LAYERS
    assert after["Softmax"] == 0 and after["Erf"] == 0 and after["Transpose"] == 0
    assert report.nodes_after == sum(after.values()) < report.nodes_before == sum(before.values())


def test_installed_fused_model_is_fused_and_the_default_is_not(models_root):
    d = models_root / "minilm-l6-v2-int8-fused"
    ops = _ops(d / "model.onnx")
    assert ops["QAttention"] == LAYERS and ops["Gelu"] == LAYERS and ops["Softmax"] == 0
    cfg = json.loads((d / "config.json").read_text())
    assert cfg["disabled_optimizers"] == ["SkipLayerNormFusion"]
    # the default keeps its graph (stores built with it keep their embedder's checksum)
    default = _ops(models_root / "minilm-l6-v2-int8" / "model.onnx")
    assert default["QAttention"] == 0 and default["Softmax"] == LAYERS
    assert "disabled_optimizers" not in json.loads((models_root / "minilm-l6-v2-int8" / "config.json").read_text())


def test_wrong_block_count_is_an_error(fp32_dir, tmp_path):
    with pytest.raises(ModelError, match=f"found {LAYERS} attention blocks, expected {LAYERS + 1}"):
        fuse_encoder(fp32_dir / "model.onnx", tmp_path / "m.onnx", expect_layers=LAYERS + 1)
    assert not (tmp_path / "m.onnx").exists()


def _broken_copy(fp32_dir, tmp_path, layer: int) -> str:
    """The fp32 graph with the query head transpose of one attention block changed."""
    model = onnx.load(str(fp32_dir / "model.onnx"))
    softmaxes = [n for n in model.graph.node if n.op_type == "Softmax"]
    producer = {o: n for n in model.graph.node for o in n.output}
    qk = producer[producer[softmaxes[layer].input[0]].input[0]]  # Softmax <- Add <- MatMul(Q, K^T)
    node = producer[qk.input[0]]
    while node.op_type != "Transpose":  # through the scale Mul to the heads' transpose
        node = producer[node.input[0]]
    for a in node.attribute:
        if a.name == "perm":
            a.ints[:] = [0, 1, 2, 3]
    path = tmp_path / f"broken{layer}.onnx"
    onnx.save(model, str(path))
    return str(path)


@pytest.mark.parametrize("layer", [0, LAYERS - 1])
def test_a_block_that_does_not_match_is_an_error_not_skipped(fp32_dir, tmp_path, layer):
    # One layer differs from the pattern: the rewrite refuses the whole graph instead of
    # fusing the other five and leaving a half-rewritten model.
    with pytest.raises(ModelError, match="attention query"):
        fuse_encoder(_broken_copy(fp32_dir, tmp_path, layer), tmp_path / "m.onnx", expect_layers=LAYERS)


# ---------------------------------------------------------------- vectors


def test_fused_fp32_equals_unfused_fp32(fused_dir, fp32_dir, paragraphs):
    # The rewrite itself is exact up to float rounding: same vectors as the unfused graph, each text alone.
    ref = Embedder(fp32_dir, batching="single").embed(paragraphs)
    got = Embedder(fused_dir[0], batching="single").embed(paragraphs)
    np.testing.assert_allclose(got, ref, atol=2e-5)


def test_fused_padding_is_masked(fused_dir, paragraphs):
    # Padded batches of mixed lengths (the fused Attention's key padding mask): each vector equals
    # the text's vector computed alone.
    texts = paragraphs[:12] + ["short", ""]
    emb = Embedder(fused_dir[0])
    alone = emb.embed(texts, batching="single")
    padded = emb.embed(texts, batching="bucketed", batch_size=len(texts))
    assert emb.forward_passes == len(texts) + 1
    np.testing.assert_allclose(padded, alone, atol=2e-5)


def test_fused_embedder_close_to_fp32(fused, fp32_dir, paragraphs):
    # The int8 fused graph against the unfused fp32 graph, per text, is as close as the unfused int8 default
    # (quantised from that same fp32 graph) is: the fusion adds no error of its own beyond quantisation's.
    # How close quantisation gets depends on the text, so the bar is the default's cosine on the same texts.
    # Measured (fused / default): SQuAD's 48 paragraphs mean 0.99480 / 0.99486, min 0.99193 / 0.99167;
    # the fallback paragraphs mean 0.99316 / 0.99328, min 0.98703 / 0.98497.
    ref = Embedder(fp32_dir).embed(paragraphs)
    cos = (fused.embed(paragraphs) * ref).sum(axis=1)
    default = (Embedder.from_registry("minilm-l6-v2-int8").embed(paragraphs) * ref).sum(axis=1)
    assert cos.mean() >= default.mean() - 1e-3, (cos.mean(), default.mean())
    assert cos.min() >= default.min() - 5e-3, (cos.min(), default.min())
    assert cos.min() >= 0.98, cos.min()  # and no text far off in absolute terms


def test_fused_embedder_independent_of_batch_mates(fused, paragraphs):
    # The activation scale of an int8 pass is computed over the whole batch tensor, so the graph
    # runs one text per pass: a text's vector is the same alone and among other texts.
    assert fused.batching == "single" and fused.batch_independent
    text = paragraphs[3]
    alone = fused.embed([text])[0]
    mates = fused.embed(paragraphs[:3] + [text] + ["a short one", paragraphs[10]])
    np.testing.assert_array_equal(mates[3], alone)


def test_disabled_optimizers_must_be_a_list(models_root, tmp_path):
    d = tmp_path / "m"
    shutil.copytree(models_root / "minilm-l6-v2-int8-fused", d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["disabled_optimizers"] = "SkipLayerNormFusion"
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelError, match="disabled_optimizers .* must be a list"):
        Embedder(d)


def test_cli_index_with_the_fused_embedder(fused, tmp_path, paragraphs):
    # a new store built with --embedder records the fused model and holds its vectors; --no-dense excludes it
    from momoka import Index
    from momoka.cli import main

    src = tmp_path / "doc.txt"
    src.write_text("\n\n".join(paragraphs[:4]), encoding="utf-8")
    assert main(["index", str(src), "--store", str(tmp_path / "s"), "--embedder", "minilm-l6-v2-int8-fused"]) == 0
    with Index.open(tmp_path / "s") as ix:
        assert ix.store.embedder_info["model_id"] == "minilm-l6-v2-int8-fused"
        ids = list(range(ix.store.n_chunks))
        want = fused.embed([ix.store.chunks.text(c) for c in ids])
        np.testing.assert_allclose(ix.store.vector_view("raw").get(ids), want, atol=1e-6)
    assert main(["index", str(src), "--store", str(tmp_path / "t"), "--no-dense", "--embedder",
                 "minilm-l6-v2-int8-fused"]) == 2
