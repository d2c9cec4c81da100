"""Small-to-big context assembly (momoka.methods.assemble) against a slow reference written here.

The reference works on sets of character positions and the real document
texts (not on the assembler's interval arithmetic or the chunk table's
arrays): a hit's paragraph is found by scanning every chunk, "touching" means
only whitespace of the document lies between two spans, and the whitespace
between two returned spans is returned (and counted) when a chunk ends where
it begins and the document's next chunk starts where it ends. A trimmed hit's
run of sentences is found by trying every run and tokenising its whole text,
its weight computed here from the BM25 view's document frequencies.
"""

from __future__ import annotations

import json
import math
from importlib import resources

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from momoka import Index
from momoka.errors import ConfigError
from momoka.methods.base import (DEFAULT_ASSEMBLE_CAP, DEFAULT_ASSEMBLE_EXTRA, DEFAULT_ASSEMBLE_MIN_HITS,
                                 DEFAULT_ASSEMBLE_TRIM, DEFAULT_ASSEMBLE_TRIM_FILL, Item, Member, Result)
from momoka.text import Document
from momoka.text.segment import split_sentences

SETS = ("hotpotqa_dev500_long", "squad_v1_dev_half_a")


@pytest.fixture(scope="module")
def corpus(shared_data):
    """A BM25-only index (recursive 100, the default chunker) of the bundled example and four shared documents."""
    text = resources.files("momoka.examples").joinpath("harbor_light.md").read_text(encoding="utf-8")
    docs = [Document.from_markdown(text, doc_id="harbor_light")]
    for name in SETS:
        with open(shared_data / name / "documents.jsonl", encoding="utf-8") as f:
            for _, line in zip(range(2), f):
                r = json.loads(line)
                docs.append(Document.from_text(r["text"], doc_id=r["doc_id"]))
    ix = Index.build(docs, embedder=None, progress=False)
    texts = {d.doc_id: d.text for d in docs}
    chunks = [ix.store.chunks.get(c) for c in ix.store.chunks.ids()]
    ids = [int(c) for c in ix.store.chunks.ids()]
    yield ix, texts, dict(zip(ids, chunks))
    ix.close()


def best_run(item: Item, left: int, taken: dict, bm, query: set):
    """The trimmed run of ``item`` by brute force: ``(doc, start, end)`` or None."""
    best = None
    for k, m in enumerate(item.members):
        starts, ends = split_sentences(m.text)
        sents = [(m.start + a, m.start + b) for a, b in zip(starts.tolist(), ends.tolist())]
        for i in range(len(sents)):
            for j in range(i, len(sents)):
                a, b = sents[i][0], sents[j][1]
                if b - a > left or any(p in taken.get(m.doc_id, set()) for p in range(a, b)):
                    continue
                held = set(bm.tokenize(m.text[a - m.start:b - m.start])) & query
                n = bm.n_docs
                w = math.fsum(math.log(1 + (n - bm.doc_freq(t) + 0.5) / (bm.doc_freq(t) + 0.5)) for t in held)
                key = (-w, b - a, k, a)
                if held and (best is None or key < best[0]):
                    best = (key, (m.doc_id, a, b))
    return None if best is None else best[1]


