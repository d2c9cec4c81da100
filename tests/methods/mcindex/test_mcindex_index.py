"""MC-indexing in a store: views added incrementally, the retriever over them, the LLM back-end, the CLI.

The default embedder (installed) makes the vectors; a counting wrapper records
every text it is asked to embed. The LLM back-end talks to a scripted
OpenAI-compatible server on 127.0.0.1.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from momoka.chunking.headers import with_header

from momoka.errors import ConfigError, StoreError
from momoka import Index
from momoka.methods.sources import load_embedder
from momoka.llm import OpenAIClient
from momoka.llm.testing import Reply, ScriptedServer
from momoka.methods.mcindex import KeywordsEnricher, SummaryEnricher
from momoka.methods.standard.fusion import rrf

LONG = " ".join(f"The reactor core number {i} heats water into steam for the turbine." for i in range(25))
DOC = (f"# Power plant\n\nIntro about energy.\n\n## Reactor\n\n{LONG}\n\n## Cooling\n\n"
       "Cooling towers release heat into the air. Rivers supply water.\n\n## Staff\n\n"
       "Engineers work in three shifts and wear badges.\n\n## References\n\n1. A report.\n")


class Counting:
    """The default embedder, recording every text it embeds."""

    def __init__(self):
        self.inner = load_embedder(None)
        self.seen: list[str] = []
        self.model_id, self.checksum, self.dim = self.inner.model_id, self.inner.checksum, self.inner.dim

    def embed(self, texts, **kw):
        self.seen += list(texts)
        return self.inner.embed(texts, **kw)

    def embed_query(self, texts):
        return self.inner.embed_query(texts) if hasattr(self.inner, "embed_query") else self.inner.embed(texts)


@pytest.fixture()
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("MOMOKA_LLM_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.setenv("MOMOKA_PROGRESS", "0")
    monkeypatch.delenv("MOMOKA_LLM_BASE_URL", raising=False)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "plant.md").write_text(DOC)
    return tmp_path


def test_views_added_to_a_raw_store_do_not_reembed_raw(env):
    # tried: a store built with raw views only, then extend() with keywords and summary
    emb = Counting()
    ix = Index.build([env / "docs"], store=env / "s", chunker="sections", embedder=emb, progress=False)
    raw_texts = [with_header(ix.store.chunks.metadata(c).get("header"), ix.store.chunks.text(c))
                 for c in ix.store.chunks.ids()]  # what the raw views index: header and text
    raw_before = ix.store.vector_view("raw").get(ix.store.chunks.ids()).copy()
    assert sorted(emb.seen) == sorted(raw_texts) and len(raw_texts) == 4  # References dropped
    ix.close()
    emb.seen.clear()
    ix = Index.open(env / "s", embedder=emb, writable=True)
    ix.extend(enrich=["keywords", "summary"])
    ix.save()
    assert not set(emb.seen) & set(raw_texts), "a raw chunk text was embedded again"
    ids = ix.store.chunks.ids()
    assert np.array_equal(ix.store.vector_view("raw").get(ids), raw_before)
    # only the Reactor section is over 200 words: one extractive summary; the others copy their raw vector
    summ = ix.writer.component("enrich", "summary")
    assert summ.stats["copied_from_raw"] == 3 and summ.stats["embedded"] == 1
    short = [i for i, t in enumerate(raw_texts) if len(t.split()) <= 200]
    assert np.array_equal(ix.store.vector_view("summary").get([ids[i] for i in short]), raw_before[short])
    for v in ("keywords", "summary"):
        assert ix.store.vector_view(v).source["backend"].startswith("offline:")
        assert ix.store.bm25_view(v).source["backend"].startswith("offline:")
    ix.close()
    # the views are in the saved store, with the back-end that made them in the manifest
    man = json.loads((env / "s" / "manifest.json").read_text())
    srcs = [a["source"] for a in man["artifacts"] if a["name"] in ("keywords", "summary")] \
        if isinstance(man.get("artifacts"), list) else \
        [a["source"] for a in man["artifacts"].values() if a.get("name") in ("keywords", "summary")]
    assert srcs and all(s["by"] in ("keywords", "summary") and "backend" in s for s in srcs)


def test_retriever_union_rrf_bm25_and_errors(env):
    ix = Index.build([env / "docs"], chunker="sections", enrich=["keywords", "summary"], progress=False)
    q = "how is the water cooled by towers?"
    res = ix.search(q, k=3, retriever="mcindex")
    kp = 2  # round(2 * 3 / 3)
    store = ix.store
    qv = ix.corpus.embed_queries([q])[0]
    per = [store.vector_view(v).search(qv, kp, None) for v in ("raw", "keywords", "summary")]
    want = list(dict.fromkeys(c for r in range(kp) for view in per for c, _ in view[r:r + 1]))
    assert [it.chunk_id for it in res] == want and res.stats["returned"] == len(want)
    assert res.stats["duplicates"] == sum(map(len, per)) - len(want)
    assert res[0].provenance["view"] in ("raw", "keywords", "summary")
    fused = ix.search(q, k=3, retriever="mcindex", fusion="rrf")
    per50 = [store.vector_view(v).search(qv, 50, None) for v in ("raw", "keywords", "summary")]
    assert [it.chunk_id for it in fused] == [c for c, _ in rrf(per50, 3)]
    bm = ix.search("cooling towers", k=3, retriever="mcindex", backend="bm25", views=["raw", "keywords"])
    assert len(bm) >= 1 and bm[0].section[-1] == "Cooling"
    assert len(ix.search(q, k=1, retriever="mcindex", truncate=True)) == 1
    with pytest.raises(ConfigError):
        ix.search(q, retriever="mcindex", backend="sparse")
    with pytest.raises(ConfigError):
        ix.search(q, retriever="mcindex", views=["raw", "raw"])
    plain = Index.build([env / "docs"], chunker="sections", progress=False)
    with pytest.raises(StoreError, match="keywords"):
        plain.search(q, retriever="mcindex")


def _llm_script(body, i):
    prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")  # re-asks: the first prompt
    if "keyword extractor" in prompt:
        name = prompt.split("Section Name: ")[1].split("\n")[0].split(" > ")[-1]
        if name == "Cooling":
            return Reply("Sure! The keywords are: cooling towers, heat")  # no list: re-asked, then a fallback
        if name == "Reactor":
            return Reply('["reactor core", "steam turbine"]')
        text = prompt.split("Beginning of text ")[1].split(" End of text")[0]
        return Reply(json.dumps([text.split(".")[0]]))  # a keyword list grounded in its section, one per section
    return Reply("The reactor heats water into steam that drives a turbine.")


def test_llm_backend_uses_the_paper_prompts_and_records_the_model(env):
    # tried: both views through an OpenAI-compatible scripted server; estimate before the run
    with ScriptedServer(_llm_script) as srv:
        llm = OpenAIClient("scripted-llm", base_url=srv.base_url, api_key="x", cache=str(env / "llm.sqlite"))
        kw = KeywordsEnricher("llm", llm=llm, cache=str(env / "views.sqlite"))
        sm = SummaryEnricher("llm", llm=llm, cache=str(env / "views.sqlite"))
        ix = Index.build([env / "docs"], chunker="sections", enrich=[kw, sm], progress=False)
        bodies = srv.chat_bodies()
        ids = ix.store.chunks.ids()
        # the fallback (Cooling) is not cached: asked again here
        kw_texts = {ix.store.chunks.get(c).section[-1]: t for c, t in zip(ids, kw.view_texts(ix.corpus, ids))}
    first = bodies[0]["messages"][-1]["content"]
    assert "Section Name:" in first and "Do not output anything else" in first or "summarization" in first
    assert kw_texts["Reactor"] == "reactor core, steam turbine"
    # the fallback (no list after the re-asks) is the chunk's own text: its heading and paragraph
    assert kw_texts["Cooling"] == "Cooling\n\nCooling towers release heat into the air. Rivers supply water." \
        and kw.stats["parse_failures"] == 2
    assert sm.stats["llm_calls"] == 1  # one section over 200 words
    assert ix.store.vector_view("keywords").source["backend"] == "llm:scripted-llm"
    est = sm.estimate([None], [[ix.store.chunks.get(c) for c in ids]])
    assert est["llm_calls"] == 1 and est["prompt_tokens"] > len(LONG) // 4
    assert ix.store.documents[ix.corpus.doc_ids[0]].metadata["llm_fallbacks"]["keywords"]["fallbacks"] == [
        list(ix.store.chunks.span(c)[1:]) for c in ids if ix.store.chunks.get(c).section[-1] == "Cooling"]
    n_req = len(bodies)
    # a second build reads every usable view text from the cache; the one fallback (Cooling) is asked again
    with ScriptedServer(_llm_script) as srv2:
        llm2 = OpenAIClient("scripted-llm", base_url=srv2.base_url, api_key="x", cache=False)
        kw2 = KeywordsEnricher("llm", llm=llm2, cache=str(env / "views.sqlite"))
        sm2 = SummaryEnricher("llm", llm=llm2, cache=str(env / "views.sqlite"))
        Index.build([env / "docs"], chunker="sections", enrich=[kw2, sm2], progress=False)
        asked = srv2.chat_bodies()
        assert len(asked) == 3 and n_req >= 4  # the question and its two re-asks (max_reasks=2)
        assert all("Cooling" in b["messages"][0]["content"].split("Section Text:")[0] for b in asked)
    assert kw2.stats["cached"] == 3


def test_max_reasks_sets_how_often_an_unusable_keyword_list_is_asked_again(env):
    # the scripted server answers the Cooling section with prose, never a list: asked 1 + max_reasks times
    for reasks, asked in ((0, 1), (1, 2)):
        with ScriptedServer(_llm_script) as srv:
            llm = OpenAIClient("scripted-llm", base_url=srv.base_url, api_key="x", cache=False)
            kw = KeywordsEnricher("llm", llm=llm, cache=False, max_reasks=reasks)
            ix = Index.build([env / "docs"], chunker="sections", enrich=[kw], progress=False)
            cooling = [b for b in srv.chat_bodies()
                       if "Cooling" in b["messages"][0]["content"].split("Section Text:")[0]]
            assert len(cooling) == asked
            chunks = [ix.store.chunks.get(c) for c in ix.store.chunks.ids()]
            est = kw.estimate([None], [chunks])
            assert est["llm_calls_max"] == est["llm_calls"] * (1 + reasks)
    with pytest.raises(ConfigError, match="keywords: max_reasks"):
        KeywordsEnricher("llm", max_reasks=-1)


def test_cli_adds_views_to_an_existing_store(env):
    # tried: `momoka index DIR --store S --enrich keywords,summary` on a store holding raw views only
    py = [sys.executable, "-m", "momoka"]
    import momoka

    root = Path(momoka.__file__).resolve().parents[1]  # the momoka this test imports (installed or in-tree)
    run = lambda *a: subprocess.run(py + list(a), capture_output=True, text=True, cwd=env,  # noqa: E731
                                    env={**__import__("os").environ, "PYTHONPATH": str(root)})
    r = run("index", "docs", "--store", "S", "--chunker", "sections")
    assert r.returncode == 0, r.stderr
    r = run("index", "docs", "--store", "S", "--enrich", "keywords,summary")
    assert r.returncode == 0, r.stderr
    assert "1 unchanged" in r.stdout and "keywords" in r.stdout  # the document itself is left as it is
    r = run("query", "S", "cooling towers", "--retriever", "mcindex", "-k", "2", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["stats"]["returned"] == len(out["items"]) >= 1
    r = run("query", "S", "x", "--retriever", "mcindex", "-o", "mcindex.fusion=bogus")
    assert r.returncode == 2 and r.stderr.startswith("momoka: error:")
