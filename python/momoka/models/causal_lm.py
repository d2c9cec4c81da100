"""A small causal language model on onnxruntime: log-probs, perplexity, generation.

:class:`CausalLM` loads a directory written by :func:`momoka.models.gguf.convert_gguf`
(``model.onnx`` with a KV cache, ``tokenizer.json``, ``config.json``)::

    lm = CausalLM("~/.cache/momoka/models/smollm2-135m-instruct")
    lm.perplexity(["The cat sat on the mat."])          # array([...])
    lm.conditional_perplexity("Who sat?", "The cat sat.")  # ppl(q | d), MoC's edge score
    lm.generate([{"role": "user", "content": "Hi"}], max_new_tokens=32).text

Scoring conventions
-------------------
* A text is scored after a *document start* token (``<|endoftext|>`` when the
  vocabulary has it, else the BOS token), so every token of the text gets a
  log-probability.  A ``context`` is placed between that token and the text; the
  context and the text are tokenised separately and their ids concatenated.
* Long inputs are streamed through the KV cache in blocks of ``block`` tokens,
  each token run once.  When the cache would exceed ``window`` tokens (default:
  the model's context length), the cache is rebuilt from the last ``window // 2``
  tokens with fresh positions starting at 0, and streaming goes on: a sliding
  window with recompute, so every token is scored with at least ``window // 2``
  tokens of context (or all preceding tokens) and rotary positions never exceed
  the trained range.  Short texts are scored together in padded batches.
* Log-probabilities are natural logs (nats); perplexity is ``exp(-mean log p)``.

Device: CPU by default; ``device="cuda"`` or the environment variable
``MOMOKA_DEVICE=cuda`` selects onnxruntime's CUDA provider (onnxruntime-gpu).

The class is put together from its session (:mod:`momoka.models.causal_session`: loading, the KV-cache
forward pass), scoring (:mod:`momoka.models.causal_score`: log-probs, perplexity) and generation
(:mod:`momoka.models.causal_generate`).
"""

from __future__ import annotations

from .causal_generate import CausalGeneration, GenerationResult
from .causal_score import CausalScoring
from .causal_session import PrefixState, log_softmax  # noqa: F401  (public here)

__all__ = ["CausalLM", "GenerationResult", "log_softmax"]


class CausalLM(CausalScoring, CausalGeneration):
    """A Llama-architecture ONNX causal LM with a KV cache (see the module docstring).

    ``model_dir`` holds ``model.onnx``, ``tokenizer.json`` and ``config.json``;
    ``device`` is ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` (default: ``MOMOKA_DEVICE`` or cpu;
    see :mod:`momoka.models.runtime`);
    ``threads`` sets onnxruntime's intra-op thread count (default: onnxruntime's).
    ``block`` is the number of tokens run per call when streaming (at most
    ``window // 2``), ``window`` the most tokens the KV cache holds (default: the
    model's context length). ``runtime`` chooses what runs :meth:`generate`:
    ``"onnx"``, ``"llama"`` (llama.cpp on the model's GGUF, the ``llama`` extra) or
    ``"native"`` or ``"auto"`` (default: ``MOMOKA_LLM_RUNTIME``, else auto; see
    :mod:`momoka.models.causal_llama`); scoring always runs on onnxruntime. On the
    CPU the ONNX graph is opened at the first scoring or onnxruntime generation
    call (a damaged graph raises ModelError then), so a model that only
    generates on the native decoder or llama.cpp never opens it; on a GPU it is
    opened here.
    """
