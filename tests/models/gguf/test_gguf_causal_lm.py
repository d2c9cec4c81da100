"""CausalLM on the converted SmolLM2: log-probs vs a numpy reference, streaming, perplexity, chat, generation."""

from __future__ import annotations

import shutil

from pathlib import Path

import numpy as np
import pytest
from momoka.errors import ConfigError, EmptyInputError, InputError, ModelError

pytestmark = pytest.mark.models

PARAGRAPH = (
    "The river rises in the hills to the north of the town and flows south through a wide valley of farms "
    "and small villages. In the nineteenth century its water powered a number of mills, and a canal was built "
    "beside it to carry coal and grain to the coast. Most of the mills closed after the Second World War, but "
    "several of the old buildings have been restored and are now used as homes, shops and a local museum."
)


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _full_pass_logprobs(lm, seq):
    """log P(seq[j] | seq[:j]) for j >= 1 from one cache-free ONNX run."""
    n = len(seq)
    lg, _ = lm._forward(np.asarray([seq]), np.ones((1, n), np.int64), np.arange(n)[None], lm._empty_cache(1))
    lp = _log_softmax(lg[0].astype(np.float64))
    return lp[np.arange(n - 1), np.asarray(seq[1:])]


def test_token_logprobs_match_numpy_reference(lm_fp32, numpy_llama):
    text = "Water boils at 100 degrees Celsius at sea level."
    ids = lm_fp32.encode(text)
    got = lm_fp32.token_logprobs(text)
    seq = [lm_fp32.doc_start_id] + ids
    want = _log_softmax(numpy_llama.logits(seq))[np.arange(len(ids)), np.asarray(ids)]
    assert got.shape == (len(ids),)
    np.testing.assert_allclose(got, want, atol=2e-3)


def test_context_is_prepended(lm_fp32):
    q, d = " It flows south.", "The river rises in the hills."
    got = lm_fp32.token_logprobs(q, context=d)
    seq = [lm_fp32.doc_start_id] + lm_fp32.encode(d) + lm_fp32.encode(q)
    want = _full_pass_logprobs(lm_fp32, seq)[-len(lm_fp32.encode(q)):]
    np.testing.assert_allclose(got, want, atol=1e-4)


def test_streaming_blocks_equal_single_pass(lm_fp32):
    """Each token is run once through the cache in blocks of 7; scores equal a single full pass."""
    ids = lm_fp32.encode(PARAGRAPH)[:60]
    seq = [lm_fp32.doc_start_id] + ids
    want = _full_pass_logprobs(lm_fp32, seq)
    old = lm_fp32.block
    try:
        lm_fp32.block = 7
        got = lm_fp32._stream(seq)[0]
    finally:
        lm_fp32.block = old
    np.testing.assert_allclose(got, want, atol=1e-3)


