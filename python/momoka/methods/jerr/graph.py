"""JERR graph construction: exact and near entity dedup, the DAG, and its place in the store.

Dedup (``METHODS.md`` section 5):

* **exact**: names are normalised (lower-case, whitespace runs to one space);
  the native :class:`~momoka.kernels.BloomFilter` answers "certainly new" for
  most keys and the native :class:`~momoka.kernels.Trie` confirms a "maybe";
  a duplicate joins the first entity seen with that key;
* **near**: 64-bit SimHash of each remaining name on word unigrams plus
  character trigrams (``tokenizer="word+char"``); names within Hamming
  distance <= 3 are merged transitively (union-find, found by the native
  permuted-table search), the first-seen entity being the representative.

DAG: edges (mapped onto representatives) are inserted in document order; an
edge whose target already reaches its source would close a cycle and is
dropped and counted; self loops (both ends merged into one entity) are dropped
and counted apart; a repeated edge keeps its first attribute.

In the store (see :func:`write_graph`): node table ``jerr.entities`` (one row
per entity: doc_id, name, aliases, chunk ids and their spans), node table
``jerr.edges`` (doc_id, src, dst entity ids, attribute, source chunk, sentence
or unit span), relations ``jerr.mentions`` (chunk -> entities) and
``jerr.edges`` (chunk -> edges it gave), each chunk's synopsis in its metadata
(``jerr.synopsis``) and the per-document record (back-end, counts) in the
document metadata under ``jerr``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ...kernels import BloomFilter, Trie, near_duplicates, simhash
from .extract import UnitExtraction

__all__ = ["DedupResult", "EntityGraph", "dedup", "normalise", "build_dag", "build_graph", "link_documents",
           "ENTITIES", "EDGES", "MENTIONS", "SYNOPSIS_KEY", "DOC_KEY", "write_graph", "read_graphs"]

ENTITIES = "jerr.entities"
EDGES = "jerr.edges"
MENTIONS = "jerr.mentions"
SYNOPSIS_KEY = "jerr.synopsis"
DOC_KEY = "jerr"
#: SimHash near-duplicate threshold (bits) and features (METHODS.md section 5).
MAX_HAMMING = 3
SIMHASH_TOKENIZER = "word+char"
SIMHASH_NGRAM = 3


def normalise(name: str) -> str:
    """The exact-dedup key: lower-case, whitespace runs collapsed, ends stripped."""
    return " ".join(name.lower().split())


@dataclass
class DedupResult:
    """Per input name, its representative's index (first-seen); counts of exact and near merges."""

    rep: list[int]
    exact_merges: int
    near_merges: int

    @property
    def representatives(self) -> list[int]:
        """Indices of the names that represent their group, in first-seen order."""
        return [i for i, r in enumerate(self.rep) if r == i]


def dedup(names: Sequence[str], max_hamming: int = MAX_HAMMING) -> DedupResult:
    """Exact (Bloom filter + trie) then near (SimHash, union-find) dedup of ``names`` in order."""
    n = len(names)
    rep = list(range(n))
    if n == 0:
        return DedupResult(rep, 0, 0)
    keys = [normalise(x) for x in names]
    bloom = BloomFilter(max(n, 16), 0.01)
    trie = Trie()
    first: dict[str, int] = {}  # key -> index of its first occurrence (filled for keys the trie holds)
    exact = 0
    uniq: list[int] = []
    for i, k in enumerate(keys):
        if not bloom.add(k) and k in trie:  # Bloom: maybe seen; the trie says for sure
            rep[i] = first[k]
            exact += 1
            continue
        trie.insert(k)
        first[k] = i
        uniq.append(i)
    near = 0
    if len(uniq) > 1 and max_hamming >= 0:
        fp = simhash([keys[i] for i in uniq], ngram=SIMHASH_NGRAM, tokenizer=SIMHASH_TOKENIZER)
        labels = near_duplicates(fp, max_hamming, output="clusters")  # smallest index = first seen
        for j, lab in enumerate(labels.tolist()):
            if lab != j:
                rep[uniq[j]] = uniq[lab]
                near += 1
        for i in range(n):  # exact duplicates follow their key's new representative
            rep[i] = rep[rep[i]]
    return DedupResult(rep, exact, near)


