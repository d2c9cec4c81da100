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


def _planted_report(metric_by_chunker_doc, cov_by_chunker_question, question_docs):
    chunkers = {}
    for n, per_doc in metric_by_chunker_doc.items():
        chunkers[n] = {"per_document": {d: {"bc": v, "cs_complete": -v} for d, v in per_doc.items()},
                       "per_question": dict(cov_by_chunker_question[n])}
    return {"chunkers": chunkers, "question_docs": question_docs}


def test_metric_correlations_against_scipy():
    import numpy as np
    import pytest
    from scipy.stats import pearsonr, spearmanr

    from momoka.eval.chunk_compare import metric_correlations

    rng = np.random.default_rng(3)
    docs = [f"d{i}" for i in range(8)]
    names = ["a", "b", "c", "e"]
    qdocs = {f"q{i}": [docs[i % 8]] for i in range(24)}
    qdocs["q24"] = ["d0", "d1"]  # a question with evidence in two documents counts for both
    metric = {n: {d: float(rng.normal()) for d in docs} for n in names}
    cov = {n: {q: float(rng.integers(0, 2)) for q in qdocs} for n in names}
    corr = metric_correlations(_planted_report(metric, cov, qdocs), n_resamples=300)
    bc = corr["metrics"]["bc"]
    # across: Spearman over chunkers of (mean metric over documents, mean coverage over questions, each
    # question once per document it belongs to)
    qlist = [(q, d) for q, ds in qdocs.items() for d in ds]
    m = [np.mean([metric[n][d] for d in docs]) for n in names]
    c = [np.mean([cov[n][q] for q, _ in qlist]) for n in names]
    assert bc["across"]["r"] == pytest.approx(spearmanr(m, c).statistic)
    # within: Pearson over (document, chunker) cells, both centred on the document's mean over chunkers
    cells_m, cells_c = [], []
    for d in docs:
        dm = [metric[n][d] for n in names]
        dc = [np.mean([cov[n][q] for q, ds in qdocs.items() if d in ds]) for n in names]
        cells_m += list(np.array(dm) - np.mean(dm))
        cells_c += list(np.array(dc) - np.mean(dc))
    assert bc["within"]["r"] == pytest.approx(pearsonr(cells_m, cells_c).statistic)
    assert corr["metrics"]["cs_complete"]["within"]["r"] == pytest.approx(-bc["within"]["r"])
    for side in ("across", "within"):
        assert bc[side]["low"] <= bc[side]["r"] <= bc[side]["high"]
    assert bc["documents"] == 8 and corr["questions"] == 25


def test_metric_correlations_planted_monotone_and_too_few_chunkers():
    import pytest

    from momoka.errors import ConfigError
    from momoka.eval.chunk_compare import metric_correlations

    docs = ["x", "y", "z"]
    qdocs = {"q1": ["x"], "q2": ["y"], "q3": ["z"], "q4": ["x"]}
    # the better the metric on a document, the better that document's questions: r = 1 both ways, in every resample
    metric = {"a": {d: 0.1 for d in docs}, "b": {d: 0.5 for d in docs}, "c": {d: 0.9 for d in docs}}
    cov = {"a": {q: 0.0 for q in qdocs}, "b": {q: 0.5 for q in qdocs}, "c": {q: 1.0 for q in qdocs}}
    bc = metric_correlations(_planted_report(metric, cov, qdocs), n_resamples=200)["metrics"]["bc"]
    assert bc["across"]["r"] == pytest.approx(1.0) and bc["across"]["low"] == pytest.approx(1.0)
    assert bc["within"]["r"] == pytest.approx(1.0) and bc["within"]["low"] == pytest.approx(1.0)
    with pytest.raises(ConfigError):
        metric_correlations(_planted_report({k: metric[k] for k in "ab"}, cov, qdocs))