def reference(result: Result, budget: int, cap: int, texts: dict, chunks: dict, keep_first: bool = True,
              min_hits: int = 2, extra: int = 0, trim: int = 0, bm=None, fill: float = 0.5):
    """The assembly, slowly: ``(covered chars per doc, hit groups as sets of ranks, widened ranks, skipped,
    trimmed ranks)``."""
    def family(cid):
        c = chunks[cid]
        return [i for i, o in chunks.items() if o.doc_id == c.doc_id and o.paragraph == c.paragraph]

    ranked = [m.chunk_id for it in result.items for m in it.members if m.chunk_id in chunks]

    def paragraph(cid):
        fam = family(cid)
        if len(fam) < 2:
            return None
        span = max(chunks[i].end for i in fam) - min(chunks[i].start for i in fam)
        adds = span - (chunks[cid].end - chunks[cid].start)
        held = sum(1 for r in ranked if r in fam)
        return fam if adds <= extra or (span <= cap and held >= min_hits) else None

    def joined(d, pos):
        """``pos`` with the whitespace between two of them added where a chunk ends and the next one starts."""
        out, ps = set(pos), sorted(pos)
        for a, b in zip(ps, ps[1:]):
            s, e = a + 1, b
            if e > s and texts[d][s:e].isspace() and any(
                    c.doc_id == d and c.end == s and min((o.start for o in chunks.values()
                                                          if o.doc_id == d and o.start > c.start), default=-1) == e
                    for c in chunks.values()):
                out.update(range(s, e))
        return out

    taken: dict[str, set] = {}
    accepted, widened, skipped, trimmed, tried = [], set(), 0, set(), 0
    query = set(bm.tokenize(result.query)) if trim and bm is not None else set()
    for n, item in enumerate(result.items):
        base = [(m.doc_id, m.start, m.end) for m in item.members]
        wide, grew = [], False
        for m in item.members:
            fam = paragraph(m.chunk_id) if (cap or extra) and m.chunk_id >= 0 else None
            if fam:
                wide += [(chunks[i].doc_id, chunks[i].start, chunks[i].end) for i in fam]
                grew = True
            else:
                wide.append((m.doc_id, m.start, m.end))
        choices = ([(wide, "wide")] if grew else []) + [(base, "")]
        if query and tried < trim:
            choices.append((None, "trim"))
        for spans, how in choices:
            if how == "trim":  # the first `trim` hits that fit neither way, each tried once
                tried += 1
                left = budget - sum(len(v) for v in taken.values())
                run = best_run(item, left, taken, bm, query)
                if run is None or run[2] - run[1] < fill * left:
                    skipped += 1
                    break
                spans = [run]
            grown = {d: set(v) for d, v in taken.items()}
            for d, s, e in spans:
                grown.setdefault(d, set()).update(range(s, e))
            grown = {d: joined(d, v) for d, v in grown.items()}
            new = sum(len(v) for v in grown.values()) - sum(len(v) for v in taken.values())
            used = sum(len(v) for v in taken.values())
            if used + new <= budget or (keep_first and n == 0 and not how):
                taken = grown
                accepted.append((item.rank, spans))
                {"wide": widened, "trim": trimmed}.get(how, set()).add(item.rank)
                break
        else:
            skipped += 1
    # groups: hits joined when their spans overlap or only whitespace lies between them
    group = {r: {r} for r, _ in accepted}
    for a, sa in accepted:
        for b, sb in accepted:
            if a < b and any(d1 == d2 and (min(e1, e2) >= max(s1, s2) or
                                           texts[d1][min(e1, e2):max(s1, s2)].isspace())
                             for d1, s1, e1 in sa for d2, s2, e2 in sb):
                joined = group[a] | group[b]
                for r in joined:
                    group[r] = joined
    groups = {frozenset(g) for g in group.values()}
    return taken, groups, widened, skipped, trimmed


