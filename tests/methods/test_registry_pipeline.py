"""The method registry and the index pipeline: components registered through the public API only.

A toy enricher adds a second vector view and a toy relator adds a relation to a
store, with no change to ``Store``; both are recorded in the manifest, survive a
save, run again on documents added later (and only on those), and their outputs
are checked against values computed here by hand.
"""

from __future__ import annotations


import numpy as np
import pytest
from momoka.errors import ConfigError, MissingArtifactError, StoreError
from _oracles.embedders import HashEmbedder
from momoka import Index
from momoka import registry
from momoka.methods.base import Item, Member, Result
from .conftest import builtin_components, offline_spec




class UpperEnricher:
    """Adds view "upper": the chunk texts upper-cased, embedded with the raw view's embedder."""

    name = "toy-upper"

    def __init__(self):
        self.seen: list[list[str]] = []

    def enrich(self, index, doc_ids):
        self.seen.append(list(doc_ids))
        st = index.store
        if not st.has_vector_view("upper"):
            st.add_vector_view("upper", embedder=st.vector_view("raw").info["embedder"], source={"by": self.name})
        ids = [c for d in doc_ids for c in st.documents[d].chunk_ids]
        st.vector_view("upper").add(ids, index.embed([st.chunks.text(c).upper() for c in ids], view="upper"))

    def describe(self):
        return {"toy": True}


class NextRelator:
    """Relation "next": each chunk points at the following chunk of its document (weight = its length)."""

    name = "toy-next"

    def relate(self, index, doc_ids):
        st = index.store
        if not st.has_relation("next"):
            st.add_relation("next", ordered=True, weighted=True, source={"by": self.name})
        rel = st.relation("next")
        for d in doc_ids:
            ids = st.documents[d].chunk_ids
            for a, b in zip(ids, ids[1:]):
                rel.set(a, [b], weights=[float(len(st.chunks.text(b)))])

    def describe(self):
        return {}


DOCS = [{"doc_id": f"d{i}", "title": f"Doc {i}",
         "text": "\n\n".join(f"Paragraph {j} of document {i} talks about topic {i * 7 + j}." for j in range(4))}
        for i in range(3)]


@pytest.fixture(scope="module")
def toys():
    registry.register("enricher", "toy-upper", summary="test enricher")(lambda **kw: UpperEnricher())
    registry.register("relator", "toy-next", summary="test relator")(lambda **kw: NextRelator())
    return True


def test_builtin_names_are_registered():
    assert {"dense", "bm25", "hybrid", "base", "mm", "trail", "momoka"} <= set(registry.available("retriever"))
    assert {"fixed", "sentence", "paragraph", "recursive", "structure", "llm"} <= set(registry.available("chunker"))
    assert "title" in registry.available("enricher") and "paths" in registry.available("relator")
    assert "llm" in registry.available("reader")
    assert registry.requirements("momoka") == {"enrich": ["title"], "relate": ["paths"]}
    assert registry.requirements("base") == {"enrich": [], "relate": []}
    with pytest.raises(ConfigError, match="available: .*dense"):
        registry.entry("retriever", "no-such")
    with pytest.raises(ConfigError, match="already registered"):
        registry.register("retriever", "dense")(lambda index: None)
    with pytest.raises(ConfigError, match="unknown component kind"):
        registry.available("widget")


def test_toy_enricher_and_relator_add_a_view_and_a_relation(tmp_path, toys):
    emb = HashEmbedder()
    ix = Index.build(DOCS[:2], store=tmp_path / "s", chunker="paragraph", embedder=emb,
                     enrich=["toy-upper"], relate=["toy-next"], progress=False)
    st = ix.store
    assert sorted(st.vector_views) == ["raw", "upper"]
    assert st.relations == ["next"]
    ix.close()

    again = Index.open(tmp_path / "s", embedder=emb, writable=True)
    st = again.store
    # the upper view holds, for every chunk, the embedding of its upper-cased text (computed here)
    ids = list(st.chunks.ids())
    want = emb.embed([st.chunks.text(c).upper() for c in ids])
    np.testing.assert_allclose(st.vector_view("upper").get(ids), want, atol=1e-6)
    # the relation holds each chunk's successor, weighted by its length
    for d in ("d0", "d1"):
        cs = st.documents[d].chunk_ids
        for a, b in zip(cs, cs[1:]):
            assert st.relation("next").get(a).tolist() == [b]
            assert st.relation("next").weights(a).tolist() == [float(len(st.chunks.text(b)))]
        assert st.relation("next").get(cs[-1]).tolist() == []
    pipe = again.corpus.pipeline
    assert [c["name"] for c in pipe["enrich"]] == ["toy-upper"]
    assert [c["name"] for c in pipe["relate"]] == ["toy-next"]

    # adding a document runs the recorded components on it alone (rebuilt from the registry)
    before = emb.texts
    again.add([DOCS[2]])
    comp = again.writer.component("enrich", "toy-upper")
    assert comp.seen == [["d2"]]
    n_new = len(st.documents["d2"].chunk_ids)
    assert emb.texts - before == 2 * n_new  # raw + upper view of the new chunks only
    cs = st.documents["d2"].chunk_ids
    assert st.relation("next").get(cs[0]).tolist() == [cs[1]]
    # a dense search over the new view finds the chunk whose upper-cased text matches
    q = st.chunks.text(cs[2])
    res = again.search(q, k=1, retriever="dense", view="upper")
    assert res[0].chunk_id == cs[2] and res[0].provenance["view"] == "upper"
    again.save()
    again.close()


