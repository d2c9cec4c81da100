"""The settings of Momoka-Map (:class:`~momoka.methods.momoka.map.MomokaMap`): presets, the checks of every
argument, what is recorded in the store manifest, and the prior and rollout they imply; the names of the records it
writes and its counters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ...errors import ConfigError
from ...stats import Stats
from ..fallbacks import FallbackTally

#: Metadata keys written into the store.
TITLE_KEY = "momoka_title"
TITLE_SOURCE_KEY = "momoka_title_source"
DOC_RECORD_KEY = "momoka_map"
#: Remedies for documents with more chunks than iterations.
LONG_DOC_REMEDIES = (None, "window", "widening", "scale")
#: Separator of chunk texts joined into a path context (eq. 7).
PATH_SEPARATOR = "\n\n"
#: Remedies for short documents (every rollout would cover every chunk).
SHORT_DOC_REMEDIES = (None, "rollout")
#: Named settings of the structural prior and the short- and long-document remedies (the module docstring of
#: :mod:`momoka.methods.momoka.map`): ``"referee"`` is the default, ``"paper"`` the paper's procedure as it is.
PRESETS = {"paper": {"prior_weight": None, "short_docs": None, "long_docs": None},
           "referee": {"prior_weight": 0.5, "short_docs": "rollout", "long_docs": "window"}}
#: Default of the options a preset sets ("take the preset's value"); None is an explicit "off".
_PRESET = object()


@dataclass
class MapStats(Stats):
    """Counts of the searches run by one :class:`MomokaMap` (``path_lengths``: paths by length)."""

    documents: int = 0
    chunks: int = 0
    single_chunk_documents: int = 0
    native_documents: int = 0
    native_matrix_entries: int = 0
    long_documents: int = 0
    referee_requests: int = 0
    referee_batches: int = 0
    path_lengths: dict = field(default_factory=dict)
    seconds: float = 0.0


class MapSettings:
    """The checked settings of :class:`~momoka.methods.momoka.map.MomokaMap` (which documents the arguments)."""

    def __init__(
        self,
        referee: Any = None,
        *,
        threshold: float | None = None,
        reward: str = "pair",
        iterations: int = 100,
        rollout: int = 5,
        alpha: float = 3.0,
        beta: float = 2.0,
        gamma: float = 1.0,
        delta: float = 1.0,
        c: float = math.sqrt(2),
        normalize: bool = True,
        expansion: str = "random",
        top_m: int = 5,
        long_docs: Any = _PRESET,
        window: int = 32,
        scale: float = 2.0,
        max_iterations: int = 1000,
        path_cap: int | None = None,
        preset: str = "referee",
        prior_weight: Any = _PRESET,
        short_docs: Any = _PRESET,
        structure: str = "auto",
        llm: Any = None,
        embedder: Any = None,
        parallel: int = 1,
        batch_size: int = 256,
        seed: int = 0,
        threads: int | None = None,
        progress: bool | None = None,
    ):
        if preset not in PRESETS:
            raise ConfigError(f"paths: preset must be one of {', '.join(PRESETS)}, not {preset!r}")
        prior_weight = PRESETS[preset]["prior_weight"] if prior_weight is _PRESET else prior_weight
        short_docs = PRESETS[preset]["short_docs"] if short_docs is _PRESET else short_docs
        long_docs = PRESETS[preset]["long_docs"] if long_docs is _PRESET else long_docs
        if prior_weight is not None and (isinstance(prior_weight, bool) or not isinstance(prior_weight, (int, float))
                                         or not math.isfinite(prior_weight) or prior_weight <= 0):
            raise ConfigError(f"prior_weight must be None or a number > 0, got {prior_weight!r}")
        if short_docs not in SHORT_DOC_REMEDIES:
            raise ConfigError(f"short_docs must be one of {SHORT_DOC_REMEDIES}, not {short_docs!r}")
        if reward not in ("pair", "path"):
            raise ConfigError(f"reward must be 'pair' (eq. 4) or 'path' (eq. 7), not {reward!r}")
        if expansion not in ("random", "topm"):
            raise ConfigError(f"expansion must be 'random' or 'topm', not {expansion!r}")
        if long_docs not in LONG_DOC_REMEDIES:
            raise ConfigError(f"long_docs must be one of {LONG_DOC_REMEDIES}, not {long_docs!r}")
        if structure not in ("auto", "paragraph", "sentence"):
            raise ConfigError(f"structure must be 'auto', 'paragraph' or 'sentence', not {structure!r}")
        for nm, v in (("iterations", iterations), ("rollout", rollout), ("top_m", top_m), ("window", window),
                      ("max_iterations", max_iterations), ("parallel", parallel), ("batch_size", batch_size)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{nm} must be an int >= 1, got {v!r}")
        if path_cap is not None and (isinstance(path_cap, bool) or not isinstance(path_cap, int) or path_cap < 0):
            raise ConfigError(f"path_cap must be None or an int >= 0, got {path_cap!r}")
        self._llm = llm
        self._referee_spec = referee
        self._referee = None if referee is None or isinstance(referee, str) else referee
        self.threshold = threshold
        if isinstance(referee, str) and referee not in ("ppl", "llm", "embedding"):
            raise ConfigError(f"unknown referee {referee!r}; choose one of ppl, llm, embedding")
        self._embedder = embedder
        self.reward = reward
        self.iterations, self.rollout = iterations, rollout
        self.alpha, self.beta, self.gamma, self.delta = float(alpha), float(beta), float(gamma), float(delta)
        self.c, self.normalize = float(c), bool(normalize)
        self.expansion, self.top_m = expansion, top_m
        self.long_docs, self.window, self.scale, self.max_iterations = long_docs, window, float(scale), max_iterations
        self.path_cap = rollout if path_cap is None else path_cap
        self.preset, self.short_docs = preset, short_docs
        self.prior_weight = None if prior_weight is None else float(prior_weight)
        self.structure = structure
        self.parallel, self.batch_size, self.seed, self.threads = parallel, batch_size, int(seed), threads
        self.progress = progress
        self.stats = MapStats()
        self._tie_break_warned = False  # long documents without a remedy: warned once per builder
        #: Malformed LLM-referee verdicts (scored 0), per document: the rule of :mod:`momoka.methods.fallbacks`
        #: (items: ``[[context chunk positions], candidate position]``).
        self.fallbacks = FallbackTally("referee", "referee", "verdicts", "those pairs were scored 0")

    def settings(self) -> dict:
        """Every setting of the searches (recorded in the store manifest)."""
        ref = self.referee
        a, b = self._prior()
        r_max = (1.0 + a / self.gamma + b / self.delta) if self.normalize else 1.0
        return {
            "method": "momoka-map",
            "reward": self.reward,
            "referee": None if ref is None else (
                ref.config() if hasattr(ref, "config") else {"name": getattr(ref, "name", type(ref).__name__)}),
            "iterations": self.iterations,
            "rollout": self.rollout,
            "rollout_scope": "path",
            "rollout_return": "mean",
            "alpha": self.alpha, "beta": self.beta, "gamma": self.gamma, "delta": self.delta,
            "c": self.c,
            "normalize": self.normalize,
            "r_max": r_max,
            "expansion": self.expansion,
            "top_m": self.top_m if self.expansion == "topm" else None,
            "long_docs": self.long_docs,
            "window": self.window if self.long_docs == "window" else None,
            "scale": self.scale if self.long_docs == "scale" else None,
            "max_iterations": self.max_iterations if self.long_docs == "scale" else None,
            "widening": [1.0, 0.5] if self.long_docs == "widening" else None,
            "path_cap": self.path_cap,
            "preset": self.preset,
            "prior_weight": self.prior_weight,
            "alpha_beta_used": list(self._prior()),
            "short_docs": self.short_docs,
            "best_path": "most visits per level; ties: higher mean reward, then lower chunk index",
            "structure": self.structure,
            "parallel": self.parallel,
            "seed": self.seed,
            "paths": "chunk positions within the document (paths_for_documents); the paths relator stores chunk ids",
        }

    def _prior(self) -> tuple[float, float]:
        """``(alpha, beta)`` as the engines get them (rescaled when ``prior_weight`` is set)."""
        total = self.alpha / self.gamma + self.beta / self.delta
        if self.prior_weight is None or total == 0:
            return self.alpha, self.beta
        f = self.prior_weight / total
        return self.alpha * f, self.beta * f

    def rollout_for(self, n: int) -> int:
        """The rollout length used for a document (or window block) of ``n`` chunks."""
        if self.short_docs == "rollout":
            return max(1, min(self.rollout, (n - 1) // 3))
        return self.rollout
