"""JERR: dedup, DAG, graph search, store round trip, CLI and bad input, against independent references.

References: exact dedup by a plain-Python dict of normalised names; near dedup
by SimHash computed here from ``feature_hash`` (word unigrams + char trigrams,
summed bit votes) and an all-pairs Hamming check with a plain union-find; the
DAG by a hand-written DFS cycle check; Algorithm 1 by a hand-traced run and by a plain-Python
transcription of the paper's pseudo-code (``tests/_oracles/jerr_alg1.py``) on planted graphs.
"""

from __future__ import annotations

import json
import math
import random
import warnings
import xml.etree.ElementTree as ET

import pytest

from momoka import Index
from momoka.cli import main
from momoka.errors import ConfigError, InputError, StoreError
from momoka.kernels import simhash
from momoka.llm import OpenAIClient
from momoka.llm.testing import Reply, ScriptedServer
from momoka.methods.jerr import (JerrRelator, JerrRetriever, NodeGraph, alg1_search, build_dag, dedup, keywords,
                                 mcts_top_nodes, pagerank_top_nodes)
from momoka.methods.jerr.search import VARIANTS, neighbour_lists, node_words

from _oracles.jerr_alg1 import ref_alg1
from _oracles.jerr import ref_dedup, ref_simhash

def test_word_char_simhash_equals_reference_bit_votes():
    """The native word+char fingerprint equals bit votes over word unigrams + char trigrams computed here."""
    texts = ["Captain Korvin", "the Ruler of Tr'en", "x", "Comity  of Planets", "Didyak"]
    got = simhash(texts, tokenizer="word+char", ngram=3)
    assert [int(g) for g in got] == [ref_simhash(t) for t in texts]


def test_dedup_matches_set_and_pairwise_hamming_reference():
    """Exact (case/space variants) and near duplicates (SimHash <= 3 bits) agree with the plain-Python reference."""
    rnd = random.Random(7)
    base = ["Korvin", "the Ruler", "Comity of Planets", "Didyak", "Earth Central", "Brownian movement",
            "Captain Ames", "Lost in Translation", "experts in logic", "the great chair"]
    names = []
    for _ in range(300):
        b = rnd.choice(base)
        r = rnd.random()
        if r < 0.3:
            b = b.upper()
        elif r < 0.5:
            b = "  ".join(b.split())
        elif r < 0.6:
            b = b + "s"
        elif r < 0.7:
            b = "".join(rnd.choice("abcdefghijklmnop") for _ in range(rnd.randint(3, 12)))
        names.append(b)
    got = dedup(names)
    rep, exact, near = ref_dedup(names)
    assert got.rep == rep
    assert (got.exact_merges, got.near_merges) == (exact, near)
    assert exact > 100  # the set really holds exact duplicates


def test_dedup_first_seen_is_representative_and_empty():
    """The first-seen spelling represents its group; an empty list gives nothing."""
    d = dedup(["Mr Smith", "MR SMITH", "mr   smith"])
    assert d.rep == [0, 0, 0] and d.exact_merges == 2
    assert dedup([]).rep == []


def _reaches(adj, a, b):
    stack, seen = [a], set()
    while stack:
        x = stack.pop()
        if x == b:
            return True
        if x in seen:
            continue
        seen.add(x)
        stack.extend(adj.get(x, ()))
    return False


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_dag_matches_dfs_reference(seed):
    """Edges in order; one whose target reaches its source is dropped (reference: DFS on the kept edges)."""
    rnd = random.Random(seed)
    n = 25
    edges = [(rnd.randrange(n), rnd.randrange(n)) for _ in range(150)]
    kept, cycles, loops = build_dag(n, edges)
    adj: dict[int, list[int]] = {}
    ref_kept, ref_cycles, ref_loops, have = [], 0, 0, set()
    for i, (u, v) in enumerate(edges):
        if u == v:
            ref_loops += 1
        elif (u, v) in have:
            pass
        elif _reaches(adj, v, u):
            ref_cycles += 1
        else:
            adj.setdefault(u, []).append(v)
            have.add((u, v))
            ref_kept.append(i)
    assert (kept, cycles, loops) == (ref_kept, ref_cycles, ref_loops)
    assert cycles > 0
    # the kept graph is acyclic: a DFS colouring finds no back edge
    colour = [0] * n

    def dfs(x):
        colour[x] = 1
        for y in adj.get(x, ()):
            assert colour[y] != 1
            if colour[y] == 0:
                dfs(y)
        colour[x] = 2

    for x in range(n):
        if colour[x] == 0:
            dfs(x)


