"""A :class:`Delta`: the changes of one batch of documents, keyed by ids local to that batch.

A batch built apart from the store (a Ray worker fills an in-memory store of its own) is shipped
as a Delta: picklable plain values, its chunk ids and node ids those of its own store. The store
applies it (:meth:`momoka.store.store.Store.apply`, the function :func:`apply_delta`): new global
chunk ids follow the store's, node ids continue the store's node tables, and every field that holds
ids is renumbered, as declared: relation targets (chunk ids, or node ids of the relation's
``target_table``), node-table fields (:attr:`~momoka.store.node_table.NodeTable.id_fields`) and
document metadata (:attr:`~momoka.store.node_table.NodeTable.doc_fields`). The next save writes it
as one segment: nothing else is rewritten.

A Delta may also change documents already in the store (what :meth:`momoka.Index.extend` makes
when it runs added enrichers and relators over stored documents): ``stored`` maps the batch's
local ids of those documents' chunks to their ids in the store, so vector rows, BM25 texts and
relation rows over them land on the stored chunks; ``updates`` holds the document metadata keys
the batch set and ``chunk_meta`` the chunk metadata keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConfigError, InputError
from ._kinds import ARTIFACT_KINDS


@dataclass
class Delta:
    """The documents, chunks and artifact rows of one batch, by the batch's own ids.

    ``chunks[i]`` holds ``(local chunk id, Chunk)`` of ``documents[i]``; ``vectors[name]``:
    ``{"embedder", "dtype", "source", "ids", "rows"}``; ``bm25[name]``: ``{"params", "source",
    "ids", "texts"}``; ``relations[name]``: ``{"ordered", "weighted", "target_table", "source",
    "rows": {local source: (targets, weights or None)}}``; ``nodes[name]``: ``{"source",
    "id_fields", "doc_fields", "rows"}``. ``stored``: local chunk id -> id of that chunk in the
    store, for chunks of documents already there (they are not in ``chunks``); ``updates``: doc id
    (already in the store) -> the metadata keys the batch set, with their values; ``chunk_meta``:
    local chunk id (in ``stored``) -> the chunk metadata keys the batch set. ``deletes``: ids of documents
    in the store that the batch replaces: they are deleted when the batch is applied, so one commit holds
    both the deletion and the new version (a reader sees the old version or the new one, never neither).
    """

    documents: list[dict] = field(default_factory=list)
    chunks: list[list[tuple[int, Any]]] = field(default_factory=list)
    vectors: dict[str, dict] = field(default_factory=dict)
    bm25: dict[str, dict] = field(default_factory=dict)
    relations: dict[str, dict] = field(default_factory=dict)
    nodes: dict[str, dict] = field(default_factory=dict)
    stored: dict[int, int] = field(default_factory=dict)
    updates: dict[str, dict] = field(default_factory=dict)
    chunk_meta: dict[int, dict] = field(default_factory=dict)
    deletes: list[str] = field(default_factory=list)

    @classmethod
    def of_store(cls, store) -> Delta:
        """Everything an in-memory store holds (a batch indexed on its own), by that store's ids."""
        out = cls()
        for d in store.documents.values():
            out.documents.append({"doc_id": d.doc_id, "title": d.title, "source": d.source, "length": d.length,
                                  "metadata": dict(d.metadata), "sha256": d.sha256})
            out.chunks.append([(cid, store.chunks.get(cid)) for cid in d.chunk_ids])
        arts = {kind.key: store.artifacts(kind.key) for kind in ARTIFACT_KINDS}
        for kind in ARTIFACT_KINDS:  # the spec of each artifact, as its kind declares it
            getattr(out, kind.delta).update((n, kind.spec(a)) for n, a in arts[kind.key].items())
        for name, v in arts["vectors"].items():
            ids = v.ids()
            out.vectors[name].update(ids=ids, rows=np.asarray(v.get(ids)) if len(ids) else None)
        for name, v in arts["bm25"].items():
            texts = v.unsaved_texts()
            ids = sorted(texts)
            out.bm25[name].update(ids=ids, texts=[texts[c] for c in ids])
        for name, r in arts["relation"].items():
            out.relations[name]["rows"] = {c: (np.asarray(r.get(c)), np.asarray(r.weights(c)) if r.weighted else None)
                                           for c in r.rows()}
        for name, t in arts["nodes"].items():
            out.nodes[name]["rows"] = [t.get(i) for i in range(len(t))]
        return out

    @property
    def doc_ids(self) -> list[str]:
        """The ids of the batch's documents, in order."""
        return [d["doc_id"] for d in self.documents]

    def changes_since(self, before: Delta, stored: dict[int, int]) -> Delta:
        """What this Delta of a store adds to ``before``, an earlier Delta of the same store.

        Both are :meth:`of_store` of one scratch store holding documents already in the index's
        store (``stored``: their local chunk ids -> stored ids), taken before and after components
        ran on it. The result holds no new documents: the document and chunk metadata keys set
        (``updates``, ``chunk_meta``), the vector rows added (rows are never changed in place), and
        every BM25 text, relation row and node row (none is copied into the scratch store).
        """
        out = Delta(stored=dict(stored), bm25=self.bm25, relations=self.relations, nodes=self.nodes)
        for b, a in zip(before.documents, self.documents):
            set_ = {k: v for k, v in a["metadata"].items() if k not in b["metadata"] or b["metadata"][k] != v}
            if set_:
                out.updates[a["doc_id"]] = set_
        for bs, cs in zip(before.chunks, self.chunks):
            for (cid, b), (_, a) in zip(bs, cs):
                set_ = {k: v for k, v in a.metadata.items() if k not in b.metadata or b.metadata[k] != v}
                if set_:
                    out.chunk_meta[cid] = set_
        for name, e in self.vectors.items():
            old = before.vectors.get(name)
            keep = np.ones(len(e["ids"]), bool)
            if old is not None and len(old["ids"]):
                keep = ~np.isin(np.asarray(e["ids"], np.int64), np.asarray(old["ids"], np.int64))
            ids = np.asarray(e["ids"], np.int64)[keep]
            out.vectors[name] = {**e, "ids": ids, "rows": e["rows"][keep] if len(ids) else None}
        return out