def build_dag(n_nodes: int, edges: Sequence[tuple[int, int]]) -> tuple[list[int], int, int]:
    """Insert ``edges`` in order; return (indices of the kept edges, dropped cycle edges, dropped self loops).

    An edge ``u -> v`` is dropped when ``v`` already reaches ``u`` (breadth-first
    search over the kept edges); a repeated ``(u, v)`` is kept once (its first).
    """
    adj: list[list[int]] = [[] for _ in range(n_nodes)]
    have: set[tuple[int, int]] = set()
    kept: list[int] = []
    cycles = loops = 0
    for idx, (u, v) in enumerate(edges):
        if u == v:
            loops += 1
            continue
        if (u, v) in have:
            continue
        seen = {v}
        q = deque([v])
        closes = False
        while q:
            x = q.popleft()
            if x == u:
                closes = True
                break
            for y in adj[x]:
                if y not in seen:
                    seen.add(y)
                    q.append(y)
        if closes:
            cycles += 1
            continue
        adj[u].append(v)
        have.add((u, v))
        kept.append(idx)
    return kept, cycles, loops


@dataclass
class EntityGraph:
    """One document's entity DAG: entities (name, aliases, chunk ids), edges and the counts of its making."""

    doc_id: str
    names: list[str]
    aliases: list[list[str]]
    chunks: list[list[int]]
    edges: list[tuple[int, int, str, int, tuple[int, int]]]  # src, dst, attribute, chunk id, span
    synopses: list[tuple[list[int], str]]  # per unit: its chunk ids and synopsis
    stats: dict = field(default_factory=dict)


def build_graph(doc_id: str, extractions: Sequence[UnitExtraction], units: Sequence[Any],
                max_hamming: int = MAX_HAMMING) -> EntityGraph:
    """Dedup the entities of a document's units, map edges onto them and make the graph acyclic."""
    raw_names: list[str] = []
    raw_chunks: list[list[int]] = []
    where: dict[tuple[int, str], int] = {}
    for ui, ex in enumerate(extractions):
        for name, cids in ex.entities.items():
            where[(ui, name)] = len(raw_names)
            raw_names.append(name)
            raw_chunks.append(list(cids))
    dd = dedup(raw_names, max_hamming)
    reps = dd.representatives
    pos = {r: i for i, r in enumerate(reps)}
    names = [raw_names[r] for r in reps]
    aliases: list[list[str]] = [[] for _ in reps]
    chunks: list[list[int]] = [[] for _ in reps]
    for i, r in enumerate(dd.rep):
        p = pos[r]
        if raw_names[i] != names[p] and raw_names[i] not in aliases[p]:
            aliases[p].append(raw_names[i])
        for c in raw_chunks[i]:
            if c not in chunks[p]:
                chunks[p].append(c)
    cand: list[tuple[int, int, str, int, tuple[int, int]]] = []
    missing = 0
    for ui, ex in enumerate(extractions):
        u = units[ui]
        for a, b, attr, span in ex.edges:
            ia, ib = where.get((ui, a)), where.get((ui, b))
            if ia is None or ib is None:
                missing += 1
                continue
            cid = u.chunks_at(span[0], span[1])[0]
            cand.append((pos[dd.rep[ia]], pos[dd.rep[ib]], attr, cid, (int(span[0]), int(span[1]))))
    kept, cycles, loops = build_dag(len(names), [(e[0], e[1]) for e in cand])
    backends = sorted({ex.backend for ex in extractions})
    stats = {"units": len(units), "mentions": len(raw_names), "nodes": len(names), "exact_merges": dd.exact_merges,
             "near_merges": dd.near_merges, "edges_proposed": len(cand), "edges": len(kept),
             "dropped_cycle_edges": cycles, "dropped_self_loops": loops,
             "duplicate_edges": len(cand) - len(kept) - cycles - loops, "backends": backends}
    if missing:
        stats["edges_unknown_entity"] = missing
    return EntityGraph(doc_id, names, aliases, chunks, [cand[i] for i in kept],
                       [(list(u.chunk_ids), ex.synopsis) for u, ex in zip(units, extractions)], stats)