def check(out: Result, result: Result, budget: int, cap: int, texts: dict, chunks: dict, keep_first: bool = True,
          min_hits: int = 2, extra: int = 0, trim: int = 0, bm=None, fill: float = 0.5):
    taken, groups, widened, skipped, trimmed = reference(result, budget, cap, texts, chunks, keep_first, min_hits,
                                                         extra, trim, bm, fill)
    got: dict[str, set] = {}
    for it in out:
        for a, b in zip(it.members, it.members[1:]):
            assert a.doc_id != b.doc_id or a.end != b.start               # contiguous pieces are one member
        assert sorted(it.provenance["assembly"]["chunks"]) == sorted(     # the stored chunks it returns
            {c for c, o in chunks.items() for m in it.members
             if o.doc_id == m.doc_id and m.start <= o.start and o.end <= m.end})
        for m in it.members:
            assert texts[m.doc_id][m.start:m.end] == m.text                 # every member exact
            span = {p for p in range(m.start, m.end)}
            assert not span & got.get(m.doc_id, set())                     # no character twice
            got.setdefault(m.doc_id, set()).update(span)
    assert got == taken                                                    # the same characters as the reference
    total = sum(it.n_chars for it in out)
    assert total == sum(len(v) for v in taken.values())
    # over the budget only by keep-first: the best hit alone (a composite's touching members joined by their
    # whitespace, which the reference counts too)
    assert total <= budget or (keep_first and [it.provenance["assembly"]["hits"] for it in out] == [[1]])
    assert {frozenset(it.provenance["assembly"]["hits"]) for it in out} == groups
    assert {r for it in out for r in it.provenance["assembly"]["widened"]} == widened
    assert {r for it in out for r in it.provenance["assembly"]["trimmed"]} == trimmed
    assert out.stats["assembled_skipped"] == skipped and out.stats["assembled_widened"] == len(widened)
    assert out.stats["assembled_trimmed"] == len(trimmed)
    assert [it.rank for it in out] == list(range(1, len(out) + 1))
    assert [min(it.provenance["assembly"]["hits"]) for it in out] == \
        sorted(min(it.provenance["assembly"]["hits"]) for it in out)    # in order of their best hit


QUERIES = ["where is the lighthouse and who keeps it?", "which battle occurred first?",
           "what year was the university founded?", "harbor light storm keeper", "the river and the city"]


@pytest.mark.parametrize("budget,cap,min_hits,extra,trim,fill", [
    (5000, 2500, 1, 0, 0, 0.5), (1500, 2500, 1, 0, 0, 0.5), (5000, 1000, 2, 0, 0, 0.5), (800, 600, 1, 0, 0, 0.5),
    (5000, 0, 1, 0, 0, 0.5), (300, 2500, 1, 0, 0, 0.5), (5000, 0, 1, 300, 0, 0.5), (5000, 1000, 2, 300, 0, 0.5),
    (2000, 2500, 3, 150, 0, 0.5), (1500, 0, 1, 0, 1, 0.0), (800, 600, 1, 0, 3, 0.5), (300, 0, 1, 0, 2, 0.3),
    (2000, 1000, 2, 300, 1, 1.0), (1200, 0, 1, 0, 10, 0.0),
    (5000, DEFAULT_ASSEMBLE_CAP, DEFAULT_ASSEMBLE_MIN_HITS, DEFAULT_ASSEMBLE_EXTRA, DEFAULT_ASSEMBLE_TRIM,
     DEFAULT_ASSEMBLE_TRIM_FILL)])
def test_assembled_search_matches_the_reference(corpus, budget, cap, min_hits, extra, trim, fill):
    ix, texts, chunks = corpus
    asm = ix.corpus.assembler(cap, min_hits=min_hits, extra=extra, trim=trim, trim_fill=fill)
    bm = ix.store.bm25_view("raw").index
    for q in QUERIES:
        ranked = ix.search(q, k=ix.corpus.depth_for(budget), retriever="bm25")
        check(ranked.fit(budget, assemble=asm), ranked, budget, cap, texts, chunks, min_hits=min_hits, extra=extra,
              trim=trim, bm=bm, fill=fill)


def test_assembly_widens_and_merges_on_real_documents(corpus):
    ix, texts, chunks = corpus
    ranked = [ix.search(q, k=ix.corpus.depth_for(5000), retriever="bm25") for q in QUERIES]
    outs = [r.fit(5000, assemble=ix.corpus.assembler(2500)) for r in ranked]
    assert sum(o.stats["assembled_widened"] for o in outs) > 0              # the cases the reference checks occur
    assert sum(o.stats["assembled_merged"] for o in outs) > 0
    assert sum(r.fit(1500, assemble=ix.corpus.assembler(trim=1, trim_fill=0)).stats["assembled_trimmed"] for r in ranked) > 0
    default = [ix.search(q, budget=5000, retriever="bm25") for q in QUERIES]
    assert all(o.stats["assembled_cap"] == DEFAULT_ASSEMBLE_CAP and "assembled_merged" in o.stats for o in default)
    plain = [ix.search(q, budget=5000, retriever="bm25", assemble=False) for q in QUERIES]
    assert all("assembly" not in it.provenance for o in plain for it in o)


