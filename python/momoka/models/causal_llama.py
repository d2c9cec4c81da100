"""Generation through llama.cpp (``llama-cpp-python``, the ``llama`` extra) on the GGUF a causal LM was
converted from.

:class:`~momoka.models.causal_lm.CausalLM` keeps one token loop (:meth:`CausalLM.generate`: the chat
template, momoka's tokenizer, stop tokens and strings, ``max_new_tokens``, greedy or seeded top-p
sampling on the logits); what computes the next-token logits is a *decoder*: momoka's own KV-cache loop
on onnxruntime (exact to the Q4_1 weights, fp32 activations) or :class:`LlamaCppDecoder`, llama.cpp's
fused kernels on the same GGUF (8-bit activations, so logits differ slightly and a greedy token can
differ where two candidates are nearly tied). Log-probabilities (perplexity, UPR, ETS, MoC) always run
on onnxruntime.

Which decoder generates is ``MOMOKA_LLM_RUNTIME`` (or ``CausalLM(runtime=...)``): ``onnx``, ``llama``,
``native`` (momoka's own C++ decoder on the GGUF, :mod:`momoka.models.causal_native`), or ``auto`` (the
default): the native decoder when the model runs on the CPU, its GGUF is found and this CPU has its AVX2 or
AVX-512 kernels; otherwise llama.cpp when ``llama_cpp`` imports and :func:`llama_is_faster` says so for the
call's prompt length and ``max_new_tokens``; otherwise onnxruntime.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import ConfigError, ModelError
from .runtime import sha256_file

__all__ = ["RUNTIMES", "LlamaCppDecoder", "find_gguf", "llama_cpp_available", "llama_is_faster"]

#: The values of ``MOMOKA_LLM_RUNTIME`` / ``CausalLM(runtime=...)``.
RUNTIMES = ("auto", "onnx", "llama", "native")

#: Seconds per token measured with 2 threads on the 2-core development machine (bench/micro/bench_models_decode.py,
#: SmolLM2-135M Q4_1): prefill and decode of momoka's onnxruntime loop and of llama.cpp. Only their ratios
#: matter to :func:`llama_is_faster`.
ONNX_PREFILL_S = 1 / 456
ONNX_DECODE_S = 1 / 51
LLAMA_PREFILL_S = 1 / 281
LLAMA_DECODE_S = 1 / 88


def llama_cpp_available() -> bool:
    """Whether ``llama_cpp`` (``pip install 'momoka[llama]'``) can be imported."""
    try:
        import llama_cpp  # noqa: F401  # optional: llama_cpp (the llama extra)
    except ImportError:
        return False
    return True


def llama_is_faster(prompt_tokens: int, max_new_tokens: int) -> bool:
    """Whether llama.cpp is expected to finish a generation of ``prompt_tokens`` + ``max_new_tokens`` sooner
    than the onnxruntime loop (prefill plus decode at the measured speeds; see the module constants)."""
    onnx = prompt_tokens * ONNX_PREFILL_S + max_new_tokens * ONNX_DECODE_S
    llama = prompt_tokens * LLAMA_PREFILL_S + max_new_tokens * LLAMA_DECODE_S
    return llama < onnx


def find_gguf(model_dir: str | os.PathLike, config: dict) -> Path | None:
    """The GGUF file ``model_dir`` was converted from, or None.

    ``config["source"]`` names the file and its sha256 (:func:`momoka.models.gguf.convert_gguf` writes it).
    Looked for, in order: the verified source members that ``momoka models install`` keeps in the model cache
    holding ``model_dir`` (:func:`momoka.models.catalog.cached_source`), then a file of that name inside
    ``model_dir``; a candidate counts only when its sha256 matches.
    """
    src = config.get("source") or {}
    name, want = src.get("file"), src.get("sha256")
    if not name or not want:
        return None
    from .catalog import SOURCES, cached_source  # start-up: momoka.models.catalog (the gguf package)

    d = Path(model_dir)
    for pkg in SOURCES.values():
        for member, sha in pkg.files.items():
            if sha == want and member.rsplit("/", 1)[-1] == name:
                found = cached_source(pkg.name, member, path=d.parent)
                if found is not None:
                    return found
    local = d / name
    if local.is_file() and sha256_file(local) == want:
        return local
    return None


class LlamaCppDecoder:
    """Next-token logits from llama.cpp for one sequence at a time: :meth:`start` runs a prompt, :meth:`step`
    one more token; both return the logits after the last token (float32, vocabulary size).

    ``gguf`` is the model file, ``n_ctx`` the most tokens a sequence holds, ``threads`` the threads of
    both prompt processing and decoding. ``n_batch``/``n_ubatch`` and ``flash_attn`` are the llama.cpp
    settings measured fastest here (bench/micro/bench_models_decode.py).
    """

    def __init__(self, gguf: str | os.PathLike, *, n_ctx: int, threads: int, n_batch: int = 512,
                 n_ubatch: int = 512, flash_attn: bool = True):
        try:
            import llama_cpp  # optional: llama_cpp (the llama extra)
        except ImportError as exc:
            raise ConfigError("the llama runtime needs llama-cpp-python: pip install 'momoka[llama]'") from exc
        self._llama_cpp = llama_cpp
        try:
            self.llm = llama_cpp.Llama(model_path=str(gguf), n_ctx=int(n_ctx), n_threads=int(threads),
                                       n_threads_batch=int(threads), n_batch=int(n_batch), n_ubatch=int(n_ubatch),
                                       flash_attn=bool(flash_attn), logits_all=False, verbose=False)
        except Exception as exc:  # llama.cpp reports a bad file as a ValueError or RuntimeError
            raise ModelError(f"llama.cpp cannot load {gguf}: {exc}") from exc
        self.n_vocab = int(self.llm.n_vocab())
        self.n_ctx = int(n_ctx)

    def _logits(self) -> np.ndarray:
        ptr = self._llama_cpp.llama_get_logits_ith(self.llm.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()

    def start(self, ids: list[int]) -> np.ndarray:
        """Forget the previous sequence, run ``ids`` and return the logits after its last token."""
        self.llm.reset()
        self.llm.eval(list(ids))
        return self._logits()

    def step(self, token: int) -> np.ndarray:
        """Append ``token`` to the sequence and return the logits after it."""
        self.llm.eval([int(token)])
        return self._logits()
