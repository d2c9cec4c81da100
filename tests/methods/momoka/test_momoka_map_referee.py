"""Momoka-Map paths follow the referee: planted partners at distance >= 3 under the paper's settings and the
``referee`` preset, each checked against the same search with a constant referee (which ignores the pairs).

The referee is a table: chunk i accepts exactly one partner, 4 positions away (3 in short documents), and
rejects every other chunk. A constant referee answers 1 for every pair, so its paths depend only on the
structural prior; a test that passes with both referees does not test the referee, hence the comparisons.
"""

from __future__ import annotations

import numpy as np
import pytest
from momoka.errors import ConfigError
from momoka.methods.momoka import MomokaMap
from momoka.mcts import MCTS
from momoka.text import Document, make_chunks


def _chunks(n: int, doc_id: str):
    """``n`` one-sentence chunks of one paragraph (so the prior uses sentence distance for both terms)."""
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
    text = " ".join(f"Sentence {words[i % 10]} {i} of {doc_id} ends here." for i in range(n))
    doc = Document.from_text(text, doc_id=doc_id)
    cs = make_chunks(doc, doc.sentences)
    assert len(cs) == n
    return cs


def _partner(i: int, n: int, dist: int) -> int | None:
    j = i + dist if i + dist < n else i - dist
    return j if 0 <= j < n else None


class Planted:
    """Accepts (chunk i, its partner) only."""

    name = "planted"

    def __init__(self, docs, dist):
        self.ones = set()
        for cs in docs:
            for i, c in enumerate(cs):
                j = _partner(i, len(cs), dist)
                if j is not None:
                    self.ones.add((c.text, cs[j].text))

    def __call__(self, pairs):
        return np.array([1.0 if p in self.ones else 0.0 for p in pairs])


class Constant:
    """Accepts every pair: the paths then depend on the structural prior alone."""

    name = "constant"

    def __call__(self, pairs):
        return np.ones(len(pairs))


def _rates(docs, paths, dist):
    """(share of roots whose first path node is the partner, share whose path holds it)."""
    first = held = total = 0
    for cs, ps in zip(docs, paths):
        for i, p in enumerate(ps):
            j = _partner(i, len(cs), dist)
            if j is None:
                continue
            total += 1
            first += bool(p) and p[0] == j
            held += j in p
    return first / total, held / total


def _run(docs, referee, **options):
    mm = MomokaMap(referee=referee, seed=3, **options)
    paths, _ = mm.paths_for_documents(docs)
    return paths


def test_paper_prior_outweighs_a_distant_accepted_chunk_by_hand():
    # Eq. 4 with alpha=3, beta=2, gamma=delta=1 and p = s (one paragraph): a rejected neighbour scores
    # 0 + 3/2 + 2/2 = 2.5, an accepted chunk 3 positions away 1 + 3/4 + 2/4 = 2.25 (both over r_max = 6).
    cs = _chunks(8, "h")
    e = MCTS(len(cs), **MomokaMap(referee=Constant(), preset="paper")._engine_kwargs(cs, None)[0])
    assert e.step_reward(0, 1, 0.0) == pytest.approx(2.5 / 6)
    assert e.step_reward(0, 3, 1.0) == pytest.approx(2.25 / 6)
    # the referee preset: alpha, beta scaled by 0.5 / 5, so the prior is worth at most 0.5; r_max = 1.5
    e = MCTS(len(cs), **MomokaMap(referee=Constant(), preset="referee")._engine_kwargs(cs, None)[0])
    assert e.step_reward(0, 1, 0.0) == pytest.approx((0.3 / 2 + 0.2 / 2) / 1.5)
    assert e.step_reward(0, 7, 1.0) == pytest.approx((1 + 0.3 / 8 + 0.2 / 8) / 1.5)
    assert e.step_reward(0, 7, 1.0) > e.step_reward(0, 1, 0.0)


