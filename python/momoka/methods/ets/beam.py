"""ETS inference: early-terminating beam search over evidence sentences (paper 002, section 3.3).

A policy LM writes the evidence one sentence per line after the paper's
extraction prompt (App. D). The search keeps ``beam`` (B2) evidence paths; at
each depth every path is expanded with the ``expansion`` (B1) sentences the
policy ranks highest, each new path is scored by a value function (a value
model, or the reader's likelihood of its own answer, METHODS.md section 4),
and the best ``beam`` paths go on, up to ``max_depth`` sentences. The answer
is the path with the highest value seen at any depth.

Decoding of one sentence is constrained to the candidates: a token is only
allowed when some not-yet-chosen candidate continues the prefix with it (so a
sentence that is not a candidate can never come out). The candidates' token
sequences end in the policy's line separator, so no key is a prefix of
another. With early termination (the default) decoding stops as soon as the
generated prefix matches one remaining candidate: its unique-prefix length
(:func:`momoka.kernels.unique_prefix_lengths`); the rest of the sentence is
then run through the model in one step (prefill) instead of token by token.
Without it, every token of the sentence is decoded. Both modes rank a
sentence by the log-probability of its identifying prefix (the tokens after
it are forced by the constraint and carry no choice), so the switch changes
cost, never the result.

The ``expansion`` best sentences of one node are found exactly by a
best-first search over the prefix tree of the candidates (log-probabilities
only fall along a prefix, so the first ``expansion`` complete prefixes popped
are the top ones).
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..._validate import check_int
from ...errors import ConfigError, InputError
from ...kernels import unique_prefix_lengths
from ...llm import prompts
from ...progress import Progress
from ...stats import Stats

__all__ = ["BeamResult", "LMPolicy", "Policy", "SearchStats", "beam_search", "expand", "run_beam"]


class Policy(Protocol):
    """What the search needs of a policy LM: token ids, a prompt state, and next-token log-probs.

    ``end_id`` is the token that ends a sentence (the line separator).
    ``root(question, candidates)`` runs the prompt; ``extend(state, ids)``
    returns the state after more tokens (the given state unchanged);
    ``logprobs(state)`` the next-token log-probabilities after it.
    """

    end_id: int

    def encode(self, text: str) -> list[int]: ...

    def root(self, question: str, candidates: Sequence[str]) -> Any: ...

    def extend(self, state: Any, ids: Sequence[int]) -> Any: ...

    def logprobs(self, state: Any) -> np.ndarray: ...


@dataclass
class SearchStats(Stats):
    """Cost of one search: policy tokens decoded and prefilled, model runs, value calls, seconds."""

    tokens_generated: int = 0   # tokens chosen by decoding (what early termination cuts)
    policy_runs: int = 0        # policy forward runs (decode steps and prefills)
    prefill_tokens: int = 0     # tokens run after a sentence was identified, in one step each
    value_calls: int = 0
    value_cached: int = 0
    seconds_policy: float = 0.0  # decoding and prefill after the prompt
    seconds_root: float = 0.0    # the prompt (once per search; a policy may reuse it across searches)
    seconds_value: float = 0.0
    sentences_decoded: int = 0


@dataclass(frozen=True)
class BeamResult:
    """The chosen path (candidate indices in document order), its value, every scored path, the cost.

    An empty path (value -inf) when no node had a child."""

    path: tuple
    value: float
    scored: dict = field(compare=False)
    stats: SearchStats = field(compare=False)


@dataclass
class _Node:
    path: tuple                    # candidates in the order chosen
    state: Any                     # policy state after the path's sentences
    value: float = float("-inf")


def _keys(policy: Policy, candidates: Sequence[str]) -> tuple[list[tuple[int, ...]], list[int]]:
    """Token keys (sentence ids + end) of the candidates, and the indices that are selectable (first of duplicates)."""
    end = int(policy.end_id)
    keys, first, seen = [], [], {}
    for i, text in enumerate(candidates):
        ids = [int(t) for t in policy.encode(text)]
        if not ids:
            raise InputError(f"candidate {i} encodes to no tokens")
        if end in ids:
            raise InputError(f"candidate {i} holds the policy's sentence separator (token {end}); "
                             "normalise its whitespace first")
        key = tuple(ids) + (end,)
        keys.append(key)
        if key not in seen:
            seen[key] = i
            first.append(i)
    return keys, first


def expand(policy: Policy, state: Any, keys: Sequence[Sequence[int]], remaining: Sequence[int], n: int, *,
           early_termination: bool = True, stats: SearchStats | None = None) -> list[tuple[int, float, Any, int]]:
    """The ``n`` remaining candidates the policy ranks highest after ``state``, best first.

    Returns ``(index, score, state_after_sentence, tokens_generated)`` per pick:
    ``score`` is the summed log-probability of the candidate's identifying
    prefix (its unique-prefix length among ``remaining``), the state is the
    policy's after the whole key. ``keys[i]`` are the token ids of candidate
    ``i`` ending in the separator; they must be distinct over ``remaining``.
    """
    stats = stats if stats is not None else SearchStats()
    remaining = list(remaining)
    if n < 1 or not remaining:
        return []
    stop_at = dict(zip(remaining, unique_prefix_lengths([list(keys[i]) for i in remaining]).tolist()))
    tick = itertools.count()
    # heap entries: (-score, tie, prefix, alive, parent_state); parent_state is the state before prefix[-1]
    heap: list = [(0.0, next(tick), (), tuple(remaining), None)]
    out: list[tuple[int, float, Any, int]] = []
    t0 = time.perf_counter()
    while heap and len(out) < n:
        neg, _, prefix, alive, parent = heapq.heappop(heap)
        st = state if not prefix else None
        if len(alive) == 1:
            i = alive[0]
            key = keys[i]
            assert len(prefix) == stop_at[i], (prefix, stop_at[i])
            done = len(prefix)
            if prefix:
                if early_termination:
                    st = parent  # the identifying token goes in with the prefill of the rest
                    done -= 1
                else:
                    st = policy.extend(parent, prefix[-1:])
                    stats.policy_runs += 1
            if not early_termination:
                # decode the forced rest token by token (constrained to the one continuation)
                while done < len(key) - 1:
                    policy.logprobs(st)
                    st = policy.extend(st, key[done:done + 1])
                    stats.policy_runs += 1
                    done += 1
                gen = len(key)
            else:
                gen = len(prefix)
                stats.prefill_tokens += len(key) - done
            if done < len(key):
                st = policy.extend(st, key[done:])
                stats.policy_runs += 1
            stats.tokens_generated += gen
            stats.sentences_decoded += 1
            out.append((i, -neg, st, gen))
            continue
        if prefix:
            st = policy.extend(parent, prefix[-1:])
            stats.policy_runs += 1
        lp = policy.logprobs(st)
        depth = len(prefix)
        groups: dict[int, list[int]] = {}
        for i in alive:
            groups.setdefault(int(keys[i][depth]), []).append(i)
        for tok, sub in groups.items():
            heapq.heappush(heap, (neg - float(lp[tok]), next(tick), prefix + (tok,), tuple(sub), st))
    stats.seconds_policy += time.perf_counter() - t0
    return out


def beam_search(question: str, candidates: Sequence[str], policy: Policy,
                value: Callable[[str, list[str]], float], *, expansion: int = 3, beam: int = 3,
                max_depth: int = 5, early_termination: bool = True, progress: bool | None = None) -> BeamResult:
    """Early-terminating beam search for the evidence of ``question`` among ``candidates`` (document order).

    ``value(question, evidence_texts)`` scores an evidence set given in
    document order (higher is better). Returns the path (candidate indices,
    document order) with the highest value over all depths; ties go to the
    shorter, earlier path. Identical candidate texts are one candidate (the
    first). ``progress``: a :class:`momoka.progress.Progress` line per node
    expanded (``None``: its default rules). Raises :class:`ConfigError` on bad sizes.
    """
    expansion, beam, max_depth = (check_int(v, name, minimum=1) for name, v in (
        ("expansion", expansion), ("beam", beam), ("max_depth", max_depth)))
    if not candidates:
        raise InputError("beam search needs at least one candidate sentence")
    stats = SearchStats()
    keys, selectable = _keys(policy, candidates)
    t0 = time.perf_counter()
    root = policy.root(question, candidates)
    stats.policy_runs += 1
    stats.seconds_root += time.perf_counter() - t0

    def children(path: tuple[int, ...], state: Any) -> list[tuple[int, Any]]:
        used = set(path)
        remaining = [i for i in selectable if i not in used]
        return [(i, st) for i, _s, st, _g in expand(policy, state, keys, remaining, expansion,
                                                     early_termination=early_termination, stats=stats)]

    return run_beam(root, children, lambda ev: value(question, [candidates[i] for i in ev]), stats=stats,
                    beam=beam, max_depth=min(max_depth, len(selectable)), planned_expansion=expansion,
                    progress=progress)


def run_beam(root: Any, children: Callable[[tuple[int, ...], Any], list[tuple[int, Any]]],
             value: Callable[[tuple[int, ...]], float], *, beam: int, max_depth: int, planned_expansion: int = 1,
             stats: SearchStats | None = None, progress: bool | None = None) -> BeamResult:
    """The beam of ETS over any expansion: the ``beam`` best paths go on at each depth, the best path seen wins.

    ``root`` is the policy state of the empty path; ``children(path, state)``
    returns the node's expansions best first as ``(candidate, state after it)``
    (candidates are hashable ids, ints for :func:`beam_search`; at most the
    expansion size); ``value(evidence)`` scores a set of candidates given
    sorted (an evidence set is scored once, whatever the order it was reached
    in). A path that reaches an evidence set already reached at the same depth
    is dropped. Returns the path (sorted) with the highest value over all
    depths; ties go to the shorter, earlier path. ``planned_expansion`` only
    sizes the progress line.
    """
    stats = stats if stats is not None else SearchStats()
    scored: dict[tuple, float] = {}

    def score(path: tuple) -> float:
        k = tuple(sorted(path))
        if k in scored:
            stats.value_cached += 1
            return scored[k]
        t = time.perf_counter()
        v = float(value(k))
        stats.seconds_value += time.perf_counter() - t
        stats.value_calls += 1
        scored[k] = v
        return v

    # nodes expanded when no depth runs out of new paths: 1 at the root, then up to `beam` per depth
    planned = sum(min(beam, planned_expansion ** d) for d in range(max_depth))
    frontier = [_Node((), root)]
    best: _Node | None = None
    with Progress("ets beam search", total=planned, unit="nodes", enabled=progress) as bar:
        for depth in range(max_depth):
            kids: list[_Node] = []
            seen: set = set()
            for node in frontier:
                for i, st in children(node.path, node.state):
                    path = node.path + (i,)
                    k = tuple(sorted(path))
                    if k in seen:
                        continue
                    seen.add(k)
                    kids.append(_Node(path, st, score(path)))
                bar.update(1, depth=depth + 1, value_calls=stats.value_calls,
                           best=f"{best.value:.3f}" if best is not None else "-")
            if not kids:
                break
            kids.sort(key=lambda c: -c.value)  # stable: policy order breaks ties
            frontier = kids[:beam]
            if best is None or frontier[0].value > best.value:
                best = frontier[0]
        bar.total = bar.n  # a search with fewer new paths than planned is done all the same
    if best is None:
        return BeamResult((), float("-inf"), dict(scored), stats)
    return BeamResult(tuple(sorted(best.path)), best.value, dict(scored), stats)


def normalise(text: str) -> str:
    """A candidate as the policy sees and writes it: whitespace runs made one space."""
    return " ".join(text.split())


def extraction_background(texts: Sequence[str]) -> str:
    """The ``{background}`` of the extraction prompt: the candidates normalised, one per line."""
    return "\n" + "\n".join(normalise(t) for t in texts) + "\n"


def extraction_target(texts: Sequence[str]) -> str:
    """What the policy writes for an evidence path: each sentence normalised, ended by a newline."""
    return "".join(normalise(t) + "\n" for t in texts)


class LMPolicy:
    """The local instruction LM as the policy: the ETS extraction prompt (App. D), one sentence per line.

    The prompt lists the candidates (whitespace-normalised, one per line, in
    document order) and the question; the answer the policy writes is the
    evidence, each sentence followed by a newline. Its KV cache is reused:
    the prompt runs once per question, each decoded token once
    (:meth:`momoka.models.CausalLM.extend_state`).
    """

    def __init__(self, lm: Any, *, prompt: str = "ets.extraction"):
        self.lm = lm
        self.template = prompts.get(prompt)
        ids = lm.encode("\n")
        if len(ids) != 1:
            raise ConfigError(f"the policy's tokenizer splits a newline into {len(ids)} tokens; need one")
        self.end_id = int(ids[0])
        self._last_root: tuple | None = None  # (prompt ids, state): searches of one question share the prompt

    normalise = staticmethod(normalise)

    def encode(self, text: str) -> list[int]:
        """Token ids of a candidate sentence (normalised)."""
        return list(self.lm.encode(self.normalise(text)))

    def root(self, question: str, candidates: Sequence[str]) -> Any:
        """Run the extraction prompt (chat-templated) up to the assistant's first token (the last one is kept)."""
        background = extraction_background(candidates)
        chat = self.lm.apply_chat_template(self.template.messages(background=background, query=question))
        ids = tuple(self.lm.encode(chat))
        if self._last_root is None or self._last_root[0] != ids:
            self._last_root = (ids, self.lm.prefix_state(list(ids)))
        return self._last_root[1]

    def extend(self, state: Any, ids: Sequence[int]) -> Any:
        """The state after ``ids`` (the given state unchanged)."""
        return self.lm.extend_state(state, ids)

    def logprobs(self, state: Any) -> np.ndarray:
        """Next-token log-probabilities after ``state``."""
        from ...models.causal_lm import log_softmax  # start-up: momoka.models.causal_lm

        return log_softmax(np.asarray(state.last_logits, dtype=np.float64))
