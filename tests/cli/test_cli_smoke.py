"""The CLI smoke matrix: every command and the README's option combinations on a slice of real data.

A slice of ``dragonball_finance_en`` (two documents, their first questions) is
indexed with every registered chunker (except the LLM chunker, which runs on a
short text with the local model in its own test) together with the Momoka
title enricher and path relator; every registered retriever is then queried on
every store, and every returned span is checked to be an exact substring of
the source document. ``momoka eval`` runs every retriever and the README's
ablation commands; nothing may be written into the working directory unless
``--out`` says so. Uses the real default embedder (skipped when it is not
installed) and the real shared data (skipped when absent).
"""

from __future__ import annotations

import json
import os

import pytest
from momoka.cli import main
from momoka import registry

pytestmark = [pytest.mark.models, pytest.mark.data]

# LLM / causal-LM chunkers run a model over every document: tested on tiny inputs in tests/methods
LM_CHUNKERS = {"llm", "ppl", "msp", "meta", "moc"}
CHUNKERS = [c for c in registry.available("chunker") if c not in LM_CHUNKERS]
RETRIEVERS = registry.available("retriever")
PATHS_FAST = ["-o", "paths.referee=embedding", "-o", "paths.iterations=30"]


@pytest.fixture(scope="module")
def installed():
    from momoka.models import is_installed
    from momoka.models.catalog import DEFAULT_EMBEDDER

    if not is_installed(DEFAULT_EMBEDDER):
        pytest.skip("the default embedder is not installed (momoka models install)")


