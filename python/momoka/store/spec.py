"""The typed pipeline spec a store records: :class:`PipelineSpec` and its :class:`ComponentSpec` entries.

The manifest's ``pipeline`` holds what filled the store: the chunker (``{"name", "params"}``), the
enrichers and relators in order (each ``{"name", "params", "object"}``, with the ``settings`` its
``describe()`` reported and, while an interrupted ``Index.extend`` left work, the ``pending`` document
ids) and the LLM stages' fallback tallies (``llm_fallbacks``). Every store object holds it typed
(:attr:`Store.pipeline <momoka.store.store.Store.pipeline>`); the writer alone turns it back into the
manifest's ``pipeline`` when it commits (:meth:`PipelineSpec.to_dict`), so that JSON is written in one
place. A manifest written by any earlier version reads and writes back unchanged: keys it lacks stay
absent, keys this version does not know are kept, and the order of keys is kept.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from ..errors import StoreCorruptedError

#: The kinds of component a pipeline runs after chunking, by their key in the spec.
COMPONENT_KINDS = ("enrich", "relate")
#: The key of the LLM stages' fallback tallies (see :mod:`momoka.methods.fallbacks`).
FALLBACKS_KEY = "llm_fallbacks"


def _ordered(values: dict[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    """``values`` with the keys of ``order`` first, in that order, then the others as they come."""
    out = {k: values[k] for k in order if k in values}
    out.update((k, v) for k, v in values.items() if k not in out)
    return out


@dataclass
class ComponentSpec:
    """One enricher or relator of the pipeline.

    ``params``: its options (JSON values); ``object``: it was given as an object the manifest cannot
    rebuild; ``settings``: what its ``describe()`` reported (None: nothing yet); ``pending``: documents an
    interrupted ``extend`` left for it (None: none).
    """

    name: str
    params: dict = field(default_factory=dict)
    object: bool = False
    settings: dict | None = None
    pending: list[str] | None = None
    extra: dict = field(default_factory=dict)  # keys this version does not know, kept as they were
    _order: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, d: dict) -> ComponentSpec:
        """The entry of a manifest's pipeline."""
        known = {"name", "params", "object", "settings", "pending"}
        return cls(name=str(d["name"]), params=copy.deepcopy(d.get("params") or {}), object=bool(d.get("object", False)),
                   settings=copy.deepcopy(d.get("settings")), pending=list(d["pending"]) if "pending" in d else None,
                   extra={k: copy.deepcopy(v) for k, v in d.items() if k not in known}, _order=tuple(d))

    def to_dict(self) -> dict:
        """The manifest entry (JSON values)."""
        out: dict[str, Any] = {"name": self.name, "params": copy.deepcopy(self.params), "object": self.object}
        if self.settings is not None:
            out["settings"] = copy.deepcopy(self.settings)
        if self.pending is not None:
            out["pending"] = list(self.pending)
        out.update(copy.deepcopy(self.extra))
        return _ordered(out, self._order)


@dataclass
class PipelineSpec:
    """The chunker, the enrichers and relators with their options, settings and pending work, and the LLM
    fallback tallies of a store (see the module docstring)."""

    chunker: dict | None = None
    enrich: list[ComponentSpec] = field(default_factory=list)
    relate: list[ComponentSpec] = field(default_factory=list)
    fallbacks: dict | None = None
    extra: dict = field(default_factory=dict)
    _order: tuple[str, ...] = ()
    _absent: frozenset = frozenset()  # keys the manifest it was read from lacked (written back only when set)

    @classmethod
    def from_dict(cls, d: dict | None) -> PipelineSpec:
        """The spec of a manifest's ``pipeline`` (None or ``{}``: an empty one that writes back ``{}``)."""
        d = d or {}
        try:
            spec = cls(chunker=copy.deepcopy(d.get("chunker")),
                       enrich=[ComponentSpec.from_dict(e) for e in d.get("enrich") or []],
                       relate=[ComponentSpec.from_dict(e) for e in d.get("relate") or []],
                       fallbacks=copy.deepcopy(d.get(FALLBACKS_KEY)),
                       extra={k: copy.deepcopy(v) for k, v in d.items()
                              if k not in ("chunker", *COMPONENT_KINDS, FALLBACKS_KEY)},
                       _order=tuple(d))
        except (KeyError, TypeError, AttributeError) as exc:
            raise StoreCorruptedError(f"the manifest's pipeline is malformed ({type(exc).__name__}: {exc})") from None
        spec._absent = frozenset(k for k in ("chunker", *COMPONENT_KINDS) if k not in d)
        return spec

    def to_dict(self) -> dict:
        """The manifest's ``pipeline`` (JSON values); only the writer calls it, when it commits."""
        out: dict[str, Any] = {}
        if self.chunker is not None or "chunker" not in self._absent:
            out["chunker"] = copy.deepcopy(self.chunker)
        for kind in COMPONENT_KINDS:
            entries = self.components(kind)
            if entries or kind not in self._absent:
                out[kind] = [e.to_dict() for e in entries]
        if self.fallbacks is not None:
            out[FALLBACKS_KEY] = copy.deepcopy(self.fallbacks)
        out.update(copy.deepcopy(self.extra))
        return _ordered(out, self._order)

    def view(self, chunker: dict | None = None) -> dict:
        """A copy as a plain dict with ``chunker`` (default: the spec's), ``enrich`` and ``relate`` always there
        (what :attr:`Corpus.pipeline <momoka.methods.corpus.Corpus.pipeline>` shows; changing it changes nothing)."""
        out = self.to_dict()
        out.setdefault("chunker", copy.deepcopy(chunker))
        for kind in COMPONENT_KINDS:
            out.setdefault(kind, [])
        return out

    def components(self, kind: str) -> list[ComponentSpec]:
        """The enrichers (``kind="enrich"``) or relators (``"relate"``), in order."""
        if kind not in COMPONENT_KINDS:
            raise KeyError(kind)
        return self.enrich if kind == "enrich" else self.relate

    def entry(self, kind: str, name: str) -> ComponentSpec | None:
        """The entry of enricher/relator ``name`` (None when the pipeline has none)."""
        return next((c for c in self.components(kind) if c.name == name), None)

    def pending(self, kind: str, name: str) -> list[str]:
        """Documents an interrupted ``Index.extend`` left for enricher/relator ``name`` to do (empty when none)."""
        entry = self.entry(kind, name) if kind in COMPONENT_KINDS else None
        return list(entry.pending or []) if entry is not None else []

    def needs(self, kind: str, name: str) -> bool:
        """Whether ``Index.extend`` has work for enricher/relator ``name``: not in the pipeline, or left unfinished."""
        entry = self.entry(kind, name) if kind in COMPONENT_KINDS else None
        return entry is None or bool(entry.pending)

    def record_settings(self, kind: str, name: str, settings: dict) -> None:
        """Record what enricher/relator ``name`` reported (its ``describe()``)."""
        for c in self.components(kind):
            if c.name == name:
                c.settings = settings
