"""momoka._validate: the shared checks of option values, and some of the options that use them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from momoka._validate import check_choice, check_float, check_int, describe_range
from momoka.errors import ConfigError, InputError


@pytest.mark.parametrize("value, kw, message", [
    (0, {"minimum": 1}, "n must be a positive integer, got 0"),
    (True, {"minimum": 1}, "n must be a positive integer, got True"),
    (2.0, {"minimum": 1}, "n must be a positive integer, got 2.0"),
    ("3", {"minimum": 1}, "n must be a positive integer, got '3'"),
    (None, {"minimum": 0}, "n must be an integer >= 0, got None"),
    (-1, {"minimum": 0}, "n must be an integer >= 0, got -1"),
    (1, {"minimum": 2}, "n must be an integer >= 2, got 1"),
    (64, {"minimum": 0, "maximum": 63}, "n must be an integer in [0, 63], got 64"),
    (99, {"minimum": 100}, "n must be an integer >= 100, got 99"),
])
def test_check_int_refuses(value, kw, message):
    with pytest.raises(ConfigError) as info:
        check_int(value, "n", **kw)
    assert str(info.value) == message


def test_check_int_takes_integers_and_returns_plain_ints():
    assert check_int(1, "n", minimum=1) == 1
    assert check_int(63, "n", minimum=0, maximum=63) == 63
    v = check_int(np.int64(5), "n", minimum=1)
    assert v == 5 and type(v) is int
    assert check_int(-7, "n") == -7  # no bounds: any integer


def test_check_float():
    assert check_float(0, "x", minimum=0) == 0.0
    assert check_float(np.float32(0.5), "x", minimum=0, maximum=1) == 0.5
    assert check_float(-1, "t", minimum=-1, maximum=1, below=True) == -1.0
    for bad, kw, message in [
        (1, {"minimum": -1, "maximum": 1, "below": True}, "t must be a number in [-1, 1), got 1"),
        (0, {"minimum": 0, "above": True, "unit": "seconds"}, "t must be a number of seconds > 0, got 0"),
        (math.nan, {"minimum": 0}, "t must be a number >= 0, got nan"),
        (math.inf, {"minimum": 0}, "t must be a number >= 0, got inf"),
        (False, {}, "t must be a number, got False"),
        ("0.5", {"maximum": 1}, "t must be a number <= 1, got '0.5'"),
    ]:
        with pytest.raises(ConfigError) as info:
            check_float(bad, "t", **kw)
        assert str(info.value) == message


def test_the_error_type_is_the_callers():
    with pytest.raises(InputError, match="^'k' must be a positive integer, got 0$"):
        check_int(0, "'k'", minimum=1, error=InputError)


def test_check_choice():
    assert check_choice("word", "tokenizer", ("word", "char")) == "word"
    with pytest.raises(ConfigError, match=r"^tokenizer must be one of word, char; got 'byte'$"):
        check_choice("byte", "tokenizer", ("word", "char"))


# ------------------------------------------------------------------ options checked with them
def test_retriever_k_takes_a_numpy_integer_as_an_int():
    from momoka.methods.standard.retrievers import check_k

    assert check_k(3) == 3 and type(check_k(np.int64(3))) is int
    with pytest.raises(ConfigError, match=r"k must be an integer in \[1, 2147483647\], got 0"):
        check_k(0)
    assert check_k(2**31 - 1) == 2147483647
    for big in (2**31, 2**63, 2**64):  # past what the native core's products of k hold
        with pytest.raises(ConfigError, match=f"got {big}$"):
            check_k(big)


def test_budgets_are_bounded_like_k():
    from momoka.methods.base import check_budget

    assert check_budget(2**31 - 1) == 2147483647
    with pytest.raises(ConfigError, match="up to 2,147,483,647"):
        check_budget(2**63)


def test_integer_bounds_are_shown_with_every_digit():
    assert describe_range(1, 2**31 - 1, integer=True) == "an integer in [1, 2147483647]"
    assert describe_range(0.5, 1e10) == "a number in [0.5, 1e+10]"


def test_check_text_refuses_lone_surrogates():
    from momoka._validate import check_text

    assert check_text("caf\u00e9 \U0001F600", "query") == "caf\u00e9 \U0001F600"  # a pair is one character
    raw = b"chess \xff king".decode("utf-8", "surrogateescape")  # what argv holds for bytes that are not UTF-8
    with pytest.raises(InputError, match=r"^query is not valid text: character 7 is a lone surrogate \(U\+DCFF"):
        check_text(raw, "query", error=InputError)
    with pytest.raises(ConfigError, match="character 1 is a lone surrogate"):
        check_text("\ud800", "x")


def test_jerr_and_ets_sizes():
    from momoka.methods.ets.beam import beam_search
    from momoka.methods.jerr.components import JerrRelator

    with pytest.raises(ConfigError, match=r"jerr: max_hamming must be an integer in \[0, 63\], got 64"):
        JerrRelator(max_hamming=64)
    with pytest.raises(ConfigError, match="jerr: max_chars must be a positive integer, got 0"):
        JerrRelator(max_chars=0)
    with pytest.raises(ConfigError, match="beam must be a positive integer, got 0"):
        beam_search("q", ["a"], None, None, beam=0)  # checked before the policy is used


def test_referee_threshold_and_edges():
    from momoka.methods.momoka.referees import EmbeddingReferee

    with pytest.raises(ConfigError, match=r"threshold must be a number in \[-1, 1\), got 1"):
        EmbeddingReferee(threshold=1)
    with pytest.raises(ConfigError, match="max_edges must be a positive integer, got True"):
        EmbeddingReferee(max_edges=True)  # a bool was taken as 1 before


def test_cli_llm_limits_name_the_option():
    import argparse

    from momoka.cli.common import apply_llm_arguments

    with pytest.raises(ConfigError, match=r"^--llm-max-failed must be a number in \(0, 1\], got 1.5$"):
        apply_llm_arguments(argparse.Namespace(llm_max_failed=1.5))
    with pytest.raises(ConfigError, match=r"^--llm-timeout must be a number of seconds > 0, got 0.0$"):
        apply_llm_arguments(argparse.Namespace(llm_timeout=0.0))