def _planted():
    rnd = random.Random(3)
    vocab = ["river", "stone", "cloud", "market", "letter", "garden", "engine", "window", "bridge", "candle"]
    names = [f"{rnd.choice(vocab)} {rnd.choice(vocab)}" for _ in range(40)]
    names[23] = "golden lighthouse keeper"
    attrs = [[] for _ in names]
    attrs[23] = ["guards lighthouse"]
    edges = [(i, rnd.randrange(i + 1, 41)) for i in range(39) for _ in range(2) if rnd.random() < 0.8]
    edges = [(a, b) for a, b in edges if b < 40]
    return NodeGraph(node_words(names, [[] for _ in names], attrs), edges)


def test_mcts_finds_planted_keyword_node():
    """Among 40 nodes, the one holding every keyword is Algorithm 1's start node, the virtual-root variant's
    and PageRank's first result."""
    g = _planted()
    q = "Who is the golden lighthouse keeper of the harbour?"
    top, scores, st = mcts_top_nodes(g, q, k=5)
    assert st["start_node"] == 23 and 23 not in top and scores == sorted(scores, reverse=True)
    assert set(st["keywords"]) >= {"golden", "lighthouse", "keeper"} and "the" not in st["keywords"]
    vtop, vscores, _ = mcts_top_nodes(g, q, k=5, variant="virtual-root")
    assert vtop[0] == 23 and vscores == sorted(vscores, reverse=True)
    assert pagerank_top_nodes(g, q, k=5)[0][0] == 23
    for variant in VARIANTS:
        assert mcts_top_nodes(g, "qwerty zxcv", k=5, variant=variant)[0] == []  # no keyword matches: nothing


# --- Algorithm 1 node for node against tests/_oracles/jerr_alg1.py ---------------------------------

KW = {"amber", "lantern", "keeper", "harbour"}
KW_QUERY = "Where is the amber lantern of the keeper in the harbour?"


def _words(*ws):
    return set(" ".join(ws).split())


def _hand_graph():
    """0 matches 3 keywords (the start); its children 1 (one keyword, above a node with two), 2 (one keyword,
    a sink) and 3 (none, above a node with three): the ranking is decided by the neighbours."""
    words = [_words("amber lantern keeper"), _words("amber"), _words("lantern"), _words("rope"),
             _words("lantern keeper"), _words("harbour amber lantern")]
    return NodeGraph(words, [(0, 1), (0, 2), (0, 3), (1, 4), (3, 5)])


def test_alg1_hand_computed_greedy_run():
    """c = 0 (line 6's plain win/visit), 10 simulations, traced by hand: rollouts score 1->4 = 3, 2 = 1,
    3->5 = 3, then 4 = 2 and 5 = 3; greedy win/visit then keeps returning to 3 (3.0 > 2.5 > 1.0). (Walking the
    edges both ways, the default, changes nothing here: every backward step leads to 0, already on the path.)"""
    g = _hand_graph()
    assert keywords(KW_QUERY) == KW
    top, scores, st = mcts_top_nodes(g, KW_QUERY, k=5, simulations=10, c=0.0)
    assert st["start_node"] == 0
    assert top == [3, 1, 2] and scores == [3.0, 2.5, 1.0]
    tree = alg1_search(neighbour_lists(g), g.rewards(KW).tolist(), 0, simulations=10, c=0.0)
    got = {tree.item[t]: (tree.visits[t], tree.wins[t]) for t in range(len(tree.item))}
    assert got == {0: (10, 27.0), 1: (2, 5.0), 2: (1, 1.0), 3: (7, 21.0), 4: (1, 2.0), 5: (7, 21.0)}


