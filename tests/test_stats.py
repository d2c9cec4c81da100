"""momoka.stats.Stats, the one shape of component statistics: its JSON view and merge against hand-written dicts,
and every component statistic keeping the dict it recorded before it took this shape."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from momoka.errors import InputError
from momoka.llm import Accounting, MethodStats
from momoka.methods.base import FallbackCounts
from momoka.methods.ets.beam import SearchStats
from momoka.methods.mcindex.sections import SectionStats
from momoka.methods.moc import MetaChunkStats, PPLChunkStats
from momoka.methods.momoka import LLMChunkStats, MapStats, TitleStats
from momoka.methods.momoka.referees import EmbeddingRefereeStats, LLMRefereeStats, PerplexityRefereeStats
from momoka.stats import Stats, examples, stats_dict


@dataclass
class Sample(Stats):
    derived = ("total",)

    hits: int = 0
    misses: int = 0
    seconds: float = 0.0
    by_len: dict = field(default_factory=dict)
    routed: list = field(default_factory=lambda: [0, 0, 0])
    failures: list = examples(3)

    @property
    def total(self) -> int:
        return self.hits + self.misses


def test_to_dict_fields_in_order_then_derived_keys_as_strings_sorted_tuples_as_lists():
    s = Sample(hits=2, misses=1, seconds=0.5, by_len={10: 1, 2: 4}, routed=[1, 0, 2], failures=[("d1", "bad")])
    d = s.to_dict()
    assert d == {"hits": 2, "misses": 1, "seconds": 0.5, "by_len": {"2": 4, "10": 1}, "routed": [1, 0, 2],
                 "failures": [["d1", "bad"]], "total": 3}
    assert list(d) == ["hits", "misses", "seconds", "by_len", "routed", "failures", "total"]
    assert list(d["by_len"]) == ["2", "10"]  # numeric order of the keys, not string order
    d["routed"][0] = 99
    assert s.routed == [1, 0, 2]  # a copy


def test_merge_adds_numbers_counts_by_key_vectors_and_keeps_examples_up_to_the_limit():
    a = Sample(hits=2, seconds=0.25, by_len={2: 1}, routed=[1, 0, 0], failures=[("a", "x"), ("b", "y")])
    b = Sample(hits=1, misses=4, seconds=0.5, by_len={2: 2, 7: 1}, routed=[0, 3, 1],
               failures=[("c", "z"), ("d", "w")])
    assert a.merge(b) is a
    assert a.to_dict() == {"hits": 3, "misses": 4, "seconds": 0.75, "by_len": {"2": 3, "7": 1},
                           "routed": [1, 3, 1], "failures": [["a", "x"], ["b", "y"], ["c", "z"]], "total": 7}
    assert b.to_dict() == {"hits": 1, "misses": 4, "seconds": 0.5, "by_len": {"2": 2, "7": 1}, "routed": [0, 3, 1],
                           "failures": [["c", "z"], ["d", "w"]], "total": 5}  # unchanged


def test_merge_refuses_another_class_or_a_vector_of_another_length():
    with pytest.raises(InputError, match="cannot merge MapStats into Sample"):
        Sample().merge(MapStats())
    with pytest.raises(InputError, match=r"Sample\.routed: cannot add 2 counts to 3"):
        Sample().merge(Sample(routed=[1, 1]))


def test_example_stops_at_the_limit_and_count_adds_to_a_named_field():
    s = Sample()
    for k in range(5):
        s.example("failures", k)
    assert s.failures == [0, 1, 2]
    with pytest.raises(InputError, match="no example list 'routed'"):
        s.example("routed", 1)
    s.count("hits")
    s.count("seconds", 0.5)
    assert (s.hits, s.seconds) == (1, 0.5)


def test_stats_dict_takes_a_stats_a_mapping_or_none():
    assert stats_dict(None) is None
    plain = {"pairs": 3}
    assert stats_dict(plain) == {"pairs": 3} and stats_dict(plain) is not plain
    assert stats_dict(LLMRefereeStats(pairs=2, ones=1)) == {"pairs": 2, "ones": 1, "zeros": 0, "malformed": 0}


# The dicts these statistics recorded (store manifests, chunk comparisons, results) before they shared the shape,
# written out by hand from the code they replaced: same keys, same order, same values.
SHAPES = [
    (MapStats(documents=2, path_lengths={3: 1, 12: 2}, seconds=1.5),
     {"documents": 2, "chunks": 0, "single_chunk_documents": 0, "native_documents": 0, "native_matrix_entries": 0,
      "long_documents": 0, "referee_requests": 0, "referee_batches": 0, "path_lengths": {"3": 1, "12": 2},
      "seconds": 1.5}),
    (TitleStats(llm=1, failed_llm=1, failures=[("d", "unusable answer ''")]),
     {"llm": 1, "document": 0, "heading": 0, "sentence": 0, "failed_llm": 1,
      "failures": [["d", "unusable answer ''"]]}),
    (FallbackCounts(fallback_parse=1, fallback_unplaced=2),
     {"fallback_parse": 1, "fallback_unplaced": 2, "fallback": 3}),
    (LLMChunkStats(fallback_unplaced=1, chunks=4, fallback_examples=[["d", 0, "no JSON list", "x"]]),
     {"fallback_parse": 0, "fallback_unplaced": 1, "documents": 0, "paragraphs": 0, "llm_paragraphs": 0,
      "short_paragraphs": 0, "long_paragraphs": 0, "edited_items": 0, "chunks": 4,
      "fallback_examples": [["d", 0, "no JSON list", "x"]], "fallback": 1}),
    (MetaChunkStats(fallback_parse=2, windows=3),
     {"fallback_parse": 2, "fallback_unplaced": 0, "documents": 0, "windows": 3, "llm_windows": 0, "outlines": 0,
      "outlines_unplaced": 0, "fuzzy_outlines": 0, "chunks": 0, "routed": [0, 0, 0, 0], "fallback": 2}),
    (SearchStats(tokens_generated=5, seconds_value=0.25),
     {"tokens_generated": 5, "policy_runs": 0, "prefill_tokens": 0, "value_calls": 0, "value_cached": 0,
      "seconds_policy": 0.0, "seconds_root": 0.0, "seconds_value": 0.25, "sentences_decoded": 0}),
    (MethodStats(calls=3, wall_s=0.5),
     {"calls": 3, "requests": 0, "prompt_tokens": 0, "completion_tokens": 0, "cache_hits": 0, "deduplicated": 0,
      "retries": 0, "failures": 0, "reasks": 0, "parse_failures": 0, "wall_s": 0.5}),
    (LLMRefereeStats(pairs=4, ones=2, zeros=2, malformed=1), {"pairs": 4, "ones": 2, "zeros": 2, "malformed": 1}),
    (PerplexityRefereeStats(pairs=2, lm_texts=3), {"pairs": 2, "ones": 0, "lm_texts": 3}),
    (EmbeddingRefereeStats(ones=1, native_docs=2), {"pairs": 0, "ones": 1, "native_docs": 2}),
    (PPLChunkStats(documents=1, tokens=10, tokens_scored=8, cached_segments=1),
     {"documents": 1, "tokens": 10, "tokens_scored": 8, "cached_segments": 1}),
    (SectionStats(documents=1, by_lines=1, sections=4),
     {"documents": 1, "by_parser": 0, "by_markdown_or_html": 0, "by_lines": 1, "by_paragraphs": 0, "sections": 4,
      "dropped_sections": 0}),
]


@pytest.mark.parametrize("stats, expected", SHAPES, ids=[type(s).__name__ for s, _ in SHAPES])
def test_component_statistics_keep_their_recorded_dicts(stats, expected):
    assert isinstance(stats, Stats)
    d = stats.to_dict()
    assert d == expected and list(d) == list(expected)


def test_meta_chunk_stats_merge_routes_by_class_and_fallbacks():
    a = MetaChunkStats(fallback_parse=1, routed=[1, 0, 2, 0])
    a.merge(MetaChunkStats(fallback_unplaced=2, routed=[0, 1, 1, 3]))
    assert (a.routed, a.fallback) == ([1, 1, 3, 3], 3)


def test_accounting_sums_methods_and_hands_out_copies():
    acc = Accounting()
    acc.record("title", calls=2, prompt_tokens=10, wall_s=0.5)
    acc.record("referee", calls=3, prompt_tokens=7)
    acc.record("title", calls=1)
    by = acc.by_method
    assert (by["title"].calls, by["title"].prompt_tokens, by["referee"].calls) == (3, 10, 3)
    by["title"].calls = 100
    assert acc.by_method["title"].calls == 3
    t = acc.total
    assert (t.calls, t.prompt_tokens, t.wall_s) == (6, 17, 0.5)
