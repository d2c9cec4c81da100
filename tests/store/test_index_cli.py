"""The index CLI: momoka index / query / eval / quickstart."""

from __future__ import annotations

import json

import pytest
from momoka.cli import main

DOCS = {
    "birds": "Owls hunt at night.\n\nPenguins cannot fly but swim well.\n\nHummingbirds hover while feeding.",
    "stars": "The sun is a star.\n\nNeutron stars are very dense.\n\nRed giants swell as they age.",
}


@pytest.fixture
def files(tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    for name, text in DOCS.items():
        (d / f"{name}.txt").write_text(text)
    return d


def test_index_query_json(tmp_path, files, capsys):
    store = tmp_path / "s"
    assert main(["index", str(files), "--store", str(store), "--no-dense", "--chunker", "paragraph"]) == 0
    assert "indexed 2 document(s), 6 chunk(s)" in capsys.readouterr().out
    assert main(["query", str(store), "which birds can swim?", "-k", "2", "--json", "--retriever", "bm25"]) == 0
    hits = [it["members"][0] for it in json.loads(capsys.readouterr().out)["items"]]
    assert hits[0]["doc_id"] == "birds"
    assert DOCS["birds"][hits[0]["start"] : hits[0]["end"]] == "Penguins cannot fly but swim well."
    assert main(["query", str(store), "dense stars", "--retriever", "bm25", "--doc", "stars"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("#1") and "stars [" in out and "birds" not in out


def test_index_adds_to_existing_store(tmp_path, files, capsys):
    store = tmp_path / "s"
    main(["index", str(files / "birds.txt"), "--store", str(store), "--no-dense"])
    assert main(["index", str(files / "stars.txt"), "--store", str(store)]) == 0
    assert "2 documents in the store" in capsys.readouterr().out
    # tried: indexing a document that is already in the store: skipped as identical, nothing added
    assert main(["index", str(files / "stars.txt"), "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "indexed 0 document(s)" in out and "1 unchanged" in out and "2 documents in the store" in out


def test_store_merge(tmp_path, files, capsys):
    store = tmp_path / "s"
    for f in ("birds.txt", "stars.txt"):  # two commits: two segments
        assert main(["index", str(files / f), "--store", str(store), "--no-dense", "--chunker", "paragraph"]) == 0
    capsys.readouterr()
    before = [h for h in json.loads(_query(store, capsys))["items"]]
    assert main(["store", "merge", str(store)]) == 0
    assert capsys.readouterr().out.startswith("merged: 2 segment(s) -> 1; 6 chunks in gen-")
    assert [h for h in json.loads(_query(store, capsys))["items"]] == before
    assert main(["store", "verify", str(store)]) == 0 and capsys.readouterr().out.startswith("ok: ")
    assert main(["store", "merge", str(store)]) == 0
    assert capsys.readouterr().out.startswith("nothing to merge: 1 segment(s) -> 1")


def _query(store, capsys) -> str:
    assert main(["query", str(store), "which stars are dense?", "-k", "3", "--json", "--retriever", "bm25"]) == 0
    return capsys.readouterr().out


def test_cli_errors_are_one_line(tmp_path, files, capsys):
    store = tmp_path / "s"
    main(["index", str(files), "--store", str(store), "--no-dense"])
    capsys.readouterr()
    # tried: a store that does not exist, an empty query, a missing input file, a non-store dir
    cases = [
        ["query", str(tmp_path / "nope"), "q"],
        ["query", str(store), "   "],
        ["index", str(tmp_path / "missing.txt"), "--store", str(tmp_path / "t")],
        ["query", str(files), "q"],
        ["query", str(store), "q", "--retriever", "dense"],  # BM25-only store
    ]
    for argv in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("momoka: error:") and "\n" not in err, (argv, err)


def test_eval_bm25_on_a_tiny_set(tmp_path, capsys):
    data = tmp_path / "tiny"
    data.mkdir()
    with open(data / "documents.jsonl", "w") as f:
        f.writelines(json.dumps({"doc_id": name, "title": name, "text": text}) + "\n" for name, text in DOCS.items())
    qs = [("q1", "birds", "Which bird swims?", "Penguins"), ("q2", "stars", "What is very dense?", "Neutron stars"),
          ("q3", "birds", "Who hunts at night?", "Owls")]
    with open(data / "questions.jsonl", "w") as f:
        for qid, doc, q, ans in qs:
            s = DOCS[doc].index(ans)
            f.write(json.dumps({"qid": qid, "doc_id": doc, "question": q, "answers": [ans],
                                "evidence": [[s, s + len(ans)]]}) + "\n")
    out = tmp_path / "rep.json"
    assert main(["eval", "--data", str(data), "--retriever", "bm25", "--chunker", "paragraph", "--out", str(out)]) == 0
    rep = json.loads(out.read_text())
    # hand check: each answer's paragraph is the only one sharing a content word with its question
    # (penguins/swim, dense, hunts/night), so it is ranked first: recall@1 = MRR = 1.
    row = rep["retrievers"]["bm25"]["item"]
    assert row["means"]["recall@1"] == 1.0 and row["means"]["mrr@5"] == 1.0
    assert rep["n_questions"] == 3 and list(rep["retrievers"]) == ["bm25"]
    assert "recall" in capsys.readouterr().out
    # tried: an unknown method
    assert main(["eval", "--data", str(data), "--retriever", "tfidf"]) == 2


def _model_installed() -> bool:
    try:
        from momoka.models.catalog import is_installed

        return is_installed("minilm-l6-v2-int8")
    except Exception:
        return False


@pytest.mark.models
@pytest.mark.skipif(not _model_installed(), reason="default embedder not installed (momoka models install)")
def test_quickstart(tmp_path, capsys):
    assert main(["quickstart", "--store", str(tmp_path / "qs")]) == 0
    out = capsys.readouterr().out
    first = out.split("#1", 1)[1].split("#2", 1)[0]
    assert "automated in 1986" in first  # the answer's section comes first


def test_eval_refuses_a_set_without_evidence(tmp_path, capsys):
    data = tmp_path / "noev"
    data.mkdir()
    (data / "documents.jsonl").write_text(json.dumps({"doc_id": "a", "title": "a", "text": "some text"}) + "\n")
    (data / "questions.jsonl").write_text(json.dumps({"qid": "1", "doc_id": "a", "question": "q?", "answers": ["x"],
                                                      "evidence": []}) + "\n")
    # tried: a data set whose questions have no gold evidence (metrics would be all zero)
    assert main(["eval", "--data", str(data), "--retriever", "bm25"]) == 2
    assert "no question has evidence spans" in capsys.readouterr().err
