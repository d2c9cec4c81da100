"""Generation with :class:`~momoka.models.causal_lm.CausalLM`: the chat template, and sampling or greedy decoding
with stop strings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import ConfigError, InputError, InputTooLargeError, ModelError

from .causal_session import CausalSession


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


class CausalGeneration(CausalSession):
    """Chat prompts and generation (part of :class:`~momoka.models.causal_lm.CausalLM`)."""

    def apply_chat_template(self, messages: Sequence[dict], add_generation_prompt: bool = True) -> str:
        """Render chat messages with the model's template (ChatML for SmolLM2).

        ChatML templates are rendered natively: a default system message (taken
        from the template) is inserted when the first message is not a system
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
        tnorm = template.replace("\\n", "\n")
        if not template or chatml_body in tnorm:
            default_system = None
            mt = re.search(r"!= 'system' %\}\{\{ '<\|im_start\|>system\n(.*?)<\|im_end\|>", tnorm, re.DOTALL)
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
        _, logits, cache, _ = self._stream(ids, n_scored=0)
        out: list[int] = []
        finish = "length"
        budget = min(max_new_tokens, self.max_context - len(ids))
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
            lg, cache = self._forward(
                np.asarray([[tok]], dtype=np.int64),
                np.ones((1, cache.length + 1), dtype=np.int64),
                np.asarray([[cache.length]], dtype=np.int64),
                cache,
            )
            logits = lg[0, -1]
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
