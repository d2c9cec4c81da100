"""``momoka eval --retriever base,mm,momoka`` on a tiny data set (real default embedder), and its bad input."""

from __future__ import annotations

import json

import pytest
from momoka.cli import main

FILLER = [
    "Bread dough rises when yeast ferments the sugars in warm kitchens.",
    "Tides follow the pull of the moon on the oceans of the earth.",
    "A violin has four strings and is played with a bow in orchestras.",
    "Glaciers carve valleys slowly as the ice moves downhill over centuries.",
    "Chess players protect the king and promote pawns on the last rank.",
    "Volcanic islands form where magma rises through the ocean floor.",
    "Comets grow bright tails of gas when they pass near the sun.",
]
ANCHOR = "The Zorblax Corporation was founded by the engineer Mira Quell to build water pumps."
PARTNER = "The Zorblax Corporation moved its headquarters to the harbour city of Vantor in 1988."


@pytest.fixture(scope="module")
def tiny_set(tmp_path_factory):
    from momoka.models import is_installed
    from momoka.models.catalog import DEFAULT_EMBEDDER

    if not is_installed(DEFAULT_EMBEDDER):
        pytest.skip("the default embedder is not installed (momoka models install)")
    d = tmp_path_factory.mktemp("tinyset")
    text = "\n\n".join([ANCHOR, *FILLER, PARTNER])
    other = "\n\n".join(FILLER[::-1])
    docs = [{"doc_id": "z", "title": "Zorblax Corporation", "text": text},
            {"doc_id": "o", "title": "Assorted facts", "text": other}]
    s = text.index("Vantor")
    qs = [{"qid": "q1", "doc_id": "z", "question": "Where is the Zorblax Corporation headquarters?",
           "answers": ["Vantor"], "evidence": [[s, s + len("Vantor")]]},
          {"qid": "q2", "doc_id": "o", "question": "What do glaciers carve?", "answers": ["valleys"],
           "evidence": [[other.index("valleys"), other.index("valleys") + 7]]}]
    (d / "documents.jsonl").write_text("".join(json.dumps(x) + "\n" for x in docs))
    (d / "questions.jsonl").write_text("".join(json.dumps(x) + "\n" for x in qs))
    return d


def test_eval_base_mm_momoka(tiny_set, tmp_path, capsys):
    out = tmp_path / "r.json"
    rc = main(["eval", "--data", str(tiny_set), "--retriever", "base,mm,momoka", "--chunker", "paragraph",
               "--out", str(out), "-o", "paths.iterations=50", "-o", "paths.rollout=3",
               "-o", "paths.referee=embedding"])
    assert rc == 0
    printed = capsys.readouterr().out
    rows = {tuple(line.split()[:2]) for line in printed.splitlines()[2:]}  # the table: retriever, view
    assert {("momoka", "item"), ("momoka", "chunk")} <= rows
    rep = json.loads(out.read_text())
    assert set(rep["retrievers"]) == {"base", "mm", "momoka"}
    assert rep["retrievers"]["momoka"]["retriever"] == "trail"
    (rel,) = rep["pipeline"]["relate"]
    how = rel["settings"]
    assert rel["name"] == "paths" and how["method"] == "momoka-map"
    assert (how["iterations"], how["rollout"]) == (50, 3)
    assert how["referee"]["name"] == "embedding"
    assert [e["name"] for e in rep["pipeline"]["enrich"]] == ["title"]
    for v in rep["retrievers"].values():
        for view in ("item", "chunk"):
            assert set(v[view]["sums"]) >= {"recall", "precision", "mrr", "f1", "span_recall"}
            assert v[view]["n_questions"] == 2
    # plain chunks: item and distinct-chunk views are the same list at every k; at the budget the assembled
    # context may join chunks into one item, over the same characters
    b = rep["budgets"][0]
    for name in ("base", "mm"):
        item, chunk = (rep["retrievers"][name][v]["means"] for v in ("item", "chunk"))
        assert {k: v for k, v in item.items() if not k.endswith("c")} == \
            {k: v for k, v in chunk.items() if not k.endswith("c")}
        assert [item[f"{m}@{b}c"] for m in ("span_recall", "complete", "chars")] == \
            [chunk[f"{m}@{b}c"] for m in ("span_recall", "complete", "chars")]
    assert rep["assemble"]["on"] is True
    m = rep["retrievers"]["momoka"]["counts"]
    assert m["composites"] > 0 and m["truncated"] <= m["composites"] <= m["candidates"]


def test_eval_bad_input(tiny_set, tmp_path, capsys):
    # an unknown retriever name: refused before any work
    assert main(["eval", "--data", str(tiny_set), "--retriever", "base,nosuch"]) == 2
    assert "unknown retriever 'nosuch'" in capsys.readouterr().err
    # an option that is not NAME.KEY=VALUE, and cut-offs that are not positive
    assert main(["eval", "--data", str(tiny_set), "--retriever", "momoka", "-o", "paths.referee"]) == 2
    assert "NAME.KEY=VALUE" in capsys.readouterr().err
    assert main(["eval", "--data", str(tiny_set), "--retriever", "momoka", "--ks", "0,3"]) == 2
    assert "--ks takes positive integers" in capsys.readouterr().err
    # a set whose questions have no evidence spans
    d = tmp_path / "noev"
    d.mkdir()
    (d / "documents.jsonl").write_text(json.dumps({"doc_id": "a", "title": "A", "text": "Some text here."}) + "\n")
    (d / "questions.jsonl").write_text(json.dumps({"qid": "1", "doc_id": "a", "question": "what?",
                                                   "answers": ["x"], "evidence": []}) + "\n")
    assert main(["eval", "--data", str(d), "--retriever", "momoka", "--out", str(tmp_path / "x.json")]) == 2
    assert "no question has evidence" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()
