"""Momoka-Map in an index store: titles in document metadata, the ``titled`` view, paths in the ``paths``
relation, add() for new documents, a reopened store, and the CLI (``--enrich title --relate paths``)."""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import pytest
from momoka.errors import ConfigError, InputError, MissingArtifactError
from momoka import Index
from momoka.methods.momoka import EmbeddingReferee, PathRelator, TitleEnricher
from momoka.text import Document, make_chunks


class HashEmbedder:
    """A deterministic bag-of-words embedder (content words hashed to 128 dimensions), index-compatible."""

    model_id = "test-hash-128"
    checksum = "0" * 64
    dim = 128
    STOP = {"the", "and", "of", "a", "to", "was", "were", "its", "in", "on", "by"}

    def embed(self, texts):
        out = np.zeros((len(texts), 128), np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().replace(".", " ").replace("\n", " ").split():
                if w not in self.STOP:
                    out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % 128] += 1.0
        n = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(n, 1e-12)


def sentence_chunker(doc):
    return make_chunks(doc, doc.sentences)


DOCS = [
    Document.from_text("Volcano lava flowed. Bakery bread rose. Volcano lava cooled. Bakery bread sold.",
                       doc_id="planted", title="Mixed Notes"),
    Document.from_text("One lonely sentence.", doc_id="single"),
    Document.from_text("First half here. Second half there.", doc_id="pair", title="Halves"),
]

# rollout 1 and no structural prior: a child's mean reward is the referee's verdict on (root, child), so the
# best path is hand-computable (with rollouts covering the whole short document every child would tie)
PATHS = ("paths", {"referee": "embedding", "threshold": 0.5, "alpha": 0, "beta": 0, "rollout": 1})
TITLES = ("title", {"mode": "document"})


def _build(store=None, docs=DOCS):
    # the paper's setting: the raw view holds the chunks alone (base), the titled view T_D + chunk (mm)
    return Index.build(docs, store=store, chunker=sentence_chunker, embedder=HashEmbedder(), enrich=[TITLES],
                       relate=[PATHS], progress=False, headers=False)


def _paths(st, doc_id):
    """The stored path of every chunk of ``doc_id``, as positions within the document (read from the relation)."""
    ids = list(st.documents[doc_id].chunk_ids)
    rel = st.relation("paths")
    return [[ids.index(int(t)) for t in rel.get(c).tolist()] for c in ids]


def _check_store(st):
    """Everything the pipeline wrote, against values computed here."""
    meta = {d: st.documents[d].metadata for d in ("planted", "single", "pair")}
    # titles: the document's own title, else its first sentence (mode "document")
    assert meta["planted"]["momoka_title"] == "Mixed Notes" and meta["planted"]["momoka_title_source"] == "document"
    assert meta["single"]["momoka_title"] == "One lonely sentence."
    assert meta["single"]["momoka_title_source"] == "sentence"
    assert meta["pair"]["momoka_map"]["n_chunks"] == 2
    # hand-computed: one chunk -> no path; two chunks -> each other; planted: volcano 0 <-> 2, bakery 1 <-> 3
    assert _paths(st, "single") == [[]]
    assert _paths(st, "pair") == [[1], [0]]
    assert _paths(st, "planted") == [[2], [3], [0], [1]]
    # the relation holds store chunk ids of the same document
    for d in meta:
        ids = set(st.documents[d].chunk_ids)
        assert all(set(st.relation("paths").get(c).tolist()) <= ids - {c} for c in ids)
    # chunk text is unchanged (offsets exact); the titled view holds embeddings of title + "\n" + chunk,
    # the raw view embeddings of the chunk alone
    emb = HashEmbedder()
    for doc in DOCS:
        ids = list(st.documents[doc.doc_id].chunk_ids)
        texts = [doc.text[st.chunks.get(c).start : st.chunks.get(c).end] for c in ids]
        assert texts == [st.chunks.text(c) for c in ids]
        title = meta[doc.doc_id]["momoka_title"]
        np.testing.assert_allclose(st.vector_view("titled").get(ids), emb.embed([title + "\n" + t for t in texts]),
                                   atol=1e-3)
        np.testing.assert_allclose(st.vector_view("raw").get(ids), emb.embed(texts), atol=1e-3)