# --------------------------------------------------------------------------- store


def prepare_graph(store: Any, source: dict) -> None:
    """Create the JERR artifacts (node tables :data:`ENTITIES` and :data:`EDGES`, relations :data:`MENTIONS`
    and :data:`EDGES`) in ``store`` when they are missing."""
    if not store.has_node_table(ENTITIES):
        # where rows and documents hold store ids, so a batch built apart (on a Ray worker) is renumbered
        store.add_node_table(ENTITIES, source=source, id_fields={"chunks": "chunk"},
                             doc_fields={DOC_KEY: ["first_entity"]})
        store.add_node_table(EDGES, source=source, id_fields={"src": f"nodes/{ENTITIES}", "dst": f"nodes/{ENTITIES}",
                                                              "chunk": "chunk"}, doc_fields={DOC_KEY: ["first_edge"]})
        store.add_relation(MENTIONS, ordered=False, target_table=ENTITIES, source=source)
        store.add_relation(EDGES, ordered=True, target_table=EDGES, source=source)


def write_graph(store: Any, g: EntityGraph, source: dict) -> None:
    """Add one document's graph to the store's JERR artifacts (made first when missing)."""
    prepare_graph(store, source)
    ents = store.node_table(ENTITIES)
    chunk_span = {c: store.chunks.span(c) for cs in g.chunks for c in cs}
    ids = ents.add([{"doc_id": g.doc_id, "name": n, "aliases": a, "chunks": cs,
                     "spans": [[int(chunk_span[c][1]), int(chunk_span[c][2])] for c in cs]}
                    for n, a, cs in zip(g.names, g.aliases, g.chunks)])
    eids = store.node_table(EDGES).add([{"doc_id": g.doc_id, "src": ids[s], "dst": ids[d], "attr": attr, "chunk": c,
                                         "span": list(sp)} for s, d, attr, c, sp in g.edges])
    by_chunk: dict[int, list[int]] = {}
    for i, cs in zip(ids, g.chunks):
        for c in cs:
            by_chunk.setdefault(c, []).append(i)
    rel = store.relation(MENTIONS)
    for c, t in by_chunk.items():
        rel.set(c, t)
    e_by_chunk: dict[int, list[int]] = {}
    for eid, e in zip(eids, g.edges):
        e_by_chunk.setdefault(e[3], []).append(eid)
    rel = store.relation(EDGES)
    for c, t in e_by_chunk.items():
        rel.set(c, t)
    for cids, syn in g.synopses:
        for c in cids:
            store.chunks.set_metadata(c, SYNOPSIS_KEY, syn)
    store.documents[g.doc_id].metadata[DOC_KEY] = {**g.stats, "first_entity": ids[0] if ids else None,
                                                   "first_edge": eids[0] if eids else None}


def read_graphs(store: Any, doc_ids: Sequence[str] | None = None) -> tuple[list[dict], list[dict]]:
    """Entity and edge rows (with their ``id``) of the live documents (or of ``doc_ids``).

    A document's rows are the ranges its record names (``first_entity`` and
    ``nodes``, ``first_edge`` and ``edges``), so the rows of an earlier version
    of a replaced document are never read.
    """
    if not store.has_node_table(ENTITIES):
        return [], []
    ents, edges = store.node_table(ENTITIES), store.node_table(EDGES)
    names = list(store.documents) if doc_ids is None else [d for d in doc_ids if d in store.documents]
    er: list[dict] = []
    ed: list[dict] = []
    for d in names:
        rec = store.documents[d].metadata.get(DOC_KEY)
        if not rec:
            continue
        if rec.get("first_entity") is not None:
            a = int(rec["first_entity"])
            er.extend(dict(ents.get(i), id=i) for i in range(a, a + int(rec["nodes"])))
        if rec.get("first_edge") is not None:
            a = int(rec["first_edge"])
            ed.extend(dict(edges.get(i), id=i) for i in range(a, a + int(rec["edges"])))
    return er, ed