def test_custom_component_objects_must_be_passed_again(tmp_path):
    emb = HashEmbedder()
    ix = Index.build(DOCS[:1], store=tmp_path / "s", chunker="paragraph", embedder=emb,
                     enrich=[UpperEnricher()], progress=False)
    ix.close()
    again = Index.open(tmp_path / "s", embedder=emb)
    with pytest.raises(ConfigError, match="pass it again"):
        again.add([DOCS[1]])
    again.close()
    ok = Index.open(tmp_path / "s", embedder=emb, components={"toy-upper": UpperEnricher()})
    ok.add([DOCS[1]])
    assert ok.store.vector_view("upper").has(ok.store.documents["d1"].chunk_ids).all()
    ok.close()


def test_retrievers_that_lack_their_artifacts_say_what_to_build(tmp_path):
    ix = Index.build(DOCS, chunker="paragraph", embedder=HashEmbedder(), progress=False)
    with pytest.raises(MissingArtifactError, match="relation/paths .made by --relate paths"):
        ix.search("topic", retriever="trail")
    with pytest.raises(MissingArtifactError, match="vectors/titled .made by --enrich title"):
        ix.search("topic", retriever="mm")
    bm = Index.build(DOCS, chunker="paragraph", embedder=None, progress=False)
    with pytest.raises(StoreError, match="without an embedder"):
        bm.search("topic", retriever="dense")
    assert bm.search("topic 7", retriever="hybrid")[0].provenance["fused"] == ["bm25"]


def test_result_views_by_hand():
    m = [Member(i, "d", 10 * i, 10 * i + 5, "x" * 5) for i in range(4)]
    r = Result("q", (Item((m[0], m[2]), 0.9, 1), Item((m[2],), 0.8, 2), Item((m[1], m[3]), 0.7, 3)), "t")
    assert r.spans() == [[("d", 0, 5), ("d", 20, 25)], [("d", 20, 25)], [("d", 10, 15), ("d", 30, 35)]]
    assert [x.chunk_id for x in r.distinct_chunks()] == [0, 2, 1, 3]
    assert [x.chunk_id for x in r.distinct_chunks(3)] == [0, 2, 1]
    assert r[0].composite and not r[1].composite and r[0].text == "xxxxx\n\nxxxxx"
    assert r[2].n_chars == 10 and r[1].span == ("d", 20, 25)
    assert len(r) == 3 and r[1:] == [r.items[1], r.items[2]]


def test_options_that_json_cannot_hold_make_an_object_component(tmp_path):
    # tried: an option value that is an object (a client, a model): the manifest cannot record it, so the
    # reopened index must ask for the component again rather than rebuild it from a string
    class Client:
        pass

    registry_name = "toy-client"
    if registry_name not in registry.available("enricher"):
        registry.register("enricher", registry_name)(lambda client=None: _ClientEnricher(client))
    ix = Index.build(DOCS[:1], store=tmp_path / "s", chunker="paragraph", embedder=HashEmbedder(),
                     enrich=[(registry_name, {"client": Client()})], progress=False)
    spec = ix.corpus.pipeline["enrich"][0]
    assert spec["object"] is True and spec["params"] == {}
    ix.close()
    with pytest.raises(ConfigError, match="pass it again"):
        Index.open(tmp_path / "s", embedder=HashEmbedder()).add([DOCS[1]])


class _ClientEnricher:
    name = "toy-client"

    def __init__(self, client):
        self.client = client

    def enrich(self, index, doc_ids):
        assert self.client is not None and not isinstance(self.client, str)

    def describe(self):
        return {}