def test_paper_settings_paths_depend_on_the_referee():
    # Tried: two documents (12 and 20 chunks), partners 4 positions away, the paper's alpha=3, beta=2,
    # 100 iterations, rollout 5. The prior wins most roots, but the planted referee must still pull its
    # partner into clearly more paths than a constant referee does; ignoring the referee fails here.
    docs = [_chunks(12, "a"), _chunks(20, "b")]
    planted = _rates(docs, _run(docs, Planted(docs, 4), preset="paper"), 4)
    constant = _rates(docs, _run(docs, Constant(), preset="paper"), 4)
    assert planted[1] >= constant[1] + 0.15, (planted, constant)
    # ... but rarely as the first node: the paper's prior drowns the referee (the reason for the preset)
    assert planted[0] < 0.2


def test_referee_preset_puts_the_partner_first():
    # Tried: the same documents with preset="referee" (prior worth at most 0.5, short-document rollouts).
    docs = [_chunks(12, "a"), _chunks(20, "b")]
    planted = _rates(docs, _run(docs, Planted(docs, 4), preset="referee"), 4)
    constant = _rates(docs, _run(docs, Constant(), preset="referee"), 4)
    assert planted[0] >= 0.9, planted
    assert constant[0] <= 0.2, constant  # without the referee the nearest chunks win, as before
    # the paper preset at the same documents is far below
    paper = _rates(docs, _run(docs, Planted(docs, 4), preset="paper"), 4)
    assert planted[0] >= paper[0] + 0.4, (planted, paper)


def test_long_document_without_the_window_still_follows_the_referee():
    # Tried: 120 chunks with 100 iterations (without a remedy the tree never grows past depth 1 and the
    # rollout means, random tails included, decide): the referee preset (window remedy) finds most
    # partners; its prior alone without the window, and the paper preset, find few.
    docs = [_chunks(120, "l")]
    planted = _rates(docs, _run(docs, Planted(docs, 4), preset="referee"), 4)
    no_window = _rates(docs, _run(docs, Planted(docs, 4), preset="referee", long_docs=None), 4)
    paper = _rates(docs, _run(docs, Planted(docs, 4), preset="paper"), 4)
    assert planted[0] >= 0.8, planted
    assert no_window[0] <= 0.4 and paper[0] <= 0.3, (no_window, paper)


@pytest.mark.parametrize("n", [4, 5, 6])
def test_short_documents(n):
    # Tried: documents of 4-6 chunks, partners 3 positions away. Under the paper's procedure a rollout of 5
    # steps visits every other chunk, so every root child has the same mean reward (up to rounding) and
    # the first nodes come out as with a constant referee: the lowest index wins the tie. The referee
    # preset caps the rollout at (n - 1) // 3 and finds every partner.
    docs = [_chunks(n, "s")]
    paper_planted = _rates(docs, _run(docs, Planted(docs, 3), preset="paper"), 3)
    paper_constant = _rates(docs, _run(docs, Constant(), preset="paper"), 3)
    assert paper_planted[0] == paper_constant[0] <= 0.5
    assert [p[:1] for p in _run(docs, Planted(docs, 3), preset="paper")[0]] == [[1]] + [[0]] * (n - 1)
    planted = _rates(docs, _run(docs, Planted(docs, 3), preset="referee"), 3)
    assert planted[0] == 1.0
    assert _rates(docs, _run(docs, Constant(), preset="referee"), 3)[0] < 1.0


def test_options_and_record():
    mm = MomokaMap(referee=Constant(), preset="referee")
    assert (mm.prior_weight, mm.short_docs, mm.long_docs) == (0.5, "rollout", "window")
    s = mm.settings()
    assert s["preset"] == "referee" and s["alpha_beta_used"] == pytest.approx([0.3, 0.2])
    assert s["r_max"] == pytest.approx(1.5)
    assert [mm.rollout_for(n) for n in (2, 4, 7, 10, 16, 100)] == [1, 1, 2, 3, 5, 5]
    # explicit options win over the preset; the paper preset leaves everything as given
    mm = MomokaMap(referee=Constant(), preset="referee", prior_weight=2.0, short_docs=None, long_docs=None)
    assert mm.long_docs is None
    assert mm.settings()["alpha_beta_used"] == pytest.approx([1.2, 0.8]) and mm.rollout_for(4) == 5
    s = MomokaMap(referee=Constant(), preset="paper").settings()
    assert s["alpha_beta_used"] == [3.0, 2.0] and s["short_docs"] is None and s["r_max"] == 6.0
    assert s["long_docs"] is None and s["prior_weight"] is None
    # alpha = beta = 0: nothing to rescale
    assert MomokaMap(referee=Constant(), alpha=0, beta=0, prior_weight=0.5)._prior() == (0.0, 0.0)


