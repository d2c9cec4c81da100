"""Options shared by several commands: component names, component options, LLM endpoint, output."""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from typing import Any, Callable

from .. import settings
from .._validate import check_float
from ..errors import ConfigError


def say(msg: str) -> None:
    """A one-line message on stderr."""
    print(f"momoka: {msg}", file=sys.stderr, flush=True)


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose ``epilog`` may be a callable, made into text only when help is shown.

    Listing the registered names imports every method package, which a command
    that only runs (``momoka query``) should not pay for.
    """

    def format_help(self) -> str:
        if callable(self.epilog):
            self.epilog = self.epilog()
        return super().format_help()


def names_epilog(*kinds: str) -> Callable[[], str]:
    """The registered names of each kind, for a command's ``--help`` (a callable: see :class:`Parser`)."""

    def text() -> str:
        from .. import registry  # start-up: momoka.registry (dataclasses)

        lines = []
        for kind in kinds:
            lines.append(f"{kind}s:")
            for name, summary in registry.summaries(kind):
                lines.append(f"  {name:<12} {summary}")
        return "\n".join(lines)

    return text


def split_names(values: list[str] | None) -> list[str]:
    """``["a,b", "c"]`` -> ``["a", "b", "c"]`` (order kept, repeats dropped)."""
    out: list[str] = []
    for v in values or []:
        for n in v.split(","):
            n = n.strip()
            if n and n not in out:
                out.append(n)
    return out


def add_option_argument(p: argparse.ArgumentParser) -> None:
    """``-o NAME.KEY=VALUE``: an option of a component (repeatable)."""
    p.add_argument("-o", "--option", action="append", default=[], metavar="NAME.KEY=VALUE",
                   help="an option of a component, e.g. -o paths.referee=embedding -o trail.expand=3 "
                        "(VALUE is read as JSON when it parses, else as a string; repeatable)")


def parse_options(items: list[str]) -> dict[str, dict[str, Any]]:
    """``["paths.referee=embedding", "trail.expand=3"]`` -> ``{"paths": {"referee": "embedding"}, "trail": {"expand": 3}}``."""
    out: dict[str, dict[str, Any]] = {}
    for it in items or []:
        name, dot, rest = it.partition(".")
        key, eq, value = rest.partition("=")
        if not dot or not eq or not name or not key:
            raise ConfigError(f"an option is NAME.KEY=VALUE (e.g. paths.referee=embedding), not {it!r}")
        try:
            v: Any = json.loads(value)
        except ValueError:
            v = value
        out.setdefault(name, {})[key.replace("-", "_")] = v
    return out


def add_chunker_arguments(p: argparse.ArgumentParser, *, several: bool = False, choices: bool = False,
                          note: str = "") -> None:
    """``--chunker`` and ``--size`` with the shared defaults (:func:`momoka.methods.pipeline.chunker_params`).

    ``several``: comma-separated names; ``choices``: the parser itself refuses an unknown name.
    """
    from ..methods.base import DEFAULT_CHUNK_SIZE, DEFAULT_CHUNKER  # start-up: momoka.methods.base

    known = None
    if choices:
        from .. import registry  # start-up: momoka.registry (dataclasses)

        known = registry.available("chunker")
    p.add_argument("--chunker", default=None, choices=known, metavar="NAME[,NAME]" if several else "NAME",
                   help=("chunker name(s), comma-separated" if several else "chunker name")
                   + f" (default {DEFAULT_CHUNKER}{note})")
    p.add_argument("--size", type=int, default=None,
                   help=f"chunk size for the chunker (default {DEFAULT_CHUNK_SIZE} tokens for {DEFAULT_CHUNKER}, "
                   "the chunker's own default for the others; sentences for 'sentence')")


def chunker_of(args: argparse.Namespace) -> str:
    """The ``--chunker`` given, else the default chunker."""
    from ..methods.base import DEFAULT_CHUNKER  # start-up: momoka.methods.base

    return args.chunker or DEFAULT_CHUNKER


