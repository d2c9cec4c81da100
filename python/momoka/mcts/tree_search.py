"""Python API of the native Monte Carlo tree search (``momoka._core.MctsEngine``).

One :class:`MCTS` object holds one independent Monte Carlo tree search per
root item over ``n_items`` items (Momoka-Map: every chunk of a document is a
root). The tree bookkeeping runs in C++; rewards come either

* natively (:meth:`MCTS.run_native`): ``I`` is a dense ``(n, n)`` matrix, a
  per-item vector, or a sparse CSR matrix, and the whole run stays in C++ over
  a thread pool; or
* through ask/tell (:meth:`MCTS.ask` / :meth:`MCTS.tell`, or the loops
  :meth:`MCTS.run` and :meth:`MCTS.arun`): the engine advances all searches
  until they block on unknown ``I`` values and hands out deduplicated
  batches of requests; each distinct ``(root, candidate)`` pair (pair mode,
  Momoka eq. 4) or ``(path prefix, candidate)`` (path mode, eq. 7) is
  requested at most once, ever.

Step reward (Momoka eq. 4 / 7)::

    r = I + alpha / (|p_root - p_cand| + gamma) + beta / (|s_root - s_cand| + delta)

the structural part only when ``paragraph`` and ``sentence`` are given, and
divided by ``r_max = 1 + alpha/gamma + beta/delta`` when ``normalize`` (the
default, so that ``C = sqrt(2)`` is a sensible exploration constant).

Determinism: every root has its own SplitMix64 generator seeded from
``(seed, root item)`` (see :func:`splitmix64_stream`), and rewards are
consumed in fixed "waves" of ``parallel`` trajectories, so the same seed and
the same answers give the same trees whatever the thread count, the ask
batch size or the order in which answers arrive. Only ``time_limit`` (a
wall-clock cap) makes results timing dependent.

Length: the Python face of the whole engine (constructor checks, ask/tell, native runs, the
reward-request type), documented argument by argument, hence over 500 lines.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable, Sequence

import numpy as np

from .. import _core
from ..errors import ConfigError, InputError, JudgeError, RewardError, SearchError
from ..progress import Progress

__all__ = [
    "MCTS",
    "RewardRequests",
    "JudgeError",
    "RewardError",
    "splitmix64_stream",
    "root_rng_state",
]

_MASK = (1 << 64) - 1

_BACKUP = {"sum": 0, "mean": 1}
_RETURN = {"mean": 0, "sum": 1, "last": 2}
_EXPANSION = {"random": 0, "topm": 1, "neighbors": 2, "scored": 3}
_KEY = {"pair": 0, "path": 1}


def root_rng_state(seed: int, root: int) -> int:
    """Initial SplitMix64 state of the search rooted at item ``root``.

    ``state = seed xor ((root + 1) * 0xD1B54A32D192ED03) mod 2**64``.
    """
    return (seed ^ (((root + 1) * 0xD1B54A32D192ED03) & _MASK)) & _MASK


def splitmix64_stream(state: int):
    """Yield the SplitMix64 numbers the engine draws from ``state``.

    The engine draws ``below(n) = next() % n``; expansion and rollout use
    them as documented in ``docs/search.md``. Exposed so that independent
    reimplementations can replay the exact random stream.
    """
    while True:
        state = (state + 0x9E3779B97F4A7C15) & _MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        yield z ^ (z >> 31)


@dataclass(frozen=True)
class RewardRequests:
    """A batch of reward requests from :meth:`MCTS.ask` (numpy arrays, one entry per request).

    ``ids``: request ids to pass back to :meth:`MCTS.tell`; ``root``: root item;
    ``root_index``: position of the root in ``MCTS.roots``; ``cand``: candidate
    item; ``path_id``: id of the path prefix in path mode (``-1`` in pair mode).
    :attr:`paths` gives the prefixes as item arrays (root first). ``kind``: 0 for a
    reward ``I(path, cand)``, 1 for an expansion score of ``cand`` after the path
    (``expansion="scored"`` only); None when the engine did not say (all rewards).
    """

    ids: np.ndarray
    root_index: np.ndarray
    root: np.ndarray
    path_id: np.ndarray
    cand: np.ndarray
    _engine: Any = None
    kind: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    @property
    def paths(self) -> list[np.ndarray]:
        """Path prefix (root first) per request; ``[root]`` in pair mode."""
        out = []
        for r, pid in zip(self.root.tolist(), self.path_id.tolist()):
            out.append(np.array([r], dtype=np.int32) if pid < 0 else self._engine.path_items(pid))
        return out

    @property
    def is_score(self) -> np.ndarray:
        """Boolean mask: True where the request asks for an expansion score (``expansion="scored"``)."""
        if self.kind is None:
            return np.zeros(len(self), dtype=bool)
        return self.kind.astype(bool)

    def pairs(self) -> list[tuple[int, int]]:
        """``(root item, candidate)`` per request, as Python ints."""
        return list(zip(self.root.tolist(), self.cand.tolist()))


def _int_array(x, name: str, n: int | None = None) -> np.ndarray:
    try:
        a = np.asarray(x)
    except Exception as exc:  # pragma: no cover - exotic objects
        raise InputError(f"{name}: cannot be read as an array ({exc})") from None
    if a.ndim != 1:
        raise InputError(f"{name}: expected a 1-D array, got shape {a.shape}")
    if a.size and not np.issubdtype(a.dtype, np.integer):
        raise InputError(f"{name}: expected integers, got dtype {a.dtype}")
    if n is not None and a.shape[0] != n:
        raise InputError(f"{name}: expected {n} entries, got {a.shape[0]}")
    return a.astype(np.int64)


class MCTS:
    """Many independent MCTS searches (one per root) over ``n_items`` items.

    Parameters
    ----------
    n_items: number of items (chunks, sentences, graph nodes); at least 1.
    roots: root items (default: every item). Each root gets its own search.
    iterations: rollouts per root (Momoka: 100).
    rollout_len: steps per rollout, the expanded node included (Momoka: 5).
    rollout_scope: ``"path"`` (default): the steps scored are the tree nodes
        between the root and the new leaf, the leaf, then random items until
        ``rollout_len`` steps ("every expanded node along the path participates",
        Momoka section 3.1); ``"leaf"``: only the leaf and the random items
        (``METHODS.md`` 3.3). With ``"leaf"`` a node's value measures the items
        *below* it, not the node itself, and planted paths are not recovered
        (see ``docs/search.md``). Under ``"path"`` ``rollout_len`` is a floor,
        not a cap: a rollout scores ``max(leaf depth, rollout_len)`` steps.
    max_depth: tree depth limit (root depth 0); ``None``: unlimited.
    path_cap: longest best path returned (default ``rollout_len``).
    c: UCT exploration constant (Momoka eq. 3 / ETS eq. 1 ``w``); default sqrt(2).
    backup: ``"sum"`` (cumulative reward and visits, Momoka) or ``"mean"``
        (running mean ``V += (R - V)/N``, ETS eq. 3).
    rollout_return: ``"mean"`` (Momoka eq. 5), ``"sum"`` (JERR) or ``"last"``.
    expansion: ``"random"`` (uniform among items not on the path, Momoka),
        ``"topm"`` (the ``top_m`` items of ``prior`` not on the path, expanded in
        prior order, rollouts uniform among them), ``"neighbors"``
        (neighbours in the CSR graph ``graph=(indptr, indices)``; JERR), or
        ``"scored"`` (ETS annotation): the first time a node is expanded, every
        item off its path is scored through ask/tell (requests with ``kind == 1``:
        the score of ``cand`` appended to the path) and the node keeps the
        ``top_m`` best (ties: lower item), expanded in score order; rollout items
        are uniform among free items. Needs ``reward="path"`` and ask/tell.
    reward: ``"pair"`` (``I(root, cand)``, eq. 4) or ``"path"`` (``I(path, cand)``, eq. 7).
    paragraph, sentence: per-item paragraph / sentence index for the structural
        prior; both or neither.
    alpha, beta, gamma, delta: eq. 4 weights (3, 2, 1, 1).
    normalize: divide the step reward by ``r_max = 1 + alpha/gamma + beta/delta``.
    widening: ``(k, a)`` for progressive widening: a node holds at most
        ``max(1, ceil(k * visits**a))`` children; ``None``: expand fully first.
    parallel: trajectories selected per wave with virtual loss (1: plain sequential MCTS).
    seed: seed of the per-root SplitMix64 generators.
    time_limit: wall-clock cap in seconds (``None``: none); results then depend on timing.
    threads: worker threads (``None`` or 0: all cores).

    One engine is driven from one thread at a time (the asyncio loop of
    :meth:`arun` is fine); the native work inside releases the GIL.
    """

    def __init__(
        self,
        n_items: int,
        roots: Iterable[int] | None = None,
        *,
        iterations: int = 100,
        rollout_len: int = 5,
        rollout_scope: str = "path",
        max_depth: int | None = None,
        path_cap: int | None = None,
        c: float = math.sqrt(2.0),
        backup: str = "sum",
        rollout_return: str = "mean",
        expansion: str = "random",
        prior: Sequence[float] | None = None,
        top_m: int = 3,
        graph: tuple[Sequence[int], Sequence[int]] | None = None,
        reward: str = "pair",
        paragraph: Sequence[int] | None = None,
        sentence: Sequence[int] | None = None,
        alpha: float = 3.0,
        beta: float = 2.0,
        gamma: float = 1.0,
        delta: float = 1.0,
        normalize: bool = True,
        widening: tuple[float, float] | None = None,
        parallel: int = 1,
        seed: int = 0,
        time_limit: float | None = None,
        threads: int | None = None,
    ):
        if isinstance(n_items, bool) or not isinstance(n_items, (int, np.integer)):
            raise InputError(f"n_items must be an int, got {type(n_items).__name__}")
        n_items = int(n_items)
        if n_items < 1:
            raise InputError(f"n_items must be at least 1 (got {n_items}): there is nothing to search")
        if n_items >= 2**31 - 1:
            raise InputError(f"n_items={n_items} is too large")
        roots_a = np.arange(n_items, dtype=np.int64) if roots is None else _int_array(list(roots) if not isinstance(roots, np.ndarray) else roots, "roots")
        bad = roots_a[(roots_a < 0) | (roots_a >= n_items)]
        if bad.size:
            raise InputError(f"roots: item {int(bad[0])} out of range [0, {n_items})")
        if np.unique(roots_a).shape[0] != roots_a.shape[0]:
            raise InputError("roots: each root may appear only once")

        def _choice(name, value, table):
            if value not in table:
                raise ConfigError(f"{name}={value!r}: expected one of {sorted(table)}")
            return table[value]

        def _pos_int(name, value, lo):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo:
                raise ConfigError(f"{name}={value!r}: expected an int >= {lo}")
            return int(value)

        cfg = _core.MctsConfig()
        cfg.n_items = n_items
        cfg.iterations = _pos_int("iterations", iterations, 0)
        cfg.rollout_len = _pos_int("rollout_len", rollout_len, 1)
        cfg.score_path = _choice("rollout_scope", rollout_scope, {"path": True, "leaf": False})
        cfg.max_depth = -1 if max_depth is None else _pos_int("max_depth", max_depth, 0)
        cfg.path_cap = _pos_int("path_cap", rollout_len if path_cap is None else path_cap, 0)
        if not (isinstance(c, (int, float)) and math.isfinite(c) and c >= 0):
            raise ConfigError(f"c={c!r}: expected a finite number >= 0")
        cfg.c = float(c)
        cfg.backup = _choice("backup", backup, _BACKUP)
        cfg.ret = _choice("rollout_return", rollout_return, _RETURN)
        cfg.expansion = _choice("expansion", expansion, _EXPANSION)
        cfg.key = _choice("reward", reward, _KEY)
        cfg.top_m = _pos_int("top_m", top_m, 1)
        if expansion == "scored" and reward != "path":
            raise ConfigError("expansion='scored' needs reward='path': the scores depend on the path")
        prior_a = None
        if expansion == "topm":
            if prior is None:
                raise ConfigError("expansion='topm' needs a prior score vector")
            prior_a = np.asarray(prior, dtype=np.float64)
            if prior_a.shape != (n_items,):
                raise InputError(f"prior: expected shape ({n_items},), got {prior_a.shape}")
            if not np.all(np.isfinite(prior_a)):
                raise InputError("prior: contains NaN or infinite values")
        indptr = indices = None
        if expansion == "neighbors":
            if graph is None:
                raise ConfigError("expansion='neighbors' needs graph=(indptr, indices)")
            indptr = _int_array(graph[0], "graph indptr", n_items + 1)
            indices = _int_array(graph[1], "graph indices")
            if indptr[0] != 0 or np.any(np.diff(indptr) < 0) or indptr[-1] != indices.shape[0]:
                raise InputError("graph: indptr must start at 0, be non-decreasing and end at len(indices)")
            if indices.size and (indices.min() < 0 or indices.max() >= n_items):
                raise InputError(f"graph: neighbour index out of range [0, {n_items})")
        if (paragraph is None) != (sentence is None):
            raise ConfigError("give both paragraph and sentence indices, or neither")
        para = sent = None
        if paragraph is not None:
            para = _int_array(paragraph, "paragraph", n_items)
            sent = _int_array(sentence, "sentence", n_items)
            cfg.structural = True
        for name, v in (("alpha", alpha), ("beta", beta), ("gamma", gamma), ("delta", delta)):
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ConfigError(f"{name}={v!r}: expected a finite number >= 0")
        if gamma <= 0 or delta <= 0:
            raise ConfigError("gamma and delta must be > 0 (they smooth a division by a distance that can be 0)")
        cfg.alpha, cfg.beta, cfg.gamma, cfg.delta = float(alpha), float(beta), float(gamma), float(delta)
        cfg.normalize = bool(normalize)
        if widening is not None:
            k, a = widening
            if not (k > 0 and 0 <= a <= 1):
                raise ConfigError(f"widening={widening!r}: expected (k > 0, 0 <= a <= 1)")
            cfg.pw_k, cfg.pw_a = float(k), float(a)
        cfg.parallel = _pos_int("parallel", parallel, 1)
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise ConfigError(f"seed={seed!r}: expected an int")
        cfg.seed = int(seed) & _MASK
        if time_limit is not None:
            if not (isinstance(time_limit, (int, float)) and time_limit > 0):
                raise ConfigError(f"time_limit={time_limit!r}: expected seconds > 0")
            cfg.time_limit = float(time_limit)
        self.threads = 0 if threads is None else _pos_int("threads", threads, 1)
        self.n_items = n_items
        self.roots = roots_a.astype(np.int32)
        self.reward = reward
        self._cfg = cfg
        try:
            self._e = _core.MctsEngine(cfg, self.roots, para, sent, prior_a, indptr, indices)
        except _core.MctsError as exc:
            raise InputError(str(exc)) from None
        self._last: RewardRequests | None = None

    # ------------------------------------------------------------ properties
    @property
    def done(self) -> bool:
        """True when every search has spent its budget (or cannot continue)."""
        return bool(self._e.done)

    @property
    def r_max(self) -> float:
        """Normaliser of the step reward (1 when not normalising)."""
        return float(self._e.r_max)

    def step_reward(self, root: int, cand: int, value: float) -> float:
        """Step reward (eq. 4) of ``cand`` for ``root`` given ``I = value``, normalised as configured."""
        for name, v in (("root", root), ("cand", cand)):
            if not 0 <= v < self.n_items:
                raise InputError(f"{name}={v} out of range [0, {self.n_items})")
        return float(self._e.step_reward(int(root), int(cand), float(value)))

    # --------------------------------------------------------------- native
    def run_native(self, I, threads: int | None = None) -> "MCTS":
        """Run every search to the end in C++ with ``I`` fully known (pair mode only).

        ``I``: a dense ``(n_items, n_items)`` array (``I[root, cand]``), a
        ``(n_items,)`` vector (``I[cand]``, the same for every root), a
        ``scipy.sparse`` matrix, or a CSR triple ``(data, indices, indptr)``
        (missing entries are 0). Roots are spread over ``threads`` workers.
        """
        if self.reward != "pair":
            raise ConfigError("run_native needs reward='pair': path rewards depend on the path text")
        if self._cfg.expansion == _EXPANSION["scored"]:
            raise ConfigError("run_native cannot run expansion='scored': its scores come through ask/tell")
        n = self.n_items
        kind, data, indptr, indices = self._native_reward(I, n)
        th = self.threads if threads is None else threads
        try:
            self._e.run_native(kind, data, indptr, indices, int(th))
        except _core.MctsError as exc:
            raise SearchError(str(exc)) from None
        return self

    @staticmethod
    def _native_reward(I, n):
        if hasattr(I, "tocsr") and not isinstance(I, np.ndarray):  # scipy.sparse
            I = I.tocsr()
            I = (I.data, I.indices, I.indptr) if I.shape == (n, n) else None
            if I is None:
                raise InputError(f"I: sparse matrix must have shape ({n}, {n})")
        if isinstance(I, tuple):
            if len(I) != 3:
                raise InputError("I: a CSR triple is (data, indices, indptr)")
            data = np.asarray(I[0], dtype=np.float64)
            indices = _int_array(I[1], "I indices", data.shape[0])
            indptr = _int_array(I[2], "I indptr", n + 1)
            if indptr[0] != 0 or np.any(np.diff(indptr) < 0) or indptr[-1] != data.shape[0]:
                raise InputError("I: indptr must start at 0, be non-decreasing and end at len(data)")
            if indices.size and (indices.min() < 0 or indices.max() >= n):
                raise InputError(f"I: column index out of range [0, {n})")
            if not np.all(np.isfinite(data)):
                raise InputError("I: contains NaN or infinite values")
            # sort each row by column; duplicates are an error
            rows = np.repeat(np.arange(n), np.diff(indptr))
            order = np.lexsort((indices, rows))
            indices, data = indices[order], data[order]
            if np.any((np.diff(indices) == 0) & (np.diff(rows[order]) == 0)):
                raise InputError("I: duplicate (row, column) entries in the sparse matrix")
            return 2, data, indptr, indices
        a = np.asarray(I, dtype=np.float64)
        if not np.all(np.isfinite(a)):
            raise InputError("I: contains NaN or infinite values")
        if a.shape == (n, n):
            return 0, np.ascontiguousarray(a), None, None
        if a.shape == (n,):
            return 1, a, None, None
        raise InputError(f"I: expected shape ({n}, {n}) or ({n},), got {a.shape}")

    # ------------------------------------------------------------- ask/tell
    def ask(self, max_requests: int = 256) -> RewardRequests:
        """Advance every search until it blocks on unknown rewards; return up to ``max_requests`` requests.

        An empty batch means either the run is :attr:`done`, or every open
        request is already out (answer them with :meth:`tell`).
        """
        if isinstance(max_requests, bool) or not isinstance(max_requests, (int, np.integer)) or max_requests < 1:
            raise ConfigError(f"max_requests={max_requests!r}: expected an int >= 1")
        try:
            ids, ri, root, pid, cand, kind = self._e.ask(int(max_requests), self.threads)
        except _core.MctsError as exc:
            raise SearchError(str(exc)) from None
        self._last = RewardRequests(ids, ri, root, pid, cand, self._e, kind)
        return self._last

    def tell(self, values, ids=None) -> None:
        """Answer requests: ``values[j]`` is ``I`` for request ``ids[j]`` (default: the last :meth:`ask` batch).

        Raises :class:`RewardError` (nothing changes) on a wrong count or a
        NaN / infinite value, :class:`SearchError` for unknown or repeated ids
        and for a tell without an ask.
        """
        if ids is None:
            if self._last is None:
                raise SearchError("tell() without ask(): there are no requests to answer")
            ids = self._last.ids
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        try:
            vals = np.asarray(values, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError) as exc:
            raise RewardError(f"rewards must be numbers ({exc})") from None
        if vals.shape[0] != ids.shape[0]:
            raise RewardError(f"got {vals.shape[0]} rewards for {ids.shape[0]} requests")
        bad = np.flatnonzero(~np.isfinite(vals))
        if bad.size:
            raise RewardError(f"reward for request {int(ids[bad[0]])} is {vals[bad[0]]}: rewards must be finite")
        if ids.shape[0] == 0:
            return
        try:
            self._e.tell(ids, vals)
        except _core.MctsError as exc:
            raise SearchError(str(exc)) from None

    def release(self, ids=None) -> None:
        """Give unanswered requests back (e.g. after a failed judge call); a later :meth:`ask` hands them out again."""
        if ids is None:
            ids = self._last.ids if self._last is not None else np.zeros(0, np.int64)
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        try:
            self._e.release(ids)
        except _core.MctsError as exc:
            raise SearchError(str(exc)) from None

    def run(
        self,
        judge: Callable[[RewardRequests], Sequence[float]],
        batch_size: int = 64,
        progress: Callable[[int, int], None] | bool = False,
    ) -> "MCTS":
        """Ask/tell loop with a synchronous ``judge(requests) -> values`` (one value per request).

        A judge that raises, or returns the wrong number of values or
        non-finite values, raises :class:`JudgeError` / :class:`RewardError`;
        ``progress``: a callable taking the count of answered requests, or True
        for progress on stderr (:class:`momoka.progress.Progress`).
        its requests are released, so the engine is as before the call and
        ``run`` can be called again.
        """
        report = _progress(progress)
        answered = 0
        while True:
            batch = self.ask(batch_size)
            if len(batch) == 0:
                if self.done or self._e.n_outstanding == 0:
                    break
                raise SearchError("requests are still outstanding: answer them with tell() before run()")
            try:
                vals = judge(batch)
            except Exception as exc:
                self.release(batch.ids)
                raise JudgeError(f"the judge raised {type(exc).__name__}: {exc}") from exc
            try:
                self.tell(vals, batch.ids)
            except Exception:
                self.release(batch.ids)
                raise
            answered += len(batch)
            report(answered)
        report(answered, final=True)
        return self

    async def arun(
        self,
        judge: Callable[[RewardRequests], Awaitable[Sequence[float]]],
        max_in_flight: int = 32,
        batch_size: int = 1,
        progress: Callable[[int, int], None] | bool = False,
    ) -> "MCTS":
        """Async ask/tell loop that keeps up to ``max_in_flight`` requests in flight.

        ``judge`` is an async callable taking a :class:`RewardRequests` of at
        most ``batch_size`` requests and returning their values. Answers are
        told as they arrive; the searches they unblock produce new requests at
        once. On a judge error the other in-flight calls are cancelled, all
        unanswered requests are released and :class:`JudgeError` is raised.
        """
        if max_in_flight < 1 or batch_size < 1:
            raise ConfigError("max_in_flight and batch_size must be >= 1")
        report = _progress(progress)
        answered = 0
        pending: dict[asyncio.Task, RewardRequests] = {}
        in_flight = 0
        try:
            while True:
                free = max_in_flight - in_flight
                if free > 0:
                    batch = self.ask(free)
                    for s in range(0, len(batch), batch_size):
                        sub = RewardRequests(
                            batch.ids[s : s + batch_size],
                            batch.root_index[s : s + batch_size],
                            batch.root[s : s + batch_size],
                            batch.path_id[s : s + batch_size],
                            batch.cand[s : s + batch_size],
                            self._e,
                            batch.kind[s : s + batch_size] if batch.kind is not None else None,
                        )
                        pending[asyncio.ensure_future(judge(sub))] = sub
                        in_flight += len(sub)
                if not pending:
                    break
                finished, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                ids, vals = [], []
                failure = None
                for task in finished:
                    sub = pending.pop(task)
                    in_flight -= len(sub)
                    if failure is not None:
                        self.release(sub.ids)
                        continue
                    try:
                        v = task.result()
                        v = np.asarray(v, dtype=np.float64).reshape(-1)
                    except Exception as exc:
                        self.release(sub.ids)
                        failure = JudgeError(f"the judge raised {type(exc).__name__}: {exc}")
                        failure.__cause__ = exc
                        continue
                    if v.shape[0] != len(sub):
                        self.release(sub.ids)
                        failure = RewardError(f"got {v.shape[0]} rewards for {len(sub)} requests")
                        continue
                    ids.append(sub.ids)
                    vals.append(v)
                if ids:
                    i_all, v_all = np.concatenate(ids), np.concatenate(vals)
                    try:
                        self.tell(v_all, i_all)
                    except Exception:
                        self.release(i_all)
                        raise
                    answered += i_all.shape[0]
                    report(answered)
                if failure is not None:
                    raise failure
        finally:
            if pending:
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                for sub in pending.values():
                    self.release(sub.ids)
        report(answered, final=True)
        return self

    # -------------------------------------------------------------- results
    def paths(self) -> list[np.ndarray]:
        """Best path per root (root excluded): the most visited child at each level,
        ties by mean reward then lowest item, at most ``path_cap`` items."""
        return [self._e.best_path(i) for i in range(len(self.roots))]

    def top_children(self, k: int = 5) -> list[np.ndarray]:
        """Per root, up to ``k`` root children by mean value (ties: more visits, then lowest item)."""
        if k < 0:
            raise ConfigError("k must be >= 0")
        return [self._e.top_children(i, int(k)) for i in range(len(self.roots))]

    def tree(self, i: int) -> dict[str, np.ndarray]:
        """Nodes of the ``i``-th root's tree (node 0 = root): item, parent, depth, visits, value, mean.

        ``value`` is the cumulative reward (backup ``"sum"``) or the running mean (``"mean"``).
        """
        if not 0 <= i < len(self.roots):
            raise InputError(f"root index {i} out of range [0, {len(self.roots)})")
        return self._e.tree(int(i))

    def stats(self) -> dict[str, np.ndarray]:
        """Per root: iterations done, distinct reward requests, tree nodes."""
        return self._e.stats()


def _progress(progress):
    if not progress:
        return lambda n, final=False: None
    if callable(progress):
        return lambda n, final=False: progress(n)
    bar = Progress("mcts", unit="rewards", enabled=True)  # the total is not known in advance

    def report(n, final=False):
        bar.update(n - bar.n)
        if final:
            bar.close()

    return report
