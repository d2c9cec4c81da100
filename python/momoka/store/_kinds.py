"""The artifact accessors of :class:`~momoka.store.store.Store` (views, relations, node tables)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, StoreError
from ._io import check_name
from ._manifest import RAW_VIEW
from .artifact import Artifact
from .bm25_view import BM25View
from .node_table import NodeTable
from .relations import Relation
from .vectors import VectorView



@dataclass(frozen=True)
class ArtifactKind:
    """One kind of artifact, declared once: its key in the store, its label, its key in a batch's
    :class:`~momoka.store.delta.Delta` and a scratch store's template, the fields of its spec (the
    constructor arguments, read back from an artifact as its attributes of the same names) and the
    writer method that creates one from them. The scratch store (:func:`momoka.methods.indexer.scratch_store`),
    :meth:`Delta.of_store <momoka.store.delta.Delta.of_store>` and :func:`~momoka.store.delta.apply_delta`
    all read a kind from here."""

    key: str
    label: str
    delta: str
    fields: tuple[str, ...]
    create_with: str

    def spec(self, art: Artifact) -> dict[str, Any]:
        """The spec of ``art`` (a copy: JSON values), what :meth:`create` makes an empty one like it from."""
        return {f: copy.deepcopy(getattr(art, f)) for f in self.fields}

    def create(self, store: Any, name: str, spec: dict[str, Any]) -> Artifact:
        """A new, empty artifact ``name`` of this kind in ``store`` (a writer) with ``spec`` (extra keys, such as
        a Delta entry's rows, are ignored)."""
        return getattr(store, self.create_with)(name, **{f: copy.deepcopy(spec[f]) for f in self.fields})


#: The artifact kinds a store holds besides its documents and chunk table.
ARTIFACT_KINDS: tuple[ArtifactKind, ...] = (
    ArtifactKind("vectors", "vector view", "vectors", ("embedder", "dtype", "source"), "add_vector_view"),
    ArtifactKind("bm25", "BM25 view", "bm25", ("params", "source"), "add_bm25_view"),
    ArtifactKind("relation", "relation", "relations", ("ordered", "weighted", "target_table", "source"),
                 "add_relation"),
    ArtifactKind("nodes", "node table", "nodes", ("source", "id_fields", "doc_fields"), "add_node_table"),
)
#: Each :class:`ArtifactKind` by its key.
KIND = {k.key: k for k in ARTIFACT_KINDS}
#: Artifact kinds by key, with their labels.
KINDS = {k.key: k.label for k in ARTIFACT_KINDS}


class ArtifactRegistry:
    """Named artifacts by kind, read access: ``self._artifacts[kind][name]`` (the store provides it)."""

    _artifacts: dict[str, dict[str, Artifact]]

    def artifacts(self, kind: str) -> dict[str, Artifact]:
        """The artifacts of ``kind`` (a key of :data:`KINDS`) by name (a copy of the mapping)."""
        return dict(self._artifacts[kind])

    def _get(self, kind: str, name: str):
        arts = self._artifacts[kind]
        if name not in arts:
            have = ", ".join(sorted(arts)) or "none"
            where = f" at {self.path}" if self.path else ""
            raise StoreError(f"the store{where} has no {KINDS[kind]} {name!r} ({KINDS[kind]}s: {have})")
        return arts[name]

    def put_artifact(self, kind: str, name: str, art: Artifact) -> Artifact:
        """Register an artifact read from disk under ``name`` (format readers use this; nothing is written)."""
        check_name(name, KINDS[kind])
        self._artifacts[kind][name] = art
        return art

    @property
    def vector_views(self) -> list[str]:
        """Names of the dense vector views."""
        return list(self._artifacts["vectors"])

    def has_vector_view(self, name: str) -> bool:
        """True when the store has vector view ``name``."""
        return name in self._artifacts["vectors"]

    def vector_view(self, name: str = RAW_VIEW) -> VectorView:
        """Vector view ``name`` (StoreError naming the views there are)."""
        return self._get("vectors", name)

    @property
    def bm25_views(self) -> list[str]:
        """Names of the BM25 views."""
        return list(self._artifacts["bm25"])

    def has_bm25_view(self, name: str) -> bool:
        """True when the store has BM25 view ``name``."""
        return name in self._artifacts["bm25"]

    def bm25_view(self, name: str = RAW_VIEW) -> BM25View:
        """BM25 view ``name`` (StoreError naming the views there are)."""
        return self._get("bm25", name)

    @property
    def relations(self) -> list[str]:
        """Names of the relations."""
        return list(self._artifacts["relation"])

    def has_relation(self, name: str) -> bool:
        """True when the store has relation ``name``."""
        return name in self._artifacts["relation"]

    def relation(self, name: str) -> Relation:
        """Relation ``name`` (StoreError naming the relations there are)."""
        return self._get("relation", name)

    @property
    def node_tables(self) -> list[str]:
        """Names of the node tables."""
        return list(self._artifacts["nodes"])

    def has_node_table(self, name: str) -> bool:
        """True when the store has node table ``name``."""
        return name in self._artifacts["nodes"]

    def node_table(self, name: str) -> NodeTable:
        """Node table ``name`` (StoreError naming the tables there are)."""
        return self._get("nodes", name)

    @property
    def embedder_info(self) -> dict | None:
        """``{"model_id", "checksum", "dim"}`` of the ``raw`` vector view, or None when there is none."""
        v = self._artifacts["vectors"].get(RAW_VIEW)
        return dict(v.embedder) if v is not None else None


class ArtifactWriter:
    """Creating and removing named artifacts (the writer's side of :class:`ArtifactRegistry`; the writer
    provides ``ensure_writable``)."""

    _artifacts: dict[str, dict[str, Artifact]]

    def _new(self, kind: str, name: str, art: Artifact):
        check_name(name, KINDS[kind])
        if name in self._artifacts[kind]:
            raise StoreError(f"the store already has a {KINDS[kind]} {name!r}; remove it first to rebuild it")
        self.ensure_writable()
        self._artifacts[kind][name] = art
        self._dirty = True
        return art

    def add_vector_view(self, name: str, *, embedder: dict, dtype: str = "float32",
                        source: dict | None = None) -> VectorView:
        """A new, empty dense view: ``embedder`` ``{"model_id", "checksum", "dim"}``, ``source`` what is embedded."""
        check_name(name, KINDS["vectors"])
        view = VectorView(self, name, embedder=embedder, dtype=dtype, source=source, hnsw=self.manifest.get("hnsw"))
        return self._new("vectors", name, view)

    def add_bm25_view(self, name: str, *, params: dict | None = None, source: dict | None = None) -> BM25View:
        """A new, empty BM25 view (``params`` over :data:`~momoka.store.bm25_view.DEFAULT_BM25`)."""
        check_name(name, KINDS["bm25"])
        return self._new("bm25", name, BM25View.create(self, name, params=params, source=source))

    def add_relation(self, name: str, *, ordered: bool = True, weighted: bool = False,
                     target_table: str | None = None, source: dict | None = None) -> Relation:
        """A new, empty relation over chunk ids (or from chunks to the nodes of ``target_table``)."""
        if target_table is not None:
            check_name(target_table, KINDS["nodes"])
        return self._new("relation", name, Relation(self, name, ordered=ordered, weighted=weighted,
                                                    target_table=target_table, source=source))

    def add_node_table(self, name: str, source: dict | None = None, *, id_fields: dict | None = None,
                       doc_fields: dict | None = None) -> NodeTable:
        """A new, empty node table (``id_fields``, ``doc_fields``: where its rows and the documents hold store
        ids, see :class:`~momoka.store.node_table.NodeTable`)."""
        return self._new("nodes", name, NodeTable(self, name, source, id_fields=id_fields, doc_fields=doc_fields))

    def remove_artifact(self, kind: str, name: str) -> None:
        """Drop a view, relation or node table (kind: vectors, bm25, relation, nodes), e.g. to rebuild it."""
        if kind not in KINDS:
            raise ConfigError(f"artifact kind must be one of {', '.join(KINDS)}, not {kind!r}")
        self._get(kind, name)
        self.ensure_writable()
        del self._artifacts[kind][name]
        self._dirty = True