def test_sliding_window_rebuilds_context(lm_fp32):
    """With window 12 and block 4, token j is scored after the documented recomputed context."""
    seq = [lm_fp32.doc_start_id] + lm_fp32.encode(PARAGRAPH)[:29]
    block, window = 4, 12
    # expected: simulate the documented rule with plain lists, score each block by a fresh full pass
    want = np.empty(len(seq) - 1)
    cache: list[int] = []
    prev_ctx = None
    for start in range(0, len(seq), block):
        chunk = seq[start:start + block]
        if len(cache) + len(chunk) > window:
            cache = cache[-(window // 2):]
        ctx = cache + chunk
        lp = _full_pass_logprobs(lm_fp32, ctx)  # rows predict ctx[1:]
        for j in range(start, start + len(chunk)):
            if j == 0:
                continue
            if j == start:  # predicted by the previous block's last row
                want[j - 1] = _full_pass_logprobs(lm_fp32, prev_ctx + [seq[j]])[-1]
            else:
                want[j - 1] = lp[len(cache) + (j - start) - 1]
        prev_ctx = ctx
        cache = ctx
    old = (lm_fp32.block, lm_fp32.window)
    try:
        lm_fp32.block, lm_fp32.window = block, window
        got = lm_fp32._stream(seq)[0]
    finally:
        lm_fp32.block, lm_fp32.window = old
    np.testing.assert_allclose(got, want, atol=1e-3)


def test_perplexity_sanity(lm_fp32):
    """An English paragraph is far more likely than the same words shuffled."""
    words = PARAGRAPH.split()
    shuffled = " ".join(np.random.default_rng(0).permutation(words))
    ppl = lm_fp32.perplexity([PARAGRAPH, shuffled])
    assert 3 < ppl[0] < 30, ppl
    assert ppl[1] > 300, ppl
    # batching does not change the numbers
    np.testing.assert_allclose(lm_fp32.perplexity(PARAGRAPH), ppl[:1], rtol=1e-4)


@pytest.mark.parametrize("fixture", ["lm_int8", "lm_int4"])
def test_quantised_perplexity_close(request, lm_fp32, fixture):
    lm = request.getfixturevalue(fixture)
    a, b = lm_fp32.perplexity(PARAGRAPH)[0], lm.perplexity(PARAGRAPH)[0]
    assert abs(a - b) / a < (0.03 if fixture == "lm_int8" else 0.002)


def test_conditional_perplexity(lm_fp32):
    q = "The tower was finished in 1889 and stands in Paris."
    rel = "The Eiffel Tower, completed in 1889, is a wrought-iron tower in Paris, France."
    unrel = "Photosynthesis converts light energy into chemical energy in plants."
    p_q = lm_fp32.perplexity(q)[0]
    p_rel = lm_fp32.conditional_perplexity(q, rel)
    p_unrel = lm_fp32.conditional_perplexity(q, unrel)
    assert p_rel < p_q and p_rel < p_unrel
    batch = lm_fp32.conditional_perplexities([q, q], [rel, unrel])
    np.testing.assert_allclose(batch, [p_rel, p_unrel], rtol=1e-4)


def test_continuation_logprob(lm_fp32):
    prompt = "The capital of France is"
    good = lm_fp32.continuation_logprob(prompt, " Paris")
    bad = lm_fp32.continuation_logprob(prompt, " Berlin")
    assert good > bad
    both = lm_fp32.token_logprobs(" Paris and Lyon", context=prompt)
    assert lm_fp32.continuation_logprob(prompt, " Paris and Lyon") == pytest.approx(both.sum())
    assert lm_fp32.continuation_logprob(prompt, " Paris and Lyon", mean=True) == pytest.approx(both.mean())


def test_long_text_streams(lm_fp32):
    """A text longer than one block streams through the cache and scores every token."""
    text = " ".join([PARAGRAPH] * 3)
    n = len(lm_fp32.encode(text))
    old = lm_fp32.block
    try:
        lm_fp32.block = 64
        assert n > lm_fp32.block
        lp = lm_fp32.token_logprobs(text)
    finally:
        lm_fp32.block = old
    assert lp.shape == (n,) and np.isfinite(lp).all()
    # repeated paragraphs become nearly certain once seen
    assert lp[-50:].mean() > -0.5


def test_empty_inputs(lm_fp32):
    # an empty list of texts is an empty answer; an empty text cannot be scored
    assert lm_fp32.perplexity([]).shape == (0,)
    with pytest.raises(EmptyInputError):
        lm_fp32.perplexity(["fine", ""])
    with pytest.raises(EmptyInputError):
        lm_fp32.token_logprobs("")


# ---------------------------------------------------------------- chat template


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "user", "content": "Hi!"}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Why is the sky blue?"}],
        [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c\nd"}],
    ],
)
@pytest.mark.parametrize("gen", [True, False])
def test_chat_template_matches_jinja(lm_fp32, messages, gen):
    """The native ChatML rendering equals jinja2's rendering of the GGUF's own template."""
    jinja2 = pytest.importorskip("jinja2")
    tpl = jinja2.Environment().from_string(lm_fp32.config["chat_template"])
    assert lm_fp32.apply_chat_template(messages, add_generation_prompt=gen) == tpl.render(
        messages=messages, add_generation_prompt=gen)


