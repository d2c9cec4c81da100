"""What goes into an index: documents from paths, chunkers and embedders by name, queries checked.

Shared by :class:`momoka.Index`, the CLI and the eval runner.
"""

from __future__ import annotations

import hashlib
import os
import sys
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


def make_embedder(embedder: Any, deferred: bool = False):
    """The embedder an index is built with: None, ``"default"`` or a registry model id (loaded; ``deferred``:
    on first use, see :func:`load_embedder`), or an object with ``.embed/.dim/.model_id/.checksum`` (checked)."""
    if embedder is None:
        return None
    if isinstance(embedder, str):
        return load_embedder(None if embedder == "default" else embedder, deferred)
    embedder_info(embedder)  # validates the interface
    return embedder


class LanguageWarning(UserWarning):
    """The documents are mostly in a script the default (English) embedder does not serve, and the
    multilingual embedder is not installed (:func:`language_default_embedder`)."""


#: Documents and characters per document that :func:`language_default_embedder` reads.
LANGUAGE_SAMPLE_DOCS = 32
LANGUAGE_SAMPLE_CHARS = 20_000
_LANGUAGE_WARNED: set[str] = set()


def _sample_texts(sources: Any, *, encoding: str | None = None, follow_links: bool = False) -> list[str]:
    """The first :data:`LANGUAGE_SAMPLE_CHARS` characters of the first :data:`LANGUAGE_SAMPLE_DOCS` readable
    documents of ``sources`` (the forms :meth:`momoka.Index.add` takes); unreadable ones are passed over."""
    out: list[str] = []
    # the build reads the same sources next and reports what it cannot read (as on_error says), once
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            items = expand_paths([sources] if isinstance(sources, (str, os.PathLike)) else list(sources), [],
                                 strict=False, follow_links=follow_links)
        except Exception:
            return out
        for it in items:
            if len(out) >= LANGUAGE_SAMPLE_DOCS:
                break
            try:
                doc = to_document(it, encoding=encoding)
            except Exception:
                continue
            out.append(doc.text[:LANGUAGE_SAMPLE_CHARS])
    return out


def language_default_embedder(sources: Any, *, encoding: str | None = None, follow_links: bool = False,
                              say: Any = None) -> str:
    """The embedder an index of ``sources`` gets when none was chosen: ``"default"`` (the English
    ``minilm-l6-v2-int8``), or the multilingual one when the documents are mostly non-Latin.

    A sample of the documents (:func:`_sample_texts`) is judged by
    :func:`momoka.text.scripts.is_mostly_non_latin` (more than half of its words, or characters of
    scripts written without spaces, outside the Latin script). When it is mostly non-Latin and
    ``multilingual-e5-small`` is installed, that id is returned and one line says so on stderr
    (``say``: a callable taking the line, default a ``momoka:`` line on stderr); when it is not
    installed, a :class:`LanguageWarning` (once per process) names ``momoka models install
    multilingual-e5-small`` and ``"default"`` is returned. Latin-script text, whatever its language, keeps
    the default.
    """
    from ..text.scripts import dominant_scripts, is_mostly_non_latin, non_latin_share  # start-up: momoka.text.scripts

    sample = _sample_texts(sources, encoding=encoding, follow_links=follow_links)
    if not is_mostly_non_latin(sample):
        return "default"
    from ..models.catalog import DEFAULT_EMBEDDER, MULTILINGUAL_EMBEDDER, is_installed  # start-up: momoka.models.catalog

    what = (f"the documents are mostly in {' and '.join(dominant_scripts(sample))} script "
            f"({non_latin_share(sample):.0%} of the words in a sample of {len(sample)} outside the Latin script)")
    if is_installed(MULTILINGUAL_EMBEDDER):
        line = f"{what}: building with {MULTILINGUAL_EMBEDDER} (--embedder {DEFAULT_EMBEDDER} keeps the English default)"
        if say is None:
            print(f"momoka: {line}", file=sys.stderr, flush=True)
        else:
            say(line)
        return MULTILINGUAL_EMBEDDER
    if MULTILINGUAL_EMBEDDER not in _LANGUAGE_WARNED:
        _LANGUAGE_WARNED.add(MULTILINGUAL_EMBEDDER)
        warnings.warn(f"{what}; the default embedder {DEFAULT_EMBEDDER} is English-only: retrieval quality for "
                      f"this language needs `momoka models install {MULTILINGUAL_EMBEDDER}` (then build the "
                      "index again)", LanguageWarning, stacklevel=3)
    return "default"