def test_paths_and_titles_are_stored(tmp_path):
    ix = _build(tmp_path / "s")
    _check_store(ix.store)
    ix.close()
    # settings recorded in the manifest (read as a file)
    man = json.loads((tmp_path / "s" / "manifest.json").read_text())
    (rel,) = man["pipeline"]["relate"]
    assert rel["name"] == "paths" and rel["params"]["referee"] == "embedding"
    rec = rel["settings"]
    assert rec["method"] == "momoka-map" and rec["iterations"] == 100 and rec["rollout"] == 1
    assert rec["c"] == pytest.approx(2 ** 0.5) and rec["r_max"] == pytest.approx(1.0)  # alpha = beta = 0 here
    assert rec["referee"]["name"] == "embedding" and rec["referee"]["threshold"] == 0.5
    assert rec["referee"]["model"] == "test-hash-128"  # the named referee judged with the index's embedder
    assert rec["stats"]["documents"] == 3 and rec["stats"]["single_chunk_documents"] == 1
    assert rec["stats"]["native_documents"] == 2
    (en,) = man["pipeline"]["enrich"]
    assert en["name"] == "title" and en["settings"]["mode"] == "document" and en["settings"]["view"] == "titled"

    # reopened from disk: the same titles, views and paths
    ix = Index.open(tmp_path / "s", embedder=HashEmbedder())
    _check_store(ix.store)
    ix.close()


def test_title_stats_add_up_over_batches_and_record_no_counts_before_one(tmp_path):
    assert TitleEnricher(mode="document").describe()["stats"] == {}
    ix = Index.build(DOCS, store=tmp_path / "s", chunker=sentence_chunker, embedder=HashEmbedder(), enrich=[TITLES],
                     progress=False)
    ix.add([Document.from_text("Glacier ice melted. Orbit moon photo.", doc_id="new")])
    # planted and pair have their own titles, single and new get their first sentence
    want = {"llm": 0, "document": 2, "heading": 0, "sentence": 2, "failed_llm": 0}
    assert ix.writer.component("enrich", "title").describe()["stats"] == want
    ix.save()
    ix.close()
    (en,) = json.loads((tmp_path / "s" / "manifest.json").read_text())["pipeline"]["enrich"]
    assert en["settings"]["stats"] == want and list(en["settings"]["stats"]) == list(want)


def test_add_computes_paths_for_the_new_document_only(tmp_path):
    _build(tmp_path / "s").close()
    ix = Index.open(tmp_path / "s", embedder=HashEmbedder(), chunker=sentence_chunker)
    st = ix.store
    before = {c: st.relation("paths").get(c).tolist() for c in st.chunks.ids()}
    old_vecs = st.vector_view("titled").get(sorted(before))
    new = Document.from_text("Glacier ice melted. Orbit moon photo. Glacier ice cracked.", doc_id="new")
    assert ix.add([new]) == ["new"]
    # the relator was rebuilt from the manifest and searched the new document alone
    rel = ix.writer.component("relate", "paths")
    assert isinstance(rel, PathRelator)
    assert rel.map.stats.documents == 1 and rel.map.stats.chunks == 3
    assert ix.writer.component("enrich", "title").describe()["stats"] == {"document": 0, "heading": 0, "sentence": 1,
                                                                   "llm": 0, "failed_llm": 0}
    ix.save()
    ix.close()
    ix = Index.open(tmp_path / "s", embedder=HashEmbedder(), chunker=sentence_chunker)
    st = ix.store
    assert {c: st.relation("paths").get(c).tolist() for c in before} == before
    np.testing.assert_array_equal(st.vector_view("titled").get(sorted(before)), old_vecs)
    # glacier 0 <-> 2 by hand; "Orbit moon photo." shares no word with the others: no edge (its path is
    # then left to the visit-count tie-breaks, so it is not asserted). T_D here is the first sentence (the
    # document has no title), which the referee does not get (see the next test).
    assert _paths(st, "new")[::2] == [[2], [0]]
    assert st.documents["new"].metadata["momoka_title"] == "Glacier ice melted."
    ids = list(st.documents["new"].chunk_ids)
    np.testing.assert_allclose(st.vector_view("titled").get(ids),
                               HashEmbedder().embed(["Glacier ice melted.\n" + st.chunks.text(c) for c in ids]),
                               atol=1e-3)
    ix.close()


