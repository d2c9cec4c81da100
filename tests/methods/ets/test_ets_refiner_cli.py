"""The ``ets`` refiner (methods/ets/refiner.py) and ``--refine ets`` in ``momoka ask`` / ``momoka eval``.

A hand-written document with known sentences; the refiner is checked with a
scripted policy and a value whose best evidence set is known by hand, then
with the real local LM as policy (a candidate comes back, early termination
decodes fewer tokens for the same choice), then end to end through the CLI
with the local model (small search sizes so it stays quick).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from momoka.cli import main
from momoka.errors import ConfigError
from momoka import registry
from momoka.methods.base import Item, Member, Result
from momoka.methods.ets.refiner import ETSRefiner

pytestmark = [pytest.mark.models]

DOC = ("Paris is the capital of France. The Seine flows through Paris. Berlin is the capital of Germany. "
       "Madrid is in Spain. Rome has many old churches. The Eiffel Tower stands in Paris. "
       "Vienna lies on the Danube. Lisbon faces the Atlantic.")
QUESTION = "What river flows through the capital of France?"


class CharPolicy:
    """A scripted policy over characters: token = code point % 97 + 1, 0 ends a sentence; log-probs are a fixed
    pseudo-random function of the state."""

    end_id = 0

    def encode(self, text):
        return [ord(c) % 97 + 1 for c in " ".join(text.split())]

    def root(self, question, candidates):
        return ()

    def extend(self, state, ids):
        return state + tuple(ids)

    def logprobs(self, state):
        rng = np.random.default_rng([len(state), *state[-4:]])
        z = rng.normal(size=98)
        return z - np.log(np.exp(z).sum())


def _result(doc_id="d1", text=DOC):
    return Result(QUESTION, (Item((Member(0, doc_id, 0, len(text), text),), 1.0, 1, {"retriever": "dense"}, "Cities"),),
                  "dense")


def test_refiner_returns_the_best_set_with_exact_spans(embedder):
    """Value = (sentences naming Paris) - 0.1 x (sentences): the best set is exactly the three Paris sentences.
    With expansion and beam as large as the candidate set the search is exhaustive, so it must find them; every
    returned item is one sentence whose span reads back from the document, in document order."""
    def value(q, ev):
        return sum("Paris" in e for e in ev) - 0.1 * len(ev)

    ref = registry.create("refiner", "ets", embedder=embedder, policy=CharPolicy(), value=value, n=8, expansion=8,
                          beam=200, max_depth=4)
    out = ref.refine(QUESTION, _result())
    assert out.retriever == "dense+ets"
    assert [it.text for it in out] == ["Paris is the capital of France.", "The Seine flows through Paris.",
                                       "The Eiffel Tower stands in Paris."]
    for it in out:
        assert it.members[0].chunk_id == -1 and DOC[it.start:it.end] == it.text and it.title == "Cities"
    assert [it.start for it in out] == sorted(it.start for it in out)
    assert out.stats["candidates"] == 8 and out.stats["value"] == pytest.approx(2.7)


def test_refiner_bad_options_and_empty_result(embedder):
    """Sizes below one are refused when the refiner is made; an empty result gives an empty refined result that
    says it had no candidates."""
    for bad in ({"n": 0}, {"beam": -1}, {"expansion": 1.5}, {"early_termination": "yes"}, {"value": 3}):
        with pytest.raises(ConfigError):
            registry.create("refiner", "ets", embedder=embedder, **bad)
    out = ETSRefiner(embedder=embedder, policy=CharPolicy(), value=lambda q, e: 0.0).refine(
        QUESTION, Result(QUESTION, (), "dense"))
    assert len(out) == 0 and out.stats["candidates"] == 0


@pytest.mark.slow
def test_local_lm_policy_picks_candidates_and_early_termination_saves_tokens(embedder, lm):
    """The local LM as policy, a cheap value (shorter evidence is better): the chosen sentences are candidates;
    with early termination switched off the same sentences come back after more decoded tokens."""
    ref = ETSRefiner(embedder=embedder, lm=lm, policy="lm", value=lambda q, ev: -sum(map(len, ev)), n=5,
                     expansion=2, beam=1, max_depth=2)
    texts = ["Paris is the capital of France.", "The Seine flows through Paris.", "Berlin is the capital of Germany.",
             "Madrid is in Spain.", "Vienna lies on the Danube."]
    on = ref.search(QUESTION, texts)
    off = ref.search(QUESTION, texts, early_termination=False)
    assert on.path and set(on.path) <= set(range(5))
    assert on.path == off.path and on.scored == off.scored
    assert on.stats.tokens_generated < off.stats.tokens_generated


@pytest.fixture(scope="module")
def tiny_set(tmp_path_factory):
    """Two documents as .txt files and as a data set with one question whose evidence is a sentence."""
    root = tmp_path_factory.mktemp("ets_cli")
    other = "Tokyo is the capital of Japan. Kyoto has many temples. Osaka is known for food."
    (root / "docs").mkdir()
    (root / "docs" / "cities.txt").write_text(DOC)
    (root / "docs" / "japan.txt").write_text(other)
    (root / "set").mkdir()
    s = DOC.index("The Seine")
    e = s + len("The Seine flows through Paris.")
    (root / "set" / "documents.jsonl").write_text(
        json.dumps({"doc_id": "cities", "title": "Cities", "text": DOC}) + "\n" +
        json.dumps({"doc_id": "japan", "title": "Japan", "text": other}) + "\n")
    (root / "set" / "questions.jsonl").write_text(json.dumps(
        {"qid": "q1", "doc_id": "cities", "question": QUESTION, "answers": ["the Seine"], "evidence": [[s, e]]}) + "\n")
    (root / "set" / "dataset.json").write_text(json.dumps({"evidence_mode": "all"}))
    return root


SMALL = ["-o", "ets.policy=lm", "-o", "ets.budget=null", "-o", "ets.n=4", "-o", "ets.expansion=1", "-o", "ets.beam=1",
         "-o", "ets.max_depth=1"]


@pytest.mark.slow
def test_cli_ask_and_eval_with_refine_ets(tiny_set, lm, capsys, monkeypatch):
    """``momoka ask STORE q --refine ets`` with the LM policy and no fill (``budget=null``): the reader's context
    is ETS's sentences, each an exact span of the source; ``momoka eval --retriever dense --refine ets`` scores ``dense+ets`` beside ``dense``."""
    monkeypatch.delenv("MOMOKA_LLM_BASE_URL", raising=False)
    store = tiny_set / "store"
    assert main(["index", str(tiny_set / "docs"), "--store", str(store)]) == 0
    capsys.readouterr()
    assert main(["ask", str(store), QUESTION, "--retriever", "dense", "--refine", "ets", "--json", *SMALL,
                 "--reader", "local", "-o", "local.max_tokens=8"]) == 0
    ans = json.loads(capsys.readouterr().out)
    assert len(ans["context"]) == 1
    c = ans["context"][0]
    src = {p.stem: p.read_text() for p in (tiny_set / "docs").iterdir()}[c["doc_id"]]
    assert src[c["start"]:c["end"]] == c["text"]
    assert c["text"].strip().endswith(".") and c["text"].count(". ") == 0  # one sentence
    out = tiny_set / "report.json"
    assert main(["eval", "--data", str(tiny_set / "set"), "--retriever", "dense", "--refine", "ets", *SMALL,
                 "--out", str(out)]) == 0
    rep = json.loads(out.read_text())
    assert set(rep["retrievers"]) == {"dense", "dense+ets"} and rep["refine"] == "ets"
    row = rep["retrievers"]["dense+ets"]
    assert row["refiner"] == "ets" and row["returned"]["chunks@1"] == 1.0
    assert row["counts"]["candidates"] == 4


def test_cli_refine_errors_are_one_line(tiny_set, capsys):
    """An unknown refiner and a bad refiner option end with one ``momoka: error:`` line and exit 2."""
    cases = [["eval", "--data", str(tiny_set / "set"), "--retriever", "bm25", "--refine", "nope"],
             ["eval", "--data", str(tiny_set / "set"), "--retriever", "bm25", "--refine", "ets", "-o", "ets.beam=0"]]
    for argv in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("momoka: error: ") and "\n" not in err, (argv, err)
