"""Generation with :class:`~momoka.models.causal_lm.CausalLM`: the chat template, and sampling or greedy decoding
with stop strings.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .. import settings
from ..errors import ConfigError, InputError, InputTooLargeError, ModelError

from . import causal_llama
from .causal_session import CausalSession
from .runtime import resolve_threads


@dataclass
class GenerationResult:
    """The outcome of :meth:`CausalLM.generate`.

    ``finish_reason`` is ``"stop"`` (an end token or a stop string) or ``"length"``
    (``max_new_tokens`` or the context length reached).
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    token_ids: list[int] = field(default_factory=list)


class OnnxDecoder:
    """Next-token logits from momoka's KV-cache loop on onnxruntime (exact fp32 activations): :meth:`start`
    runs a prompt, :meth:`step` one more token (the decoder interface of :mod:`momoka.models.causal_llama`)."""

    def __init__(self, session: CausalSession):
        self.session = session
        self.cache = None

    def start(self, ids: list[int]) -> np.ndarray:
        """Run ``ids`` from an empty cache and return the logits after the last one."""
        _, logits, self.cache, _ = self.session._stream(ids, n_scored=0)
        return logits

    def step(self, token: int) -> np.ndarray:
        """Append ``token`` and return the logits after it."""
        n = self.cache.length
        lg, self.cache = self.session._forward(np.asarray([[token]], dtype=np.int64), np.ones((1, n + 1), dtype=np.int64),
                                               np.asarray([[n]], dtype=np.int64), self.cache)
        return lg[0, -1]


