"""Calibrating chunkers to one mean chunk length (``momoka eval-chunking --metrics``).

What is tried: an LLM chunker (the meta-chunker on a scripted endpoint that never answers in JSON,
so every window falls back and a malformed answer is never cached) through the binary search over
its merge target: the endpoint must be asked once per window, not once per search step, and the
settled spans must be those the chunker gives when built with the chosen target; and a classic
chunker, whose settled spans must be those of a fresh chunker of the chosen size.
"""

from __future__ import annotations

from momoka.eval.chunk_compare import calibrate
from momoka import registry
from momoka.text import Document

TEXT = ("The harbor opened in 1850. Ships carried grain and timber. Trade grew quickly. "
        "Meanwhile, the town council debated taxes. Councillors argued for months. "
        "In spring, a storm destroyed the pier. Repairs took two years. ")
DOCS = [Document.from_text(TEXT * 3, doc_id="a"), Document.from_text(TEXT[80:] * 2, doc_id="b")]


def test_meta_chunker_is_asked_once_per_window_during_calibration():
    from momoka.llm import OpenAIClient
    from momoka.llm.testing import Reply, ScriptedServer
    from momoka.methods.moc import MetaChunker, sentence_spans, sentence_windows

    asked = []
    with ScriptedServer(lambda body, i: (asked.append(i), Reply("No JSON here."))[1]) as srv:
        llm = OpenAIClient("scripted", base_url=srv.base_url, api_key="x", cache=False)
        ch, size, mean, spans = calibrate("meta", DOCS, 150, options={"llm": llm, "window_chars": 200,
                                                                       "max_reasks": 0, "max_failed": 1.0})
        windows = [d.text[w[0][0]:w[-1][1]] for d in DOCS for w in sentence_windows(sentence_spans(d), 200)]
        n_windows, n_distinct = len(windows), len(set(windows))  # the client sends a repeated prompt once
        assert len(asked) == n_distinct
        # the returned chunker serves the settled spans without asking again
        assert [[(c.start, c.end) for c in ch(d)] for d in DOCS] == spans and len(asked) == n_distinct
        direct = MetaChunker(llm, window_chars=200, max_reasks=0, merge_target=size,
                             max_failed=1.0).chunk_spans_batch(DOCS)
    assert spans == direct
    lens = [b - a for s in spans for a, b in s]
    assert abs(mean - sum(lens) / len(lens)) < 1e-9
    assert ch.stats.fallback == n_windows


def test_classic_chunker_settles_on_a_fresh_chunker_of_that_size():
    _, size, _, spans = calibrate("fixed", DOCS, 120)
    fresh = registry.create("chunker", "fixed", size=size)
    assert spans == [[(c.start, c.end) for c in fresh(d)] for d in DOCS]