def _random_planted(seed, n=36):
    """A random DAG of filler nodes: one node in the first third holds every keyword and points at 4 later
    nodes; 9 more hold 1-2 keywords; their neighbours decide their rank."""
    rnd = random.Random(seed)
    filler = ["river", "stone", "cloud", "market", "letter", "garden", "engine", "window", "bridge", "candle"]
    words = [{rnd.choice(filler), rnd.choice(filler)} for _ in range(n)]
    s0 = rnd.randrange(n // 3)
    words[s0] |= KW
    for v in rnd.sample([v for v in range(n) if v != s0], 9):
        words[v] |= set(rnd.sample(sorted(KW), rnd.randint(1, 2)))
    edges = {(i, rnd.randrange(i + 1, n)) for i in range(n - 1) for _ in range(3) if rnd.random() < 0.6}
    edges |= {(s0, v) for v in rnd.sample(range(s0 + 1, n), 4)}
    return NodeGraph(words, sorted(edges))


def _adjacency(g, direction):
    adj = [[] for _ in range(g.n)]
    for u, v in g.edges:
        adj[u].append(v)
        if direction == "both":
            adj[v].append(u)
    return adj


@pytest.mark.parametrize("seed,direction,c,sims", [(1, "out", math.sqrt(2.0), 100), (2, "out", 0.0, 60),
                                                   (3, "both", math.sqrt(2.0), 100), (4, "both", 0.7, 150),
                                                   (5, "out", 2.0, 40)])
def test_alg1_matches_reference_node_for_node(seed, direction, c, sims):
    """Every tree node (graph node, parent, visits, wins) and the returned order and scores equal the
    plain-Python transcription of Algorithm 1."""
    g = _random_planted(seed)
    root, every, ranked = ref_alg1(_adjacency(g, direction), g.words, KW, N=sims, kappa=c)
    assert len(ranked) >= 3 and len(every) > 8  # a real search: several children, a deeper tree
    top, scores, st = mcts_top_nodes(g, KW_QUERY, k=len(ranked), simulations=sims, c=c, direction=direction)
    assert st["start_node"] == root.state
    assert top == [r.state for r in ranked]
    assert scores == [r.wins / r.visits for r in ranked]
    tree = alg1_search(neighbour_lists(g, direction), g.rewards(KW).tolist(), root.state, simulations=sims, c=c)
    mine = [(tree.item[t], tree.item[tree.parent[t]] if tree.parent[t] >= 0 else None, tree.visits[t],
             tree.wins[t]) for t in range(len(tree.item))]
    ref = [(x.state, x.parent.state if x.parent else None, x.visits, x.wins) for x in every]
    assert mine == ref
    # the neighbours decide: some child ranks above one with more keywords of its own, or above one with as many
    own = [len(KW & g.words[r.state]) for r in ranked]
    assert any(own[a] < own[b] or (own[a] == own[b] and scores[a] != scores[b])
               for a in range(len(own)) for b in range(a + 1, len(own)))


def test_mcts_bad_options():
    """Unknown variant or direction and negative budgets are ConfigErrors naming the option."""
    g = _hand_graph()
    for kw in ({"variant": "magic"}, {"direction": "sideways"}, {"simulations": -1}, {"depth": 0}, {"c": -1.0}):
        with pytest.raises(ConfigError, match=next(iter(kw))):
            mcts_top_nodes(g, KW_QUERY, **kw)


STORY = (
    "Captain Ames sailed the Northern Star into the harbour of Port Vell. "
    "The harbourmaster, Mira Tolan, met Captain Ames at the golden lighthouse. "
    "Mira Tolan kept the lighthouse lamp burning every night.\n\n"
    "In the morning Captain Ames sold the cargo of salt in the Port Vell market. "
    "The merchants of Port Vell paid in silver. "
    "CAPTAIN AMES left with the silver and the Northern Star sailed north.\n\n"
    "Years later Mira Tolan wrote a letter about the lighthouse and the salt."
)


def _build(tmp_path, **relate):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "story.txt").write_text(STORY)
    (tmp_path / "docs" / "empty.txt").write_text("and the of it. was in to.")
    return Index.build([tmp_path / "docs"], store=tmp_path / "s", chunker="recursive", size=40, embedder=None,
                       relate=[JerrRelator("offline", unit_tokens=60, **relate)], progress=False)


