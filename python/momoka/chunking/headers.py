"""Contextual headers: what a chunk is about, from its document's structure, indexed with its text.

A chunk of about 100 tokens cut from a long document often does not name what it is about: the cast
list of a film's page, the second half of a section whose title came before it. The default index
embeds and BM25-indexes each chunk as its *header*, a newline and its text (as Docling's
``contextualize`` does for embeddings); search results still return the chunk's own text, and the
header is kept in the chunk's ``metadata["header"]``.

The header's lines, each left out when empty, already given, or the chunk's text starts with it:

* the document's title (:attr:`momoka.text.Document.title`: a Markdown file's first heading, an HTML
  ``<title>``, a title given with the document);
* the heading path of the chunk's section (:attr:`momoka.text.model.Chunk.section`) in a document
  with sections;
* in a document without sections, the title line over the chunk
  (:func:`momoka.chunking._splitter.title_lines`: ``Title\\nText`` written without a blank line), the last
  one that starts at or before the chunk's start.

The header is cut to :data:`HEADER_CHARS` characters; the default chunker leaves
:data:`HEADER_TOKENS` of the embedder's input for it (:func:`momoka.methods.pipeline.chunker_params`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ._splitter import title_lines

__all__ = ["HEADED_TEXT", "HEADER_CHARS", "HEADER_TOKENS", "context_headers", "headed", "indexed_text", "with_header"]

#: The ``source["text"]`` of a raw view that indexes each chunk with its header (stores built without
#: headers record ``"chunk"``).
HEADED_TEXT = "header + newline + chunk"

#: The longest header, in characters (cut there).
HEADER_CHARS = 120
#: The embedder tokens the default chunker leaves for the header (a header of :data:`HEADER_CHARS` ASCII
#: characters is at most about 40 WordPiece tokens).
HEADER_TOKENS = 40


def headed(source: dict | None) -> bool:
    """Whether a view with this ``source`` record indexes its chunks with their headers."""
    return bool(source) and source.get("text") == HEADED_TEXT


def with_header(header: str | None, text: str) -> str:
    """The text indexed for a chunk: ``header + "\\n" + text`` (``text`` alone without a header)."""
    return f"{header}\n{text}" if header else text


def indexed_text(chunk: Any, headers: bool) -> str:
    """What a view indexes for a stored ``chunk``: :func:`with_header` of its ``metadata["header"]`` and its text
    when the view is :func:`headed` (``headers``), else its text."""
    return with_header(chunk.metadata.get("header"), chunk.text) if headers else chunk.text


def context_headers(document: Any, chunks: Sequence[Any]) -> list[str]:
    """The header of each chunk of ``document`` (``""`` where there is none); see the module doc."""
    title = " ".join((getattr(document, "title", None) or "").split())
    lines_at: list[tuple[int, str]] = []
    if not getattr(document, "sections", None):
        text = document.text
        ends, _ = title_lines(document)
        starts = [text.rfind("\n", 0, e) + 1 for e in ends.tolist()]
        lines_at = [(a, " ".join(text[a:e].split())) for a, e in zip(starts, ends.tolist())]
    # the last title line starting at or before each chunk (-1: none)
    at = np.searchsorted(np.asarray([a for a, _ in lines_at], dtype=np.int64),
                         np.asarray([c.start for c in chunks], dtype=np.int64), side="right") - 1
    out = []
    for c, k in zip(chunks, at.tolist()):
        parts = [title, *(" ".join(s.split()) for s in c.section)]
        if k >= 0:
            parts.append(lines_at[k][1])
        head = c.text.lstrip()
        kept: list[str] = []
        for p in parts:
            if p and p not in kept and not head.startswith(p):
                kept.append(p)
        out.append("\n".join(kept)[:HEADER_CHARS].rstrip())
    return out
