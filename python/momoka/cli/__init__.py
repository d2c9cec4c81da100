"""The ``momoka`` command.

Each area registers its sub-commands from its own module (``momoka.cli.<area>``,
a ``register(subparsers)`` function); this module wires them together and turns
any :class:`momoka.errors.MomokaError` into a one-line message and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings

from .._version import __version__
from ..errors import MomokaError
from .common import Parser

# Modules providing sub-commands, in the order they appear in --help.
_AREAS = ("index", "store", "serve", "graph", "evaluation", "chunking", "models", "llm", "ets")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="momoka",
        description="momoka: retrieval over long documents (chunk, index, query, evaluate).",
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for area in _AREAS:
        importlib.import_module(f"{__name__}.{area}").register(sub)
    return parser


def _version() -> str:
    return f"momoka {__version__}"


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings as one line ``momoka: warning: ...`` (no source path)."""
    print(f"momoka: warning: {message}", file=file or sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run the ``momoka`` command; returns its exit status (errors: one line on stderr, status 2)."""
    parser = build_parser()
    shown = warnings.showwarning
    warnings.showwarning = _show_warning
    try:
        args = parser.parse_args(argv)  # a deprecated option warns here
        if not getattr(args, "func", None):
            parser.print_help()
            return 2
        rc = args.func(args)
    except MomokaError as exc:
        print(f"momoka: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # permissions, read-only or full file systems outside the store's own checks
        if isinstance(exc, BrokenPipeError):
            return 0
        from ..store._manifest import os_reason  # start-up: momoka.store._manifest

        print(f"momoka: error: {os_reason(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("momoka: interrupted", file=sys.stderr)
        return 130
    finally:
        warnings.showwarning = shown
        oc = sys.modules.get("momoka.llm.openai_client")
        if oc is not None:
            oc._close_all()  # close every HTTP session on every path (no "Unclosed client session")
    return int(rc or 0)