@pytest.fixture(scope="module")
def data_slice(shared_data, tmp_path_factory, installed):
    """Two documents of dragonball_finance_en as .txt files and as a data set with their questions."""
    src = shared_data / "dragonball_finance_en"
    qs = [json.loads(line) for line in (src / "questions.jsonl").read_text().splitlines()]
    qs = [q for q in qs if q.get("evidence") and len(q.get("doc_ids") or [q["doc_id"]]) == 1]
    keep = list(dict.fromkeys(q["doc_id"] for q in qs))[:2]  # the first two documents with such questions
    qs = [q for q in qs if q["doc_id"] in keep][:6]
    docs = [d for d in map(json.loads, (src / "documents.jsonl").read_text().splitlines()) if d["doc_id"] in keep]
    assert qs, "the slice needs questions with evidence"
    root = tmp_path_factory.mktemp("slice")
    (root / "set").mkdir()
    (root / "set" / "documents.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (root / "set" / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in qs))
    # DragonBall's reference sentences are all needed (its README): the set says so in its metadata.
    (root / "set" / "dataset.json").write_text(json.dumps({"evidence_mode": "all"}))
    (root / "docs").mkdir()
    for d in docs:
        (root / "docs" / f"{d['doc_id']}.txt").write_text(d["text"], encoding="utf-8")
    return {"root": root, "docs": {d["doc_id"]: d["text"] for d in docs}, "questions": qs}


def _run(capsys, *argv):
    rc = main(list(argv))
    cap = capsys.readouterr()
    assert rc == 0, f"momoka {' '.join(argv)} exited {rc}: {cap.err}"
    return cap.out


@pytest.fixture(scope="module")
def stores(data_slice, tmp_path_factory):
    """One store per chunker, each with every enricher and relator the registered retrievers need."""
    from momoka.eval.runner import plan

    need = plan(RETRIEVERS)
    enrich = ",".join(n for n, _ in need["enrich"])
    relate = ",".join(n for n, _ in need["relate"])
    out = {}
    base = tmp_path_factory.mktemp("stores")
    mp = pytest.MonkeyPatch()
    mp.setenv("MOMOKA_LLM_CACHE", str(base / "cache.sqlite"))  # view caches stay in the test's folder
    for ch in CHUNKERS:
        s = base / ch
        size = ["--size", "128"] if ch in ("fixed", "recursive") else []
        rc = main(["index", str(data_slice["root"] / "docs"), "--store", str(s), "--chunker", ch, *size,
                   "--enrich", enrich, "--relate", relate, *PATHS_FAST])
        assert rc == 0
        out[ch] = s
    yield out
    mp.undo()


def _source_text(data_slice, doc_id: str) -> str:
    return data_slice["docs"][doc_id]


@pytest.mark.parametrize("chunker", CHUNKERS)
def test_chunk_command_offsets_are_exact(data_slice, capsys, chunker):
    f = data_slice["root"] / "docs" / f"{next(iter(data_slice['docs']))}.txt"
    out = _run(capsys, "chunk", str(f), "--chunker", chunker, "--json")
    text = f.read_text(encoding="utf-8")
    rows = [json.loads(line) for line in out.splitlines()]
    assert rows and all(text[r["start"]:r["end"]] == r["text"] for r in rows)


@pytest.mark.parametrize("retriever", RETRIEVERS)
@pytest.mark.parametrize("chunker", CHUNKERS)
def test_query_every_retriever_on_every_chunker(stores, data_slice, capsys, chunker, retriever):
    q = data_slice["questions"][0]["question"]
    res = json.loads(_run(capsys, "query", str(stores[chunker]), q, "--retriever", retriever, "-k", "3", "--json"))
    assert res["retriever"] == registry.entry("retriever", retriever).name or res["retriever"] == retriever
    n = len(res["items"])
    if "per_view" in res["stats"]:
        # a union of per-view top-k' lists (mcindex, as the paper): not cut to k by design, but at most
        # k' per view over the default views; the budget (5,000 characters by default) may cut the union
        from momoka.methods.mcindex.retriever import DEFAULT_VIEWS, per_view_k

        assert res["stats"]["per_view"] == per_view_k(3)
        assert 1 <= n <= res["stats"]["returned"] <= per_view_k(3) * len(DEFAULT_VIEWS)
    else:
        assert 1 <= n <= 3
    for it in res["items"]:
        for m in it["members"]:
            # doc ids of files are their stem; every member is an exact span of the source
            assert _source_text(data_slice, m["doc_id"])[m["start"]:m["end"]] == m["text"]


def test_query_text_output_and_doc_filter(stores, data_slice, capsys):
    q = data_slice["questions"][0]
    out = _run(capsys, "query", str(stores["fixed"]), q["question"], "--doc", q["doc_id"])
    assert out.startswith("#1  score") and f"{q['doc_id']} [" in out
    assert all(line.split()[3] == q["doc_id"] for line in out.splitlines() if line.startswith("#"))


def test_eval_every_retriever_and_nothing_written_by_default(data_slice, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = _run(capsys, "eval", "--data", str(data_slice["root"] / "set"), "--retriever", ",".join(RETRIEVERS),
               "--chunker", "fixed", "--size", "128", *PATHS_FAST)
    assert list(tmp_path.iterdir()) == []  # no report unless --out
    rows = {line.split()[0] for line in out.splitlines()[1:] if line.strip()}
    assert set(RETRIEVERS) <= rows


def test_readme_ablation_commands(data_slice, tmp_path, capsys):
    # the README's Table 3 ablation, with the fixed chunker and with the default chunker
    for extra in (["--chunker", "fixed", "--size", "128"], []):
        rep_path = tmp_path / f"r{len(extra)}.json"
        _run(capsys, "eval", "--data", str(data_slice["root"] / "set"), "--retriever", "base,mm,momoka",
             *extra, *PATHS_FAST, "--out", str(rep_path))
        rep = json.loads(rep_path.read_text())
        assert set(rep["retrievers"]) == {"base", "mm", "momoka"}
        n = len(data_slice["questions"])
        for row in rep["retrievers"].values():
            assert row["item"]["n_questions"] == row["chunk"]["n_questions"] == n
        item, chunk = (rep["retrievers"]["base"][v]["means"] for v in ("item", "chunk"))
        # plain chunks: the views agree at every k; at the budget the assembled items may join chunks
        assert {k: v for k, v in item.items() if not k.endswith("c")} == \
            {k: v for k, v in chunk.items() if not k.endswith("c")}
        b = rep["budgets"][0]
        assert [item[f"{m}@{b}c"] for m in ("span_recall", "complete", "chars")] == \
            [chunk[f"{m}@{b}c"] for m in ("span_recall", "complete", "chars")]
        settings = rep["pipeline"]["relate"][0]["settings"]
        assert settings["referee"]["name"] == "embedding" and settings["iterations"] == 30


def test_eval_baselines_store_reuse_and_json(data_slice, tmp_path, capsys):
    st = tmp_path / "st"
    _run(capsys, "eval", "--data", str(data_slice["root"] / "set"), "--retriever", "dense,bm25,hybrid",
         "--store", str(st), "--scope", "document", "--limit", "3")
    # the stored index is reused, and the Momoka components are added to it on demand
    out = _run(capsys, "eval", "--data", str(data_slice["root"] / "set"), "--retriever", "mm", "--store", str(st),
               "--json", "--ks", "1,2")
    rep = json.loads(out)
    assert rep["ks"] == [1, 2] and [c["name"] for c in rep["pipeline"]["enrich"]] == ["title"]


def test_eval_chunking_and_help_lists_names(data_slice, capsys):
    out = _run(capsys, "eval-chunking", "--data", str(data_slice["root"] / "set"), "--chunker", "fixed",
               "--size", "128")
    assert "evidence units inside one chunk" in out
    for cmd, names in (("index", ["recursive", "title", "paths"]), ("query", RETRIEVERS),
                       ("eval", RETRIEVERS), ("ask", ["llm", "local", "evidence"])):
        with pytest.raises(SystemExit):
            main([cmd, "--help"])
        helptext = capsys.readouterr().out
        for n in names:
            assert n in helptext, (cmd, n)


def test_index_adds_to_a_store_and_extends_its_pipeline(data_slice, tmp_path, capsys):
    docs = sorted((data_slice["root"] / "docs").iterdir())
    s = tmp_path / "s"
    _run(capsys, "index", str(docs[0]), "--store", str(s), "--chunker", "paragraph")
    out = _run(capsys, "index", str(docs[1]), "--store", str(s), "--relate", "paths", *PATHS_FAST)
    assert "indexed 1 document(s)" in out and "paths" in out
    res = json.loads(_run(capsys, "query", str(s), data_slice["questions"][0]["question"], "--retriever", "trail",
                          "--json"))
    assert res["items"]
    est = json.loads(_run(capsys, "index", str(docs[0]), "--store", str(tmp_path / "e"), "--relate", "paths",
                          "--estimate", "-o", "paths.referee=llm"))
    assert est["relators"]["paths"]["referee_calls_max"] > 0
    assert not (tmp_path / "e").exists()


def test_cli_errors_are_one_line(data_slice, tmp_path, capsys):
    cases = [
        ["query", str(tmp_path / "missing"), "q"],
        ["eval", "--data", str(data_slice["root"] / "set"), "--retriever", "nope"],
        ["index", str(data_slice["root"] / "docs"), "--store", str(tmp_path / "x"), "--enrich", "nope"],
        ["index", str(data_slice["root"] / "docs"), "--store", str(tmp_path / "y"), "-o", "badoption"],
        ["index", str(data_slice["root"] / "docs"), "--store", str(tmp_path / "z"), "-o", "trail.expand=3"],
    ]
    for argv in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("momoka: error: ") and "\n" not in err, (argv, err)
    # a refused command leaves no half-made store behind
    assert not any((tmp_path / n).exists() for n in ("x", "y", "z"))


@pytest.mark.slow
def test_quickstart_and_ask_with_the_local_model(data_slice, tmp_path, capsys):
    from momoka.models import is_installed
    from momoka.models.catalog import DEFAULT_CAUSAL_LM

    if not is_installed(DEFAULT_CAUSAL_LM):
        pytest.skip("the local causal LM is not installed")
    os.environ.pop("MOMOKA_LLM_BASE_URL", None)
    store = tmp_path / "qs"
    out = _run(capsys, "quickstart", "--store", str(store))
    assert "#1  score" in out
    # it answers the question too: the example's sentence on the automation, quoted (read off the example)
    answer = out.split("answer (offline", 1)[1]
    assert '"The Kessel Point Light was automated in 1986."' in answer.split("next:")[0]
    from momoka.examples import QUICKSTART_DOCUMENT, QUICKSTART_QUESTION
    from momoka.text import Document

    text = Document.from_file(QUICKSTART_DOCUMENT).text
    ans = json.loads(_run(capsys, "ask", str(store), QUICKSTART_QUESTION, "-k", "3", "--json", "--reader", "local",
                          "-o", "local.max_tokens=48"))
    assert ans["context"], ans
    for c in ans["context"] + ans["citations"]:
        assert text[c["start"]:c["end"]] == c["text"]  # every cited or given passage is an exact span
    assert ans["answer"].strip()
    # the quickstart answer cites at least one passage (by its [n] markers, or by word overlap when it has none)
    assert ans["citations"] and ans["cited_by"] in ("model", "overlap")
