"""What goes into an index: documents from paths, chunkers and embedders by name, queries checked.

Shared by :class:`momoka.Index`, the CLI and the eval runner.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._files import path_kind
from .._validate import check_text
from ..errors import BinaryInputError, ConfigError, EmptyInputError, InputError, InputTooLargeError
from .. import registry

#: Queries longer than this many characters are refused (InputTooLargeError).
MAX_QUERY_CHARS = 10_000
#: File extensions read when a directory is given (the extensions :data:`momoka.text.io.FORMATS` parses).
DOC_EXTENSIONS = (".txt", ".text", ".md", ".markdown", ".mdown", ".mkd", ".html", ".htm", ".xhtml", ".pdf", ".docx")
#: What a folder is read for, in words (the skip warnings end with it).
READS = f"a folder is read for {', '.join(DOC_EXTENSIONS)} and text files without an extension"
#: The reasons a file found in a folder is not read (``skipped`` entries start with one of them).
UNSUPPORTED = "unsupported file type"
NOT_TEXT = "no extension and not text (binary or empty)"
#: Bytes of a file without a document extension read to tell text from binary.
_SNIFF_BYTES = 64 * 1024


def _bare_name(path: Path) -> bool:
    """A file name without an extension (``LICENSE``, ``GPL-3``) or whose last dot starts a version
    number (``MPL-2.0``, ``LGPL-2.1``), not a file type."""
    return not path.suffix or path.suffix[1:].isdigit()


def _looks_like_text(path: Path) -> bool:
    """Whether the first bytes of ``path`` are text by :func:`momoka.text.io.check_binary` (no NUL byte,
    few control bytes); an unreadable file is not."""
    from ..text.io import check_binary  # start-up: momoka.text.io, only when a folder holds such a file

    try:
        with open(path, "rb") as fh:
            head = fh.read(_SNIFF_BYTES)
        check_binary(head, str(path))
    except (OSError, BinaryInputError):
        return False
    return bool(head.strip())


def embedder_info(embedder: Any) -> dict:
    """``{"model_id", "checksum", "dim"}`` of an embedder object."""
    for attr in ("embed", "dim", "model_id", "checksum"):
        if not hasattr(embedder, attr):
            raise ConfigError(f"an embedder needs .embed, .dim, .model_id and .checksum; {embedder!r} lacks .{attr}")
    return {"model_id": str(embedder.model_id), "checksum": str(embedder.checksum), "dim": int(embedder.dim)}


def make_embedder(embedder: Any):
    """The embedder an index is built with: None, ``"default"`` or a registry model id (loaded), or an object
    with ``.embed/.dim/.model_id/.checksum`` (checked)."""
    if embedder is None:
        return None
    if isinstance(embedder, str):
        return load_embedder(None if embedder == "default" else embedder)
    embedder_info(embedder)  # validates the interface
    return embedder


def load_embedder(model_id: str | None = None):
    """The registry's embedder ``model_id`` (None: the default), installed on first use."""
    from ..models import Embedder  # start-up: momoka.models

    return Embedder.default() if model_id is None else Embedder.from_registry(model_id)


def embed_limit(embedder: Any) -> tuple[Any, int] | None:
    """``(tokenizer, max_length)`` of an embedder that says how it counts its input (a ``tokenizers.Tokenizer``
    ``tokenizer`` and an int ``max_length``, as :class:`momoka.models.Embedder` has), else None."""
    tok, limit = getattr(embedder, "tokenizer", None), getattr(embedder, "max_length", None)
    if tok is None or isinstance(limit, bool) or not isinstance(limit, int):
        return None
    from ..chunking._tokens import _is_hf_tokenizer  # start-up: momoka.chunking

    return (tok, limit) if _is_hf_tokenizer(tok) else None


def resolve_chunker(chunker: Any, params: dict, embedder: Any = None) -> tuple[Any, dict]:
    """``(chunker object, {"name", "params"[, "object"]})`` from a registered name or a chunker object.

    A named chunker whose ``params`` hold ``max_embed_tokens`` counts them with ``embedder``'s tokenizer
    (:func:`embed_limit`; not recorded in the params).
    """
    if isinstance(chunker, str):
        params = {k: v for k, v in params.items() if v is not None}
        objects = {}
        if "max_embed_tokens" in params and embedder is not None and embed_limit(embedder) is not None:
            objects["embed_tokenizer"] = embed_limit(embedder)[0]
        return registry.create("chunker", chunker, **params, **objects), {"name": chunker, "params": params}
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
    """The document id of a file: its path relative to ``base`` without the extension, ``/``-separated
    (a version number after the last dot is part of the name: ``MPL-2.0`` keeps it).

    ``base`` defaults to the file's own folder (the id is then the file name without its extension).
    :func:`expand_paths` passes the common root of all the paths it was given.
    """
    rel = Path(path).relative_to(base) if base is not None else Path(Path(path).name)
    return rel.as_posix() if _bare_name(rel) else rel.with_suffix("").as_posix()


@dataclass(frozen=True)
class _Found:
    """A file found by :func:`expand_paths`: as given, and as an absolute path with its folders resolved."""

    path: Path
    full: Path


def _absolute(p: Path) -> Path:
    """``p`` absolute, its folders resolved (symbolic links, ``..``) and its own name kept."""
    return Path(os.path.abspath(p)).parent.resolve() / p.name