def test_default_paths_use_the_embedding_referee_on_the_stored_vectors(tmp_path, monkeypatch):
    # relate=["paths"] with no option and no endpoint: the embedding referee with the index's embedder (the
    # recorded model is the test embedder, not the default one, so nothing was embedded by another model),
    # the referee preset, and with rollout 1 and no prior the hand-computed planted paths.
    monkeypatch.delenv("MOMOKA_LLM_BASE_URL", raising=False)
    ix = Index.build(DOCS, store=tmp_path / "s", chunker=sentence_chunker, embedder=HashEmbedder(), progress=False,
                     enrich=[TITLES], relate=[("paths", {"alpha": 0, "beta": 0, "rollout": 1})], headers=False)
    (rel,) = ix.corpus.pipeline["relate"]
    assert "referee" not in rel["params"] and "preset" not in rel["params"]
    rec = rel["settings"]
    assert rec["referee"]["name"] == "embedding" and rec["referee"]["model"] == "test-hash-128"
    assert (rec["preset"], rec["long_docs"], rec["short_docs"], rec["prior_weight"]) == ("referee", "window",
                                                                                          "rollout", 0.5)
    assert rec["stats"]["native_documents"] == 2
    _check_store(ix.store)
    ix.close()


def _old_store(path, settings_preset):
    """A store as a build before the defaults changed left it: the paths relator's recorded options (params)
    name the referee and iterations but no preset, its recorded settings say what ran (``settings_preset``;
    None: a store from before presets existed, whose settings have no preset)."""
    ix = Index.build([DOCS[0]], store=path, chunker=sentence_chunker, embedder=HashEmbedder(), progress=False,
                     relate=[("paths", {"referee": "embedding", "preset": "paper", "iterations": 10})])
    spec = ix.store.pipeline.relate[0]  # the writer's typed spec (ix.corpus.pipeline is a copy)
    assert spec.settings["preset"] == "paper" and spec.settings["long_docs"] is None
    spec.params = {"referee": "embedding", "iterations": 10}
    if settings_preset is None:
        for k in ("preset", "prior_weight", "short_docs"):
            del spec.settings[k]
    else:
        spec.settings["preset"] = settings_preset
    ix.store.mark_dirty()
    ix.save()
    ix.close()


@pytest.mark.parametrize("settings_preset", ["paper", None])
def test_a_reopened_store_adds_documents_with_the_settings_it_recorded(tmp_path, settings_preset):
    # The store ran the paper's procedure (then the default). Reopened after the default became the referee
    # preset, the relator is rebuilt with the recorded settings, so a new document of 14 chunks (more than
    # iterations + 1 = 11) gets the paper's search: no remedy, one-chunk paths picked by the tie-break (13
    # candidates, 10 iterations: every root child visited at most once), and the warning that says so.
    _old_store(tmp_path / "s", settings_preset)
    ix = Index.open(tmp_path / "s", embedder=HashEmbedder(), chunker=sentence_chunker)
    long = Document.from_text(" ".join(f"Line {w} number {i} stays." for i, w in enumerate("abcdefghijklmn")),
                              doc_id="long")
    with pytest.warns(UserWarning, match=r"preset='paper'\): 14 of their 14 roots got a one-chunk path"):
        ix.add([long])
    rel = ix.writer.component("relate", "paths")
    assert (rel.map.preset, rel.map.long_docs, rel.map.prior_weight, rel.map.short_docs) == ("paper", None, None, None)
    rec = ix.store.documents["long"].metadata["momoka_map"]
    assert rec["n_chunks"] == 14 and rec["remedy"] is None and rec["tie_break_roots"] == 14
    assert all(len(p) == 1 for p in _paths(ix.store, "long"))
    ix.close()


def test_a_reopened_store_keeps_its_recorded_referee_and_preset_unless_its_options_name_them(tmp_path):
    from momoka.methods.momoka.components import recorded_options

    # a store whose settings say the referee preset: its window remedy is kept (control of the test above)
    _old_store(tmp_path / "s", "referee")
    ix = Index.open(tmp_path / "s", embedder=HashEmbedder(), chunker=sentence_chunker)
    assert ix.writer.component("relate", "paths").map.preset == "referee"
    ix.close()
    # the referee: a store built when ppl was the offline default recorded no referee option but the
    # referee's name in its settings; options recorded with the relator win over its settings
    settings = {"preset": "paper", "prior_weight": None, "short_docs": None, "long_docs": None,
                "referee": {"name": "ppl", "threshold": 0.1}}
    assert recorded_options(settings) == {"preset": "paper", "prior_weight": None, "short_docs": None,
                                          "long_docs": None, "referee": "ppl"}
    assert recorded_options({"referee": {"name": "MyReferee"}, "long_docs": "scale"}) == {"preset": "paper",
                                                                                            "long_docs": "scale"}
    from momoka import registry

    e = registry.entry("relator", "paths")
    assert e.reopen_options({}, settings)["referee"] == "ppl"
    assert e.reopen_options({"referee": "embedding", "long_docs": "window"}, settings) == {
        **recorded_options(settings), "referee": "embedding", "long_docs": "window"}
    assert e.reopen_options({"iterations": 7}, None) == {"iterations": 7}  # nothing recorded yet: today's defaults