class CausalGeneration(CausalSession):
    """Chat prompts and generation (part of :class:`~momoka.models.causal_lm.CausalLM`)."""

    _llama = None  # the LlamaCppDecoder, made on first use
    _native = None  # the NativeDecoder, made on first use
    _gguf_path = None  # the GGUF this model was converted from (looked for once: each look checks its sha256)
    _gguf_missing = False  # no GGUF was found for this model

    def resolve_runtime(self) -> str:
        """The generation runtime asked for: ``runtime=`` of the constructor, else ``$MOMOKA_LLM_RUNTIME``
        (``auto``, ``onnx``, ``llama`` or ``native``; see :mod:`momoka.models.causal_llama`)."""
        return self.runtime or settings.get_choice("MOMOKA_LLM_RUNTIME")

    def runtime_key(self) -> str:
        """What generates for this model, as a cache key names it: ``"onnx"``; ``"llama"``; ``"native"`` (also
        for ``auto`` where the native decoder runs); or ``"auto"`` when ``auto`` may pick llama.cpp (it is
        installed and the model runs on the CPU; the pick then depends only on the request's prompt and token
        budget). ``auto`` with neither is ``"onnx"``."""
        runtime = self.resolve_runtime()
        if self.native_only and runtime in ("auto", "onnx"):
            return "native"
        if runtime == "auto":
            if self._native_possible():
                return "native"
            if not (self._cpu and not self._gguf_missing and causal_llama.llama_cpp_available()):
                return "onnx"
        return runtime

    def _gguf(self):
        """The GGUF file this model was converted from, or None (:func:`~momoka.models.causal_llama.find_gguf`,
        looked for once per model)."""
        if self._gguf_path is None and not self._gguf_missing:
            if self.native_only:
                self._gguf_path = self.model_dir / str(self.config["gguf_file"])
            else:
                self._gguf_path = causal_llama.find_gguf(self.model_dir, self.config)
            self._gguf_missing = self._gguf_path is None
        return self._gguf_path

    def _required_gguf(self, runtime: str):
        """:meth:`_gguf`, or a ModelError saying what the ``runtime`` needs and how to get it."""
        gguf = self._gguf()
        if gguf is None:
            name = (self.config.get("source") or {}).get("file", "the GGUF")
            raise ModelError(f"the {runtime} generation runtime needs {name}, the GGUF {self.model_dir} was "
                             "converted from; run `momoka models install` (it keeps the GGUF in the model cache) "
                             f"or copy the file into {self.model_dir}")
        return gguf

    def _native_possible(self) -> bool:
        """Whether ``auto`` runs the native decoder: the model runs on the CPU, its GGUF is found and this
        CPU has the decoder's AVX2 or AVX-512 kernels."""
        if self._native is not None or self.native_only:
            return True
        if not self._cpu:
            return False
        from . import causal_native  # start-up: the decoder binding, only when generating

        return causal_native.simd() != "scalar" and self._gguf() is not None

    def decoder_for(self, prompt_tokens: int, max_new_tokens: int):
        """The decoder that runs a generation of ``prompt_tokens`` + up to ``max_new_tokens``: the native
        decoder when the runtime is ``native``, or ``auto`` and it can run (:meth:`_native_possible`); else
        llama.cpp's when the runtime is ``llama``, or ``auto`` and llama.cpp is installed, the model runs on
        the CPU, its GGUF is found and :func:`~momoka.models.causal_llama.llama_is_faster` holds for the
        call; else an :class:`OnnxDecoder`.

        Raises ConfigError for ``llama`` without llama-cpp-python and ModelError when the GGUF that
        ``llama`` or ``native`` needs is not found.
        """
        runtime = self.resolve_runtime()
        if self.native_only and runtime == "onnx":
            runtime = "native"  # no graph to run: the native decoder computes the same logits
        if runtime == "native" or (runtime == "auto" and self._native_possible()):
            return self._native_decoder()
        if runtime == "auto":
            use = (self._cpu and not self._gguf_missing and causal_llama.llama_is_faster(prompt_tokens, max_new_tokens)
                   and causal_llama.llama_cpp_available())
            if use and (self._llama is not None or self._load_llama(required=False)):
                return self._llama
            return OnnxDecoder(self)
        if runtime == "llama":
            if self._llama is None:
                self._load_llama(required=True)
            return self._llama
        return OnnxDecoder(self)

    def _native_decoder(self):
        """The :class:`~momoka.models.causal_native.NativeDecoder` of this model's GGUF, made on first use (generation
        and, for a native-only model, scoring share it)."""
        if self._native is None:
            from . import causal_native  # start-up: the decoder binding, only when generating

            self._native = causal_native.NativeDecoder(self._required_gguf("native"), n_ctx=self.max_context,
                                                       threads=self._gguf_threads())
        return self._native

    def _gguf_threads(self) -> int:
        """Threads of the GGUF runtimes: ``threads=``, else ``MOMOKA_THREADS``, else the CPUs this process may use."""
        return resolve_threads(self.threads) or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                                                 else os.cpu_count() or 1)

    def _load_llama(self, *, required: bool) -> bool:
        if required and not causal_llama.llama_cpp_available():
            raise ConfigError("the llama generation runtime needs llama-cpp-python: pip install 'momoka[llama]' "
                              "(or set MOMOKA_LLM_RUNTIME=onnx)")
        gguf = self._required_gguf("llama") if required else self._gguf()
        if gguf is None:
            return False
        self._llama = causal_llama.LlamaCppDecoder(gguf, n_ctx=self.max_context, threads=self._gguf_threads())
        return True

    def apply_chat_template(self, messages: Sequence[dict], add_generation_prompt: bool = True) -> str:
        """Render chat messages with the model's template (ChatML for SmolLM2 and Qwen2.5).

        ChatML templates (SmolLM2's, and Qwen2.5's without tools) are rendered natively: a default system
        message (taken from the template) is inserted when the first message is not a system
        message, then ``<|im_start|>{role}\\n{content}<|im_end|>\\n`` per message,
        then ``<|im_start|>assistant\\n`` when ``add_generation_prompt``.  Other
        templates need ``jinja2``.
        """
        if not isinstance(messages, (list, tuple)) or not messages:
            raise InputError("messages must be a non-empty list of {'role', 'content'} dicts")
        for m in messages:
            if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
                raise InputError(f"bad chat message {m!r}: need str 'role' and 'content'")
        template = self.config.get("chat_template") or ""
        # the ChatML loop body (with real newlines inside the quotes, or escaped ones)
        chatml_body = "'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'"
        chatml_attr = chatml_body.replace("message['role']", "message.role").replace("message['content']", "message.content")
        tnorm = template.replace("\\n", "\n")
        if not template or chatml_body in tnorm or chatml_attr in tnorm:  # SmolLM2's ChatML, Qwen2.5's
            default_system = None
            mt = (re.search(r"!= 'system' %\}\{\{ '<\|im_start\|>system\n(.*?)<\|im_end\|>", tnorm, re.DOTALL)
                  or re.search(r"'<\|im_start\|>system\n([^'+]*?)<\|im_end\|>", tnorm))
            if mt:
                default_system = mt.group(1)
            parts = []
            if default_system is not None and messages[0]["role"] != "system":
                parts.append(f"<|im_start|>system\n{default_system}<|im_end|>\n")
            for m in messages:
                parts.append(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n")
            if add_generation_prompt:
                parts.append("<|im_start|>assistant\n")
            return "".join(parts)
        try:
            import jinja2  # optional: jinja2, for a chat template that is not ChatML
        except ImportError as exc:
            raise ModelError("this model's chat template is not ChatML; rendering it needs jinja2") from exc
        env = jinja2.Environment(undefined=jinja2.StrictUndefined)
        return env.from_string(template).render(
            messages=list(messages), add_generation_prompt=add_generation_prompt,
            bos_token=(self.config.get("bos_token") or {}).get("content", ""),
            eos_token=(self.config.get("eos_token") or {}).get("content", ""),
        )

    # ------------------------------------------------------------ generation
    def prompt_ids(self, prompt_or_messages: str | Sequence[dict]) -> list[int]:
        """The token ids :meth:`generate` runs for a prompt (a str, used as is) or a chat (templated)."""
        prompt = prompt_or_messages if isinstance(prompt_or_messages, str) else self.apply_chat_template(prompt_or_messages)
        ids = self.encode(prompt)
        if self.config.get("add_bos_token") and self.bos_id is not None:
            ids = [self.bos_id] + ids
        if not ids:
            ids = [self.doc_start_id]
        return ids

    def generate(
        self,
        prompt_or_messages: str | Sequence[dict],
        *,
        max_new_tokens: int = 128,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        stop: str | Iterable[str] | None = None,
    ) -> GenerationResult:
        """Continue a prompt (a str, used as is) or a chat (a list of messages, templated).

        ``temperature=0`` is greedy decoding; otherwise tokens are sampled from
        ``softmax(logits / temperature)`` restricted to the top-``top_p`` nucleus,
        with ``seed`` for reproducibility.  Generation stops at an end-of-turn token,
        a ``stop`` string (cut from the text), ``max_new_tokens`` or the context length.
        The logits come from the runtime :meth:`decoder_for` picks for the call (momoka's onnxruntime
        loop or llama.cpp; ``MOMOKA_LLM_RUNTIME``).
        """
        if temperature < 0 or not (0 < top_p <= 1):
            raise ConfigError("temperature must be >= 0 and top_p in (0, 1]")
        if max_new_tokens < 0:
            raise ConfigError("max_new_tokens must be >= 0")
        ids = self.prompt_ids(prompt_or_messages)
        if len(ids) >= self.max_context:
            raise InputTooLargeError(f"prompt has {len(ids)} tokens; the model's context is {self.max_context}")
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        rng = np.random.default_rng(seed)
        budget = min(max_new_tokens, self.max_context - len(ids))
        decoder = self.decoder_for(len(ids), budget)
        logits = decoder.start(ids)
        out: list[int] = []
        finish = "length"
        text = ""
        while len(out) < budget:
            tok = self._pick(logits, temperature, top_p, rng)
            if tok in self.stop_ids:
                finish = "stop"
                break
            out.append(tok)
            if stops:
                text = self.decode(out)
                cut = min((text.find(s) for s in stops if s and s in text), default=-1)
                if cut >= 0:
                    text = text[:cut]
                    finish = "stop"
                    break
            if len(out) >= budget:
                break
            logits = decoder.step(tok)
        if finish != "stop" or not stops or not text:
            text = self.decode(out)
            if stops:
                cut = min((text.find(s) for s in stops if s and s in text), default=-1)
                if cut >= 0:
                    text, finish = text[:cut], "stop"
        return GenerationResult(text, len(ids), len(out), finish, out)

    @staticmethod
    def _pick(logits: np.ndarray, temperature: float, top_p: float, rng: np.random.Generator) -> int:
        if temperature == 0:
            return int(np.argmax(logits))
        z = logits.astype(np.float64) / temperature
        p = np.exp(z - z.max())
        p /= p.sum()
        if top_p < 1.0:
            order = np.argsort(-p)
            cum = np.cumsum(p[order])
            keep = order[: int(np.searchsorted(cum, top_p) + 1)]
            q = np.zeros_like(p)
            q[keep] = p[keep]
            p = q / q.sum()
        return int(rng.choice(p.size, p=p))