@pytest.mark.parametrize("bad", [{"preset": "fast"}, {"prior_weight": 0}, {"prior_weight": -1.0},
                                 {"prior_weight": float("nan")}, {"prior_weight": True}, {"short_docs": "drop"}])
def test_bad_options(bad):
    # Tried: an unknown preset, a non-positive / NaN / boolean prior weight, an unknown short-document remedy.
    with pytest.raises(ConfigError):
        MomokaMap(referee=Constant(), **bad)


# --------------------------------------------------------------------------- the default and its warnings


def test_paper_preset_on_a_long_document_warns_with_the_tie_break_count():
    # 120 chunks, 100 iterations: 119 candidates per root, so the 100 iterations expand 100 different root
    # children once each and none gets a child; every best path is one chunk, picked by the tie-break among
    # candidates visited once. The warning counts them (120 of 120 roots) and comes once per builder.
    docs = [_chunks(120, "w"), _chunks(8, "v")]
    mm = MomokaMap(referee=Planted(docs, 4), preset="paper", seed=3)
    with pytest.warns(UserWarning, match=r"1 of the 2 document\(s\) of this search have more than iterations \+ 1 \(101\) chunks .*"
                                         r"preset='paper'\): 120 of their 120 roots got a one-chunk path") as rec:
        paths, records = mm.paths_for_documents(docs)
    assert len([w for w in rec if "tie-break" in str(w.message)]) == 1
    assert all(len(p) == 1 for p in paths[0])
    assert records[0]["tie_break_roots"] == 120 and records[0]["remedy"] is None
    assert "tie_break_roots" not in records[1]  # 8 chunks: the tree grows, no tie-break warning for it
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mm.paths_for_documents(docs[:1])  # shown once per builder
    # the same holds for long_docs=None given explicitly under the default preset
    with pytest.warns(UserWarning, match=r"long_docs=None, preset='referee'\): 120 of their 120 roots"):
        MomokaMap(referee=Planted(docs, 4), long_docs=None, seed=3).paths_for_documents(docs[:1])


def test_the_default_is_the_referee_preset_and_finds_long_document_partners():
    # Without a preset the builder runs the referee preset (window remedy, prior worth 0.5, short rollouts):
    # on the 120-chunk document of the test above no warning, paths deeper than one chunk (a window block
    # offers at most 3 * 32 - 1 = 95 candidates to 100 iterations, so trees grow), and the planted partner
    # first for most roots, where the paper's procedure finds it for at most 30 % (measured above).
    import warnings

    mm = MomokaMap(referee=Constant())
    assert (mm.preset, mm.prior_weight, mm.short_docs, mm.long_docs) == ("referee", 0.5, "rollout", "window")
    docs = [_chunks(120, "l")]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        paths, records = MomokaMap(referee=Planted(docs, 4), seed=3).paths_for_documents(docs)
    assert records[0]["remedy"] == "window" and "tie_break_roots" not in records[0]
    assert sum(len(p) > 1 for p in paths[0]) >= 100
    assert _rates(docs, paths, 4)[0] >= 0.8


