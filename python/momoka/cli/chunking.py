"""``momoka chunk``: cut a file into chunks and print them with their offsets."""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import ConfigError, InputError
from .common import add_chunker_arguments, add_llm_arguments, apply_llm_arguments, chunker_of, names_epilog


def register(subparsers) -> None:
    """Add the ``chunk`` sub-command."""
    p = subparsers.add_parser(
        "chunk",
        help="cut a document into chunks and print them with offsets",
        description=(
            "Read FILE (plain text, Markdown, HTML, PDF or Word .docx, by extension or --format), chunk it and print "
            "each chunk with its character offsets, paragraph and sentence index and section path."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=names_epilog("chunker"),
    )
    p.add_argument("file", metavar="FILE", help="document to chunk (.txt, .md, .html, ...)")
    add_chunker_arguments(p, note="; the chunks 'momoka index' stores with the same options; the names are "
                          "listed below")
    p.add_argument("--overlap", type=int, default=None, help="overlap between chunks (fixed, sentence)")
    p.add_argument("--unit", choices=("tokens", "chars"), default=None, help="size unit (default: tokens)")
    p.add_argument(
        "--tokenizer",
        metavar="JSON",
        default=None,
        help="count tokens with this tokenizers.Tokenizer file (tokenizer.json; default: whitespace tokens)",
    )
    p.add_argument("--format", choices=("text", "markdown", "html", "pdf", "docx"), default=None,
                   help="override the parser (default: by the extension)")
    p.add_argument("--json", action="store_true", help="print one JSON object per chunk (JSON lines)")
    p.add_argument("--no-dense", action="store_true",
                   help="chunk as 'momoka index --no-dense' does: without the default embedder's input limit "
                   "(by default a chunk longer than the embedder reads is split further, as 'momoka index' does)")
    add_llm_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``momoka chunk``; errors are momoka.errors exceptions (handled by the dispatcher)."""
    from ..methods.pipeline import chunker_params  # start-up: momoka.methods.pipeline
    from ..methods.sources import load_embedder, resolve_chunker  # start-up: momoka.methods.sources
    from ..text import Document  # start-up: momoka.text

    apply_llm_arguments(args)

    try:
        doc = Document.from_file(args.file, format=args.format)
    except FileNotFoundError:
        raise InputError(f"no such file: {args.file}") from None
    except IsADirectoryError:
        raise InputError(f"is a directory, not a file: {args.file}") from None
    except PermissionError:
        raise InputError(f"cannot read {args.file}: permission denied") from None
    tokenizer = _load_tokenizer(args.tokenizer) if args.tokenizer else None
    name = chunker_of(args)
    emb = None if args.no_dense else load_embedder()  # the index's default embedder sets the input limit
    params = chunker_params(name, args.size, {"overlap": args.overlap, "unit": args.unit, "tokenizer": tokenizer},
                            embedder=emb)
    chunker, _ = resolve_chunker(name, params, emb)
    chunks = chunker(doc)
    out = sys.stdout
    if args.json:
        for c in chunks:
            d = c.to_dict()
            if doc.pages is not None:
                d["page"] = doc.page_at(c.start)
            out.write(json.dumps(d, ensure_ascii=False) + "\n")
    else:
        for c in chunks:
            section = " > ".join(c.section)
            page = doc.page_at(c.start)
            head = (f"[{c.index}] {'' if page is None else f'page {page}  '}{c.start}:{c.end}  "
                    f"paragraph {c.paragraph}  sentence {c.sentence}")
            out.write(head + (f"  section {section}" if section else "") + "\n")
            out.write("    " + c.text.replace("\n", "\n    ") + "\n\n")
    st = getattr(chunker, "stats", None)
    if hasattr(st, "fallback") and hasattr(st, "to_dict"):  # an LLM chunker: say how many windows fell back
        from ..eval.chunk_compare import fallback_note  # start-up: momoka.eval.chunk_compare

        sys.stderr.write(f"momoka: {fallback_note(name, st.to_dict())}\n")
    return 0


def _load_tokenizer(path: str):
    """A ``tokenizers.Tokenizer`` from a tokenizer.json file, or a momoka error saying why not."""
    from pathlib import Path  # start-up: pathlib

    if not Path(path).is_file():
        raise InputError(f"no such tokenizer file: {path}")
    try:
        from tokenizers import Tokenizer  # start-up: tokenizers
    except ImportError:
        raise ConfigError("--tokenizer needs the 'tokenizers' package (pip install tokenizers)") from None
    try:
        return Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception for malformed files
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"cannot load tokenizer {path}: {msg}") from None
