"""Rerankers: score passages against a query, higher is better.

Every backend follows the :class:`Reranker` protocol, ``score(query, passages)
-> np.ndarray`` (float32, one score per passage, in input order):

- :class:`CosineReranker` (``"cosine"``, the fast default): cosine similarity
  of embeddings from an :class:`~momoka.models.embedder.Embedder`;
- :class:`CrossEncoderReranker` (``"cross-encoder"``): any ONNX cross-encoder
  given its path (inputs ``input_ids``, ``attention_mask`` and optionally
  ``token_type_ids``; output ``logits`` of shape (n,), (n, 1) or (n, 2));
- :class:`QueryLikelihoodReranker` (``"query-likelihood"``, UPR): the mean
  log-probability of the query's tokens given a prompt built from the
  passage, from the local causal LM;
- :class:`~momoka.models.rerank_endpoint.EndpointReranker` (``"endpoint"``): a
  Cohere/Jina/vLLM-style ``/rerank`` HTTP server.

An empty passage list gives an empty array; an empty or whitespace-only
query raises :class:`~momoka.errors.EmptyInputError`.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path
from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from ..errors import ConfigError, EmptyInputError, InputError, ModelError
from ._inputs import check_passages, check_query, check_query_passages
from .embedder import Embedder
from .installer import default_causal_lm
from .onnx_embedder import _session_io_check, load_tokenizer
from .runtime import create_session, sha256_file

__all__ = [
    "Reranker",
    "CosineReranker",
    "CrossEncoderReranker",
    "QueryLikelihoodReranker",
    "get_reranker",
    "rank",
    "UPR_TEMPLATE",
]

#: The UPR prompt (Sachan et al., 2022): the query is scored as its continuation.
UPR_TEMPLATE = "Passage: {passage}\nPlease write a question based on this passage.\nQuestion:"


@runtime_checkable
class Reranker(Protocol):
    """Anything with ``score(query, passages) -> np.ndarray`` (higher is more relevant)."""

    name: str

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:  # pragma: no cover - protocol
        ...


def rank(reranker: Reranker, query: str, passages: Sequence[str], top_k: int | None = None) -> list[tuple[int, float]]:
    """``(index, score)`` pairs of ``passages`` by decreasing score (ties by index), at most ``top_k``."""
    s = np.asarray(reranker.score(query, passages), dtype=np.float64)
    order = sorted(range(len(s)), key=lambda i: (-s[i], i))
    if top_k is not None:
        order = order[:top_k]
    return [(i, float(s[i])) for i in order]


class CosineReranker:
    """Cosine similarity of embeddings (the fast default reranker).

    ``embedder``: an :class:`Embedder` (default: :meth:`Embedder.default`).
    Passage embeddings are kept in an LRU cache of ``cache_size`` texts, so
    scoring the same passages for many queries embeds each once.
    """

    name = "cosine"

    def __init__(self, embedder: Embedder | None = None, *, cache_size: int = 10_000):
        self.embedder = embedder if embedder is not None else Embedder.default()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.cache_size = int(cache_size)

    def _embed_cached(self, texts: list[str]) -> np.ndarray:
        miss = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if miss:
            vecs = self.embedder.embed(miss)
            for t, v in zip(miss, vecs):
                self._cache[t] = v
        out = np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, self.embedder.dim), np.float32)
        for t in texts:
            self._cache.move_to_end(t)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return out

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """Cosine similarity of the query's embedding (the embedder's ``embed_query`` when it has one) to each
        passage's (float32, in [-1, 1])."""
        passages = check_query_passages(query, passages)
        if not passages:
            return np.zeros(0, dtype=np.float32)
        fn = getattr(self.embedder, "embed_query", None)  # the query form (e5's "query: " prefix) when there is one
        q = (fn([query]) if callable(fn) else self.embedder.embed([query]))[0]
        P = self._embed_cached(passages)
        qn = q / max(float(np.linalg.norm(q)), 1e-12)
        Pn = P / np.maximum(np.linalg.norm(P, axis=1, keepdims=True), 1e-12)
        return (Pn @ qn).astype(np.float32)