def load_embedder(model_id: str | None = None, deferred: bool = False):
    """The registry's embedder ``model_id`` (None: the default), installed on first use; ``deferred``: a
    :class:`~momoka.models.embedder.DeferredEmbedder`, which loads the model on its first use (the driver of
    a Ray build records the embedder and embeds nothing)."""
    from ..models import Embedder  # start-up: momoka.models

    if deferred:
        from ..models.embedder import DeferredEmbedder  # start-up: momoka.models

        return DeferredEmbedder(model_id)
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
    linked: bool = False  # reached through a link found in a folder


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
            first = seen[key]
            if first.linked and not it.linked:  # the path read without a link gives the id
                first, it = it, first
                seen[key] = first
            warnings.warn(f"{it.path} is the same file as {first.path}; it is indexed once", UserWarning,
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


#: Why a link found in a folder is not followed (``skipped`` entries start with one of them).
LINK_OUTSIDE = "outside the folders and files given: not followed (--follow-links or follow_links=True follows it)"
LINK_LOOP = "a folder that contains it (a loop): not followed"


def _inside(target: str, roots: tuple[set, list]) -> bool:
    """Whether the resolved path ``target`` is one of the files given or inside one of the folders given."""
    files, folders = roots
    return target in files or any(target == r or target.startswith(r.rstrip(os.sep) + os.sep) for r in folders)


class _Walk:
    """One folder given to :func:`expand_paths`, read by the link rule (see there).

    ``files``: the documents found (as seen from the folder given); ``other``: files of other types;
    ``odd``: ``(path, why)`` of everything found and not read (with ``strict``, the first raises).
    """

    def __init__(self, top: Path, roots: tuple[set, list], follow_links: bool, strict: bool):
        self.top, self.roots, self.follow, self.strict = top, roots, follow_links, strict
        self.visited: set[str] = set()  # the folders read (resolved paths)
        self.files: list[Path] = []
        self.linked: list[Path] = []  # documents reached through a link: after the others
        self.other: list[Path] = []
        self.odd: list[tuple[Path, str]] = []
        # links to folders, (link, target, the link's folder resolved, the folders above it as reached): read after
        # every folder reached without a link
        pending: list[tuple[Path, str, str, tuple]] = []
        real = os.path.realpath(top)
        self._scan(top, real, (real,), pending)
        while pending:
            seen, target, here, chain = pending.pop(0)
            if target in chain or here.startswith(target.rstrip(os.sep) + os.sep):
                self._skip(seen, f"a link to {target}, {LINK_LOOP}")
            elif not (self.follow or _inside(target, roots)):
                self._skip(seen, f"a link to {target}, {LINK_OUTSIDE}")
            elif target not in self.visited:  # else its files are read already, under the path first read
                self._scan(seen, target, chain + (target,), pending, linked=True)

    def _skip(self, path: Path, why: str) -> None:
        if self.strict:
            raise InputError(f"{path} is {why} (found in {self.top})")
        self.odd.append((path, why))

    def _file(self, f: Path, linked: bool) -> None:
        if f.suffix.lower() in DOC_EXTENSIONS or (_bare_name(f) and _looks_like_text(f)):
            (self.linked if linked else self.files).append(f)
        else:
            self.other.append(f)

    def _entries(self, folder: Path, real: str) -> list:
        """The entries of ``folder`` by name (hidden ones left out), marking it read; [] when it cannot be read
        (reported)."""
        self.visited.add(real)
        try:
            with os.scandir(folder) as it:
                return sorted((e for e in it if not e.name.startswith(".")), key=lambda e: e.name)
        except OSError as exc:
            self._skip(folder, f"a folder that cannot be read ({exc.strerror}): not read")
            return []

    def _scan(self, folder: Path, real: str, chain: tuple, pending: list, linked: bool = False) -> None:
        """Read ``folder`` (resolved: ``real``; the folders above it: ``chain``) depth first in name order,
        without following links to folders (put on ``pending``). Iterative, so any depth is read."""
        stack = [(iter(self._entries(folder, real)), folder, real, chain)]
        while stack:
            it, folder, real, chain = stack[-1]
            e = next(it, None)
            if e is None:
                stack.pop()
                continue
            f = folder / e.name
            what = path_kind(f)
            if e.is_symlink() and what in ("file", "directory"):
                target = os.path.realpath(f)
                if what == "directory":
                    pending.append((f, target, real, chain))
                elif self.follow or _inside(target, self.roots):
                    self._file(f, linked=True)
                else:
                    self._skip(f, f"a link to {target}, {LINK_OUTSIDE}")
            elif what == "file":
                self._file(f, linked=linked)
            elif what == "directory":
                sub = os.path.join(real, e.name)
                if sub not in self.visited:
                    stack.append((iter(self._entries(f, sub)), f, sub, chain + (sub,)))
            elif self.strict:
                raise InputError(f"{f} is {what}, not a regular file (found in {self.top})")
            else:
                self.odd.append((f, f"{what}, not a regular file: not read"))


def expand_paths(items: Iterable[Any], skipped: list | None = None, *, strict: bool = False,
                 follow_links: bool = False) -> list[Any]:
    """Files and directories into :class:`SourceFile` items; other items (Documents, dicts) pass unchanged.

    A directory is read recursively for :data:`DOC_EXTENSIONS`, and for files
    without an extension (or whose last dot starts a version number, ``MPL-2.0``)
    whose first 64 KiB are text (``LICENSE``, ``COPYING``), read as plain text;
    names starting with ``.`` are not read. Files of other types found in a
    directory are appended to ``skipped`` as ``(path, reason)`` when a list is
    given. Entries are classified without being opened
    (:func:`momoka._files.path_kind`): dangling links, FIFOs, sockets and devices
    found in a directory are appended to ``skipped`` with what they are (or, with
    ``strict``, raise :class:`InputError`). A directory without any document, and a
    path given that is missing or not a regular file or directory, raise
    :class:`InputError`.

    Symbolic links found in a directory follow one rule (the paths given are
    always read, links or not):

    * a link whose target (resolved) is one of the files given or inside one of
      the directories given is followed: a link to a file is read, a link to a
      folder is read like a folder, after every folder reached without a link; a
      folder already read (through its own path or another link) is not read
      twice, so each file is indexed once, under the path first read;
    * a link to a folder that contains it (the link's own folder or one above
      it, as reached: a loop) is not followed, and reported;
    * a link whose target is elsewhere is reported and not followed, unless
      ``follow_links`` (``momoka index --follow-links``): then it is followed too,
      loops still excepted.

    A link not followed is appended to ``skipped`` as ``(path, "a link to TARGET,
    ...")`` (with ``strict``: raises :class:`InputError`); nothing is left out
    without a word.

    Document ids (:func:`file_doc_id`) are the files' paths without the
    extension, relative to the common root of the given paths (a directory
    counts as itself, a file as its folder), after making the paths absolute
    and resolving their folders, so an id does not depend on how a path is
    typed: ``docs/`` alone gives ``report`` and ``x/report`` for
    ``docs/report.md`` and ``docs/x/report.md``, a single file ``y/report.md``
    gives ``report``, and ``a/README.txt`` with ``b/README.txt`` give
    ``a/README`` and ``b/README``. A file read through a followed link to a folder
    has the id of its path through the link. One file given twice (the same path twice,
    two spellings of it, a file inside a directory also given, a link to a file)
    is indexed once, with a warning. Two files that would differ only by their
    extension keep it in their ids (``notes.md``, ``notes.txt``).
    """
    items = list(items)
    given = [Path(it) for it in items if isinstance(it, (str, os.PathLike))]
    kinds = {id(p): path_kind(p) for p in given}
    roots = ({os.path.realpath(p) for p in given if kinds[id(p)] == "file"},
             [os.path.realpath(p) for p in given if kinds[id(p)] == "directory"])
    out: list[Any] = []
    anchors: list[Path] = []
    k = 0
    for it in items:
        if isinstance(it, (str, os.PathLike)):
            p = given[k]
            kind = kinds[id(p)]
            k += 1
            if kind == "directory":
                walk = _Walk(p, roots, follow_links, strict)
                files, other = walk.files + walk.linked, walk.other
                if skipped is not None:
                    skipped.extend(walk.odd)
                if not files:
                    raise InputError(f"{p} holds no documents ({', '.join(DOC_EXTENSIONS)})"
                                     + (f"; it has {len(other)} file(s) of other types, e.g. {other[0]}" if other else "")
                                     + (f"; {len(walk.odd)} thing(s) not read, e.g. {walk.odd[0][0]}: {walk.odd[0][1]}"
                                        if walk.odd else ""))
                if skipped is not None:
                    skipped.extend((f, NOT_TEXT if _bare_name(f) else f"{UNSUPPORTED} {f.suffix}") for f in other)
                top = p.resolve()
                anchors.append(top)
                out.extend(_Found(f, top / f.relative_to(p)) for f in walk.files)
                out.extend(_Found(f, top / f.relative_to(p), linked=True) for f in walk.linked)
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


def to_document(item: Any, encoding: str | None = None):
    """A :class:`momoka.text.Document` from a :class:`SourceFile`, a path, a Document, a dict or an eval DocRecord.

    Files are read with ``encoding`` (None: each file's own, see :mod:`momoka.text.io`); a bare path gets the
    id :func:`file_doc_id` gives it, which depends on the path only.
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
                                 "momoka query --max-query-chars, or Index.corpus.max_query_chars in Python)")
    return query
