"""Checks of the query and passages every reranker gets (the ONNX ones and the HTTP endpoint alike)."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import EmptyInputError, InputError


def check_query(query: str) -> None:
    """A non-empty ``str``: else InputError, or EmptyInputError when it is blank."""
    if not isinstance(query, str):
        raise InputError(f"query must be a str, got {type(query).__name__}")
    if not query.strip():
        raise EmptyInputError("query is empty")


def check_passages(passages: Sequence[str]) -> list[str]:
    """The passages as a list of ``str`` (a single string is refused: it would be scored letter by letter)."""
    if isinstance(passages, (str, bytes)):
        raise InputError("passages must be a list of strings, not a single string")
    passages = list(passages)
    for i, p in enumerate(passages):
        if not isinstance(p, str):
            raise InputError(f"passage {i} is {type(p).__name__}, not str")
    return passages


def check_query_passages(query: str, passages: Sequence[str]) -> list[str]:
    """:func:`check_query` then :func:`check_passages`."""
    check_query(query)
    return check_passages(passages)