def test_chat_template_literal(lm_fp32):
    out = lm_fp32.apply_chat_template([{"role": "user", "content": "Hi"}])
    assert out == ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                   "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")


def test_bad_messages(lm_fp32):
    # not a list, a message without content, an empty list
    for bad in ["hello", [{"role": "user"}], []]:
        with pytest.raises(InputError):
            lm_fp32.apply_chat_template(bad)


# ---------------------------------------------------------------- generation


def test_greedy_generation_equals_argmax_of_full_passes(lm_fp32):
    prompt = "Once upon a time"
    res = lm_fp32.generate(prompt, max_new_tokens=6)
    seq = lm_fp32.encode(prompt)
    want = []
    for _ in range(6):
        n = len(seq)
        lg, _ = lm_fp32._forward(np.asarray([seq]), np.ones((1, n), np.int64), np.arange(n)[None],
                                 lm_fp32._empty_cache(1))
        nxt = int(lg[0, -1].argmax())
        if nxt in lm_fp32.stop_ids:
            break
        want.append(nxt)
        seq = seq + [nxt]
    assert res.token_ids == want
    assert res.prompt_tokens == len(lm_fp32.encode(prompt))
    assert res.completion_tokens == len(want)
    assert res.text == lm_fp32.decode(want)


def test_chat_generation(lm_fp32):
    res = lm_fp32.generate([{"role": "user", "content": "What is the capital of France?"}], max_new_tokens=30)
    assert "Paris" in res.text
    assert res.finish_reason == "stop"


def test_sampling_is_seeded(lm_fp32):
    a = lm_fp32.generate("The weather today", max_new_tokens=5, temperature=1.0, seed=3)
    b = lm_fp32.generate("The weather today", max_new_tokens=5, temperature=1.0, seed=3)
    assert a.token_ids == b.token_ids
    outs = {tuple(lm_fp32.generate("The weather today", max_new_tokens=5, temperature=2.0, seed=s).token_ids)
            for s in range(3)}
    assert len(outs) > 1
    # a tiny nucleus keeps only the most likely token: greedy
    g = lm_fp32.generate("The weather today", max_new_tokens=5)
    n = lm_fp32.generate("The weather today", max_new_tokens=5, temperature=1.0, top_p=1e-6, seed=1)
    assert g.token_ids == n.token_ids


def test_stop_and_length(lm_fp32):
    full = lm_fp32.generate("1, 2, 3, 4,", max_new_tokens=12)
    assert full.finish_reason == "length" and full.completion_tokens == 12
    cut = lm_fp32.generate("1, 2, 3, 4,", max_new_tokens=12, stop=["7"])
    assert "7" not in cut.text and cut.finish_reason == "stop"
    assert full.text.startswith(cut.text)
    zero = lm_fp32.generate("1, 2", max_new_tokens=0)
    assert zero.text == "" and zero.completion_tokens == 0 and zero.finish_reason == "length"


def test_bad_generation_options(lm_fp32):
    # negative temperature, top_p out of range, negative budget
    with pytest.raises(ConfigError):
        lm_fp32.generate("x", temperature=-1)
    with pytest.raises(ConfigError):
        lm_fp32.generate("x", top_p=0)
    with pytest.raises(ConfigError):
        lm_fp32.generate("x", max_new_tokens=-1)


# ---------------------------------------------------------------- loading errors


def test_load_errors(tmp_path, smollm_int4):
    from momoka.models.causal_lm import CausalLM

    # a directory without config.json
    with pytest.raises(ModelError, match="config.json"):
        CausalLM(tmp_path)
    # a corrupted graph file next to a valid config and tokenizer
    d = tmp_path / "bad"
    d.mkdir()
    for f in ("config.json", "tokenizer.json"):
        shutil.copy(smollm_int4 / f, d / f)
    (d / "model.onnx").write_bytes(b"\x00garbage" * 64)
    lm = CausalLM(d)  # on the CPU the graph is opened when first needed (native generation never needs it)
    with pytest.raises(ModelError, match="corrupted"):
        lm.perplexity(["The cat sat."])
    # a valid ONNX graph whose inputs are not those of a KV-cache causal LM
    from onnx import TensorProto, helper, save_model

    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    save_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), str(d / "model.onnx"))
    with pytest.raises(ModelError, match="do not match"):
        CausalLM(d).token_logprobs("Hi")
    with pytest.raises(ModelError, match="do not match"):  # generation on onnxruntime opens it too
        CausalLM(d, runtime="onnx").generate("Hello", max_new_tokens=2)
    # an unknown device name
    with pytest.raises(ConfigError, match="device"):
        CausalLM(smollm_int4, device="tpu")