def test_store_round_trip_and_retriever(tmp_path):
    """Graph rows, spans and search results survive save/reopen; members are exact document spans."""
    ix = _build(tmp_path)
    rec = ix.store.documents["story"].metadata["jerr"]
    assert rec["backend"] == "offline" and rec["nodes"] > 3 and rec["exact_merges"] >= 1
    assert ix.store.documents["empty"].metadata["jerr"]["nodes"] == 0
    before = ix.search("Who kept the lighthouse lamp burning?", k=3, retriever="jerr")
    ix.save()
    ix.close()
    ix2 = Index.open(tmp_path / "s", components={"jerr": JerrRelator("offline")})
    after = ix2.search("Who kept the lighthouse lamp burning?", k=3, retriever="jerr")
    assert [it.to_dict() for it in before] == [it.to_dict() for it in after] and len(after) > 0
    text = ix2.corpus.document("story").text
    for it in after:
        assert it.provenance["kind"] == "node"
        for m in it.members:
            assert text[m.start:m.end] == m.text
    names = {it.provenance["entity"] for it in after}
    assert names & {"lighthouse", "Mira Tolan", "lamp"}
    # entity spans are the chunks' spans and the merged spelling is an alias
    from momoka.methods.jerr import read_graphs

    ents, edges = read_graphs(ix2.store, ["story"])
    ames = [e for e in ents if e["name"] == "Captain Ames"][0]
    assert "CAPTAIN AMES" in ames["aliases"]
    for c, (a, b) in zip(ames["chunks"], ames["spans"]):
        assert ix2.store.chunks.span(c) == ("story", a, b)
    for e in edges:
        assert e["span"][0] < e["span"][1] and text[e["span"][0]:e["span"][1]].strip()
    assert ix2.search("lighthouse", k=2, retriever="jerr", doc_ids="empty").items == ()
    ix2.close()


def test_cli_graph_prints_and_exports(tmp_path, capsys):
    """`momoka graph` prints the record, nodes and edges; exports parse as GraphML and JSON; errors exit 2."""
    _build(tmp_path).save()
    assert main(["graph", str(tmp_path / "s"), "--doc", "story"]) == 0
    out = capsys.readouterr().out
    assert "backend offline" in out and "Captain Ames" in out and "edges:" in out
    assert main(["graph", str(tmp_path / "s"), "--doc", "story", "--export", str(tmp_path / "g.graphml")]) == 0
    root = ET.parse(tmp_path / "g.graphml").getroot()
    ns = "{http://graphml.graphdrawing.org/xmlns}"
    assert root.find(f"{ns}graph").findall(f"{ns}node")
    assert main(["graph", str(tmp_path / "s"), "--doc", "story", "--export", str(tmp_path / "g.json")]) == 0
    g = json.loads((tmp_path / "g.json").read_text())
    assert all(0 <= e["source"] < len(g["nodes"]) for e in g["edges"])
    capsys.readouterr()
    assert main(["query", str(tmp_path / "s"), "who kept the lighthouse lamp?", "--retriever", "jerr", "-k", "2"]) == 0
    assert "(node)" in capsys.readouterr().out
    assert main(["graph", str(tmp_path / "s"), "--doc", "nope"]) == 2
    assert "no document 'nope'" in capsys.readouterr().err
    assert main(["graph", str(tmp_path / "s"), "--doc", "story", "--export", str(tmp_path / "g.png")]) == 2


def test_bad_options_and_missing_graph(tmp_path):
    """Bad relator options are ConfigErrors; the retriever on a store without a graph says how to build it."""
    with pytest.raises(ConfigError):
        JerrRelator("magic")
    with pytest.raises(ConfigError):
        JerrRelator(max_hamming=99)
    (tmp_path / "a.txt").write_text(STORY)
    ix = Index.build([tmp_path / "a.txt"], embedder=None, progress=False)
    with pytest.raises(StoreError, match="--relate jerr"):
        ix.search("lighthouse", retriever="jerr")


def _script(body, i):
    user = body["messages"][-1]["content"]
    if user.startswith("Please transfer"):
        return Reply("Synopsis: " + user.split("Passage: ", 1)[1])
    if "information atoms" in user:
        return Reply("1. Captain Ames meets Mira Tolan.\n2. Mira Tolan keeps the lighthouse.")
    if "core components" in user:
        if "salt" in user or "silver" in user:
            return Reply("I cannot answer this as a list because " + "the text is long " * 20)  # malformed
        return Reply('["Captain Ames", "Mira Tolan", "lighthouse"]')
    if "attributes between" in user:
        return Reply("none" if "lighthouse" in user.split("between")[1] and "Captain" in user.split("between")[1]
                     else "meets")
    return Reply("?")