def test_search_default_is_the_assembled_fit(corpus):
    ix, _, _ = corpus
    q = QUERIES[0]
    ranked = ix.search(q, k=ix.corpus.depth_for(2000), retriever="bm25")
    items = lambda r: r.to_dict()["items"]  # noqa: E731 (stats hold timings)
    assert items(ix.search(q, budget=2000, retriever="bm25")) == items(ranked.fit(2000, assemble=ix.corpus.assembler()))
    assert items(ix.search(q, budget=2000, retriever="bm25", assemble=False)) == items(ranked.fit(2000))


def test_parent_is_the_paragraph_by_a_scan(corpus):
    ix, _, chunks = corpus
    asm = ix.corpus.assembler()
    for cid, c in chunks.items():
        want = sorted((i for i, o in chunks.items() if o.doc_id == c.doc_id and o.paragraph == c.paragraph),
                      key=lambda i: chunks[i].start)
        assert list(asm.parent(cid)) == want
    assert asm.parent(10 ** 9) == () and asm.parent(-1) == ()


def test_assembler_follows_the_chunk_table(corpus, tmp_path):
    ix, _, _ = corpus
    assert ix.corpus.assembler() is ix.corpus.assembler() and ix.corpus.assembler(2500) is not ix.corpus.assembler()
    assert ix.corpus.assembler(extra=0) is not ix.corpus.assembler() and ix.corpus.assembler(min_hits=1) is not ix.corpus.assembler()
    small = Index.build([Document.from_text("One two.\n\nThree four.", doc_id="a")], embedder=None, progress=False)
    before = small.corpus.assembler()
    small.add([Document.from_text("Five six.", doc_id="b")])
    assert small.corpus.assembler() is not before and small.corpus.assembler().parent(small.store.documents["b"].chunk_ids[0])


def _member(d, s, text):
    return Member(-1, d, s, s + len(text), text)


def test_overlapping_members_are_cut_to_exact_tails_by_hand():
    doc = "alpha beta gamma delta epsilon"
    texts = {"d": doc}
    a = _member("d", 0, doc[0:16])        # "alpha beta gamma"
    b = _member("d", 6, doc[6:22])        # "beta gamma delta": overlaps a by 10
    c = _member("d", 0, doc[0:5])         # inside a: nothing new
    res = Result("q", (Item((a,), 3.0, 1), Item((b,), 2.0, 2), Item((c,), 1.0, 3)), "t")

    class _NoChunks:  # an assembler over an empty chunk table: only merging and skipping
        def column(self, name):
            import numpy as np
            return np.zeros(0, dtype=bool if name == "live" else np.int64)
        doc_list = []
        n_slots = 0

    from momoka.methods.assemble import Assembler

    asm = Assembler(_NoChunks(), lambda c: None, cap=0)
    out = res.fit(22, assemble=asm)
    assert [(m.start, m.end, m.text) for m in out[0].members] == [(0, 22, "alpha beta gamma delta")]
    assert out[0].provenance["assembly"]["hits"] == [1, 2, 3] and len(out) == 1
    assert out.stats["assembled_skipped"] == 0
    out = res.fit(20, assemble=asm)                                       # b's 6 new characters do not fit
    assert [m.span for it in out for m in it.members] == [("d", 0, 16)] and out.stats["assembled_skipped"] == 1
    assert res.fit(10, assemble=asm)[0].n_chars == 16                     # keep-first: the best hit, too long
    assert len(res.fit(10, keep_first=False, assemble=asm)) == 1          # c (5 chars) fits after a is skipped
    with pytest.raises(ConfigError):
        res.fit(0, assemble=asm)
    for bad in ({"cap": -1}, {"min_hits": 0}, {"extra": -5}, {"extra": True}, {"trim": -1}, {"trim_fill": 1.5},
                {"trim_fill": -0.1}):
        with pytest.raises(ConfigError):
            Assembler(_NoChunks(), lambda c: None, **bad)
    check(res.fit(22, assemble=asm), res, 22, 0, texts, {})