class CrossEncoderReranker:
    """An ONNX cross-encoder: the (query, passage) pair is encoded together and a logit read out.

    ``onnx_path``: the model; ``tokenizer_path``: its ``tokenizer.json``
    (default: beside the model). The graph must take ``input_ids`` and
    ``attention_mask`` (int64, [batch, seq]) and optionally ``token_type_ids``;
    anything else raises ModelError naming the inputs found. The score is
    ``logits[:, 0]`` for one output column, ``logits[:, 1] - logits[:, 0]``
    for two. Pairs longer than ``max_length`` are truncated (longest side
    first) and counted in ``truncated``.
    """

    name = "cross-encoder"

    def __init__(
        self,
        onnx_path: str | os.PathLike,
        tokenizer_path: str | os.PathLike | None = None,
        *,
        device: str | None = None,
        threads: int | None = None,
        max_length: int = 512,
        batch_size: int = 32,
    ):
        p = Path(onnx_path)
        if p.is_dir():
            p = p / "model.onnx"
        if not p.is_file():
            raise ModelError(f"cross-encoder model not found: {p}")
        self.path = p
        self.tokenizer = load_tokenizer(tokenizer_path if tokenizer_path is not None else p.with_name("tokenizer.json"))
        self._session = create_session(p, device=device, threads=threads)
        self._inputs = _session_io_check(self._session, p, ("input_ids", "attention_mask"), ("token_type_ids",))
        outs = [o.name for o in self._session.get_outputs()]
        self._output = "logits" if "logits" in outs else outs[0]
        self.max_length = int(max_length)
        self.batch_size = int(batch_size)
        self.tokenizer.enable_truncation(self.max_length, strategy="longest_first")
        self.checksum = sha256_file(p)
        self.truncated = 0

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """One relevance logit per passage (float32, input order)."""
        passages = check_query_passages(query, passages)
        if not passages:
            return np.zeros(0, dtype=np.float32)
        encs = self.tokenizer.encode_batch([(query, p) for p in passages], add_special_tokens=True)
        self.truncated += sum(1 for e in encs if e.overflowing)
        order = sorted(range(len(encs)), key=lambda i: len(encs[i].ids))
        out = np.empty(len(encs), dtype=np.float32)
        for s in range(0, len(order), self.batch_size):
            idx = order[s : s + self.batch_size]
            n = max(len(encs[i].ids) for i in idx)
            ids = np.zeros((len(idx), n), np.int64)
            mask = np.zeros_like(ids)
            tt = np.zeros_like(ids)
            for r, i in enumerate(idx):
                e = encs[i]
                k = len(e.ids)
                ids[r, :k] = e.ids
                mask[r, :k] = 1
                tt[r, :k] = e.type_ids
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feed["token_type_ids"] = tt
            logits = np.asarray(self._session.run([self._output], feed)[0], dtype=np.float32)
            if logits.ndim == 2 and logits.shape[1] == 1:
                logits = logits[:, 0]
            elif logits.ndim == 2 and logits.shape[1] == 2:
                logits = logits[:, 1] - logits[:, 0]
            elif logits.ndim != 1:
                raise ModelError(
                    f"cross-encoder output {self._output!r} has shape {logits.shape}; expected (n,), (n, 1) or (n, 2)"
                )
            out[idx] = logits
        return out