def test_reader_citations_from_markers_and_by_overlap():
    # tried: an answer with [n] markers (cited by the model), one without any (cited by word overlap,
    # hand-computed below), and one whose words occur in no passage (no citation)
    from momoka.methods.standard.reader import LLMReader

    class Fixed:
        model = "fixed"

        def __init__(self, text):
            self.text = text

        def complete(self, messages, **kw):
            return self.text

    m = [Member(0, "d", 0, 31, "The tower was automated in 1986"), Member(1, "d", 40, 63, "Keepers lived in a hut.")]
    res = Result("q", (Item((m[0],), 0.9, 1), Item((m[1],), 0.5, 2)), "t")
    a = LLMReader(Fixed("It was automated in 1986 [1].")).answer("when?", res)
    assert a.cited_by == "model" and [c.number for c in a.citations] == [1]
    # "automated", "1986": both in passage 1 (share 1.0), none in passage 2 (share 0) -> passage 1 only
    a = LLMReader(Fixed("Automated in 1986.")).answer("when?", res)
    assert a.cited_by == "overlap" and [(c.start, c.end) for c in a.citations] == [(0, 31)]
    a = LLMReader(Fixed("Nobody knows.")).answer("when?", res)
    assert a.cited_by == "none" and a.citations == () and len(a.context) == 2


class _Interrupting(UpperEnricher):
    """The toy enricher, interrupted (as by Ctrl-C) when it reaches document ``stop_at``."""

    def __init__(self, stop_at=None):
        super().__init__()
        self.stop_at = stop_at

    def enrich(self, index, doc_ids):
        if self.stop_at in doc_ids:
            raise KeyboardInterrupt
        super().enrich(index, doc_ids)


def test_extend_resumes_after_an_interruption(tmp_path):
    # tried: adding a view to a 6-document store in committed batches of 2, interrupted at the 3rd batch;
    # the reopened store keeps the first 4 documents' rows and lists the 2 left; extending again runs on those only
    docs = [{"doc_id": f"e{i}", "title": "", "text": f"Paragraph about topic {i}.\n\nMore about {i * 3}."}
            for i in range(6)]
    emb = HashEmbedder()
    Index.build(docs, store=tmp_path / "s", chunker="paragraph", embedder=emb, progress=False).close()
    ix = Index.open(tmp_path / "s", embedder=emb, writable=True)
    ix.writer.commit_docs = 2
    with pytest.raises(KeyboardInterrupt):
        ix.extend(enrich=[_Interrupting(stop_at="e4")], commit=True)
    ix.close()
    again = Index.open(tmp_path / "s", embedder=emb, writable=True,
                       components={"toy-upper": _Interrupting()})
    st = again.store
    assert again.store.pipeline.pending("enrich", "toy-upper") == ["e4", "e5"]
    done = [c for d in ("e0", "e1", "e2", "e3") for c in st.documents[d].chunk_ids]
    left = [c for d in ("e4", "e5") for c in st.documents[d].chunk_ids]
    assert st.vector_view("upper").has(done).all() and not st.vector_view("upper").has(left).any()
    again.extend(enrich=[_Interrupting()], commit=True)
    comp = again.writer.component("enrich", "toy-upper")
    assert comp.seen == [["e4", "e5"]] and again.store.pipeline.pending("enrich", "toy-upper") == []
    ids = list(st.chunks.ids())
    want = emb.embed([st.chunks.text(c).upper() for c in ids])
    np.testing.assert_allclose(st.vector_view("upper").get(ids), want, atol=1e-6)
    with pytest.raises(ConfigError, match="already has"):
        again.extend(enrich=[_Interrupting()])
    again.close()


def test_result_fit_keeps_the_prefix_within_budget_by_hand():
    m = [Member(i, "d", 100 * i, 100 * i + n, "x" * n) for i, n in enumerate((40, 30, 50, 10))]
    r = Result("q", tuple(Item((x,), 1.0 - i / 10, i + 1) for i, x in enumerate(m)), "t")
    assert [it.chunk_id for it in r.fit(70)] == [0, 1]        # 40 + 30 = 70; + 50 > 70 ends it
    assert [it.chunk_id for it in r.fit(119)] == [0, 1]       # 120 > 119: the short fourth item is not pulled up
    assert [it.chunk_id for it in r.fit(130)] == [0, 1, 2, 3]
    assert len(r.fit(39, keep_first=False)) == 0 and r.fit(39).stats["budget"] == 39
    assert [it.chunk_id for it in r.fit(39)] == [0]              # the best item is kept even when too long
    with pytest.raises(ConfigError):
        r.fit(0)