def link_documents(ents: Sequence[dict], edges: Sequence[dict], titles: dict[str, tuple[str, int]],
                   max_hamming: int = 0) -> tuple[list[dict], list[tuple[int, int, str]]]:
    """One entity graph over several documents' graphs: entities linked across documents.

    ``ents`` and ``edges``: the rows of :func:`read_graphs` (each document's own DAG);
    ``titles``: per document, its title and the chunk it heads (the document's first chunk).

    * each titled document gains a **page node** named by its title, holding the chunk it heads,
      with an edge to every entity of the document (no attribute): the document is about
      its title, and what it names is what the page links to;
    * all names (entities and page nodes) are deduplicated **across documents** with :func:`dedup`
      (exact keys by Bloom filter and trie; SimHash within ``max_hamming`` bits, 0 by default: across
      a corpus two different entities' names are often a few bits apart, as "1994 FIFA World Cup"
      and "1998 FIFA World Cup"); merged nodes hold the chunks of every member, so an entity one page
      names and another page is about becomes one node: the bridge of a multi-hop question;
    * edges are mapped onto the merged nodes; self loops and repeated edges are dropped. Across
      documents the graph is no longer acyclic (Algorithm 1 does not need it to be).

    Returns the merged node rows (``id``: the first member's row id, or ``None`` for a page node;
    ``doc_id``: the first member's document; ``doc_ids``; ``name``; ``aliases``; ``chunks``; ``pages``:
    the chunks its page nodes head, the chunks of the pages about it) and the
    edges as ``(src, dst, attr)`` over their positions.
    """
    rows = [dict(r) for r in ents]
    by_doc: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_doc.setdefault(r["doc_id"], []).append(i)
    pos = {r["id"]: i for i, r in enumerate(rows)}
    pairs: list[tuple[int, int, str]] = [(pos[e["src"]], pos[e["dst"]], e.get("attr", "")) for e in edges
                                         if e["src"] in pos and e["dst"] in pos]
    for d, (title, chunk) in titles.items():
        if not title or not title.strip():
            continue
        rows.append({"id": None, "doc_id": d, "name": title, "aliases": [], "chunks": [chunk]})
        p = len(rows) - 1
        pairs.extend((p, i, "") for i in by_doc.get(d, ()))
    dd = dedup([r["name"] for r in rows], max_hamming)
    reps = dd.representatives
    at = {r: j for j, r in enumerate(reps)}
    out: list[dict] = []
    for r in reps:
        row = rows[r]
        out.append({"id": row["id"], "doc_id": row["doc_id"], "doc_ids": [row["doc_id"]], "name": row["name"],
                    "aliases": list(row.get("aliases", [])), "chunks": list(row["chunks"]),
                    "pages": list(row["chunks"]) if row["id"] is None else []})
    for i, r in enumerate(dd.rep):
        if i == r:
            continue
        m, row = out[at[r]], rows[i]
        if row["doc_id"] not in m["doc_ids"]:
            m["doc_ids"].append(row["doc_id"])
        for a in [row["name"], *row.get("aliases", [])]:
            if a != m["name"] and a not in m["aliases"]:
                m["aliases"].append(a)
        m["chunks"].extend(c for c in row["chunks"] if c not in m["chunks"])
        if row["id"] is None:
            m["pages"].extend(c for c in row["chunks"] if c not in m["pages"])
    seen: set[tuple[int, int]] = set()
    linked: list[tuple[int, int, str]] = []
    for s, t, attr in pairs:
        a, b = at[dd.rep[s]], at[dd.rep[t]]
        if a != b and (a, b) not in seen:
            seen.add((a, b))
            linked.append((a, b, attr))
    return out, linked


def csr(n: int, edges: Sequence[tuple[int, int]], direction: str = "out") -> tuple[np.ndarray, np.ndarray]:
    """CSR neighbour lists of ``n`` nodes: out-neighbours, or both directions with ``direction="both"``."""
    rows: list[list[int]] = [[] for _ in range(n)]
    for u, v in edges:
        rows[u].append(v)
        if direction == "both":
            rows[v].append(u)
    indptr = np.zeros(n + 1, np.int64)
    indptr[1:] = np.cumsum([len(r) for r in rows])
    indices = np.asarray([x for r in rows for x in r], np.int64)
    return indptr, indices
