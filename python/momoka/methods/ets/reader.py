"""The ETS reader: the answer likelihood P(y | q, d) that scores evidence, and the reader's own answer.

METHODS.md section 4 settles the paper's open points: ``P(y | q, d) = exp(mean log p)``
over the answer's tokens (the geometric mean of the token probabilities, so it does
not shrink with answer length), the evidence sentences in the order given (callers
pass document order), correctness = normalised EM or token F1 >= 0.8.

Two back-ends, one prompt (ETS App. D "Answering Prompt", ``prompts["ets.answering"]``,
the evidence sentences joined by a space as ``{background}``):

* ``Reader()`` / ``Reader(lm)``: the local causal LM (default ``smollm2-135m-instruct``).
  The chat-templated prompt is cut where the evidence starts: the part before
  (system message and instruction, the same for every call) runs once through
  the model and its KV cache (:meth:`CausalLM.prefix_state`) is reused by every
  later call; each scored evidence set runs only its own tokens after it, batched
  (:meth:`CausalLM.prefix_batch`). The answer is scored after
  ``<|im_start|>assistant\\n``, the point where the model would start answering.
* ``Reader(endpoint=URL, model=NAME)`` / ``Reader(client=OpenAIClient(...))``: any
  OpenAI-compatible server. Likelihoods come from ``/completions`` with
  ``echo`` and ``logprobs`` on the raw prompt (no chat template: the server's is
  unknown) followed by ``" " + answer``; a server without prompt log-probs raises
  :class:`~momoka.errors.LLMCapabilityError`. Answers come from chat completions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..._validate import check_int
from ...errors import ConfigError, InputError
from ..._answer_metrics import exact_match, token_f1
from ...llm import OpenAIClient, prompts

__all__ = ["CORRECTNESS_MODES", "PROMPT", "Reader", "is_correct"]

#: The reader prompt's name in :mod:`momoka.llm.prompts`.
PROMPT = "ets.answering"
#: ``is_correct`` modes.
CORRECTNESS_MODES = ("em", "f1", "em_or_f1")
_MARK = "\u0000EVIDENCE\u0000"


def is_correct(prediction: str, gold: str | Sequence[str], *, mode: str = "em_or_f1",
               f1_threshold: float = 0.8) -> bool:
    """Whether ``prediction`` answers ``gold`` (one answer or several), SQuAD-normalised.

    ``mode``: ``"em"`` (exact match), ``"f1"`` (token F1 >= ``f1_threshold``) or
    ``"em_or_f1"`` (either; METHODS.md section 4).
    """
    if mode not in CORRECTNESS_MODES:
        raise ConfigError(f"correctness mode must be one of {CORRECTNESS_MODES}, got {mode!r}")
    golds = [gold] if isinstance(gold, str) else list(gold)
    if mode in ("em", "em_or_f1") and exact_match(prediction, golds) == 1.0:
        return True
    return mode != "em" and token_f1(prediction, golds) >= f1_threshold


#: The default answer limit of :class:`Reader` (tokens).
ANSWER_MAX_TOKENS = 32


class Reader:
    """P(y | q, evidence), greedy answers and correctness, on the local LM or an endpoint (module docstring).

    ``Reader()`` loads the default local causal LM; ``Reader(lm)`` takes a
    :class:`momoka.models.causal_lm.CausalLM`; ``Reader(endpoint=URL, model=NAME)``
    or ``Reader(client=...)`` (an :class:`momoka.llm.OpenAIClient`) reads through
    an OpenAI-compatible server. ``max_tokens`` bounds generated answers;
    ``batch_tokens`` the tokens run per batch on the local LM.
    """

    def __init__(self, lm: Any = None, *, endpoint: str | None = None, model: str | None = None,
                 client: Any = None, max_tokens: int = ANSWER_MAX_TOKENS, batch_tokens: int = 2048,
                 **client_options: Any):
        if sum(x is not None for x in (lm, endpoint, client)) > 1:
            raise ConfigError("Reader takes one of lm=, endpoint= or client=")
        self.max_tokens = check_int(max_tokens, "max_tokens", minimum=1)
        self.batch_tokens = batch_tokens
        self.client = client
        self.lm = None
        if endpoint is not None:
            self.client = OpenAIClient(model, base_url=endpoint, **client_options)
        elif client is None:
            if lm is None:
                from ...models import default_causal_lm  # start-up: momoka.models

                lm = default_causal_lm()
            self.lm = lm
        self._head: tuple[str, Any] | None = None  # (head text, PrefixState)
        self.name = getattr(self.client, "model", None) or f"local:{getattr(getattr(lm, 'model_dir', None), 'name', 'lm')}"

    @classmethod
    def from_spec(cls, spec: str | None, **options: Any) -> "Reader":
        """``"local"`` (or None): the default local LM; an ``http(s)://`` URL: that endpoint
        (``model=`` names the model, else ``MOMOKA_LLM_MODEL``)."""
        if spec in (None, "", "local"):
            return cls(**options)
        if spec.startswith(("http://", "https://")):
            return cls(endpoint=spec, **options)
        raise ConfigError(f"reader must be 'local' or an http(s):// URL, got {spec!r}")

    # ------------------------------------------------------------------ prompt
    @staticmethod
    def messages(question: str, evidence: Sequence[str]) -> list[dict]:
        """The chat messages of the reader prompt (evidence joined by a space, in the given order)."""
        if not isinstance(question, str) or not question.strip():
            raise InputError("the reader needs a non-empty question")
        if isinstance(evidence, str):
            raise InputError("evidence must be a sequence of sentences, not one str")
        return prompts.messages(PROMPT, background=" ".join(evidence), query=question)

    def _parts(self, question: str, evidence: Sequence[str]) -> tuple[str, str]:
        """The local chat prompt cut into (head, rest) where the evidence starts: the head is the same for every call."""
        full = self.lm.apply_chat_template(self.messages(question, evidence))
        marked = self.lm.apply_chat_template(self.messages(question, [_MARK]))
        head = marked[:marked.index(_MARK)].rstrip(" ")
        if not full.startswith(head):  # pragma: no cover - the evidence is the first variable part
            raise InputError("the chat template does not keep the prompt head")
        return head, full[len(head):]

    def _head_state(self, head: str):
        if self._head is None or self._head[0] != head:
            self._head = (head, self.lm.prefix_state(self.lm.encode(head)))
        return self._head[1]

    # ------------------------------------------------------------- likelihood
    def likelihood(self, question: str, answer: str, evidence: Sequence[str]) -> float:
        """exp(mean log P(answer tokens | reader prompt with ``evidence`` in the given order))."""
        return float(self.likelihoods(question, answer, [evidence])[0])

    def likelihoods(self, question: str, answer: str, evidences: Sequence[Sequence[str]]) -> np.ndarray:
        """:meth:`likelihood` of one answer under many evidence sets, batched (float64 array)."""
        if not isinstance(answer, str) or not answer.strip():
            raise InputError("the answer to score is empty")
        evidences = list(evidences)
        if not evidences:
            return np.zeros(0, dtype=np.float64)
        if self.client is not None:
            pairs = [(prompts.render(PROMPT, background=" ".join(ev), query=question), " " + answer.strip())
                     for ev in evidences]
            for ev in evidences:
                self.messages(question, ev)  # same input checks as the local path
            lps = self.client.logprob_many(pairs, mean=True, method="ets.reader")
            return np.exp(np.asarray(lps, dtype=np.float64))
        ans = self.lm.encode(answer)
        suffixes, head = [], None
        for ev in evidences:
            h, rest = self._parts(question, ev)
            head = h
            suffixes.append(self.lm.encode(rest) + ans)
        state = self._head_state(head)
        lps = self.lm.prefix_batch(state, suffixes, batch_tokens=self.batch_tokens)
        return np.asarray([float(np.exp(lp[-len(ans):].mean())) for lp in lps], dtype=np.float64)

    # ----------------------------------------------------------------- answers
    def answer(self, question: str, evidence: Sequence[str], max_tokens: int | None = None) -> str:
        """The reader's greedy answer from ``evidence`` (stripped)."""
        n = self.max_tokens if max_tokens is None else max_tokens
        msgs = self.messages(question, evidence)
        if self.client is not None:
            return self.client.complete(msgs, max_tokens=n, temperature=0, method="ets.reader").strip()
        return self.lm.generate(msgs, max_new_tokens=n, temperature=0.0).text.strip()

    def answer_with_likelihood(self, question: str, evidence: Sequence[str]) -> tuple[str, float]:
        """The reader's own answer and its exp(mean log-prob): the value available without gold.

        An empty answer has likelihood 0.
        """
        a = self.answer(question, evidence)
        return (a, self.likelihood(question, a, evidence)) if a else (a, 0.0)

    @staticmethod
    def is_correct(prediction: str, gold: str | Sequence[str], *, mode: str = "em_or_f1",
                   f1_threshold: float = 0.8) -> bool:
        """:func:`is_correct` (normalised EM or token F1 >= threshold)."""
        return is_correct(prediction, gold, mode=mode, f1_threshold=f1_threshold)
