"""JERR's registered components: the ``jerr`` relator (graph construction), retriever and reader.

* relator ``jerr``: units of the paper's size (``unit_tokens``), extraction by
  the offline or the LLM back-end (:mod:`.extract`), dedup and DAG
  (:mod:`.graph`), written to the store as node tables and relations;
* retriever ``jerr``: Algorithm 1 MCTS (``method="mcts"``, ``variant="paper"``
  or ``"virtual-root"``) or PageRank (``method="pagerank"``) over the graph
  (:mod:`.search`), then, with an LLM, the look-up step that picks the units to
  read again (section 3.3; skipped offline); each result item is one entity
  node, its members the node's chunks (in the picked units) that hold most
  query keywords (``chunks_per_node``), its score win/visit (or PageRank);
* reader ``jerr``: the LLM reader given the top-k nodes (name, aliases, edges)
  and the synopses of their units before the numbered chunks (App. A.6 prompt),
  or the A.5 prompt for a multiple-choice question.
"""

from __future__ import annotations

import math
import re
import time
import warnings
from typing import Any, Iterable, Sequence

from ..._validate import check_choice, check_float, check_int
from ...errors import ConfigError, InputError, StoreError
from ...llm import prompts
from ...progress import Progress
from .._backend import LLMBacked, endpoint_of
from ..base import DEFAULT_BUDGET, Item, Result
from ..fallbacks import FallbackTally, set_record
from ...registry import register
from ..standard.reader import LLMReader
from ..standard.retrievers import check_k
from .extract import CHARS_PER_TOKEN, content_words, estimate_llm, extract_llm, extract_offline, make_units
from .graph import (DOC_KEY, EDGES, ENTITIES, MAX_HAMMING, MENTIONS, SYNOPSIS_KEY, build_graph, link_documents, prepare_graph,
                    read_graphs, write_graph)
from .search import VARIANTS, NodeGraph, mcts_top_nodes, node_words, pagerank_top_nodes

__all__ = ["JerrRelator", "JerrRetriever", "JerrReader", "BACKENDS"]

BACKENDS = ("auto", "offline", "llm")
#: how the graphs of several documents are searched (see :class:`JerrRetriever`)
ACROSS = ("auto", "documents", "none")


