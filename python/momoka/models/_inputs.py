"""Checks of the texts a model gets: the query and passages of every reranker (the ONNX ones and the HTTP
endpoint alike) and the texts of the embedder."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import EmptyInputError, InputError


def check_query(query: str) -> None:
    """A non-empty ``str``: else InputError, or EmptyInputError when it is blank."""
    if not isinstance(query, str):
        raise InputError(f"query must be a str, got {type(query).__name__}")
    if not query.strip():
        raise EmptyInputError("query is empty")


def check_texts(texts: Sequence[str], what: str = "passages", item: str = "passage") -> list[str]:
    """The texts as a list of ``str``: a single string is refused (it would be read letter by letter), and so is
    an item that is not a ``str``; ``what`` and ``item`` name them in the message."""
    if isinstance(texts, (str, bytes)):
        raise InputError(f"{what} must be a list of strings, not a single string; wrap a single text in a list")
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise InputError(f"{item} {i} is {type(t).__name__}, not str")
    return texts


def check_passages(passages: Sequence[str]) -> list[str]:
    """The passages as a list of ``str`` (:func:`check_texts`)."""
    return check_texts(passages)


def check_query_passages(query: str, passages: Sequence[str]) -> list[str]:
    """:func:`check_query` then :func:`check_passages`."""
    check_query(query)
    return check_passages(passages)
