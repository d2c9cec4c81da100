"""What goes into an index: documents from paths, chunkers and embedders by name, queries checked.

Shared by :class:`momoka.index.Index`, the CLI and the eval runner.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import ConfigError, EmptyInputError, InputError, InputTooLargeError

#: Queries longer than this many characters are refused (InputTooLargeError).
MAX_QUERY_CHARS = 10_000
#: File extensions read when a directory is given.
DOC_EXTENSIONS = (".txt", ".md", ".markdown", ".html", ".htm")


def embedder_info(embedder: Any) -> dict:
    """``{"model_id", "checksum", "dim"}`` of an embedder object."""
    for attr in ("embed", "dim", "model_id", "checksum"):
        if not hasattr(embedder, attr):
            raise ConfigError(f"an embedder needs .embed, .dim, .model_id and .checksum; {embedder!r} lacks .{attr}")
    return {"model_id": str(embedder.model_id), "checksum": str(embedder.checksum), "dim": int(embedder.dim)}


def load_embedder(model_id: str | None = None):
    """The registry's embedder ``model_id`` (None: the default), installed on first use."""
    from ..models import Embedder

    return Embedder.default() if model_id is None else Embedder.from_registry(model_id)


def resolve_chunker(chunker: Any, params: dict) -> tuple[Any, dict]:
    """``(chunker object, {"name", "params"[, "object"]})`` from a registered name or a chunker object."""
    from ..methods import registry

    if isinstance(chunker, str):
        params = {k: v for k, v in params.items() if v is not None}
        return registry.create("chunker", chunker, **params), {"name": chunker, "params": params}
    if callable(chunker):
        if params:
            raise ConfigError("chunker parameters go with a chunker name, not a chunker object")
        name = getattr(chunker, "name", type(chunker).__name__)
        raw = chunker.params() if callable(getattr(chunker, "params", None)) else {}
        return chunker, {"name": name, "params": jsonable(raw), "object": True}
    raise ConfigError(f"chunker must be a name or a callable, not {type(chunker).__name__}")


def jsonable(x: Any) -> Any:
    """``x`` with everything JSON cannot hold turned into strings (tuples into lists)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    return str(x)


def expand_paths(items: Iterable[Any]) -> list[Any]:
    """Files and directories (read recursively for :data:`DOC_EXTENSIONS`) into a list of files; other items pass."""
    out: list[Any] = []
    for it in items:
        if isinstance(it, (str, os.PathLike)):
            p = Path(it)
            if p.is_dir():
                files = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in DOC_EXTENSIONS)
                if not files:
                    raise InputError(f"{p} holds no documents ({', '.join(DOC_EXTENSIONS)})")
                out.extend(files)
            elif p.is_file():
                out.append(p)
            else:
                raise InputError(f"no such file or directory: {p}")
        else:
            out.append(it)
    return out


def to_document(item: Any):
    """A :class:`momoka.text.Document` from a path, a Document, a dict or an eval DocRecord."""
    from ..text import Document

    if isinstance(item, Document):
        doc = item
    elif isinstance(item, (str, os.PathLike)):
        doc = Document.from_file(item)
    elif isinstance(item, dict):
        if "text" not in item:
            raise InputError("a document dict needs 'text' (and 'doc_id')")
        doc = Document.from_text(item["text"], title=item.get("title"), doc_id=item.get("doc_id"),
                                 source=item.get("source"))
    elif hasattr(item, "to_document"):
        doc = item.to_document()
    else:
        raise InputError(f"cannot index a {type(item).__name__}: give paths, Documents or dicts with text")
    if not doc.doc_id:
        raise InputError("every document needs a doc_id (files get their name; give one for texts)")
    return doc


def check_query(query: Any, max_chars: int = MAX_QUERY_CHARS) -> str:
    """``query`` if it is a non-empty str of at most ``max_chars`` characters, else a clear error."""
    if not isinstance(query, str):
        raise InputError(f"query must be str, got {type(query).__name__}")
    if not query.strip():
        raise EmptyInputError("query is empty")
    if len(query) > max_chars:
        raise InputTooLargeError(f"query is {len(query):,} characters; the limit is {max_chars:,}")
    return query