class JerrRelator(LLMBacked):
    """Build each document's JERR entity DAG and store it (see :mod:`momoka.methods.jerr.graph`).

    Args:
        backend: ``"offline"`` (no LLM), ``"llm"`` (the paper's prompts) or
            ``"auto"`` (``llm`` when a client is given or ``MOMOKA_LLM_BASE_URL`` is set).
        unit_tokens: tokens per JERR chunk (600: the paper's QuALITY setting;
            2000 for NarrativeQA / MuSiQue); units are runs of whole store chunks.
        max_hamming: SimHash near-duplicate distance (3).
        llm, max_tokens, max_chars: the LLM client and its answer / input limits.
        repeated_terms, min_count, max_mentions, synopsis_sentences: offline back-end settings.

    LLM extraction follows the rule of :mod:`momoka.methods.fallbacks`: ``fallbacks`` counts the units
    that fell back to the offline extraction, each batch stops above ``--llm-max-failed`` before any graph
    is stored, and each document records which units (``[start, end]``) are fallbacks.
    """

    name = "jerr"

    def __init__(self, backend: str = "auto", *, unit_tokens: int = 600, max_hamming: int = MAX_HAMMING,
                 llm: Any = None, max_tokens: int = 256, max_chars: int = 6000, repeated_terms: int = 20,
                 min_count: int = 3, max_mentions: int = 8, synopsis_sentences: int = 2):
        if backend not in BACKENDS:
            raise ConfigError(f"jerr: backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
        unit_tokens, max_tokens, max_chars = (check_int(v, f"jerr: {nm}", minimum=1) for nm, v in (
            ("unit_tokens", unit_tokens), ("max_tokens", max_tokens), ("max_chars", max_chars)))
        max_hamming = check_int(max_hamming, "jerr: max_hamming", minimum=0, maximum=63)
        self.backend, self._llm = backend, llm
        self.unit_tokens, self.max_hamming = unit_tokens, max_hamming
        self.max_tokens, self.max_chars = max_tokens, max_chars
        self.offline = {"repeated_terms": int(repeated_terms), "min_count": int(min_count),
                        "max_mentions": int(max_mentions), "synopsis_sentences": int(synopsis_sentences)}
        self.stats: dict[str, Any] = {}
        self.fallbacks = FallbackTally("jerr extraction", "jerr", "units",
                                       "those units were extracted offline (no LLM)")

    def backend_id(self) -> str:
        """``offline`` or ``llm:<model>``: who built the graphs."""
        if self.effective_backend == "llm":
            return f"llm:{getattr(self.llm, 'model', '') or type(self.llm).__name__}"
        return "offline"

    def _count(self, key: str, v: float) -> None:
        self.stats[key] = self.stats.get(key, 0) + v

    def units_of(self, store: Any, doc_id: str, text: str) -> list:
        """The document's JERR units (runs of its store chunks)."""
        cids = list(store.documents[doc_id].chunk_ids)
        spans = [store.chunks.span(c)[1:] for c in cids]
        return make_units(doc_id, text, spans, cids, self.unit_tokens)

    def relate(self, index: Any, doc_ids: Sequence[str]) -> None:
        """Extract, dedup and store the graph of every document of ``doc_ids`` (progress per unit).

        With the LLM back-end the units of all documents are extracted first; when more than
        ``--llm-max-failed`` of them fell back (:attr:`fallbacks`), :class:`~momoka.errors.LLMFallbackError`
        is raised before any graph is stored.
        """
        store = index.store
        backend = self.effective_backend
        source = self._source()
        docs = [(d, index.document(d).text) for d in doc_ids]
        units = [self.units_of(store, d, t) for d, t in docs]
        graphs = []
        with Progress(f"jerr graphs ({backend})", total=sum(len(u) for u in units), unit="units",
                      enabled=index.progress) as pr:
            for (d, text), us in zip(docs, units):
                t0 = time.perf_counter()
                st: dict = {}
                if not us:
                    ex = []
                elif backend == "llm":
                    ex = extract_llm(us, text, self.llm, st, max_tokens=self.max_tokens, max_chars=self.max_chars,
                                     fallbacks=self.fallbacks, **self.offline)
                else:
                    ex = extract_offline(us, text, **self.offline)
                g = build_graph(d, ex, us, self.max_hamming)
                g.stats.update({"backend": source["backend"], **st, "seconds": round(time.perf_counter() - t0, 3)})
                graphs.append((d, g))
                pr.update(len(us))
        self.fallbacks.check()
        for d, g in graphs:
            write_graph(store, g, source)
            if backend == "llm":
                set_record(store.documents[d].metadata, self.fallbacks.key, self.fallbacks.take(d))
            for key in ("units", "nodes", "exact_merges", "near_merges", "edges", "dropped_cycle_edges",
                        "dropped_self_loops", "llm_calls", "prompt_tokens", "completion_tokens",
                        "fallback_parse"):
                if key in g.stats:
                    self._count(key, g.stats[key])
            self._count("documents", 1)
            self._count("seconds", g.stats["seconds"])

    def _source(self) -> dict:
        """What the JERR artifacts record as their source: this relator, its back-end and settings."""
        return {"by": self.name, "backend": self.backend_id(), "settings": self.settings()}

    def prepare(self, batch: Any) -> None:
        """Create the JERR node tables and relations in ``batch.store`` when they are missing."""
        if not batch.store.has_node_table(ENTITIES):  # the four are made together
            prepare_graph(batch.store, self._source())

    def estimate(self, documents: Sequence[Any], chunks: Sequence[Sequence[Any]]) -> dict:
        """Pre-run estimate of LLM calls and tokens for documents already chunked (4 characters per token);
        the offline backend makes none."""
        units = []
        for doc, cs in zip(documents, chunks):
            units += make_units(doc.doc_id, doc.text, [(c.start, c.end) for c in cs], list(range(len(cs))),
                                self.unit_tokens)
        if self.effective_backend != "llm":
            return {"backend": self.effective_backend, "units": len(units), "llm_calls": 0}
        return {"backend": "llm", **estimate_llm(units, max_tokens=self.max_tokens, max_chars=self.max_chars)}

    def settings(self) -> dict:
        """What changes the graph."""
        base = {"unit_tokens": self.unit_tokens, "max_hamming": self.max_hamming,
                "simhash": "64-bit, word unigrams + char trigrams", "dedup_representative": "first seen",
                "dag": "document order, cycle-closing edges dropped"}
        if self.effective_backend == "llm":
            return {**base, "prompts": "jerr.synopsis/entities/elements/edge_attributes", "max_tokens": self.max_tokens,
                    "max_chars": self.max_chars}
        return {**base, **self.offline}

    def describe(self) -> dict:
        """Settings and counts (recorded in the manifest)."""
        return {"backend": self.effective_backend, "settings": self.settings(), "stats": dict(self.stats)}


class JerrRetriever(LLMBacked):
    """Entity nodes for a query by MCTS (Algorithm 1) or PageRank over the stored JERR graphs.

    Searching several documents, their graphs are linked into one (``across``): a document's title is a
    page node and names are deduplicated across documents, so an entity one page names leads to the page
    about it (the bridge of a multi-hop question over a corpus of pages).

    Args:
        index: the :class:`momoka.Index` (built with ``relate=["jerr"]``).
        method: ``"mcts"`` (default) or ``"pagerank"`` (Table 4's ablation).
        variant: ``"paper"`` (Algorithm 1 as written, one start node) or ``"virtual-root"``
            (the native-engine variant); see :mod:`momoka.methods.jerr.search`.
        simulations, depth, c, seed: MCTS settings (100, 10, sqrt 2, 0; ``seed``: ``virtual-root`` only).
        direction: expand along out-edges of the DAG (``"out"``) or both ways (``"both"``); None: the
            variant's default (``both`` for ``paper``, ``out`` for ``virtual-root``; ``out`` for PageRank).
        chunks_per_node: chunks of each node returned (those holding most keywords; 0: all).
        backend: the key-chunk step after the search: ``"llm"`` (the look-up prompt ``jerr.lookup``
            picks the units to read again), ``"offline"`` (skipped: each node's chunks holding most
            keywords) or ``"auto"`` (``llm`` when a client is given or ``MOMOKA_LLM_BASE_URL`` is set).
        llm, max_pages, max_tokens: the client, the most units it may pick (6) and its answer limit (128).
        across: link the graphs of the searched documents into one (:func:`~momoka.methods.jerr.graph.link_documents`:
            each document's title a page node, names deduplicated across documents, so the search walks from
            one page's entity to the page about it) with ``"documents"``; search them side by side, unlinked,
            with ``"none"``; ``"auto"`` (default): ``documents`` when most of the searched documents are one unit
            long (a corpus of pages, :func:`pages_like`), else ``none``.

    :meth:`estimate` prices the look-up of one question (one request or none) without making it.
    """

    name = "jerr"
    requires = {"relate": ["jerr"]}

    def __init__(self, index: Any, *, method: str = "mcts", variant: str = "paper", simulations: int = 100,
                 depth: int = 10, c: float = math.sqrt(2.0), seed: int = 0, direction: str | None = None,
                 chunks_per_node: int = 2, backend: str = "auto", llm: Any = None, max_pages: int = 6,
                 max_tokens: int = 128, across: str = "auto"):
        self.method = check_choice(method, "jerr: method", ("mcts", "pagerank"))
        self.across = check_choice(across, "jerr: across", ACROSS)
        self.variant = check_choice(variant, "jerr: variant", VARIANTS)
        self.direction = None if direction is None else check_choice(direction, "jerr: direction", ("out", "both"))
        self.backend = check_choice(backend, "jerr: backend", BACKENDS)
        self.simulations = check_int(simulations, "jerr: simulations", minimum=0)
        self.depth = check_int(depth, "jerr: depth", minimum=1)
        self.c = check_float(c, "jerr: c", minimum=0.0)
        self.seed = check_int(seed, "jerr: seed")
        self.chunks_per_node = check_int(chunks_per_node, "jerr: chunks_per_node", minimum=0)
        self.max_pages = check_int(max_pages, "jerr: max_pages", minimum=1)
        self.max_tokens = check_int(max_tokens, "jerr: max_tokens", minimum=1)
        if not index.store.has_node_table(ENTITIES):
            raise StoreError("the store has no JERR graph: build it with `momoka index ... --relate jerr`")
        self.index, self._llm = index, llm
        self._graphs: dict[tuple, tuple[NodeGraph, list[dict]]] = {}

    def _graph(self, doc_ids: tuple | None) -> tuple[NodeGraph, list[dict]]:
        if doc_ids not in self._graphs:
            store = self.index.store
            docs = list(store.documents) if doc_ids is None else [d for d in doc_ids if d in store.documents]
            ents, edges = read_graphs(store, docs)
            if self.across == "documents" or (self.across == "auto" and pages_like(store, docs)):
                titles = {d: (self.index.title(d) or "", store.documents[d].chunk_ids[0]) for d in docs
                          if len(store.documents[d].chunk_ids)}
                ents, linked = link_documents(ents, edges, titles)
            else:
                pos = {r["id"]: i for i, r in enumerate(ents)}
                linked = [(pos[e["src"]], pos[e["dst"]], e["attr"]) for e in edges]
            attrs: list[list[str]] = [[] for _ in ents]
            pairs = []
            for s, d, attr in linked:
                pairs.append((s, d))
                attrs[s].append(attr)
                attrs[d].append(attr)
            g = NodeGraph(node_words([r["name"] for r in ents], [r.get("aliases", []) for r in ents], attrs), pairs)
            self._graphs[doc_ids] = (g, ents)
        return self._graphs[doc_ids]

    def _chunks(self, row: dict, kw: set[str], allowed: set | None = None) -> list[int]:
        cids = [c for c in row["chunks"] if c in self.index.store.chunks and (allowed is None or c in allowed)]
        # the page about the entity (linked documents) first, then the chunks holding most keywords
        pages = [c for c in row.get("pages", ()) if c in cids]
        if self.chunks_per_node <= 0 or len(cids) <= self.chunks_per_node:
            return pages + [c for c in cids if c not in pages]
        pages = pages[: self.chunks_per_node]
        text = self.index.store.chunks.text
        hits = [(-len(kw & set(content_words(text(c)))), i, c) for i, c in enumerate(cids) if c not in pages]
        return pages + [c for _, _, c in sorted(hits)[: self.chunks_per_node - len(pages)]]

    def retrieve(self, query: str, k: int = 5, *, doc_ids: Iterable[str] | str | None = None) -> Result:
        """The top ``k`` entity nodes for ``query`` (``doc_ids``: only these documents' graphs)."""
        return self.retrieve_batch([query], k, doc_ids=doc_ids)[0]

    def retrieve_batch(self, queries: Sequence[str], k: int = 5, *, doc_ids: Iterable[str] | str | None = None,
                       per_query_doc_ids: Sequence[Any] | None = None) -> list[Result]:
        """:meth:`retrieve` for many queries (``per_query_doc_ids``: one document filter per query)."""
        queries = self.index.check_queries(queries)
        k = check_k(k)
        if per_query_doc_ids is not None and doc_ids is not None:
            raise ConfigError("give doc_ids or per_query_doc_ids, not both")
        if per_query_doc_ids is None:
            per_query_doc_ids = [doc_ids] * len(queries)
        elif len(per_query_doc_ids) != len(queries):
            raise ConfigError("per_query_doc_ids needs one entry per query")
        out = []
        tally = FallbackTally("jerr look-up", "jerr_lookup", "answers",
                              "those questions kept the chunks their keywords chose")
        for q, f in zip(queries, per_query_doc_ids):
            key = None if f is None else ((f,) if isinstance(f, str) else tuple(f))
            res = self._one(q, k, key)
            look = res.stats.get("key_chunks")
            if isinstance(look, dict):  # the LLM was asked
                tally.ask(q)
                if "fallback" in look:
                    tally.fail(q, q, look.get("answer"))
            out.append(res)
        if tally.warning():  # a fallback changes the result: the user is told (the stats record it per question)
            warnings.warn(tally.warning(), UserWarning, stacklevel=2)
        return out

    def _search(self, query: str, k: int, key: tuple | None) -> tuple[list[int], list[float], dict, list[dict]]:
        """The graph search alone (no LLM): top ``k`` node indices, their scores, the search's stats and the
        node rows of the searched graphs (no node and ``{}`` for an empty graph)."""
        g, rows = self._graph(key)
        if g.n == 0:
            return [], [], {}, rows
        if self.method == "mcts":
            nodes, scores, st = mcts_top_nodes(g, query, k, variant=self.variant, simulations=self.simulations,
                                               depth=self.depth, c=self.c, direction=self.direction, seed=self.seed)
        else:
            nodes, scores, st = pagerank_top_nodes(g, query, k, direction=self.direction or "out")
        st["nodes"] = g.n
        return nodes, scores, st, rows

    def _one(self, query: str, k: int, key: tuple | None) -> Result:
        t0 = time.perf_counter()
        nodes, scores, st, rows = self._search(query, k, key)
        if not st:
            return Result(query, (), self.name, {"seconds": 0.0, "nodes": 0})
        kw = set(st["keywords"])
        allowed = None
        if self.effective_backend != "llm":
            st["key_chunks"] = "keywords (no LLM: the look-up step is skipped)"
        elif nodes:
            allowed, st["key_chunks"] = self._look_up(query, [rows[v] for v in nodes])
        items = []
        for v, s in zip(nodes, scores):
            row = rows[v]
            cids = self._chunks(row, kw, allowed)
            if not cids:
                continue
            prov = {"retriever": self.name, "kind": "node", "method": self.method, "node": row["id"],
                    "entity": row["name"], "aliases": list(row.get("aliases", []))}
            syn = []
            for c in cids:
                t = self.index.store.chunks.metadata(c).get(SYNOPSIS_KEY)
                if t and t not in syn:
                    syn.append(t)
            prov["synopsis"] = syn
            members = tuple(self.index.member(c) for c in cids)
            items.append(Item(members, float(s), len(items) + 1, prov, self.index.title(members[0].doc_id)))
        st["seconds"] = time.perf_counter() - t0
        return Result(query, tuple(items), self.name, st)

    def estimate(self, question: str, k: int = 5, *, doc_ids: Iterable[str] | str | None = None) -> dict:
        """Pre-run cost of retrieving for one question: the LLM requests of the look-up step.

        Runs the graph search (offline: no model, no LLM) to know what the look-up would be asked, and
        asks nothing. The look-up is one request when the LLM back-end is on, an endpoint is configured
        and the search finds a node; otherwise none (offline the step is skipped; on the local model it
        makes no request). The count is exact: an answer naming no page is not asked again (the keyword
        choice is kept). ``prompt_chars`` is the exact length of the look-up prompt, ``prompt_tokens`` it at
        4 characters per token, ``completion_tokens_max`` the answer limit ``max_tokens``; ``nodes_found`` and
        ``pages``: the nodes found and the units shown to the model. A cached answer makes no request.
        """
        query = self.index.check_queries([question])[0]
        k = check_k(k)
        key = None if doc_ids is None else ((doc_ids,) if isinstance(doc_ids, str) else tuple(doc_ids))
        backend = self.effective_backend
        out: dict[str, Any] = {"per": "question", "backend": backend}
        if backend != "llm":
            return {**out, "llm_calls": 0, "look_up": "skipped (offline)"}
        url = endpoint_of(self._llm)
        nodes, _, _, rows = self._search(query, k, key)
        out.update({"endpoint": url, "nodes_found": len(nodes)})
        if not nodes:
            return {**out, "llm_calls": 0, "look_up": "skipped (the search found no node)"}
        msgs, pages = self._look_up_messages(query, [rows[v] for v in nodes])
        chars = sum(len(m["content"]) for m in msgs)
        return {**out, "pages": len(pages), "llm_calls": 1 if url else 0, "prompt_chars": chars,
                "prompt_tokens": chars // CHARS_PER_TOKEN, "completion_tokens_max": self.max_tokens}

    def pages(self, rows: Sequence[dict]) -> list[list]:
        """The look-up step's pages: the units (chunks sharing a synopsis within a document) holding the
        nodes' chunks, in document order; each page is its chunk ids in order."""
        chunks = self.index.store.chunks
        by_unit: dict[tuple, list] = {}
        cids = {c for r in rows for c in r["chunks"] if c in chunks}
        for c in sorted(cids, key=lambda c: chunks.span(c)):
            by_unit.setdefault((chunks.span(c)[0], chunks.metadata(c).get(SYNOPSIS_KEY) or c), []).append(c)
        return list(by_unit.values())

    def _look_up_messages(self, query: str, rows: Sequence[dict]) -> tuple[list[dict], list[list]]:
        """The look-up step's chat messages for ``rows`` (the nodes found) and its :meth:`pages`."""
        pages = self.pages(rows)
        chunks = self.index.store.chunks
        nodes = "\n".join(f"- {r['name']}" + (f" (also: {', '.join(r['aliases'])})" if r.get("aliases") else "")
                          for r in rows)
        text = "\n\n".join(f"<Page {i}>\n{chunks.metadata(p[0]).get(SYNOPSIS_KEY) or ' '.join(chunks.text(p[0]).split())}"
                            for i, p in enumerate(pages, start=1))
        msg = prompts.render("jerr.lookup", max_pages=self.max_pages, question=query,
                             context=f"Relevant nodes:\n{nodes}\n\n{text}")
        return [{"role": "user", "content": msg}], pages

    def _look_up(self, query: str, rows: Sequence[dict]) -> tuple[set | None, dict]:
        """The LLM key-chunk step (section 3.3): the nodes and their units' synopses, numbered as pages, go to
        the ``jerr.lookup`` prompt; the chunks of the pages it names are kept. An answer naming no page keeps
        the keyword choice (recorded)."""
        msgs, pages = self._look_up_messages(query, rows)
        answer = self.llm.complete(msgs, max_tokens=self.max_tokens, temperature=0) or ""
        picked = [i for i in parse_pages(answer) if 1 <= i <= len(pages)][: self.max_pages]
        by = f"llm:{getattr(self.llm, 'model', '') or type(self.llm).__name__}"
        if not picked:
            return None, {"by": by, "pages": len(pages), "selected": [], "fallback": "keywords (no page named)",
                          "answer": " ".join(answer.split())[:200]}
        return {c for i in picked for c in pages[i - 1]}, {"by": by, "pages": len(pages), "selected": picked}


def pages_like(store: Any, doc_ids: Sequence[str]) -> bool:
    """``across="auto"``'s rule: link the documents' graphs when more than one document is searched and most
    of them (more than half) are one JERR unit long, a corpus of pages whose own graphs are too small to walk.
    Measured: linking lifts JERR on a corpus of pages and lowers it on corpora of long documents
    (``docs/results.md``)."""
    if len(doc_ids) < 2:
        return False
    one = sum(int((store.documents[d].metadata.get(DOC_KEY) or {}).get("units", 0)) <= 1 for d in doc_ids)
    return one * 2 > len(doc_ids)


def parse_pages(answer: str) -> list[int]:
    """Page numbers of a look-up answer: the last bracketed list (``Page [7, 12]``), else every ``Page N``;
    distinct, in the order named."""
    lists = re.findall(r"\[([\d\s,]+)\]", answer)
    nums = re.findall(r"\d+", lists[-1]) if lists else re.findall(r"\bpages?\s+(\d+)", answer, flags=re.I)
    out: list[int] = []
    for x in nums:
        if int(x) not in out:
            out.append(int(x))
    return out


class JerrReader(LLMReader):
    """The LLM reader with JERR's context: top-k nodes and their units' synopses before the numbered chunks.

    Nodes and synopses (at most ``max_preamble_chars``) and chunks share one
    budget of ``max_context_chars``, so JERR gets the same context size as a
    top-k chunk retriever read by this reader.

    ``options`` in the question (a list of 4 strings given to :meth:`answer_choice`)
    switch to the App. A.5 multiple-choice prompt.
    """

    name = "jerr"

    def preamble(self, result: Result) -> str:
        """The nodes (name, aliases) and the distinct synopses of their chunks' units."""
        lines, syn = [], []
        for it in result:
            ent = it.provenance.get("entity")
            if ent:
                al = it.provenance.get("aliases") or []
                lines.append(f"- {ent}" + (f" (also: {', '.join(al)})" if al else ""))
            for s in it.provenance.get("synopsis") or []:
                if s and s not in syn:
                    syn.append(s)
        parts = []
        if lines:
            parts.append("Relevant nodes:\n" + "\n".join(lines))
        if syn:
            parts.append("Synopsis:\n" + "\n".join(syn))
        return "\n\n".join(parts)

    def __init__(self, llm: Any = None, *, max_context_chars: int | None = DEFAULT_BUDGET, max_tokens: int = 128,
                 max_preamble_chars: int = 1000):
        super().__init__(llm, max_context_chars=max_context_chars, max_tokens=max_tokens, style="sentence")
        self.max_preamble_chars = int(max_preamble_chars)
        self._pre = ""

    def messages(self, question: str, context: list) -> list[dict]:
        """The A.6 prompt: nodes and synopsis, then the numbered chunks, then the question."""
        passages = "\n\n".join(f"[{c.number}] {' '.join(c.text.split())}" for c in context)
        ctx = (self._pre + "\n\n" if self._pre else "") + "Passages:\n" + passages
        return [{"role": "user", "content": prompts.render("jerr.answer", context=ctx, question=question)}]

    def context(self, result: Result) -> list:
        """The numbered chunks, within what the preamble leaves of ``max_context_chars`` (one budget for both)."""
        full = self.max_context_chars
        if full is None:
            return super().context(result)
        self.max_context_chars = max(200, full - len(self._pre))
        try:
            return super().context(result)
        finally:
            self.max_context_chars = full

    def answer(self, question: str, result: Result):
        """Answer from the nodes, synopses and chunks of ``result`` (see :class:`LLMReader.answer`)."""
        self._pre = self.preamble(result)[: self.max_preamble_chars]
        return super().answer(question, result)

    def answer_choice(self, question: str, options: Sequence[str], result: Result) -> tuple[int, str]:
        """A.5 multiple choice: the option index the model names (``-1`` when it names none) and its answer."""
        if not options:
            raise InputError("a multiple-choice question needs options")
        self._pre = self.preamble(result)[: self.max_preamble_chars]
        ctx = self.context(result)
        article = (self._pre + "\n\n" if self._pre else "") + "\n\n".join(c.text for c in ctx)
        opts = " ".join(f"({chr(65 + i)}) {o}" for i, o in enumerate(options))

        text = self.llm.complete([{"role": "user", "content": prompts.render(
            "jerr.answer_quality", context=article, question=question, options=opts)}],
            max_tokens=self.max_tokens, temperature=0) or ""
        m = re.search(r"\(([A-Z])\)", text) or re.search(r"\b([A-D])\b", text)
        idx = ord(m.group(1)) - 65 if m else -1
        return (idx if 0 <= idx < len(options) else -1), text


@register("relator", "jerr", summary="JERR entity DAG per document: synopsis, Bloom+trie / SimHash dedup, DAG "
          "(options backend=auto|offline|llm, unit_tokens, max_hamming)",
          produces=(f"nodes/{ENTITIES}", f"nodes/{EDGES}", f"relation/{MENTIONS}", f"relation/{EDGES}"))
def _relator(**options: Any) -> JerrRelator:
    return JerrRelator(**options)


@register("retriever", "jerr", summary="JERR: MCTS (Algorithm 1) or PageRank over the entity DAG, then the LLM "
          "look-up of key chunks when an LLM is configured; items are nodes with their chunks (options "
          "method=mcts|pagerank, variant=paper|virtual-root, simulations, depth, chunks_per_node, backend)",
          requires={"relate": ["jerr"]}, needs=(f"nodes/{ENTITIES}", f"nodes/{EDGES}", f"relation/{MENTIONS}"))
def _retriever(index: Any, **options: Any) -> JerrRetriever:
    return JerrRetriever(index, **options)


@register("reader", "jerr", summary="LLM reader given JERR's top-k nodes + synopsis + chunks (App. A.5 / A.6 prompts)")
def _reader(**options: Any) -> JerrReader:
    return JerrReader(**options)
