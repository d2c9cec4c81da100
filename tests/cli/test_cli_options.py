"""``-o NAME.KEY=VALUE`` for a component the command does not run is an error naming the close match, never
ignored in silence (``momoka query`` and ``momoka ask``, and ``Index.ask``'s ``options``)."""

from __future__ import annotations

import pytest

from momoka import Index
from momoka.cli import main
from momoka.errors import ConfigError

from ..store.conftest import HashEmbedder

TEXT = ("The harbour froze in the winter of 1902, and the ferry stopped for six weeks. The keeper lit the lamp "
        "at dusk and wound the clockwork every four hours.\n\nThe lighthouse was automated in 1986.\n")


@pytest.fixture
def store(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "harbour.txt").write_text(TEXT, encoding="utf-8")
    assert main(["index", str(tmp_path / "docs"), "--store", str(tmp_path / "s"), "--no-dense"]) == 0
    return tmp_path / "s"


@pytest.mark.parametrize("argv, named, close", [
    (["query", "S", "when did the harbour freeze?", "--retriever", "bm25", "-o", "bm52.k1=1.2"], "bm52", "bm25"),
    (["ask", "S", "when did the harbour freeze?", "--retriever", "bm25", "-o", "evidnce.sentences=2"],
     "evidnce", "evidence"),
    (["query", "S", "when did the harbour freeze?", "--retriever", "bm25", "-o", "trail.expand=3"], "trail", None),
])
def test_options_for_a_component_not_run_are_an_error(store, capsys, argv, named, close):
    capsys.readouterr()
    assert main([str(store) if a == "S" else a for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("momoka: error: options for ") and "\n" not in err
    assert f"'{named}'" in err and (close is None or f"did you mean '{close}'?" in err)


def test_options_for_the_components_run_are_taken(store, capsys):
    capsys.readouterr()
    assert main(["ask", str(store), "when did the harbour freeze?", "--retriever", "bm25",
                 "-o", "evidence.sentences=1", "-o", "bm25.view=raw"]) == 0
    out = capsys.readouterr().out
    assert "Evidence: the 1 sentence of" in out and "1902" in out  # one quoted sentence: the one holding the year


def test_index_ask_refuses_options_for_a_component_it_does_not_run(tmp_path):
    ix = Index.build([{"doc_id": "h", "text": TEXT}], store=tmp_path / "s", embedder=HashEmbedder(),
                     chunker="paragraph", progress=False)
    with pytest.raises(ConfigError, match="'hybird' \\(did you mean 'hybrid'\\?\\)"):
        ix.ask("when did the harbour freeze?", options={"hybird": {"coverage": 0}})
    assert ix.ask("when did the harbour freeze?", reader="evidence", options={"evidence": {"sentences": 1}}).citations
    ix.close()