def test_llm_backend_prompts_estimate_and_malformed_fallback(tmp_path):
    """The LLM back-end sends the App. A prompts; an unparsable element list falls back offline and is counted."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "story.txt").write_text(STORY)
    with ScriptedServer(_script) as srv:
        llm = OpenAIClient("scripted-llm", base_url=srv.base_url, api_key="x", cache=str(tmp_path / "llm.sqlite"))
        rel = JerrRelator("llm", llm=llm, unit_tokens=40)
        # 2 of 3 units fall back: allowed here (default bound 25 %), warned with the share
        with pytest.warns(UserWarning, match=r"^jerr extraction: 2 of 3 units \(66.7 %\) were unusable"):
            ix = Index.build([tmp_path / "docs"], store=tmp_path / "s", chunker="recursive", size=40,
                             embedder=None, relate=[rel], progress=False, llm_max_failed=1.0)
        bodies = srv.chat_bodies()
    rec = ix.store.documents["story"].metadata["jerr"]
    assert rec["backend"] == "llm:scripted-llm"
    assert rec["fallback_parse"] >= 1 and "offline-fallback" in rec["backends"] and "llm" in rec["backends"]
    units = rec["units"]
    firsts = [b["messages"][-1]["content"].split("\n")[0] for b in bodies]
    assert sum(f.startswith("Please transfer") for f in firsts) == units
    llm_units = units - rec["fallback_parse"]
    assert sum("attributes between" in b["messages"][-1]["content"] for b in bodies) == 3 * llm_units
    assert rec["llm_calls"] == len(bodies) and rec["prompt_tokens"] > 0
    from momoka.methods.jerr import read_graphs

    ents, edges = read_graphs(ix.store, ["story"])
    assert {"Captain Ames", "Mira Tolan", "lighthouse"} <= {e["name"] for e in ents}
    assert {e["attr"] for e in edges} >= {"meets"}
    # estimate: 3 calls per unit, at most 6 with the edge questions; the same units as the run
    from momoka.methods.sources import to_document

    doc = to_document(tmp_path / "docs" / "story.txt")
    chunks = [ix.store.chunks.get(c) for c in ix.store.documents["story"].chunk_ids]
    est = rel.estimate([doc], [chunks])
    assert est["units"] == units and est["llm_calls"] == 3 * units and est["llm_calls_max"] == 6 * units
    assert len(bodies) <= est["llm_calls_max"]


def test_look_up_answers_are_parsed():
    """The last bracketed list wins; without one every 'Page N' counts; repeats are dropped."""
    from momoka.methods.jerr.components import parse_pages

    assert parse_pages('I want to look up Page [7, 12] to check') == [7, 12]
    assert parse_pages("Page [2] first, then Page [3, 3, 1]") == [3, 1]
    assert parse_pages("Let me read page 4 and Pages 9") == [4, 9]
    assert parse_pages("No page is needed.") == []


def test_llm_key_chunk_step_keeps_the_pages_the_model_names(tmp_path):
    """With an LLM the look-up prompt lists the nodes and the units' synopses as pages; only chunks of the
    page the model names are returned. Offline (and on an answer naming no page) the step is skipped and
    the stats say so."""
    import re

    ix = _build(tmp_path)
    q = "Who kept the lighthouse lamp burning?"
    offline = JerrRetriever(ix.corpus, backend="offline").retrieve(q, 3)
    assert offline.stats["key_chunks"].startswith("keywords (no LLM") and len(offline) == 2
    answers = iter(["I want to look up Page [2] to see who kept the lamp.", "I need no page."])
    with ScriptedServer(lambda body, i: Reply(next(answers))) as srv:
        llm = OpenAIClient("scripted-llm", base_url=srv.base_url, api_key="x", cache=False)
        ret = JerrRetriever(ix.corpus, backend="auto", llm=llm)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a usable answer: no warning
            res = ret.retrieve(q, 3)
        prompt = srv.chat_bodies()[0]["messages"][-1]["content"]
        with pytest.warns(UserWarning, match=r"jerr look-up: 1 of 1 answers \(100.0 %\) were unusable; those "
                          r"questions kept the chunks their keywords chose"):
            unclear = ret.retrieve(q, 3)
        assert srv.count == 2
    assert prompt.startswith("The following text is what you remembered") and prompt.endswith("Question:\n" + q)
    assert "- Captain Ames" in prompt and "- Mira Tolan" in prompt
    pages = dict(re.findall(r"<Page (\d+)>\n(.*?)(?=\n\n<Page |\n\nQuestion:)", prompt, flags=re.S))
    assert len(pages) >= 2
    assert res.stats["key_chunks"] == {"by": "llm:scripted-llm", "pages": len(pages), "selected": [2]}
    assert len(res) >= 1
    for it in res:
        for m in it.members:
            assert ix.store.chunks.metadata(m.chunk_id)["jerr.synopsis"] == pages["2"]
    assert [it.to_dict() for it in offline] != [it.to_dict() for it in res]
    assert unclear.stats["key_chunks"]["fallback"].startswith("keywords")
    assert [it.to_dict() for it in unclear] == [it.to_dict() for it in offline]


def test_look_up_estimate_is_the_request_made(tmp_path):
    """``estimate`` prices the look-up without making it: one request of exactly the prompt sent when the
    search finds nodes and an endpoint is configured; none offline, on a client without an endpoint, or
    when no node matches the question (and then none is made)."""
    import re

    ix = _build(tmp_path)
    q = "Who kept the lighthouse lamp burning?"
    assert JerrRetriever(ix.corpus, backend="offline").estimate(q, 3) == {
        "per": "question", "backend": "offline", "llm_calls": 0, "look_up": "skipped (offline)"}

    class NoEndpoint:  # a client with no base_url (the local model): never called by an estimate
        def complete(self, *a, **kw):
            raise AssertionError("called")

    local = JerrRetriever(ix.corpus, backend="llm", llm=NoEndpoint()).estimate(q, 3)
    assert local["llm_calls"] == 0 and local["endpoint"] is None and local["nodes_found"] >= 1
    with ScriptedServer(lambda body, i: Reply("I want to look up Page [1].")) as srv:
        llm = OpenAIClient("scripted-llm", base_url=srv.base_url, api_key="x", cache=False)
        ret = JerrRetriever(ix.corpus, backend="auto", llm=llm, max_tokens=40)
        est = ret.estimate(q, 3)
        assert srv.count == 0
        res = ret.retrieve(q, 3)
        assert srv.count == est["llm_calls"] == 1
        body = srv.chat_bodies()[0]
        none = ret.estimate("zebra xylophone quartz", 3)
        assert ret.retrieve("zebra xylophone quartz", 3).items == () and srv.count == 1
    prompt = body["messages"][-1]["content"]
    assert len(body["messages"]) == 1 and est["prompt_chars"] == len(prompt)
    assert est["prompt_tokens"] == len(prompt) // 4 and est["completion_tokens_max"] == body["max_tokens"] == 40
    assert est["endpoint"] == srv.base_url and est["backend"] == "llm"
    assert est["pages"] == len(re.findall(r"<Page \d+>", prompt)) == res.stats["key_chunks"]["pages"] >= 2
    assert est["nodes_found"] == prompt.count("\n- ") >= 2  # the nodes listed, one line each
    assert none["llm_calls"] == none["nodes_found"] == 0
    with pytest.raises(InputError):
        ret.estimate("  ", 3)


def test_retriever_bad_options(tmp_path):
    """Unknown variant / backend and negative budgets are ConfigErrors."""
    ix = _build(tmp_path)
    for kw in ({"variant": "magic"}, {"backend": "cloud"}, {"simulations": -1}, {"max_pages": 0},
               {"direction": "up"}, {"method": "bfs"}):
        with pytest.raises(ConfigError, match=next(iter(kw))):
            JerrRetriever(ix.corpus, **kw)


# --------------------------------------------------------------------------- across documents

PAGES = {
    "Ana Varga": "Ana Varga is a Hungarian violinist born in Szeged. In 1990 Ana Varga joined the Lumen Quartet "
                 "as its first violin and toured Europe with the Lumen Quartet for ten years.",
    "Lumen Quartet": "The Lumen Quartet is a string ensemble from Tallinn. Oskar Brandt founded the Lumen Quartet "
                     "in 1961 and led the Lumen Quartet until 1975.",
    "Szeged": "Szeged is a city in southern Hungary on the Tisza River. Szeged hosts an open-air festival.",
    "Marta Kull": "Marta Kull is an Estonian cellist. Marta Kull studied in Tartu and teaches at the Tartu "
                  "Academy of Music.",
}


def _pages(tmp_path, size=400, unit_tokens=600):
    pages = [{"doc_id": t.replace(" ", "_"), "title": t, "text": x} for t, x in PAGES.items()]
    return Index.build(pages, store=tmp_path / "p", chunker="recursive", size=size, embedder=None,
                       relate=[JerrRelator("offline", unit_tokens=unit_tokens, min_count=2)], progress=False)


def _ref_linked(ents, edges, titles):
    """Plain-Python restatement of the linked graph: one node per lower-cased, space-collapsed name, met
    in the order entity rows then page nodes; page node -> each entity of its document; merged chunks."""
    names, order, words_of, chunks = [], {}, [], []
    node_of_row = {}

    def node(name, cids):
        key = " ".join(name.lower().split())
        if key not in order:
            order[key] = len(names)
            names.append(name)
            chunks.append([])
        v = order[key]
        chunks[v].extend(c for c in cids if c not in chunks[v])
        return v

    for r in ents:
        node_of_row[r["id"]] = node(r["name"], r["chunks"])
    links = [(node_of_row[e["src"]], node_of_row[e["dst"]]) for e in edges]
    for d, (title, first) in titles.items():
        p = node(title, [first])
        links += [(p, node_of_row[r["id"]]) for r in ents if r["doc_id"] == d]
    adj = [set() for _ in names]
    for a, b in links:
        if a != b:
            adj[a].add(b)
            adj[b].add(a)
    return names, chunks, [sorted(x) for x in adj]


def test_linked_pages_match_reference_and_reach_the_bridge_page(tmp_path):
    """Across documents the graph merges names across pages and adds page nodes (the plain-Python
    restatement above, searched by the Algorithm 1 transcription); the page of the entity the question
    never names (the bridge, "Lumen Quartet", named only by the first page) is then reached, and it is
    not when the pages are searched unlinked."""
    ix = _pages(tmp_path)
    q = "Who founded the ensemble that Ana Varga joined?"
    from momoka.methods.jerr import read_graphs

    docs = list(ix.store.documents)
    ents, edges = read_graphs(ix.store, docs)
    titles = {d: (ix.store.documents[d].title, ix.store.documents[d].chunk_ids[0]) for d in docs}
    names, chunks, adj = _ref_linked(ents, edges, titles)
    words = node_words(names, [[] for _ in names], [[] for _ in names])
    # edge attributes count as node words: add them as the retriever does (both ends of each edge)
    key = {" ".join(n.lower().split()): i for i, n in enumerate(names)}
    row_node = {r["id"]: key[" ".join(r["name"].lower().split())] for r in ents}
    for e in edges:
        for v in (row_node[e["src"]], row_node[e["dst"]]):
            words[v] |= set(node_words([""], [[]], [[e["attr"]]])[0])
    root, _every, ranked = ref_alg1(adj, words, keywords(q), N=100, depth=10)
    assert root is not None and names[root.state] == "Ana Varga"
    r = JerrRetriever(ix.corpus, across="documents", chunks_per_node=2)
    res = r.retrieve(q, k=len(ranked))
    assert [it.provenance["entity"] for it in res] == [names[t.state] for t in ranked]
    assert [it.score for it in res] == [t.wins / t.visits for t in ranked]
    lumen = ix.store.documents["Lumen_Quartet"].chunk_ids[0]
    got = {c for it in res for c in it.chunk_ids}
    assert lumen in got  # the bridge page, through "Lumen Quartet" named on Ana Varga's page
    # the page about an entity comes first among its node's chunks
    node = [it for it in res if it.provenance["entity"] == "Lumen Quartet"][0]
    assert node.chunk_ids[0] == lumen and node.title == "Lumen Quartet"
    # unlinked, the walk cannot leave the pages the question's words name
    alone = JerrRetriever(ix.corpus, across="none").retrieve(q, k=10)
    assert lumen not in {c for it in alone for c in it.chunk_ids}
    # auto links when several documents are searched and most are one unit long (pages), not within one
    assert [it.to_dict() for it in JerrRetriever(ix.corpus).retrieve(q, k=10)] == [
        it.to_dict() for it in JerrRetriever(ix.corpus, across="documents").retrieve(q, k=10)]
    one = JerrRetriever(ix.corpus).retrieve(q, k=10, doc_ids="Ana_Varga")
    assert one.items and {m.doc_id for it in one for m in it.members} == {"Ana_Varga"}
    with pytest.raises(ConfigError, match="across"):
        JerrRetriever(ix.corpus, across="pages")
    ix.close()


def test_link_documents_dedups_across_documents_by_the_exact_key():
    """Hand-made rows: names equal up to case and spaces merge across documents (first seen represents,
    the other spelling an alias, chunks joined); a page node merges with the entity its title names; self
    loops and repeated edges vanish."""
    from momoka.methods.jerr.graph import link_documents

    ents = [{"id": 10, "doc_id": "a", "name": "Lumen Quartet", "aliases": [], "chunks": [1]},
            {"id": 11, "doc_id": "a", "name": "Ana Varga", "aliases": [], "chunks": [1]},
            {"id": 20, "doc_id": "b", "name": "LUMEN  quartet", "aliases": ["the Lumen"], "chunks": [2, 3]},
            {"id": 21, "doc_id": "b", "name": "Oskar Brandt", "aliases": [], "chunks": [3]}]
    edges = [{"src": 11, "dst": 10, "attr": "joined"}, {"src": 20, "dst": 21, "attr": "founded"},
             {"src": 11, "dst": 10, "attr": "again"}]
    rows, linked = link_documents(ents, edges, {"a": ("Ana Varga", 1), "b": ("Lumen Quartet", 2)})
    assert [r["name"] for r in rows] == ["Lumen Quartet", "Ana Varga", "Oskar Brandt"]
    assert rows[0]["aliases"] == ["LUMEN  quartet", "the Lumen"] and rows[0]["chunks"] == [1, 2, 3]
    assert rows[0]["doc_ids"] == ["a", "b"] and rows[0]["pages"] == [2] and rows[1]["pages"] == [1]
    # page a -> Ana Varga is a self loop, the others repeat an edge each document already has
    assert linked == [(1, 0, "joined"), (0, 2, "founded")]


def test_eval_splits_options_between_the_relator_and_the_retriever_of_one_name():
    """``-o jerr.KEY=VALUE`` names both the ``jerr`` relator and retriever: each gets the options it takes
    (``unit_tokens`` builds the graph, ``across`` searches it); an option neither takes still fails."""
    from momoka.eval.runner import _retriever_options, plan

    opts = {"jerr": {"across": "none", "unit_tokens": 60, "chunks_per_node": 1}}
    need = plan(["jerr"], opts)
    assert need["relate"] == [("jerr", {"unit_tokens": 60})]
    assert _retriever_options("jerr", opts["jerr"], need) == {"across": "none", "chunks_per_node": 1}
    assert _retriever_options("hybrid", {"alpha": 1}, need) == {"alpha": 1}
    bad = {"jerr": {"acros": "none"}}
    assert _retriever_options("jerr", bad["jerr"], plan(["jerr"], bad)) == {"acros": "none"}


def test_auto_does_not_link_documents_of_several_units(tmp_path):
    """``across="auto"`` searches documents of several units each unlinked (measured: linking lowers JERR on
    corpora of long documents), as ``"none"`` does."""
    from momoka.methods.jerr.components import pages_like

    ix = _pages(tmp_path, size=12, unit_tokens=12)
    docs = list(ix.store.documents)
    assert all(ix.store.documents[d].metadata["jerr"]["units"] >= 2 for d in docs) and not pages_like(ix.store, docs)
    q = "Who founded the ensemble that Ana Varga joined?"
    auto = [it.to_dict() for it in JerrRetriever(ix.corpus).retrieve(q, k=10)]
    assert auto == [it.to_dict() for it in JerrRetriever(ix.corpus, across="none").retrieve(q, k=10)]
    assert auto != [it.to_dict() for it in JerrRetriever(ix.corpus, across="documents").retrieve(q, k=10)]
    ix.close()
