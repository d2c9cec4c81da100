"""``momoka graph STORE --doc ID``: print a document's JERR entity graph, or export it (GraphML / JSON)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import ConfigError, InputError


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``graph`` command."""
    p = sub.add_parser("graph", help="show a document's JERR entity graph (nodes, edges, merges) or export it",
                       description="Print the JERR graph of one document of a store built with --relate jerr: "
                       "its record (back-end, nodes, exact and near merges, dropped cycle edges), its nodes with "
                       "their aliases and chunks, and its edges with their attributes; --export writes it as "
                       "GraphML (.graphml) or JSON (.json) for plotting.")
    p.add_argument("store", help="store directory")
    p.add_argument("--doc", required=True, help="document id")
    p.add_argument("--export", default=None, metavar="FILE", help="write the graph to FILE (.graphml or .json)")
    p.add_argument("--limit", type=int, default=50, help="most nodes and edges printed (default 50; 0: all)")
    p.set_defaults(func=_graph)


def graph_dict(store, doc_id: str) -> dict:
    """A document's graph as a JSON-serialisable dict: record, nodes, edges (ids local to the document)."""
    from ..methods.jerr.graph import DOC_KEY, read_graphs  # start-up: momoka.methods.jerr.graph

    if doc_id not in store.documents:
        raise InputError(f"the store has no document {doc_id!r}")
    rec = store.documents[doc_id].metadata.get(DOC_KEY)
    if rec is None:
        raise InputError(f"document {doc_id!r} has no JERR graph: build it with `momoka index ... --relate jerr`")
    ents, edges = read_graphs(store, [doc_id])
    local = {r["id"]: i for i, r in enumerate(ents)}
    nodes = [{"id": i, "name": r["name"], "aliases": r.get("aliases", []), "chunks": r["chunks"], "spans": r["spans"]}
             for i, r in enumerate(ents)]
    es = [{"source": local[e["src"]], "target": local[e["dst"]], "attr": e["attr"], "chunk": e["chunk"],
           "span": e["span"]} for e in edges]
    record = {k: v for k, v in rec.items() if k not in ("first_entity", "first_edge")}
    return {"doc_id": doc_id, "record": record, "nodes": nodes, "edges": es}


def to_graphml(g: dict) -> str:
    """GraphML text of :func:`graph_dict`'s graph (node attributes name, aliases; edge attribute attr, span)."""
    # start-up: xml.sax.saxutils imports urllib; only when GraphML is written
    from xml.sax.saxutils import escape, quoteattr

    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">',
           '  <key id="name" for="node" attr.name="name" attr.type="string"/>',
           '  <key id="aliases" for="node" attr.name="aliases" attr.type="string"/>',
           '  <key id="attr" for="edge" attr.name="attr" attr.type="string"/>',
           '  <key id="span" for="edge" attr.name="span" attr.type="string"/>',
           f'  <graph id={quoteattr(g["doc_id"])} edgedefault="directed">']
    for n in g["nodes"]:
        out.append(f'    <node id="n{n["id"]}"><data key="name">{escape(n["name"])}</data>'
                   f'<data key="aliases">{escape("; ".join(n["aliases"]))}</data></node>')
    for i, e in enumerate(g["edges"]):
        out.append(f'    <edge id="e{i}" source="n{e["source"]}" target="n{e["target"]}">'
                   f'<data key="attr">{escape(e["attr"])}</data><data key="span">{e["span"][0]}:{e["span"][1]}</data>'
                   '</edge>')
    out += ["  </graph>", "</graphml>", ""]
    return "\n".join(out)


def _graph(args: argparse.Namespace) -> int:
    from ..store import Store  # start-up: momoka.store

    store = Store.open(args.store)
    try:
        g = graph_dict(store, args.doc)
    finally:
        store.close()
    if args.export:
        p = Path(args.export)
        if p.suffix.lower() == ".graphml":
            p.write_text(to_graphml(g), encoding="utf-8")
        elif p.suffix.lower() == ".json":
            p.write_text(json.dumps(g, ensure_ascii=False, indent=1), encoding="utf-8")
        else:
            raise ConfigError(f"--export: the file must end in .graphml or .json, not {p.name!r}")
        print(f"wrote {len(g['nodes'])} nodes and {len(g['edges'])} edges to {p}")
        return 0
    rec = g["record"]
    print(f"{g['doc_id']}: backend {rec.get('backend')}, {rec.get('units')} units, {rec.get('mentions')} entity "
          f"mentions -> {rec.get('nodes')} nodes ({rec.get('exact_merges')} exact merges, {rec.get('near_merges')} "
          f"near merges), {rec.get('edges')} edges ({rec.get('dropped_cycle_edges')} cycle-closing edges dropped, "
          f"{rec.get('dropped_self_loops')} self loops dropped)")
    lim = args.limit if args.limit and args.limit > 0 else None
    print("nodes:")
    for n in g["nodes"][:lim]:
        al = f"  (merged: {', '.join(n['aliases'])})" if n["aliases"] else ""
        print(f"  n{n['id']}  {n['name']}{al}  chunks {n['chunks']}")
    print("edges:")
    names = [n["name"] for n in g["nodes"]]
    for e in g["edges"][:lim]:
        print(f"  {names[e['source']]} -[{e['attr']}]-> {names[e['target']]}  span {e['span'][0]}:{e['span'][1]}")
    return 0
