"""What goes into an index: documents from paths, chunkers and embedders by name, queries checked.

Shared by :class:`momoka.Index`, the CLI and the eval runner.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._files import path_kind
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
    from . import registry

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


@dataclass(frozen=True)
class SourceFile:
    """A file to index and its document id (see :func:`expand_paths`)."""

    path: Path
    doc_id: str

    def __str__(self) -> str:
        return str(self.path)


def file_doc_id(path: Path, base: Path | None = None) -> str:
    """The document id of a file: its path without the extension, ``/``-separated, relative to ``base``
    (the directory argument it was found in), else as given (normalised; an absolute path gives its name).

    So ``docs/report.md`` found in ``docs`` is ``report``, ``docs/x/report.md`` is ``x/report``, and the file
    argument ``y/report.md`` is ``y/report``: files in different folders never share an id. Two files that
    differ only in their extension do (the second is reported as given twice).
    """
    if base is not None:
        rel = path.relative_to(base)
    elif path.is_absolute():
        rel = Path(path.name)
    else:
        rel = Path(os.path.normpath(path))
    return rel.with_suffix("").as_posix() if rel.suffix else rel.as_posix()


def expand_paths(items: Iterable[Any], skipped: list | None = None, *, strict: bool = False) -> list[Any]:
    """Files and directories into :class:`SourceFile` items; other items (Documents, dicts) pass unchanged.

    A directory is read recursively for :data:`DOC_EXTENSIONS`; its files get
    ids relative to it (:func:`file_doc_id`). Files of other types found in a
    directory are appended to ``skipped`` as ``(path, reason)`` when a list is
    given. Entries are classified without being opened (:func:`momoka._files.path_kind`):
    symbolic links to regular files are followed; dangling links, FIFOs, sockets
    and devices found in a directory are appended to ``skipped`` with what they
    are (or, with ``strict``, raise :class:`InputError`). A directory without any
    document, and a path given that is missing or not a regular file or
    directory, raise :class:`InputError`.
    """
    out: list[Any] = []
    for it in items:
        if isinstance(it, (str, os.PathLike)):
            p = Path(it)
            kind = path_kind(p)
            if kind == "directory":
                files, other, odd = [], [], []
                for f in sorted(p.rglob("*")):
                    if any(part.startswith(".") for part in f.relative_to(p).parts):
                        continue
                    what = path_kind(f)
                    if what == "file":
                        (files if f.suffix.lower() in DOC_EXTENSIONS else other).append(f)
                    elif what != "directory":
                        if strict:
                            raise InputError(f"{f} is {what}, not a regular file (found in {p})")
                        odd.append((f, f"{what}, not a regular file: not read"))
                if skipped is not None:
                    skipped.extend(odd)
                if not files:
                    raise InputError(f"{p} holds no documents ({', '.join(DOC_EXTENSIONS)})"
                                     + (f"; it has {len(other)} file(s) of other types, e.g. {other[0]}" if other else ""))
                if skipped is not None:
                    skipped.extend((f, f"unsupported file type {f.suffix or '(no extension)'} (momoka reads "
                                       f"{', '.join(DOC_EXTENSIONS)})") for f in other)
                out.extend(SourceFile(f, file_doc_id(f, p)) for f in files)
            elif kind == "file":
                out.append(SourceFile(p, file_doc_id(p)))
            elif kind == "missing":
                raise InputError(f"no such file or directory: {p}")
            else:
                raise InputError(f"{p} is {kind}, not a regular file or directory")
        else:
            out.append(it)
    return out


def to_document(item: Any, encoding: str = "utf-8"):
    """A :class:`momoka.text.Document` from a :class:`SourceFile`, a path, a Document, a dict or an eval DocRecord.

    Files are read with ``encoding``; a bare path gets the id :func:`file_doc_id` gives it.
    """
    from ..text import Document

    if isinstance(item, (str, os.PathLike)):
        item = SourceFile(Path(item), file_doc_id(Path(item)))
    if isinstance(item, Document):
        doc = item
    elif isinstance(item, SourceFile):
        doc = Document.from_file(item.path, encoding=encoding, doc_id=item.doc_id)
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
        raise InputError("every document needs a doc_id (files get their path; give one for texts)")
    return doc


def content_hash(doc: Any) -> str:
    """sha256 of what indexing a document depends on: its text and title."""
    h = hashlib.sha256()
    h.update((doc.title or "").encode("utf-8", "surrogatepass"))
    h.update(b"\0")
    h.update(doc.text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def check_query(query: Any, max_chars: int = MAX_QUERY_CHARS) -> str:
    """``query`` if it is a non-empty str of at most ``max_chars`` characters, else a clear error."""
    if not isinstance(query, str):
        raise InputError(f"query must be str, got {type(query).__name__}")
    if not query.strip():
        raise EmptyInputError("query is empty")
    if len(query) > max_chars:
        raise InputTooLargeError(f"query is {len(query):,} characters; the limit is {max_chars:,} (raise it with "
                                 "momoka query --max-query-chars, or Index.max_query_chars in Python)")
    return query