def add_retriever_argument(p: argparse.ArgumentParser, *, several: bool = False) -> None:
    """``--retriever`` with the shared default (:data:`momoka.methods.pipeline.DEFAULT_RETRIEVER`)."""
    from ..methods.base import DEFAULT_RETRIEVER  # start-up: momoka.methods.base

    if several:
        p.add_argument("--retriever", action="append", default=None, metavar="NAME[,NAME]",
                       help=f"retriever(s), comma-separated or repeated (default {DEFAULT_RETRIEVER})")
    else:
        p.add_argument("--retriever", default=DEFAULT_RETRIEVER, metavar="NAME",
                       help=f"retriever name (default {DEFAULT_RETRIEVER})")


def deprecated_alias(old: str) -> type[argparse.Action]:
    """An argparse action storing the value, with a warning when the option was spelled ``old``."""

    class _Store(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            if option_string == old:
                warnings.warn(f"{old} is deprecated; use {self.option_strings[0]}", FutureWarning, stacklevel=2)
            setattr(namespace, self.dest, values)

    return _Store


def add_llm_arguments(p: argparse.ArgumentParser) -> None:
    """``--llm-url`` and ``--llm-model``: the OpenAI-compatible endpoint for LLM-backed components."""
    g = p.add_argument_group("LLM endpoint (default: $MOMOKA_LLM_BASE_URL, else the local model)")
    g.add_argument("--llm-url", default=None, help="OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1")
    g.add_argument("--llm-model", default=None,
                   help="model name at --llm-url (default $MOMOKA_LLM_MODEL, else the one model the server lists)")
    g.add_argument("--llm-timeout", type=float, default=None, metavar="S",
                   help="seconds per LLM request (default $MOMOKA_LLM_TIMEOUT, else 120)")
    g.add_argument("--llm-deadline", "--deadline", dest="llm_deadline", type=float, default=None, metavar="S",
                   help="overall deadline of each LLM stage in seconds; requests still unanswered then fail "
                        "(default $MOMOKA_LLM_DEADLINE, else none)")
    g.add_argument("--llm-max-failed", type=float, default=None, metavar="SHARE",
                   help="stop an LLM stage (llm/meta chunker, title/keywords/summary, referee, jerr) with an error "
                        "before storing its output when more than this share of its answers were unusable; "
                        "below it, warn with the share and record the fallbacks, which a rerun asks again "
                        "(default $MOMOKA_LLM_MAX_FAILED, else 0.25)")


def apply_llm_arguments(args: argparse.Namespace) -> None:
    """Make ``--llm-*`` the endpoint and limits every LLM-backed component of this run uses."""
    from ..llm import ENV_BASE_URL, ENV_MODEL  # start-up: momoka.llm
    from ..llm.base import ENV_DEADLINE, ENV_MAX_FAILED, ENV_TIMEOUT  # start-up: momoka.llm.base

    for attr, env in (("llm_timeout", ENV_TIMEOUT), ("llm_deadline", ENV_DEADLINE), ("llm_max_failed", ENV_MAX_FAILED)):
        v = getattr(args, attr, None)
        if v is not None:
            share = attr == "llm_max_failed"
            check_float(v, f"--{attr.replace('_', '-')}", minimum=0, above=True, maximum=1 if share else None,
                        unit="" if share else "seconds")
            os.environ[env] = str(v)

    if getattr(args, "llm_model", None) and not (getattr(args, "llm_url", None) or settings.get_text(ENV_BASE_URL)):
        raise ConfigError("--llm-model needs --llm-url (or MOMOKA_LLM_BASE_URL)")
    if getattr(args, "llm_url", None):
        os.environ[ENV_BASE_URL] = args.llm_url
    if getattr(args, "llm_model", None):
        os.environ[ENV_MODEL] = args.llm_model


def write_json(path: str, data: Any) -> None:
    """Write ``data`` as indented JSON to ``path`` and say so on stderr."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, ensure_ascii=False)
        f.write("\n")
    say(f"saved {path}")