class QueryLikelihoodReranker:
    """Unsupervised passage reranking by query likelihood (UPR, Sachan et al. 2022).

    ``score = mean over the query's tokens of log P(token | prompt(passage), earlier query tokens)``
    from a causal LM (default: the installed ``smollm2-135m-instruct``, see
    :func:`momoka.models.default_causal_lm`). ``template`` builds the prompt
    from ``{passage}`` (passages are cut to ``max_passage_chars``); the query
    follows it after a space. ``causal_lm`` must offer
    ``token_logprobs_batch(texts, contexts)`` like
    :class:`momoka.models.causal_lm.CausalLM`.

    KV reuse (``kv_cache_mb`` > 0 and an LM with ``prefix_state``): each
    passage's prompt runs through the model once and its key/value cache is
    kept (least recently used first out, up to ``kv_cache_mb`` megabytes), so
    scoring the same passage for another question runs only the question's
    tokens. :meth:`score_matrix` scores many questions against many passages
    and :meth:`score_batch` each question against its own list, with one prompt
    run per distinct passage (the misses run together in padded batches). The scores equal the uncached ones (the
    same token sequences; float rounding of batched runs aside).
    ``kv_cache_mb=0`` scores every (prompt, query) pair in padded batches.
    """

    name = "query-likelihood"

    def __init__(self, causal_lm=None, *, template: str = UPR_TEMPLATE, max_passage_chars: int = 2000,
                 kv_cache_mb: float = 512.0):
        if "{passage}" not in template:
            raise ConfigError("template must contain '{passage}'")
        if causal_lm is None:
            causal_lm = default_causal_lm()
        self.lm = causal_lm
        self.template = template
        self.max_passage_chars = int(max_passage_chars)
        self.kv_cache_mb = float(kv_cache_mb)
        self._states: OrderedDict = OrderedDict()
        self._state_bytes = 0
        self.prompt_runs = 0  # passage prompts run through the model (cache misses)

    def prompt(self, passage: str) -> str:
        """The prompt the query is scored after."""
        return self.template.format(passage=passage[: self.max_passage_chars])

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """Mean log-probability of the query's tokens after each passage's prompt (float32, <= 0)."""
        passages = check_query_passages(query, passages)
        if not passages:
            return np.zeros(0, dtype=np.float32)
        if not self._reuse:
            cont = " " + query.strip()
            self.prompt_runs += len(passages)
            lps = self.lm.token_logprobs_batch([cont] * len(passages), [self.prompt(p) for p in passages])
            return np.asarray([float(np.mean(lp)) for lp in lps], dtype=np.float32)
        return self.score_batch([query], [passages])[0]

    def score_matrix(self, queries: Sequence[str], passages: Sequence[str]) -> np.ndarray:
        """Scores of every query against every passage: float32 array ``[len(queries), len(passages)]``."""
        queries = self._check_queries(queries)
        passages = check_passages(passages)
        if not queries or not passages:
            return np.zeros((len(queries), len(passages)), dtype=np.float32)
        return np.stack(self.score_batch(queries, [passages] * len(queries)))

    def score_batch(self, queries: Sequence[str], passage_lists: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Each query against its own passages (``passage_lists[i]`` for ``queries[i]``): float32 arrays.

        With KV reuse the pairs are grouped by passage: every distinct passage's
        prompt runs once (the cache misses together, in padded batches, see
        :meth:`~momoka.models.causal_lm.CausalLM.prefix_states`), then all the
        questions that rerank that passage run in one batch after its cached
        state. So the Trail candidates or top-k lists of a batch of questions
        about the same documents cost one prompt run per distinct passage.
        Without reuse each query goes through :meth:`score`.
        """
        queries = self._check_queries(queries)
        if isinstance(passage_lists, (str, bytes)) or len(passage_lists) != len(queries):
            raise InputError("passage_lists must hold one list of passages per query")
        lists = [check_passages(ps) for ps in passage_lists]
        if not self._reuse:
            return [self.score(q, ps) if ps else np.zeros(0, dtype=np.float32) for q, ps in zip(queries, lists)]
        out = [np.zeros(len(ps), dtype=np.float32) for ps in lists]
        q_ids = []
        for q in queries:
            ids = self.lm.encode(" " + q.strip())
            if not ids:
                raise EmptyInputError("cannot score an empty query")
            q_ids.append(ids)
        where: dict[str, list[tuple[int, int]]] = {}  # prompt -> (query, position) pairs that need it
        for i, ps in enumerate(lists):
            for j, p in enumerate(ps):
                where.setdefault(self.prompt(p), []).append((i, j))
        prompts = list(where)
        for s in range(0, len(prompts), self.group):
            group = prompts[s:s + self.group]
            for prompt, state in zip(group, self._states_for(group)):
                qs = list(dict.fromkeys(i for i, _ in where[prompt]))
                lp = dict(zip(qs, self.lm.prefix_batch(state, [q_ids[i] for i in qs])))
                for i, j in where[prompt]:
                    out[i][j] = float(np.mean(lp[i]))
        return out

    #: Distinct passages whose states are held at once inside one :meth:`score_batch` call.
    group = 64

    @staticmethod
    def _check_queries(queries: Sequence[str]) -> list[str]:
        if isinstance(queries, (str, bytes)):
            raise InputError("queries must be a list of strings, not a single string")
        queries = list(queries)
        for q in queries:
            check_query(q)
        return queries

    @property
    def _reuse(self) -> bool:
        return self.kv_cache_mb > 0 and hasattr(self.lm, "prefix_state") and hasattr(self.lm, "context_ids")

    def _states_for(self, prompts: list[str]) -> list:
        """The prompts' prefix states: from the cache, the misses run together (and cached)."""
        got = [self._states.get(p) for p in prompts]
        miss = [i for i, st in enumerate(got) if st is None]
        if miss:
            ids = [self.lm.context_ids(prompts[i]) for i in miss]
            if hasattr(self.lm, "prefix_states"):
                states = self.lm.prefix_states(ids)
            else:
                states = [self.lm.prefix_state(x) for x in ids]
            self.prompt_runs += len(miss)
            for i, st in zip(miss, states):
                got[i] = st
        limit = self.kv_cache_mb * 1024 * 1024
        for p, st in zip(prompts, got):
            if p in self._states:
                self._states.move_to_end(p)
                continue
            self._states[p] = st
            self._state_bytes += st.nbytes
            while self._state_bytes > limit and len(self._states) > 1:
                _, old = self._states.popitem(last=False)
                self._state_bytes -= old.nbytes
        return got


_ALIASES = {
    "cosine": "cosine",
    "embedding": "cosine",
    "cross-encoder": "cross-encoder",
    "crossencoder": "cross-encoder",
    "query-likelihood": "query-likelihood",
    "ql": "query-likelihood",
    "upr": "query-likelihood",
    "endpoint": "endpoint",
    "rerank-endpoint": "endpoint",
    "http": "endpoint",
}


def get_reranker(name: str = "cosine", **kwargs) -> Reranker:
    """A reranker by name: ``"cosine"`` (default), ``"query-likelihood"`` (aliases ``"ql"``, ``"upr"``),
    ``"cross-encoder"`` (needs ``onnx_path=``) or ``"endpoint"`` (a ``/rerank`` HTTP server,
    :class:`~momoka.models.rerank_endpoint.EndpointReranker`); ``kwargs`` go to the backend's constructor."""
    key = _ALIASES.get(str(name).strip().lower())
    if key is None:
        raise ConfigError(f"unknown reranker {name!r}; choose cosine, query-likelihood, cross-encoder or endpoint")
    if key == "endpoint":
        from .rerank_endpoint import EndpointReranker  # start-up: momoka.models.rerank_endpoint

        return EndpointReranker(**kwargs)
    if key == "cosine":
        return CosineReranker(**kwargs)
    if key == "cross-encoder":
        if "onnx_path" not in kwargs:
            raise ConfigError("the cross-encoder reranker needs onnx_path= (no default cross-encoder is shipped)")
        return CrossEncoderReranker(**kwargs)
    return QueryLikelihoodReranker(**kwargs)