def test_cuda_request_without_provider(smollm_int4):
    import onnxruntime as ort
    from momoka.models.causal_lm import CausalLM

    if "CUDAExecutionProvider" in ort.get_available_providers():
        lm = CausalLM(smollm_int4, device="cuda")
        assert lm.providers[0] == "CUDAExecutionProvider"
        assert np.isfinite(lm.perplexity("Hello there.")).all()
        # float32 products in float32 on the GPU: TensorFloat-32 moved log-probabilities by up to 0.05
        text = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")[:3000]
        cpu = CausalLM(smollm_int4, device="cpu")
        assert np.abs(lm.token_logprobs(text) - cpu.token_logprobs(text)).max() < 1e-3
    else:
        # no onnxruntime-gpu here: a clear error, not a silent CPU fallback
        with pytest.raises(ConfigError, match="CUDA"):
            CausalLM(smollm_int4, device="cuda")


def test_chat_template_paths(lm_fp32, monkeypatch):
    """ChatML is rendered without jinja2; another template is rendered by jinja2."""
    msgs = [{"role": "user", "content": "Hi"}]
    want = lm_fp32.apply_chat_template(msgs)
    monkeypatch.setitem(__import__("sys").modules, "jinja2", None)  # jinja2 unavailable
    assert lm_fp32.apply_chat_template(msgs) == want
    monkeypatch.undo()
    pytest.importorskip("jinja2")
    other = dict(lm_fp32.config, chat_template="{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }};{% endfor %}")
    monkeypatch.setattr(lm_fp32, "config", other)
    assert lm_fp32.apply_chat_template(msgs) == "[user] Hi;"


def test_io_binding_path_matches_ortvalue_path(lm_int4, monkeypatch):
    """The I/O-bound run path (what a CUDA session runs: the cache stays on the device) gives the same
    scores and tokens as the CPU's OrtValue path; here it binds to host memory."""
    text = "Hello there, how are you today?"
    a = lm_int4.perplexity([text])
    g = lm_int4.generate("Once upon a time", max_new_tokens=6).token_ids
    ids = lm_int4.encode(text)
    grown = lm_int4.extend_state(lm_int4.prefix_state(ids[:4]), ids[4:])
    monkeypatch.setattr(lm_int4, "_cpu", False)
    np.testing.assert_allclose(lm_int4.perplexity([text]), a, rtol=1e-6)
    assert lm_int4.generate("Once upon a time", max_new_tokens=6).token_ids == g
    bound = lm_int4.extend_state(lm_int4.prefix_state(ids[:4]), ids[4:])  # states come back as host arrays
    assert bound.length == grown.length == len(ids)
    np.testing.assert_allclose(bound.last_logits, grown.last_logits, rtol=1e-5, atol=1e-5)
    for k, v in grown.kv.items():
        assert isinstance(bound.kv[k], np.ndarray)
        np.testing.assert_allclose(bound.kv[k], v, rtol=1e-5, atol=1e-5)


def test_progress_counts_every_token(lm_int4):
    calls = []
    texts = ["short one.", "another short text here.", " ".join([PARAGRAPH] * 6)]
    lm_int4.perplexity(texts, progress=lambda done, total: calls.append((done, total)))
    total = sum(1 + len(lm_int4.encode(t)) for t in texts)
    assert calls[-1] == (total, total)
    assert all(a[0] < b[0] for a, b in zip(calls, calls[1:])) and len(calls) >= 3