def test_trimming_by_hand():
    text = ("The harbor is quiet. The lighthouse keeper lives alone on the rock. Storms come in winter. "
            "The keeper lights the lamp at dusk.")
    other = "A ferry crosses the bay twice a day. It carries mail, bread and the doctor. Nobody else comes."
    ix = Index.build([Document.from_text(text, doc_id="a"), Document.from_text(other, doc_id="b")], embedder=None,
                     progress=False)
    try:
        (cid,) = ix.store.documents["a"].chunk_ids
        (ferry,) = ix.store.documents["b"].chunk_ids
        res = ix.corpus.result("lighthouse keeper", [(cid, 1.0)], "t")
        keeper = "The lighthouse keeper lives alone on the rock."         # both terms: the heaviest run
        assert len(keeper) == 46
        out = res.fit(80, keep_first=False, assemble=ix.corpus.assembler(trim=1))
        assert [m.text for it in out for m in it.members] == [keeper]   # runs 2-4 hold as much but are longer
        assert out[0].chunk_id == -1 and out[0].provenance["assembly"]["trimmed"] == [1]
        assert out.stats["assembled_trimmed"] == 1 and out.stats["assembled_skipped"] == 0
        assert text[out[0].start:out[0].end] == keeper
        out = res.fit(100, keep_first=False, assemble=ix.corpus.assembler(trim=1))  # 46 of 100 left: below half
        assert len(out) == 0 and out.stats["assembled_skipped"] == 1 and out.stats["assembled_trimmed"] == 0
        assert res.fit(100, keep_first=False, assemble=ix.corpus.assembler(trim=1, trim_fill=0.46))[0].text == keeper
        out = res.fit(40, keep_first=False, assemble=ix.corpus.assembler(trim=1))   # only "keeper" fits
        assert [m.text for it in out for m in it.members] == ["The keeper lights the lamp at dusk."]
        out = res.fit(30, keep_first=False, assemble=ix.corpus.assembler(trim=1))   # no run with a query term fits
        assert len(out) == 0 and out.stats["assembled_skipped"] == 1 and out.stats["assembled_trimmed"] == 0
        assert len(res.fit(80, keep_first=False, assemble=ix.corpus.assembler(trim=0))) == 0
        assert ix.corpus.result("winter storms", [(cid, 1.0)], "t").fit(
            40, keep_first=False, assemble=ix.corpus.assembler(trim=1))[0].text == "Storms come in winter."
        assert len(ix.corpus.result("volcano", [(cid, 1.0)], "t").fit(80, keep_first=False,
                                                               assemble=ix.corpus.assembler(trim=1))) == 0
        out = res.fit(80, assemble=ix.corpus.assembler(trim=1))                    # keep-first: the best hit whole
        assert out[0].n_chars == len(text) and out.stats["assembled_trimmed"] == 0
        # a run never holds text already taken: "Storms come in winter." is, so the run starts after it
        s0 = text.index("Storms")
        taken = Item((Member(-1, "a", s0, s0 + 22, text[s0:s0 + 22]),), 3.0, 1)
        whole = ix.corpus.result("q", [(cid, 1.0)], "t").items[0]
        both = Result("storms keeper lamp", (taken, Item(whole.members, 1.0, 2)), "t")
        out = both.fit(22 + 60, keep_first=False, assemble=ix.corpus.assembler(trim=1))
        assert [it.text for it in out] == ["Storms come in winter.", "The keeper lights the lamp at dusk."]
        assert out[1].provenance["assembly"]["trimmed"] == [2] and out[0].provenance["assembly"]["trimmed"] == []
        # only the first `trim` hits that do not fit are tried: the ferry (no query term) uses up trim=1
        two = ix.corpus.result("lighthouse keeper", [(ferry, 2.0), (cid, 1.0)], "t")
        out = two.fit(80, keep_first=False, assemble=ix.corpus.assembler(trim=1))
        assert len(out) == 0 and out.stats["assembled_skipped"] == 2
        out = two.fit(80, keep_first=False, assemble=ix.corpus.assembler(trim=2))
        assert [it.text for it in out] == [keeper] and out[0].provenance["assembly"]["trimmed"] == [2]
    finally:
        ix.close()