def test_a_custom_relator_must_be_passed_again(tmp_path):
    # a store built with a relator object (here with a custom referee object) cannot add documents without it:
    # the new documents would get no paths
    def relator():
        return PathRelator(referee=EmbeddingReferee(HashEmbedder(), threshold=0.5), alpha=0, beta=0, rollout=1)

    ix = Index.build(DOCS, store=tmp_path / "s", chunker=sentence_chunker, embedder=HashEmbedder(),
                     enrich=[TITLES], relate=[relator()], progress=False)
    # the custom referee object gives the same hand-computed paths as the named one
    assert _paths(ix.store, "planted") == [[2], [3], [0], [1]]
    assert _paths(ix.store, "pair") == [[1], [0]]
    ix.close()
    ix = Index.open(tmp_path / "s", embedder=HashEmbedder(), chunker=sentence_chunker)
    more = Document.from_text("More text here. And more.", doc_id="more")
    with pytest.raises(ConfigError, match="pass it again"):
        ix.add([more])
    assert "more" not in ix  # nothing was added
    ix.close()
    ix = Index.open(tmp_path / "s", embedder=HashEmbedder(), chunker=sentence_chunker,
                    components={"paths": relator()})
    ix.add([more])
    assert [len(ix.store.relation("paths").get(c)) for c in ix.store.documents["more"].chunk_ids] == [1, 1]
    ix.close()


def test_build_refuses_an_index_as_sources():
    ix = _build(docs=DOCS[:1])
    with pytest.raises(InputError):
        Index.build(ix, chunker=sentence_chunker, embedder=HashEmbedder())  # an index is no list of documents
    with pytest.raises(InputError):
        ix.add(ix)


def test_titles_only_store_has_no_paths(tmp_path):
    # the "MM" ablation row: titles stored, no paths relation, the pipeline says so, and the ablation's plan
    # for base and mm builds no relator (so no referee is ever asked)
    from momoka.eval.runner import plan

    ix = Index.build(DOCS, store=tmp_path / "s", chunker=sentence_chunker, embedder=HashEmbedder(),
                     enrich=[TITLES], progress=False)
    st = ix.store
    assert st.documents["pair"].metadata["momoka_title"] == "Halves"
    assert not st.has_relation("paths") and "momoka_map" not in st.documents["pair"].metadata
    assert ix.corpus.pipeline["relate"] == []
    with pytest.raises(MissingArtifactError, match="--relate paths"):
        ix.search("volcano lava", retriever="trail")
    res = ix.search("volcano lava", k=2, retriever="mm")
    assert res[0].doc_id == "planted" and res[0].provenance["view"] == "titled"
    ix.close()
    assert plan(["base", "mm"])["relate"] == [] and plan(["base", "mm", "momoka"])["relate"] == [("paths", {})]


# --------------------------------------------------------------------------- CLI