def _toy_set(tmp_path):
    from momoka.eval import Dataset, DocRecord

    a = ("The harbor opened in 1850. Ships carried grain and timber to the north. Trade grew quickly after "
         "the railway came. In spring a storm destroyed the pier. Repairs took two years and cost a fortune. ")
    b = ("Bees visit flowers for nectar. A colony can hold fifty thousand workers. The queen lays eggs all "
         "summer. In winter the bees cluster to keep warm. Beekeepers leave them honey to eat. ")
    return Dataset("toy", tmp_path, [DocRecord("a", "Harbor", a * 2), DocRecord("b", "Bees", b * 2)], [])


def _metrics(report):
    return {n: {d: {k: v for k, v in r.items() if k != "seconds"} for d, r in row["per_document"].items()}
            for n, row in report["chunkers"].items()}


def test_metric_cache_resumes_a_stopped_run_and_reads_back_equal_values(tmp_path, monkeypatch):
    """A run stopped at the second document keeps the first one's BC/CS; the rerun computes only the rest
    and gives what an uncached run gives; a third run asks the model nothing; another K is a miss."""
    import pytest

    import momoka.eval.chunk_compare as cc

    try:
        from momoka.models import default_causal_lm

        lm = default_causal_lm()
    except Exception as exc:  # pragma: no cover - depends on the installed model
        pytest.skip(f"default causal LM unavailable: {exc}")
    ds = _toy_set(tmp_path)
    opts = dict(metrics=["bc", "cs"], target_chars=120, group_chars=400, retrieval=False, lm=lm)
    fresh = cc.compare_chunkers(ds, ["sentence"], cache=False, **opts)
    folder = tmp_path / "cache"

    real = cc.quality_of_chunks
    seen = []

    def stopped(text, spans, **kw):
        seen.append(text)
        if len(seen) == 2:
            raise KeyboardInterrupt  # the run is killed on its second document
        return real(text, spans, **kw)

    monkeypatch.setattr(cc, "quality_of_chunks", stopped)
    with pytest.raises(KeyboardInterrupt):
        cc.compare_chunkers(ds, ["sentence"], cache=folder, **opts)
    assert len(list(folder.glob("*.json"))) == 1 and not list(folder.glob(".*.tmp"))

    calls = []
    monkeypatch.setattr(cc, "quality_of_chunks", lambda text, spans, **kw: calls.append(text) or real(text, spans, **kw))
    resumed = cc.compare_chunkers(ds, ["sentence"], cache=folder, **opts)
    assert calls == [ds.documents[1].text]  # only the document the stopped run did not finish
    assert resumed["chunkers"]["sentence"]["cached_documents"] == 1
    assert _metrics(resumed) == _metrics(fresh)
    for key in ("bc", "cs_complete", "cs_sequential"):
        assert resumed["chunkers"]["sentence"][key] == pytest.approx(fresh["chunkers"]["sentence"][key])

    calls.clear()
    again = cc.compare_chunkers(ds, ["sentence"], cache=folder, **opts)
    assert calls == [] and again["chunkers"]["sentence"]["cached_documents"] == 2
    assert again["chunkers"]["sentence"]["metric_seconds"] == 0.0
    # a damaged file is computed again, not trusted
    victim = next(folder.glob("*.json"))
    victim.write_text("{not json")
    cc.compare_chunkers(ds, ["sentence"], cache=folder, **opts)
    assert len(calls) == 1
    calls.clear()
    cc.compare_chunkers(ds, ["sentence"], cache=folder, **{**opts, "K": 0.5})
    assert len(calls) == 2  # another CS threshold: computed afresh


def test_metric_cache_that_cannot_be_written_warns_once_and_the_run_goes_on(tmp_path):
    import warnings

    import pytest

    from momoka.eval.chunk_compare import MetricCache

    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = MetricCache(blocker / "sub")  # its folder cannot be made: a file is in the way
    with pytest.warns(UserWarning, match="not kept"):
        cache.put("k1", {"bc": 1.0})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cache.put("k2", {"bc": 2.0})  # no second warning
    assert cache.failed and cache.writes == 0 and cache.get("k1") is None
    ok = MetricCache(tmp_path / "c")
    ok.put("k", {"bc": float("nan"), "windows": 2})
    got = ok.get("k")
    assert got["windows"] == 2 and got["bc"] != got["bc"]  # NaN survives the round trip