def test_the_bm25_index_is_looked_up_only_when_a_hit_does_not_fit(corpus):
    ix, _, _ = corpus
    calls = []

    def terms():
        calls.append(1)
        return ix.store.bm25_view("raw").index

    from momoka.methods.assemble import Assembler

    asm = Assembler(ix.store.chunks, ix.corpus.results.member, terms=terms)
    ranked = ix.search(QUERIES[0], k=3, retriever="bm25")
    asm(ranked, 10 ** 6)                                  # everything fits: a dense-only search loads no BM25
    assert calls == []
    out = asm(ranked, ranked[0].n_chars + 1, keep_first=False)   # the second hit does not fit
    assert len(calls) == 1 and out.stats["assembled_skipped"] + out.stats["assembled_trimmed"] >= 1
    out = Assembler(ix.store.chunks, ix.corpus.results.member, terms=lambda: None)(ranked, 5)  # no index: none trimmed
    assert out.stats["assembled_trimmed"] == 0 and out.stats["assembled_skipped"] == len(ranked) - 1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_rankings_match_the_reference(corpus, data):
    ix, texts, chunks = corpus
    ids = sorted(chunks)
    picks = data.draw(st.lists(st.sampled_from(ids), min_size=1, max_size=25, unique=True))
    # some items are composites of two chunks (as Trail returns), possibly far apart
    pairs = data.draw(st.lists(st.sampled_from(ids), min_size=len(picks), max_size=len(picks)))
    joined = data.draw(st.lists(st.booleans(), min_size=len(picks), max_size=len(picks)))
    picks = [(c, o) if j and o != c else c for c, o, j in zip(picks, pairs, joined)]
    budget = data.draw(st.integers(1, 6000))
    cap = data.draw(st.sampled_from([0, 300, 1000, 2500, 10 ** 6]))
    keep_first = data.draw(st.booleans())
    min_hits = data.draw(st.integers(1, 3))
    extra = data.draw(st.sampled_from([0, 100, 300, 10 ** 6]))
    trim = data.draw(st.sampled_from([0, 1, 2, 5]))
    fill = data.draw(st.sampled_from([0.0, 0.5, 0.9]))
    query = data.draw(st.sampled_from(QUERIES))
    res = ix.corpus.result(query, [(c, 1.0 - i / 100) for i, c in enumerate(picks)], "t")
    out = res.fit(budget, keep_first=keep_first, assemble=ix.corpus.assembler(cap, min_hits=min_hits, extra=extra, trim=trim,
                                                                       trim_fill=fill))
    check(out, res, budget, cap, texts, chunks, keep_first, min_hits, extra, trim, ix.store.bm25_view("raw").index,
          fill)
    # every hit that is not returned was too long for what is left at the end
    got = {(m.doc_id, p) for it in out for m in it.members for p in range(m.start, m.end)}
    left = budget - sum(it.n_chars for it in out)
    for it in res:
        if not all((d, p) in got for d, s, e in it.spans for p in range(s, e)):
            assert it.n_chars > left