def _write_docs(tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    (d / "a.md").write_text("# Volcanoes\n\nThe volcano erupted. Lava covered the village.\n\n"
                            "The bakery opened. Bread was sold.\n\nLava cooled into rock near the volcano.\n")
    (d / "b.txt").write_text("Only one sentence lives here.\n")
    return d


@pytest.fixture
def no_llm_env(monkeypatch):
    """The CLI's --llm-url sets the endpoint variables for the process: restore them after the test."""
    for var in ("MOMOKA_LLM_BASE_URL", "MOMOKA_LLM_MODEL"):
        monkeypatch.setenv(var, "x")
        monkeypatch.delenv(var)
    return monkeypatch


def test_cli_estimate_prints_expected_calls(tmp_path, capsys, no_llm_env):
    from momoka.cli import main

    d = _write_docs(tmp_path)
    rc = main(["index", str(d), "--store", str(tmp_path / "s"), "--enrich", "title", "--relate", "paths",
               "-o", "paths.referee=llm", "--llm-url", "http://127.0.0.1:9/v1", "--llm-model", "m", "--estimate",
               "--chunker", "recursive", "--size", "8"])
    assert rc == 0
    est = json.loads(capsys.readouterr().out)
    assert est["documents"] == 2
    paths = est["relators"]["paths"]
    assert paths["referee"] == "llm" and paths["chunks"] == est["chunks"]
    n = est["chunks"] - 1  # b.txt is one chunk: no referee calls for it
    assert est["chunks"] > 3
    assert paths["referee_calls_max"] == n * (n - 1)  # pair memo: every ordered pair at most once
    assert not (tmp_path / "s").exists()  # an estimate builds nothing


def test_cli_bad_input(tmp_path, capsys, no_llm_env):
    from momoka.cli import main

    d = _write_docs(tmp_path)
    # an unknown referee name, an option for a component the command does not run, an unknown relator,
    # a model without an endpoint: one-line error, exit 2
    cases = [(["--relate", "paths", "-o", "paths.referee=oracle"], "unknown referee 'oracle'"),
             (["--relate", "paths", "-o", "title.mode=document"], "-o names title"),
             (["--relate", "nosuch"], "unknown relator 'nosuch'"),
             (["--relate", "paths", "--llm-model", "m"], "--llm-model needs --llm-url")]
    for k, (extra, msg) in enumerate(cases):
        rc = main(["index", str(d), "--store", str(tmp_path / f"s{k}"), *extra])
        err = capsys.readouterr().err
        assert rc == 2 and msg in err and err.count("\n") == 1, (extra, err)
        assert not (tmp_path / f"s{k}" / "manifest.json").exists()
    assert "MOMOKA_LLM_MODEL" not in os.environ


@pytest.mark.models
def test_cli_builds_a_momoka_store(tmp_path, capsys, no_llm_env):
    from momoka.cli import main

    try:
        from momoka.models import Embedder

        Embedder.default()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"default embedder not installed: {exc}")
    d = _write_docs(tmp_path)
    rc = main(["index", str(d), "--store", str(tmp_path / "s"), "--enrich", "title", "--relate", "paths",
               "-o", "paths.referee=embedding", "--chunker", "recursive", "--size", "8"])
    out = capsys.readouterr().out
    assert rc == 0 and "pipeline: title, paths" in out
    ix = Index.open(tmp_path / "s")
    st = ix.store
    docs = st.documents
    assert docs["a"].metadata["momoka_title"] == "Volcanoes"  # the Markdown heading (title=auto, no endpoint)
    assert docs["a"].metadata["momoka_title_source"] == "document"
    assert len(docs["a"].chunk_ids) >= 2
    # every chunk of a has a path inside a (not itself); b's single chunk has none
    a_ids = set(docs["a"].chunk_ids)
    for c in a_ids:
        p = st.relation("paths").get(c).tolist()
        assert 1 <= len(p) <= 5 and set(p) <= a_ids - {c}
    assert [st.relation("paths").get(c).tolist() for c in docs["b"].chunk_ids] == [[]]
    assert st.vector_view("titled").has(sorted(st.chunks.ids())).all()
    settings = ix.corpus.pipeline["relate"][0]["settings"]
    assert settings["referee"]["name"] == "embedding" and settings["stats"]["documents"] == 2
    ix.close()


def test_referee_sees_the_title_unless_told_not_to(tmp_path):
    new = Document.from_text("Glacier ice melted. Orbit moon photo. Glacier ice cracked.", doc_id="new",
                             title="Glacier ice")
    untitled = Document.from_text(new.text, doc_id="new")
    name, opts = PATHS
    for doc, title, want0 in ((new, False, [2]), (new, True, [1]), (untitled, True, [2])):
        # raw vectors of the chunks alone (headers=False): a headed store's raw vectors carry the title already
        ix = Index.build([doc], chunker=sentence_chunker, embedder=HashEmbedder(), enrich=[TITLES],
                         relate=[(name, {**opts, "title": title})], progress=False, headers=False)
        # Without T_D only the two glacier sentences share words (0 <-> 2); with it (eq. 2) every chunk carries
        # "Glacier ice": chunk 1 "Glacier ice\nOrbit moon photo." has cosine 4 / (3 sqrt(5)) = 0.60 > 0.5
        # with chunk 0, the referee accepts it too (alpha = beta = 0 here), and the documented tie-break (lower
        # index) picks it. A first-sentence fallback title is not given to the referee: as without a title.
        assert _paths(ix.store, "new")[0] == want0
        assert ix.writer.component("relate", "paths").describe()["referee_sees_title"] is title
        ix.close()