def test_offline_default_referee_is_embedding_and_llm_with_an_endpoint(monkeypatch):
    from momoka.methods.momoka import EmbeddingReferee, LLMReferee, default_referee, make_referee

    monkeypatch.delenv("MOMOKA_LLM_BASE_URL", raising=False)
    assert default_referee() == "embedding" and MomokaMap().referee_name == "embedding"
    assert isinstance(make_referee(None, embedder=object()), EmbeddingReferee)
    assert MomokaMap(referee="ppl").referee_name == "ppl"  # named: kept
    monkeypatch.setenv("MOMOKA_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    assert default_referee() == "llm" and MomokaMap().referee_name == "llm"
    assert isinstance(make_referee(None, llm=object()), LLMReferee)
    assert MomokaMap(referee="embedding").referee_name == "embedding"


class SlowLM:
    """A causal-LM stand-in for the perplexity referee that records how many warnings were given before it ran."""

    def __init__(self, caught):
        self.caught, self.warned_before = caught, None

    def perplexity(self, texts):
        if self.warned_before is None:
            self.warned_before = [str(w.message) for w in self.caught]
        return np.full(len(texts), 10.0)

    def conditional_perplexities(self, qs, ds):
        return np.full(len(qs), 5.0)


def test_perplexity_referee_says_its_pairs_and_time_before_it_starts(monkeypatch, capsys):
    # 6 chunks, pair mode: every root asks each of its 5 candidates once (100 iterations over 5 children),
    # so 6 * 5 = 30 pairs, at most 30. At 0.3-2.2 s per pair that is 9 s to 66 s (= 1 min). The warning comes
    # before the LM's first call; the progress line counts the answers out of the 30 expected.
    import warnings

    from momoka.methods.momoka import PPL_SECONDS_PER_PAIR, PerplexityReferee

    assert PPL_SECONDS_PER_PAIR == (0.3, 2.2)
    monkeypatch.setenv("MOMOKA_PROGRESS_INTERVAL", "0")
    docs = [_chunks(6, "p")]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lm = SlowLM(caught)
        paths, records = MomokaMap(referee=PerplexityReferee(lm), progress=True).paths_for_documents(docs)
    (msg,) = lm.warned_before
    assert "will judge about 30 chunk pairs (at most 30) of 1 document(s): about 9 s to 1 min at 0.3-2.2 s" in msg
    assert records[0]["requests"] == 30
    assert "momoka map: referee answers: 30/30 answers (100%)" in capsys.readouterr().err
    # other referees give no such warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        MomokaMap(referee=Constant()).paths_for_documents(docs)


class _FixedEmbedder:
    """Unit vectors at set angles to e0, by text: cos(e0, "at:c") = c."""

    dim = 2

    def __init__(self, model_id):
        self.model_id = model_id

    def embed(self, texts):
        out = []
        for t in texts:
            c = float(t.split(":")[1])
            out.append([c, (1 - c * c) ** 0.5])
        return np.asarray(out, np.float32)


def test_embedding_referee_rescales_e5_cosines():
    # multilingual-e5-small's cosines are rescaled by its floor 0.70: (c - 0.7) / 0.3.
    from momoka.methods.momoka.referees import COSINE_FLOORS, EmbeddingReferee

    assert COSINE_FLOORS["multilingual-e5-small"] == 0.70
    pairs = [("at:1", "at:0.80"), ("at:1", "at:0.90"), ("at:1", "at:0.60")]
    e5 = EmbeddingReferee(_FixedEmbedder("multilingual-e5-small"))
    assert list(e5(pairs)) == [0.0, 1.0, 0.0]  # 0.333, 0.667, -0.333 against 0.5
    soft = EmbeddingReferee(_FixedEmbedder("multilingual-e5-small"), soft=True)
    np.testing.assert_allclose(soft(pairs), [0.1 / 0.3, 0.2 / 0.3, 0.0], atol=1e-6)
    assert e5.config()["cosine_floor"] == 0.70
    # the same cosines from an embedder without a floor (MiniLM): used as they are
    minilm = EmbeddingReferee(_FixedEmbedder("minilm-l6-v2-int8"))
    assert list(minilm(pairs)) == [1.0, 1.0, 1.0]
    assert "cosine_floor" not in minilm.config()
    # the matrix the native search gets applies the same rule
    v = _FixedEmbedder("x").embed(["at:1", "at:0.80", "at:0.90"])
    data, indices, indptr = e5.matrix(v)
    row0 = dict(zip(indices[indptr[0]:indptr[1]], data[indptr[0]:indptr[1]]))
    assert row0 == {2: 1.0}  # 0.80 is not kept, 0.90 is
    data, indices, indptr = minilm.matrix(v)
    assert sorted(indices[indptr[0]:indptr[1]]) == [1, 2]
