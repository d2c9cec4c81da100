"""The one registry of components: chunkers, enrichers, relators, retrievers, refiners, readers.

Every component is registered by kind and name, in the package that defines it::

    from momoka.registry import register

    @register("retriever", "my-retriever", summary="what it does", requires={"enrich": ["title"]})
    def make(corpus, **options):
        return MyRetriever(corpus, **options)

    create("retriever", "my-retriever", corpus, k1=2)

Factories of retrievers take a :class:`~momoka.methods.corpus.Corpus` first (what a
retriever may read of an index; :meth:`Corpus.retriever <momoka.methods.corpus.Corpus.retriever>` gives it); the others
take keyword options only. :mod:`momoka.chunking` registers the classic chunkers
(``create("chunker", "recursive", size=200)``), each method package its own components.

The packages named in :data:`BUILTIN_PACKAGES` register their components
when they are imported. They are imported lazily, in that order: a lookup of one
name (:func:`entry`, :func:`create`, :func:`requirements`) imports packages only
until the name is found, so ``create("retriever", "bm25", ...)`` loads the
standard package and never JERR's LLM stack; a listing (:func:`available`,
:func:`summaries`) imports them all, so every name is known wherever the
registry is listed (``--help`` of the CLI, the eval runner). This module sits on
the ground floor: it imports nothing of momoka but its errors.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigError

__all__ = [
    "ARTIFACT_KINDS",
    "BUILTIN_PACKAGES",
    "KINDS",
    "Entry",
    "available",
    "create",
    "entry",
    "has_artifact",
    "missing",
    "producers",
    "register",
    "requirements",
    "summaries",
]

#: Component kinds.
KINDS = ("chunker", "enricher", "relator", "retriever", "refiner", "reader")
#: Kinds of store artifacts a component produces or needs (``"vectors/NAME"`` ...).
ARTIFACT_KINDS = ("vectors", "bm25", "relation", "nodes")
#: What builds the raw views: the index itself (with an embedder for the vectors).
RAW_ARTIFACTS = {"vectors/raw": "this index was built without an embedder: use the bm25 retriever, or build the "
                                 "index with one",
                 "bm25/raw": "every index builds it: the store is damaged or not an index"}
#: Packages whose import registers the built-in components.
BUILTIN_PACKAGES = ("momoka.chunking", "momoka.methods.standard", "momoka.methods.momoka", "momoka.methods.moc",
                    "momoka.methods.mcindex", "momoka.methods.jerr", "momoka.methods.ets.refiner",
                    "momoka.methods.ets.hops")


@dataclass(frozen=True)
class Entry:
    """A registered component: its factory, a one-line summary, what it needs and its aliases."""

    kind: str
    name: str
    factory: Callable[..., Any]
    summary: str = ""
    requires: dict = field(default_factory=dict)
    defaults: dict = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    produces: Any = ()
    needs: Any = ()
    reopen: Any = None

    def reopen_options(self, params: dict, settings: dict | None) -> dict:
        """The options a component recorded in a store's pipeline is rebuilt with: its recorded
        ``params``, over what ``reopen`` derives from its recorded ``settings`` (when both exist)."""
        pinned = self.reopen(settings) if self.reopen is not None and settings else {}
        return {**pinned, **params}

    def artifacts(self, what: str, options: dict | None = None) -> list[str]:
        """The artifact keys (``"vectors/titled"``, ``"bm25/keywords"``, ``"relation/paths"``,
        ``"nodes/jerr.entities"``) this component ``"produces"`` or ``"needs"`` with these options
        (its defaults filled in)."""
        decl = self.produces if what == "produces" else self.needs
        opts = {**self.defaults, **(options or {})}
        return list(decl(opts) if callable(decl) else decl)


_REGISTRY: dict[str, dict[str, Entry]] = {k: {} for k in KINDS}
_ALIASES: dict[str, dict[str, str]] = {k: {} for k in KINDS}
_imported: set[str] = set()


def _import_next() -> bool:
    """Import the next built-in package not yet imported; False when all are."""
    for pkg in BUILTIN_PACKAGES:
        if pkg not in _imported:
            _imported.add(pkg)
            importlib.import_module(pkg)
            return True
    return False


def _load_builtins() -> None:
    while _import_next():
        pass


def _lookup(kind: str, name: str) -> Entry | None:
    """The entry of ``name`` (or of the name it aliases), importing built-in packages until it is found."""
    while True:
        real = _ALIASES[kind].get(name, name)
        if real in _REGISTRY[kind]:
            return _REGISTRY[kind][real]
        if not _import_next():
            return None


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ConfigError(f"unknown component kind {kind!r}; kinds: {', '.join(KINDS)}")


def register(kind: str, name: str, *, summary: str = "", requires: dict | None = None,
             defaults: dict | None = None, aliases: tuple[str, ...] = (), produces: Any = (),
             needs: Any = (), reopen: Callable[[dict], dict] | None = None) -> Callable:
    """Decorator registering ``factory`` as component ``name`` of ``kind``.

    ``requires`` (retrievers): ``{"enrich": [names], "relate": [names]}`` the
    index is built with for the retriever's defaults (what ``momoka eval`` builds).
    ``produces`` (enrichers, relators) and ``needs`` (retrievers): the store
    artifacts it writes or reads, as keys ``"KIND/NAME"`` (KIND one of
    :data:`ARTIFACT_KINDS`), a tuple or a function of the options; a retriever
    whose needs the store lacks is refused by :meth:`Corpus.retriever <momoka.methods.corpus.Corpus.retriever>`
    with an error naming the ``--enrich``/``--relate`` that produces them
    (:func:`missing`). ``defaults``: options passed to the
    factory unless the caller gives them (how an alias such as ``mm`` fixes the
    view of the dense retriever). ``aliases``: other names for it. ``reopen`` (enrichers,
    relators): ``settings -> options``, the options that keep a reopened store's component as it
    was built (from the settings its ``describe()`` recorded), under the options recorded with it,
    so a default changed since does not change what is added to an old store.
    Registering a name twice raises :class:`ConfigError`.
    """
    _check_kind(kind)

    def deco(factory: Callable) -> Callable:
        names = (name, *aliases)
        for n in names:
            if n in _REGISTRY[kind] or n in _ALIASES[kind]:
                raise ConfigError(f"{kind} {n!r} is already registered")
        e = Entry(kind, name, factory, summary, dict(requires or {}), dict(defaults or {}), tuple(aliases),
                  produces if callable(produces) else tuple(produces), needs if callable(needs) else tuple(needs),
                  reopen)
        _REGISTRY[kind][name] = e
        for a in aliases:
            _ALIASES[kind][a] = name
        return factory

    return deco


def available(kind: str, *, aliases: bool = True) -> list[str]:
    """Registered names of ``kind`` (with their aliases unless ``aliases=False``), sorted."""
    _check_kind(kind)
    _load_builtins()
    names = set(_REGISTRY[kind])
    if aliases:
        names |= set(_ALIASES[kind])
    return sorted(names)


def entry(kind: str, name: str) -> Entry:
    """The :class:`Entry` of ``name`` (an alias resolves to its target)."""
    _check_kind(kind)
    e = _lookup(kind, name)
    if e is None:
        raise ConfigError(f"unknown {kind} {name!r}; available: {', '.join(available(kind))}")
    return e


def create(kind: str, name: str, *args: Any, **options: Any) -> Any:
    """Build component ``name`` of ``kind`` (retrievers take a :class:`~momoka.methods.corpus.Corpus` first)."""
    _check_kind(kind)
    e = entry(kind, name)
    opts = {**e.defaults, **options}
    try:
        return e.factory(*args, **opts)
    except TypeError as exc:
        bad = re.search(r"unexpected keyword argument '(\w+)'", str(exc))
        if bad:
            raise ConfigError(_unknown_option(kind, name, bad.group(1), option_names(e.factory, len(args)))) from None
        if "positional argument" in str(exc):
            raise ConfigError(f"{kind} {name!r}: {exc}") from None
        raise


def option_names(factory: Callable, positional: int = 0) -> list[str]:
    """The keyword options ``factory`` takes, in signature order: a class's ``__init__`` parameters, following
    ``**options`` into the class a factory function returns (its return annotation) and up the base classes'
    ``__init__``; the first ``positional`` parameters of each (passed by position, such as a retriever's
    index) are left out."""
    import inspect  # start-up: inspect, only for an option that is not there

    cls = factory if inspect.isclass(factory) else None
    funcs = [] if cls is not None else [factory]
    if cls is None:
        ret = inspect.signature(factory).return_annotation
        ret = getattr(factory, "__globals__", {}).get(ret) if isinstance(ret, str) else ret
        cls = ret if inspect.isclass(ret) else None
    if cls is not None:
        funcs += [c.__dict__["__init__"] for c in cls.__mro__ if "__init__" in c.__dict__ and c is not object]
    names: list[str] = []
    for f in funcs:
        try:
            params = list(inspect.signature(f).parameters.values())
        except (TypeError, ValueError):
            break
        if params and params[0].name == "self":
            params = params[1:]
        params = params[positional:] if all(p.kind == p.POSITIONAL_OR_KEYWORD for p in params[:positional]) else params
        for p in params:
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in names:
                names.append(p.name)
        if not any(p.kind == p.VAR_KEYWORD for p in params):
            break  # no **options passed on to the base class
    return names


def _unknown_option(kind: str, name: str, bad: str, names: list[str]) -> str:
    """The error for option ``bad`` that component ``name`` does not take: the close matches, then every option."""
    import difflib  # start-up: difflib, only for an option that is not there

    close = difflib.get_close_matches(bad, names, n=3, cutoff=0.6)
    msg = f"{kind} {name!r} has no option {bad!r}"
    msg += f"; did you mean {' or '.join(close)}?" if close else "."
    if names:
        msg += f" Its options: {', '.join(sorted(names))}"
    return msg


def check_options_used(left: dict, used: Sequence[str]) -> None:
    """:class:`ConfigError` for per-component options (``{name: {...}}``) left over after a call took those of the
    components it runs (``used``): options for a misspelt or unused component are never ignored in silence."""
    if not left:
        return
    import difflib  # start-up: difflib, only for options that are not used

    named = []
    for bad in sorted(left):
        close = difflib.get_close_matches(bad, list(used), n=1, cutoff=0.6)
        named.append(repr(bad) + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise ConfigError(f"options for {', '.join(named)}, which this call does not run; it runs "
                      f"{', '.join(map(repr, used))}")


def requirements(name: str) -> dict:
    """``{"enrich": [...], "relate": [...]}`` that retriever ``name`` needs."""
    e = entry("retriever", name)
    return {"enrich": list(e.requires.get("enrich", ())), "relate": list(e.requires.get("relate", ()))}


def summaries(kind: str) -> list[tuple[str, str]]:
    """``(name, summary)`` of every registered component of ``kind`` (aliases shown as such)."""
    _load_builtins()
    out = [(n, e.summary) for n, e in sorted(_REGISTRY[kind].items())]
    out += [(a, f"alias of {t}") for a, t in sorted(_ALIASES[kind].items())]
    return sorted(out)


def has_artifact(store: Any, key: str) -> bool:
    """Whether ``store`` holds the artifact ``key`` (``"vectors/NAME"``, ``"bm25/NAME"``, ``"relation/NAME"``,
    ``"nodes/NAME"``)."""
    kind, _, name = key.partition("/")
    check = {"vectors": store.has_vector_view, "bm25": store.has_bm25_view, "relation": store.has_relation,
             "nodes": store.has_node_table}.get(kind)
    if check is None or not name:
        raise ConfigError(f"an artifact key is KIND/NAME with KIND one of {', '.join(ARTIFACT_KINDS)}, got {key!r}")
    return bool(check(name))


def producers(key: str) -> list[tuple[str, str]]:
    """``(kind, name)`` of every registered enricher and relator that produces artifact ``key`` with its
    default options."""
    _load_builtins()
    return [(k, n) for k in ("enricher", "relator") for n, e in sorted(_REGISTRY[k].items())
            if key in e.artifacts("produces")]


def missing(name: str, store: Any, options: dict | None = None) -> str | None:
    """Why retriever ``name`` with ``options`` cannot run on ``store`` (the artifacts it needs that the store
    lacks, each with the ``--enrich``/``--relate`` option that produces it), or None when nothing is missing."""
    e = entry("retriever", name)
    lacking = [k for k in e.artifacts("needs", options) if not has_artifact(store, k)]
    if not lacking:
        return None
    why = []
    for k in lacking:
        if k in RAW_ARTIFACTS:
            why.append(f"{k} ({RAW_ARTIFACTS[k]})")
            continue
        made = producers(k)
        flags = " or ".join(f"--{'enrich' if kind == 'enricher' else 'relate'} {n}" for kind, n in made)
        why.append(f"{k} ({'made by ' + flags if flags else 'no registered enricher or relator makes it'})")
    where = f" at {store.path}" if getattr(store, "path", None) else ""
    return (f"retriever {e.name!r} needs what the store{where} lacks: {'; '.join(why)}; build the index with it "
            f"(`momoka index DIR --store S ...` adds enrichers and relators to an existing store)")
