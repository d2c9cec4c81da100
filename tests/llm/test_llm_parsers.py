"""Answer parsers: hand-written cases and round trips."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from momoka.errors import ConfigError, LLMResponseError
from momoka.llm.parsers import BinaryParser, JSONListParser, NumberedListParser, parse_binary, parse_json_list

# --- 0/1 -----------------------------------------------------------------------


@pytest.mark.parametrize("text,value", [
    ("1", 1), ("0", 0), (" 1\n", 1), ("**1**", 1), ("'0'", 0), ("1.", 1), ("Output: 1", 1), ("Answer: 0", 0),
    ("The answer is 1.", 1), ("0 - the new chunk is unrelated", 0), ("```\n1\n```", 1), ("输出：1", 1),
])
def test_binary_accepts(text, value):
    assert parse_binary(text) == value


@pytest.mark.parametrize("text", [
    "", "yes", "maybe", "1/0", "It is 1, not 0", "10", "0.5", "2", "Chunk 1 and chunk 0 are related",
])
def test_binary_rejects(text):
    with pytest.raises(LLMResponseError):
        parse_binary(text)


def test_binary_rejects_non_text():
    # a parser given None (e.g. a failed request) must not invent a verdict
    with pytest.raises(LLMResponseError):
        BinaryParser()(None)  # type: ignore[arg-type]


# --- JSON lists ----------------------------------------------------------------


@pytest.mark.parametrize("text,value", [
    ('["a", "b"]', ["a", "b"]),
    ('```json\n["a", "b"]\n```', ["a", "b"]),
    ('Here are the chunks:\n["a", "b"]\nDone.', ["a", "b"]),
    ('["a", "b",]', ["a", "b"]),
    ('[\u201ca\u201d, \u201cb\u201d]', ["a", "b"]),
    ('["head [MASK] tail", "x [MASK] y"', ["head [MASK] tail", "x [MASK] y"]),
    ('["first chunk", "second chu', ["first chunk", "second chu"]),
])
def test_json_list_accepts_and_repairs(text, value):
    assert parse_json_list(text) == value


@pytest.mark.parametrize("text", [
    "no list here", "[]", '{"a": 1}', "[1, 2]", '["ok", ""]', '["a", null]', "[[", '"just a string"',
])
def test_json_list_rejects(text):
    with pytest.raises(LLMResponseError):
        parse_json_list(text)


def test_json_list_bounds_and_item_type():
    assert JSONListParser(min_items=0)("[]") == []
    with pytest.raises(LLMResponseError):
        JSONListParser(max_items=1)('["a", "b"]')
    assert JSONListParser(item_type=int)("[1, 2]") == [1, 2]
    with pytest.raises(LLMResponseError):  # booleans are not ints here
        JSONListParser(item_type=int)("[true]")
    with pytest.raises(ConfigError):  # impossible bounds
        JSONListParser(min_items=3, max_items=1)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(min_size=1).filter(lambda s: s.strip()), min_size=1, max_size=8),
       st.sampled_from(["{}", "```json\n{}\n```", "Sure! {}", "{}\nHope this helps."]))
def test_json_list_round_trip(items, wrapper):
    assert parse_json_list(wrapper.replace("{}", json.dumps(items, ensure_ascii=False))) == items


# --- keyword lists ---------------------------------------------------------------


@pytest.mark.parametrize("text,value", [
    ("1. alpha\n2. beta gamma\n3. delta", ["alpha", "beta gamma", "delta"]),
    ("Keywords:\n1) alpha\n2) beta", ["alpha", "beta"]),
    ("- alpha\n* beta\n• gamma", ["alpha", "beta", "gamma"]),
    ('["alpha", "beta"]', ["alpha", "beta"]),
    ("[alpha, beta, gamma]", ["alpha", "beta", "gamma"]),
    ("alpha, beta, Alpha, gamma", ["alpha", "beta", "gamma"]),
    ("1. **alpha**\n2. \"beta\"", ["alpha", "beta"]),
    ("solar power", ["solar power"]),
])
def test_numbered_list_accepts(text, value):
    assert NumberedListParser()(text) == value


@pytest.mark.parametrize("text", [
    "",
    "I could not find any keywords in this section because it is mostly a table of numbers.\nSorry about that.",
    "[]",
])
def test_numbered_list_rejects(text):
    with pytest.raises(LLMResponseError):
        NumberedListParser()(text)


def test_numbered_list_limits():
    with pytest.raises(LLMResponseError):  # more items than allowed
        NumberedListParser(max_items=2)("1. a\n2. b\n3. c")
    with pytest.raises(LLMResponseError):  # an item that is a sentence, not a keyword
        NumberedListParser(max_words=3)("1. this is far too long to be a keyword")
    assert NumberedListParser(min_items=3)("1. a\n2. b\n3. c") == ["a", "b", "c"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.from_regex(r"[A-Za-z][A-Za-z0-9 \-]{0,20}[A-Za-z0-9]", fullmatch=True), min_size=1, max_size=10,
                unique_by=lambda s: s.lower()))
def test_numbered_list_round_trip(items):
    text = "\n".join(f"{i + 1}. {w}" for i, w in enumerate(items))
    assert NumberedListParser(max_words=None)(text) == items
