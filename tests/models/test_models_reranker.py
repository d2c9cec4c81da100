"""Reranker backends against references computed in the tests."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from tokenizers import Tokenizer

from momoka.errors import ConfigError, EmptyInputError, InputError, ModelError
from momoka.models import (
    CosineReranker,
    CrossEncoderReranker,
    Embedder,
    QueryLikelihoodReranker,
    Reranker,
    get_reranker,
    rank,
)

pytestmark = pytest.mark.models


# ---------------------------------------------------------------- cosine


def test_cosine_matches_numpy(fp32_dir):
    emb = Embedder(fp32_dir)
    rr = CosineReranker(emb)
    assert isinstance(rr, Reranker)
    q = "Who founded the university?"
    ps = ["The university was founded by John D. Rockefeller in 1890.", "Bananas are yellow.", "Rockefeller"]
    got = rr.score(q, ps)
    # Reference: embed each text alone, cosine in numpy.
    vq = emb.embed([q], batch_size=1)[0]
    ref = [float(vq @ emb.embed([p], batch_size=1)[0]) for p in ps]
    np.testing.assert_allclose(got, ref, atol=1e-5)
    assert got.dtype == np.float32
    # The passage cache returns the same scores the second time.
    np.testing.assert_allclose(rr.score(q, ps), got, atol=1e-6)
    assert rank(rr, q, ps, top_k=1)[0][0] == 0


def test_cosine_ranks_gold_paragraph(embedder, squad_dir):
    if squad_dir is None:
        pytest.skip("../shared/data is not available")
    docs = {}
    with open(squad_dir / "documents.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            docs[d["doc_id"]] = d["text"].split("\n\n")
    qs = []
    with open(squad_dir / "questions.jsonl", encoding="utf-8") as f:
        for line in f:
            qs.append(json.loads(line))
            if len(qs) >= 20:
                break
    rr = CosineReranker(embedder)
    rr_sum = 0.0
    for q in qs:
        paras = docs[q["doc_id"]]
        ranking = [i for i, _ in rank(rr, q["question"], paras)]
        rr_sum += 1.0 / (ranking.index(q["paragraph_index"]) + 1)
    mrr = rr_sum / len(qs)
    # Chance level with dozens of paragraphs is < 0.1; the embedder must do far better.
    assert mrr > 0.4, mrr


def test_reranker_bad_input(embedder):
    rr = CosineReranker(embedder)
    assert rr.score("q", []).shape == (0,)
    with pytest.raises(EmptyInputError):
        rr.score("   ", ["p"])  # whitespace-only query
    with pytest.raises(InputError):
        rr.score("q", "a single string, not a list")
    with pytest.raises(InputError, match="passage 1"):
        rr.score("q", ["ok", None])
    with pytest.raises(ConfigError, match="unknown reranker"):
        get_reranker("bm42")
    with pytest.raises(ConfigError, match="onnx_path"):
        get_reranker("cross-encoder")
    assert isinstance(get_reranker("cosine", embedder=embedder), CosineReranker)


# ---------------------------------------------------------------- cross-encoder


def _cross_encoder_graph(path, two_columns=False, names=("input_ids", "attention_mask", "token_type_ids")):
    """A tiny ONNX "cross-encoder": logit = sum(input_ids * token_type_ids * attention_mask) / 1000.

    It reads exactly what a real cross-encoder reads, so the test checks pair
    tokenisation, segment ids, padding and output handling against numpy.
    """
    import onnx
    from onnx import TensorProto, helper

    ids, mask, tt = names
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["b", "s"]) for n in names]
    nodes = [
        helper.make_node("Mul", [ids, tt], ["a"]),
        helper.make_node("Mul", ["a", mask], ["b2"]),
        helper.make_node("Cast", ["b2"], ["c"], to=TensorProto.FLOAT),
        helper.make_node("ReduceSum", ["c", "ax"], ["d"], keepdims=1),
        helper.make_node("Div", ["d", "k"], ["e"]),
    ]
    inits = [
        helper.make_tensor("ax", TensorProto.INT64, [1], [1]),
        helper.make_tensor("k", TensorProto.FLOAT, [], [1000.0]),
    ]
    if two_columns:
        nodes += [
            helper.make_node("Neg", ["e"], ["z"]),
            helper.make_node("Concat", ["z", "e"], ["logits"], axis=1),
        ]
        out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["b", 2])
    else:
        nodes[-1] = helper.make_node("Div", ["d", "k"], ["logits"])
        out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["b", 1])
    g = helper.make_graph(nodes, "ce", inputs, [out], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))


@pytest.mark.parametrize("two_columns", [False, True])
def test_cross_encoder_matches_reference(models_root, tmp_path, two_columns):
    tok_path = models_root / "minilm-l6-v2-int8" / "tokenizer.json"
    shutil.copyfile(tok_path, tmp_path / "tokenizer.json")
    _cross_encoder_graph(tmp_path / "model.onnx", two_columns)
    ce = CrossEncoderReranker(tmp_path / "model.onnx", batch_size=2)
    q = "what is the capital of poland"
    ps = ["Warsaw is the capital.", "x", "A much longer passage about Polish cities and rivers, Krakow and Gdansk.", ""]
    got = ce.score(q, ps)
    tok = Tokenizer.from_file(str(tok_path))
    tok.no_padding()
    tok.no_truncation()
    ref = []
    for p in ps:
        e = tok.encode(q, p)
        s = sum(i * t for i, t in zip(e.ids, e.type_ids)) / 1000.0
        ref.append(2 * s if two_columns else s)  # two columns: logit1 - logit0 = s - (-s)
    np.testing.assert_allclose(got, ref, rtol=1e-5)


def test_cross_encoder_wrong_inputs(models_root, tmp_path):
    shutil.copyfile(models_root / "minilm-l6-v2-int8" / "tokenizer.json", tmp_path / "tokenizer.json")
    # Inputs named like a different exporter's ("ids", "mask", "segments").
    _cross_encoder_graph(tmp_path / "model.onnx", names=("ids", "mask", "segments"))
    with pytest.raises(ModelError, match="missing: \\['input_ids', 'attention_mask'\\]"):
        CrossEncoderReranker(tmp_path / "model.onnx")
    # No tokenizer beside the model.
    (tmp_path / "tokenizer.json").unlink()
    with pytest.raises(ModelError, match="tokenizer"):
        CrossEncoderReranker(tmp_path / "model.onnx")
    with pytest.raises(ModelError, match="not found"):
        CrossEncoderReranker(tmp_path / "missing.onnx")


# ---------------------------------------------------------------- query likelihood


def test_query_likelihood_template_check():
    with pytest.raises(ConfigError, match="passage"):
        QueryLikelihoodReranker(causal_lm=object(), template="no placeholder")


@pytest.fixture(scope="module")
def lm(lm_root):
    from momoka.models import default_causal_lm

    return default_causal_lm()


def test_query_likelihood_matches_unbatched_lm(lm):
    ql = QueryLikelihoodReranker(lm)
    q = "What river flows through Warsaw?"
    ps = [
        "Warsaw is the capital and largest city of Poland. It stands on the Vistula River.",
        "Bananas are rich in potassium and grow in tropical climates.",
    ]
    got = ql.score(q, ps)
    # Reference: the LM's one-pair path (no batching), mean over the query's tokens.
    ref = [lm.continuation_logprob(ql.prompt(p), " " + q, mean=True) for p in ps]
    np.testing.assert_allclose(got, ref, atol=2e-3)
    assert (got < 0).all()


def test_query_likelihood_ranks_the_answering_passage_first(lm):
    ql = get_reranker("upr", causal_lm=lm)
    ps = [
        "Warsaw is the capital and largest city of Poland. It stands on the Vistula River.",
        "Photosynthesis lets plants turn sunlight, water and carbon dioxide into sugar.",
        "The Super Bowl is the annual championship game of the National Football League.",
    ]
    queries = ["What river flows through Warsaw?", "How do plants make sugar?", "Which game decides the NFL champion?"]
    for gold, q in enumerate(queries):
        assert rank(ql, q, ps)[0][0] == gold, (q, ql.score(q, ps))


def test_query_likelihood_kv_reuse_same_scores_fewer_prompt_runs(lm):
    ps = [
        "Warsaw is the capital and largest city of Poland. It stands on the Vistula River.",
        "Photosynthesis lets plants turn sunlight, water and carbon dioxide into sugar.",
        "The Super Bowl is the annual championship game of the National Football League.",
    ]
    queries = ["What river flows through Warsaw?", "How do plants make sugar?", "Which game decides the NFL champion?"]
    plain = QueryLikelihoodReranker(lm, kv_cache_mb=0)     # every (prompt, query) pair run whole, batched
    cached = QueryLikelihoodReranker(lm)
    want = np.stack([plain.score(q, ps) for q in queries])
    got = np.stack([cached.score(q, ps) for q in queries])
    np.testing.assert_allclose(got, want, atol=2e-3)
    assert plain.prompt_runs == 9 and cached.prompt_runs == 3   # each passage's prompt ran once
    np.testing.assert_allclose(QueryLikelihoodReranker(lm).score_matrix(queries, ps), want, atol=2e-3)
    # A cache too small for two prompts keeps the last one only: on the next call the first two passages
    # are misses again, the last a hit (a call looks up all its passages before it stores the misses).
    tiny = QueryLikelihoodReranker(lm, kv_cache_mb=0.001)
    tiny.score(queries[0], ps)
    tiny.score(queries[1], ps)
    assert tiny.prompt_runs == 5 and len(tiny._states) == 1
    # score_batch: each question against its own list; one prompt run per distinct passage in the batch
    fresh = QueryLikelihoodReranker(lm)
    got = fresh.score_batch(queries, [ps[:2], ps[1:], [ps[0], ps[2], ps[0]]])
    np.testing.assert_allclose(got[0], want[0, :2], atol=2e-3)
    np.testing.assert_allclose(got[1], want[1, 1:], atol=2e-3)
    np.testing.assert_allclose(got[2], want[2, [0, 2, 0]], atol=2e-3)
    assert fresh.prompt_runs == 3
    with pytest.raises(InputError):
        fresh.score_batch(queries, [ps])  # one list per query
    with pytest.raises(EmptyInputError):
        cached.score_matrix(["   "], ps)


def test_causal_lm_prefix_states_batched_equal_single_runs(lm):
    # Tried: three prompts of different lengths run together (right padding) against each run alone.
    prompts = ["Passage: Warsaw is the capital of Poland.", "Passage: Bananas.",
               "Passage: The Super Bowl is the annual championship game of the National Football League."]
    ids = [lm.context_ids(p) for p in prompts]
    batched = lm.prefix_states(ids)
    for x, st in zip(ids, batched):
        one = lm.prefix_state(x)
        assert st.length == one.length == len(x)
        np.testing.assert_allclose(st.last_logits, one.last_logits, atol=2e-3)
        assert st.kv.keys() == one.kv.keys()
        for k in one.kv:
            assert st.kv[k].shape == one.kv[k].shape
            np.testing.assert_allclose(st.kv[k], one.kv[k], atol=2e-3)
    # the batched state continues like the single one
    q = lm.encode(" What is the capital of Poland?")
    np.testing.assert_allclose(lm.prefix_batch(batched[0], [q])[0], lm.prefix_batch(ids[0], [q])[0], atol=2e-3)
    with pytest.raises(InputError):
        lm.prefix_states([ids[0], []])
