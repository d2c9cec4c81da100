"""The ``momoka`` command.

Each area registers its sub-commands from its own module (``momoka.cli.<area>``,
a ``register(subparsers)`` function); this module wires them together and turns
any :class:`momoka.errors.MomokaError` into a one-line message and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ..errors import MomokaError

# Modules providing sub-commands, in the order they appear in --help.
_AREAS = ("index", "evaluation", "chunking", "models", "llm")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="momoka",
        description="momoka: retrieval over long documents (chunk, index, query, evaluate).",
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for area in _AREAS:
        importlib.import_module(f"{__name__}.{area}").register(sub)
    return parser


def _version() -> str:
    from .._version import __version__

    return f"momoka {__version__}"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        rc = args.func(args)
    except MomokaError as exc:
        print(f"momoka: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("momoka: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    return int(rc or 0)