def _shift(value: Any, f) -> Any:
    """``value`` (an id, a list of ids or None) with every id mapped by ``f``."""
    if value is None:
        return None
    if isinstance(value, list):
        return [f(int(x)) for x in value]
    return f(int(value))


def check_delta(store, delta: Delta) -> None:
    """Refuse a Delta that ``store`` cannot apply, before anything is changed: node tables whose rows may
    hold ids without declaring them (:class:`ConfigError`: no generic mapping can find ids in undeclared
    fields), and changes to documents or chunks the store no longer has (:class:`InputError`)."""
    undeclared = sorted(n for n, e in delta.nodes.items() if e["rows"] and not e["id_fields"]
                        and not e["doc_fields"] and _holds_ints(e["rows"]))
    if undeclared:
        raise ConfigError(f"the pipeline writes node table(s) {', '.join(undeclared)} whose rows may hold store ids "
                          "but declare no id_fields (add_node_table(..., id_fields=...)); index with the local "
                          "engine, or add that component afterwards (momoka index PATHS --store DIR --relate NAME, "
                          "without --engine ray)")
    lost = sorted(d for d in [*delta.updates, *delta.deletes] if d not in store.documents)
    gone = sorted(g for g in delta.stored.values() if g not in store.chunks)
    if lost or gone:
        raise InputError(f"the batch changes what the store no longer has: documents {lost[:5]}, chunks {gone[:5]} "
                         "(deleted since the batch was made)")


def apply_delta(store, delta: Delta) -> list[str]:
    """Add a batch's changes to ``store``, renumbering its ids; returns the doc ids added.

    The documents of ``delta.deletes`` are deleted first, in the same in-memory change: the next
    save commits the deletions and the new versions together. :func:`check_delta` runs first.
    """
    check_delta(store, delta)
    for kind in ARTIFACT_KINDS:  # the artifacts the store lacks, as the batch's had them (its kind's spec)
        for name, e in getattr(delta, kind.delta).items():  # (node tables before their sizes give the offsets)
            if name not in store.artifacts(kind.key):
                kind.create(store, name, e)
    if delta.deletes:  # a replace: the old versions go in the same change as the new ones come
        store.delete(delta.deletes)
    offset = {f"nodes/{n}": len(store.node_table(n)) for n in delta.nodes}
    ids_per_doc = store.add_documents(delta.documents, [[c for _, c in cs] for cs in delta.chunks])
    gid = {int(local): int(g) for local, g in delta.stored.items()}
    gid.update({local: new for cs, ids in zip(delta.chunks, ids_per_doc) for (local, _), new in zip(cs, ids)})
    for d, keys in delta.updates.items():
        store.documents[d].metadata.update(keys)
    for c, keys in delta.chunk_meta.items():
        for k, v in keys.items():
            store.chunks.set_metadata(gid[int(c)], k, v)

    def chunk(i: int) -> int:
        return gid[i]

    def node(table: str):
        return lambda i, o=offset.get(table, 0): o + i

    for name, e in delta.vectors.items():
        if e["rows"] is not None:
            store.vector_view(name).add([gid[int(i)] for i in e["ids"]], e["rows"])
    for name, e in delta.bm25.items():
        if e["ids"]:
            store.bm25_view(name).add([gid[int(i)] for i in e["ids"]], e["texts"])
    for name, e in delta.nodes.items():
        fields = {k: (chunk if v == "chunk" else node(v)) for k, v in e["id_fields"].items()}
        rows = [{k: (_shift(v, fields[k]) if k in fields else v) for k, v in r.items()} for r in e["rows"]]
        store.node_table(name).add(rows)
        for key, subs in e["doc_fields"].items():
            for d in delta.doc_ids + [d for d, keys in delta.updates.items() if key in keys]:
                rec = store.documents[d].metadata.get(key)
                if isinstance(rec, dict) and any(s in rec for s in subs):
                    store.documents[d].metadata[key] = {k: (_shift(v, node(f"nodes/{name}")) if k in subs else v)
                                                        for k, v in rec.items()}
    for name, e in delta.relations.items():
        rel = store.relation(name)
        target = chunk if e["target_table"] is None else node(f"nodes/{e['target_table']}")
        for c, (targets, weights) in e["rows"].items():
            rel.set(gid[int(c)], [target(int(t)) for t in targets], weights)
    return delta.doc_ids


def _holds_ints(rows: list[dict]) -> bool:
    """Whether any row has an int (or a list of ints) field: it may be a store id."""
    for r in rows:
        for v in r.values():
            if isinstance(v, int) and not isinstance(v, bool):
                return True
            if isinstance(v, list) and any(isinstance(x, int) and not isinstance(x, bool) for x in v):
                return True
    return False