def test_search_with_a_budget_fills_it_from_the_full_ranking():
    ix = Index.build(DOCS, chunker="paragraph", embedder=None, progress=False)
    q = "topic 3 topic 7"
    full = ix.search(q, k=len(DOCS) * 4, retriever="bm25")
    for budget in (30, 100, 400):
        got = ix.search(q, retriever="bm25", budget=budget, assemble=False)
        lengths = [it.n_chars for it in full]
        n = len(got)
        assert [it.chunk_id for it in got] == [it.chunk_id for it in full][:n]
        assert n >= 1                                             # never empty for want of room
        assert (n == 1 or sum(lengths[:n]) <= budget) and (n == len(full) or sum(lengths[:n + 1]) > budget)
    assert len(ix.search(q, k=1, retriever="bm25", budget=10_000)) == 1   # k still caps
    # by default the context is assembled from the same ranking (tests/methods/test_assemble.py)
    assembled = full.fit(100, assemble=ix.corpus.assembler())
    assert ix.search(q, retriever="bm25", budget=100).to_dict()["items"] == assembled.to_dict()["items"]
    assert len(ix.search(q, retriever="bm25")) == min(5, len(full))      # neither: 5
    with pytest.raises(ConfigError):
        ix.search(q, retriever="bm25", budget=-1)


#: What each registered retriever lacks on an index built with an embedder and no enricher or relator: the
#: options the error must name (None: it runs). A retriever registered without a row here fails the test.
NEEDS_ON_A_PLAIN_INDEX = {"dense": None, "bm25": None, "hybrid": None, "mm": ["--enrich title"],
                          "trail": ["--relate paths"], "mcindex": ["--enrich keywords", "--enrich summary"],
                          "jerr": ["--relate jerr"], "ets": None}


def test_every_retriever_lacking_its_artifacts_names_what_makes_them(tmp_path):
    assert set(registry.available("retriever", aliases=False)) == set(NEEDS_ON_A_PLAIN_INDEX)
    ix = Index.build(DOCS, chunker="paragraph", embedder=HashEmbedder(), progress=False)
    for name, flags in NEEDS_ON_A_PLAIN_INDEX.items():
        if flags is None:
            assert ix.search("topic", retriever=name, k=2)
            continue
        with pytest.raises(MissingArtifactError) as ei:
            ix.corpus.retriever(name)
        assert all(f in str(ei.value) for f in flags), (name, str(ei.value))
    # options change what is needed: trail over paths given in memory needs no relation, mcindex over BM25 views
    assert registry.missing("trail", ix.store, {"paths": {}}) is None
    assert "bm25/keywords" in registry.missing("mcindex", ix.store, {"backend": "bm25"})


def _artifacts(store) -> set[str]:
    return {f"{kind}/{name}" for kind in registry.ARTIFACT_KINDS for name in store._artifacts[kind]}


@pytest.mark.parametrize("kind,name", [("enrich", n) for n in builtin_components("enricher")]
                         + [("relate", n) for n in builtin_components("relator")])
def test_declared_products_are_what_each_component_writes(kind, name, monkeypatch):
    for var in ("MOMOKA_LLM_BASE_URL", "MOMOKA_LLM_MODEL"):
        monkeypatch.delenv(var, raising=False)
    spec = offline_spec(name)
    entry = registry.entry("enricher" if kind == "enrich" else "relator", name)
    plain = Index.build(DOCS, chunker="paragraph", embedder=HashEmbedder(), progress=False)
    built = Index.build(DOCS, chunker="paragraph", embedder=HashEmbedder(), progress=False, **{kind: [spec]})
    assert _artifacts(built.store) - _artifacts(plain.store) == set(entry.artifacts("produces"))
    # and each of them is made by this component, as the error of a retriever that lacks it will say
    assert all((entry.kind, name) in registry.producers(k) for k in entry.artifacts("produces"))


def test_a_misspelt_option_is_answered_with_the_valid_names():
    # the options below are those each component documents (its registration summary and docstring)
    with pytest.raises(ConfigError) as e:
        registry.create("retriever", "hybrid", None, dense_wieght=0.5)
    msg = str(e.value)
    assert msg.startswith("retriever 'hybrid' has no option 'dense_wieght'; did you mean dense_weight")
    assert "__init__" not in msg and "keyword argument" not in msg
    listed = set(msg.split("Its options: ")[1].split(", "))
    assert {"fusion", "dense_weight", "document_weight", "coverage", "links", "depth", "view"} <= listed
    assert "index" not in listed  # passed by position, not an option
    # options taken by a base class through **options are listed too (max_tokens: the LLM back-end's limit)
    with pytest.raises(ConfigError, match=r"enricher 'keywords' has no option 'nn'; did you mean n\?") as e:
        registry.create("enricher", "keywords", nn=3)
    assert {"n", "diversity", "backend", "max_tokens"} <= set(str(e.value).split("Its options: ")[1].split(", "))
    # no close match: no guess, the list only
    with pytest.raises(ConfigError, match=r"^retriever 'bm25' has no option 'zzz'\. Its options: .*view"):
        registry.create("retriever", "bm25", None, zzz=1)
    from momoka.chunking.by_name import get_chunker

    with pytest.raises(ConfigError, match=r"chunker 'recursive' does not take sise; did you mean size\? \(it takes size, "):
        get_chunker("recursive", sise=50)
