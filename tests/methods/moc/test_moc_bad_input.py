"""MoC / Meta-Chunking on bad input: tokenizers without single-token labels, LLM replies that cannot be used.

What is tried, per test: MSP on real ``tokenizers`` tokenizers that lack a
one-token "1" / "2" (split by a Metaspace prefix, or absent and read as the
unknown token); a meta-chunker LLM whose outlines are partly absent from the
window; and the two user-facing outputs (``momoka chunk`` and the
``eval-chunking`` table) saying how many windows fell back.
"""

from __future__ import annotations

import pytest
from momoka.errors import ModelError
from momoka.methods.moc import MetaChunker, MSPChunker

TEXT = ("The harbor opened in 1850. Ships carried grain and timber. Trade grew quickly. "
        "Meanwhile, the town council debated taxes. Councillors argued for months. "
        "In spring, a storm destroyed the pier. Repairs took two years.")


class _TokLM:
    """The tokenizer side of a causal LM (what MSP checks before any scoring), on a real tokenizers.Tokenizer."""

    def __init__(self, tok):
        self.tokenizer = tok

    def encode(self, s):
        return self.tokenizer.encode(s, add_special_tokens=False).ids

    def decode(self, ids):
        return self.tokenizer.decode(list(ids))


def _metaspace_bpe():
    # Llama-2 style: "1" is pre-tokenised to "▁1", and with no "▁1" in the vocabulary it becomes ["▁", "1"]
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {"▁": 0, "1": 1, "2": 2, "a": 3, "b": 4}
    tok = Tokenizer(models.BPE(vocab, [], unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    return tok


def _wordlevel_without_digits():
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({"[UNK]": 0, "the": 1, "harbor": 2}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return tok


def test_msp_refuses_a_metaspace_tokenizer_that_splits_the_digits():
    tok = _metaspace_bpe()
    assert len(tok.encode("1", add_special_tokens=False).ids) == 2  # the premise: two tokens
    with pytest.raises(ModelError, match="single-token"):
        MSPChunker(_TokLM(tok))


def test_msp_refuses_a_tokenizer_that_reads_the_digits_as_unknown():
    # "1" encodes to ONE id, the unknown token's: a length check alone would score P([UNK]) as P("1")
    tok = _wordlevel_without_digits()
    assert tok.encode("1", add_special_tokens=False).ids == [0]
    with pytest.raises(ModelError, match="no token for '1'"):
        MSPChunker(_TokLM(tok))


def _serve(reply, fn):
    from momoka.llm import OpenAIClient
    from momoka.llm.testing import Reply, ScriptedServer

    with ScriptedServer(lambda body, i: Reply(reply)) as srv:
        return fn(OpenAIClient("scripted", base_url=srv.base_url, api_key="x", cache=False))


def test_meta_chunker_keeps_text_when_some_outlines_are_absent():
    # two outlines occur in the window, the one between them is invented: the window is cut where the
    # placed ones start (an unplaced outline's text stays with the chunk before it), nothing falls back,
    # the invented outline is counted, and the text is tiled exactly
    reply = ('["The harbor opened[MASK]grew quickly.", "Quantum chromodynamics[MASK]gluons.", '
             '"Meanwhile, the town[MASK]two years."]')
    ch = MetaChunker(window_chars=4000, max_reasks=0)
    spans = _serve(reply, lambda llm: (setattr(ch, "_llm", llm), ch.chunk_spans_batch([TEXT]))[1])[0]
    cut = TEXT.index("Meanwhile")
    assert spans == [(0, cut - 1), (cut, len(TEXT))]
    assert ch.stats.outlines == 3 and ch.stats.outlines_unplaced == 1
    assert ch.stats.fallback == 0 and ch.stats.llm_windows == 1


def test_chunk_cli_says_how_many_windows_fell_back(tmp_path, monkeypatch, capsys):
    # `momoka chunk --chunker meta` on an endpoint answering prose: every window falls back, so by default it
    # stops with exit 2 (above --llm-max-failed); with the bound at 1 the text is printed whole, and stderr
    # says how many windows fell back and why
    import json

    from momoka.cli import main
    from momoka.llm.testing import Reply, ScriptedServer

    f = tmp_path / "doc.txt"
    f.write_text(TEXT)
    with ScriptedServer(lambda body, i: Reply("I cannot do that.")) as srv:
        monkeypatch.setenv("MOMOKA_LLM_BASE_URL", srv.base_url)
        monkeypatch.setenv("MOMOKA_LLM_MODEL", "scripted")
        monkeypatch.setenv("MOMOKA_LLM_API_KEY", "x")
        monkeypatch.setenv("MOMOKA_LLM_MAX_FAILED", "0.25")  # the default, restored after --llm-max-failed below
        assert main(["chunk", str(f), "--chunker", "meta", "--json"]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.strip().splitlines()[-1].startswith(
            "momoka: error: meta chunker: 1 of 1 windows (100.0 %) were unusable, more than --llm-max-failed 25 %")
        rc = main(["chunk", str(f), "--chunker", "meta", "--json", "--llm-max-failed", "1"])
    out, err = capsys.readouterr()
    assert rc == 0
    spans = [(r["start"], r["end"]) for r in map(json.loads, out.splitlines())]
    assert "".join(TEXT[a:b] for a, b in spans).replace(" ", "") == TEXT.replace(" ", "")
    assert "meta: 1 windows, 1 fell back to whole sentences (1 unparsable replies, 0 with no outline placed" in err


def test_comparison_table_reports_fallbacks():
    from momoka.eval.chunk_compare import format_comparison

    report = {"data": "d", "documents": 1, "chars": 10, "target_chars": 5, "space": "log", "K": 0.8,
              "edge_rule": "reference", "group_chars": 2000, "model": "m",
              "chunkers": {"fixed": {"size": 5, "mean_chars": 5.0, "chunks": 2, "bc": 0.5},
                           "meta": {"size": 5, "mean_chars": 5.0, "chunks": 2, "bc": 0.6,
                                    "stats": {"windows": 7, "fallback": 3, "fallback_parse": 2,
                                              "fallback_unplaced": 1, "outlines": 9, "outlines_unplaced": 4}}}}
    text = format_comparison(report)
    assert "meta: 7 windows, 3 fell back to whole sentences (2 unparsable replies, 1 with no outline placed; " \
           "4 of 9 outlines unplaced)" in text
    assert "fixed:" not in text.split("\n", 1)[1].split("|")[-1]