def _file_key(p: Path) -> tuple:
    """What identifies a file whatever the spelling of its path: device and inode (else the resolved path)."""
    try:
        st = p.stat()
        return (st.st_dev, st.st_ino)
    except OSError:
        return (str(p.resolve()),)


def _assign_ids(items: list[Any], anchors: list[Path]) -> list[Any]:
    """Turn the :class:`_Found` files of ``items`` into :class:`SourceFile` items with their ids.

    Ids are relative to the common root of ``anchors``; a file found twice is kept once (with a warning);
    files whose ids would differ only by their extension keep it (``notes.md``, ``notes.txt``).
    """
    found = [it for it in items if isinstance(it, _Found)]
    if not found:
        return items
    try:
        root = Path(os.path.commonpath([str(a) for a in anchors]))
    except ValueError:  # paths on different drives (Windows): no common root
        root = None
    seen: dict[tuple, _Found] = {}
    dropped: set[int] = set()
    for it in found:
        key = _file_key(it.path)
        if key in seen:
            warnings.warn(f"{it.path} is the same file as {seen[key].path}; it is indexed once", UserWarning,
                          stacklevel=3)
            dropped.add(id(it))
        else:
            seen[key] = it
    kept = [it for it in found if id(it) not in dropped]
    base = {id(it): root if root is not None else it.full.parent for it in kept}
    ids = {id(it): file_doc_id(it.full, base[id(it)]) for it in kept}
    count: dict[str, int] = {}
    for v in ids.values():
        count[v] = count.get(v, 0) + 1
    for it in kept:
        if count[ids[id(it)]] > 1:  # same path but for the extension: the extension tells them apart
            ids[id(it)] = it.full.relative_to(base[id(it)]).as_posix()
    return [SourceFile(it.path, ids[id(it)]) if isinstance(it, _Found) else it
            for it in items if id(it) not in dropped]


def expand_paths(items: Iterable[Any], skipped: list | None = None, *, strict: bool = False) -> list[Any]:
    """Files and directories into :class:`SourceFile` items; other items (Documents, dicts) pass unchanged.

    A directory is read recursively for :data:`DOC_EXTENSIONS`, and for files
    without an extension (or whose last dot starts a version number, ``MPL-2.0``)
    whose first 64 KiB are text (``LICENSE``, ``COPYING``), read as plain text.
    Files of other types found in a directory are appended to ``skipped`` as
    ``(path, reason)`` when a list is given. Entries are classified without being opened
    (:func:`momoka._files.path_kind`): symbolic links to regular files are
    followed; dangling links, FIFOs, sockets and devices found in a directory
    are appended to ``skipped`` with what they are (or, with ``strict``, raise
    :class:`InputError`). A directory without any document, and a path given
    that is missing or not a regular file or directory, raise :class:`InputError`.

    Document ids (:func:`file_doc_id`) are the files' paths without the
    extension, relative to the common root of the given paths (a directory
    counts as itself, a file as its folder), after making the paths absolute
    and resolving their folders, so an id does not depend on how a path is
    typed: ``docs/`` alone gives ``report`` and ``x/report`` for
    ``docs/report.md`` and ``docs/x/report.md``, a single file ``y/report.md``
    gives ``report``, and ``a/README.txt`` with ``b/README.txt`` give
    ``a/README`` and ``b/README``. One file given twice (the same path twice,
    two spellings of it, a file inside a directory also given) is indexed once,
    with a warning. Two files that would differ only by their extension keep
    it in their ids (``notes.md``, ``notes.txt``).
    """
    out: list[Any] = []
    anchors: list[Path] = []
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
                        if f.suffix.lower() in DOC_EXTENSIONS or (_bare_name(f) and _looks_like_text(f)):
                            files.append(f)
                        else:
                            other.append(f)
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
                    skipped.extend((f, NOT_TEXT if _bare_name(f) else f"{UNSUPPORTED} {f.suffix}") for f in other)
                top = p.resolve()
                anchors.append(top)
                out.extend(_Found(f, top / f.relative_to(p)) for f in files)
            elif kind == "file":
                full = _absolute(p)
                anchors.append(full.parent)
                out.append(_Found(p, full))
            elif kind == "missing":
                raise InputError(f"no such file or directory: {p}")
            else:
                raise InputError(f"{p} is {kind}, not a regular file or directory")
        else:
            out.append(it)
    return _assign_ids(out, anchors)


def to_document(item: Any, encoding: str = "utf-8"):
    """A :class:`momoka.text.Document` from a :class:`SourceFile`, a path, a Document, a dict or an eval DocRecord.

    Files are read with ``encoding``; a bare path gets the id :func:`file_doc_id` gives it.
    """
    from ..text import Document  # start-up: momoka.text

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
    """``query`` if it is a non-empty str of at most ``max_chars`` characters of valid text (no lone surrogate:
    :func:`~momoka._validate.check_text`), else a clear error."""
    if not isinstance(query, str):
        raise InputError(f"query must be str, got {type(query).__name__}")
    if not query.strip():
        raise EmptyInputError("query is empty")
    check_text(query, "query", error=InputError)
    if len(query) > max_chars:
        raise InputTooLargeError(f"query is {len(query):,} characters; the limit is {max_chars:,} (raise it with "
                                 "momoka query --max-query-chars, or Index.max_query_chars in Python)")
    return query
