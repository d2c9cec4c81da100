"""ETS MCTS annotation: the tree against the plain-Python MCTS reference, the export format, resuming, the CLI.

A small deterministic reader stands in for the LM where the search logic is under
test (its likelihood is a hand-readable function of the evidence); one test runs
the real local reader on a HotpotQA question with a tiny N.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _oracles import mcts as reference
from momoka.cli import main
from momoka.errors import ConfigError, InputError
from momoka.methods.ets import Sentence, is_correct
from momoka.methods.ets.annotate import AnnotationConfig, annotate_dataset, annotate_question, export_paths


TEXT = ("Anna was born in Rome. The weather was cold. Rome is in Italy. Bob likes tea. "
        "Anna moved to Oslo in 1990. Oslo is the capital of Norway. Cats sleep a lot.")


def _sentences():
    from momoka.text import Document

    d = Document(TEXT, doc_id="d")
    return [Sentence("d", s, e, TEXT[s:e], 0.0) for s, e in d.sentences.tolist()]


class ToyReader:
    """Likelihood: 0.1 + 0.2 per key sentence in the evidence - 0.05 per other sentence; answers gold with both keys."""

    name = "toy"
    KEYS = ("Anna moved to Oslo in 1990.", "Oslo is the capital of Norway.")

    def __init__(self):
        self.scored = []

    def _lik(self, ev):
        k = sum(s in self.KEYS for s in ev)
        return max(0.01, 0.1 + 0.2 * k - 0.05 * (len(ev) - k))

    def likelihoods(self, question, answer, evidences):
        self.scored.extend(tuple(e) for e in evidences)
        return [self._lik(list(e)) for e in evidences]

    def answer(self, question, evidence, max_tokens=32):
        return "Norway" if all(k in evidence for k in self.KEYS) else "Italy"


def test_tree_matches_the_plain_mcts_reference():
    # tried: 7 candidates, M = 3, 20 iterations, depth <= 5, w = 1.4; the reference runs the same rules in plain
    # Python with score = the reader likelihood of the path + candidate and reward = 1 if correct else likelihood
    cands = _sentences()
    n = len(cands)
    toy = ToyReader()
    ann = annotate_question("Which country's capital did Anna move to?", ["Norway"], cands, toy)

    def ev(items):
        return [cands[i].text for i in sorted(items)]

    def score(path, u):
        return toy._lik(ev(list(path[1:]) + [u]))

    def reward(path, cand):
        e = ev(list(path[1:]) + [cand])
        return 1.0 if is_correct(toy.answer("q", e), ["Norway"]) else toy._lik(e)

    ref = reference.ReferenceMCTS(n + 1, n, reward, score=score, iterations=20, rollout_len=1, rollout_scope="leaf",
                                  rollout_return="last", backup="mean", c=1.4, expansion="scored", top_m=3,
                                  reward="path", max_depth=5, seed=0).run()
    want = [(nd.path()[1:], nd.visits, nd.value) for nd in ref.nodes[1:] if nd.visits > 0]
    got = [(nd["path"], nd["visits"], nd["value"]) for nd in ann.nodes]
    assert [(p, v) for p, v, _ in got] == [(p, v) for p, v, _ in want]
    assert [x for _, _, x in got] == pytest.approx([x for _, _, x in want])
    # evidence always reaches the reader in document order, and each set is scored once
    assert all(list(e) == sorted(e, key=TEXT.index) for e in toy.scored)
    assert len(toy.scored) == len(set(toy.scored)) == ann.likelihood_calls
    # the search finds the two key sentences: a correct path with reward 1
    best = [nd for nd in ann.nodes if nd["correct"]]
    assert best and all(nd["reward"] == 1.0 for nd in best)
    assert all(set(cands[i].text for i in nd["path"]) >= set(ToyReader.KEYS) for nd in best)


def test_export_format():
    # tried: the export of the toy annotation; spans are exact, labels agree with the reader's answers
    cands = _sentences()
    ann = annotate_question("Which country's capital did Anna move to?", ["Norway"], cands, ToyReader(),
                            AnnotationConfig(iterations=10, max_depth=3))
    recs = export_paths("q1", ann, reader_name="toy", dataset="toyset")
    assert len(recs) == len(ann.nodes) > 0
    for r in recs:
        assert r["qid"] == "q1" and r["label"] in ("correct", "incorrect")
        assert (r["label"] == "correct") == is_correct(r["reader_answer"], ["Norway"])
        assert r["reward"] == (1.0 if r["label"] == "correct" else r["likelihood"])
        assert 1 <= len(r["steps"]) <= 3
        # the policy's own format: each sentence whitespace-normalised and ended by a newline
        assert r["completion"] == "".join(" ".join(s["text"].split()) + "\n" for s in r["steps"])
        assert all(TEXT[s["start"]:s["end"]] == s["text"] for s in r["steps"])
        assert r["steps"][-1]["value"] == r["value"] and all(0 <= s["value"] <= 1 for s in r["steps"])
        assert r["prompt"].startswith("Extract sentences") and "Anna moved to Oslo" in r["prompt"]
        json.dumps(r)


def test_bad_input():
    cands = _sentences()
    with pytest.raises(InputError):  # no gold answer
        annotate_question("q", ["  "], cands, ToyReader())
    with pytest.raises(ConfigError):
        annotate_question("q", ["a"], cands, ToyReader(), AnnotationConfig(top_m=0))
    with pytest.raises(ConfigError):
        AnnotationConfig(correctness="bleu").check()
    assert annotate_question("q", ["a"], [], ToyReader()).nodes == []  # no candidates: no paths


def _toy_set(tmp_path, k=3):
    d = tmp_path / "toyset"
    d.mkdir()
    (d / "documents.jsonl").write_text(json.dumps({"doc_id": "d", "title": "t", "text": TEXT}) + "\n")
    qs = [{"qid": f"q{i}", "doc_id": "d", "question": f"Which country's capital did Anna move to ({i})?",
           "answers": ["Norway"], "evidence": []} for i in range(k)]
    (d / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in qs))
    return d


def test_dataset_export_is_resumable(tmp_path, embedder):
    # tried: 2 questions, then a run cut off inside question q2 (a partial line and a line of an unfinished
    # question), then a rerun over 3 questions: q0 and q1 are skipped, q2's stray lines dropped, q2 done once
    data = _toy_set(tmp_path)
    out = tmp_path / "paths.jsonl"
    cfg = AnnotationConfig(n=5, iterations=6)
    s1 = annotate_dataset(data, out, limit=2, reader=ToyReader(), embedder=embedder, config=cfg, progress=False)
    assert s1["questions"] == 2 and s1["paths"] == s1["correct"] + s1["incorrect"] > 0
    n1 = len(out.read_text().splitlines())
    with open(out, "a") as f:
        f.write(json.dumps({"qid": "q2", "path_index": 0}) + "\n" + '{"qid": "q2", "pa')
    s2 = annotate_dataset(data, out, limit=3, reader=ToyReader(), embedder=embedder, config=cfg, progress=False)
    assert s2["questions"] == 1 and s2["skipped"] == 2
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(recs) == n1 + s2["paths"]
    assert [r["qid"] for r in recs].count("q2") == s2["paths"]
    assert (tmp_path / "paths.jsonl.done").read_text().split() == ["q0", "q1", "q2"]
    s3 = annotate_dataset(data, out, limit=3, reader=ToyReader(), embedder=embedder, config=cfg, progress=False)
    assert s3["questions"] == 0 and s3["skipped"] == 3


def test_cli_bad_input_is_one_line(tmp_path, capsys):
    # tried: a missing data set, n = 0, an unknown reader scheme
    for argv in (["--data", str(tmp_path / "none")], ["--data", str(tmp_path), "--n", "0"],
                 ["--data", str(_toy_set(tmp_path)), "--reader", "ftp://x"]):
        assert main(["ets", "annotate", "--out", str(tmp_path / "o.jsonl"), *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("momoka: error: ")


def test_real_reader_on_a_hotpotqa_question(shared_data, reader, embedder):
    # tried: the local 135M reader, one HotpotQA question, N = 6, M = 2, 4 iterations (CI-sized)
    from momoka.eval.datasets import load_dataset
    from momoka.methods.ets import candidate_sentences

    ds = load_dataset(shared_data / "hotpotqa_dev500_long", limit=1)
    q = ds.questions[0]
    doc = ds.document(q.doc_id).to_document()
    cands = candidate_sentences(q.question, documents=[doc], embedder=embedder, n=6)
    ann = annotate_question(q.question, q.answers, cands, reader, AnnotationConfig(n=6, top_m=2, iterations=4))
    recs = export_paths(q.qid, ann, reader_name=reader.name)
    assert 1 <= len(recs) <= 4
    for r in recs:
        assert all(doc.text[s["start"]:s["end"]] == s["text"] for s in r["steps"])
        assert (r["label"] == "correct") == is_correct(r["reader_answer"], q.answers)
        ev = [cands[s["candidate"]].text for s in sorted(r["steps"], key=lambda s: s["start"])]
        assert r["likelihood"] == pytest.approx(reader.likelihood(q.question, q.answers[0], ev), rel=2e-3)
        assert r["reward"] == (1.0 if r["label"] == "correct" else r["likelihood"])
