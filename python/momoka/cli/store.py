"""``momoka store verify`` and ``momoka cache info|clear``."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from .common import say


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``store`` and ``cache`` commands."""
    p = sub.add_parser("store", help="check a store", description="Check a store against its manifest.")
    ssub = p.add_subparsers(dest="store_command", metavar="ACTION", required=True)
    v = ssub.add_parser("verify", help="check every file of a store (sizes and sha256)",
                        description="Read every file of the store's current generation and compare its size and "
                        "sha256 with the manifest; exit status 2 naming the damaged files when any differs.")
    v.add_argument("store", help="store directory")
    v.add_argument("--json", action="store_true", help="print the report as JSON")
    v.set_defaults(func=_verify)

    p = sub.add_parser("cache", help="show or empty momoka's caches (models, LLM answers)",
                       description="The caches momoka writes: the installed models ($MOMOKA_HOME/models) and "
                       "the LLM response cache ($MOMOKA_HOME/llm.sqlite, or $MOMOKA_LLM_CACHE).")
    csub = p.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    i = csub.add_parser("info", help="where the caches are and how big")
    i.add_argument("--json", action="store_true", help="print as JSON")
    i.set_defaults(func=_cache_info)
    c = csub.add_parser("clear", help="empty a cache")
    c.add_argument("what", choices=("llm", "models", "all"), help="which cache to empty")
    c.set_defaults(func=_cache_clear)


def _verify(args: argparse.Namespace) -> int:
    from ..errors import StoreCorruptedError
    from ..index import Store
    from ..index._verify import verify_store

    rep = verify_store(args.store)
    if not rep["damaged"]:
        Store.open(args.store).close()  # the structure too (counts, columns, headers)
    if args.json:
        print(json.dumps(rep, indent=2))
    if rep["damaged"]:
        files = "; ".join(f"{f} ({why})" for f, why in rep["damaged"])
        raise StoreCorruptedError(f"store {args.store} is corrupted: {len(rep['damaged'])} of {rep['files']} files "
                                  f"damaged: {files}; rebuild it (momoka index ... --overwrite) or restore a backup",
                                  Path(args.store) / rep["damaged"][0][0])
    if not args.json:
        print(f"ok: {rep['files']} files, {rep['bytes']:,} bytes of {rep['generation']} match the manifest")
    return 0


def _dir_bytes(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else 0


def _caches() -> dict:
    from ..llm.cache import default_cache_path
    from ..models.registry import momoka_home, models_dir

    llm = default_cache_path()
    llm_bytes = sum(q.stat().st_size for q in (llm, Path(f"{llm}-wal"), Path(f"{llm}-shm")) if q.exists())
    return {"home": str(momoka_home()),
            "models": {"path": str(models_dir()), "bytes": _dir_bytes(models_dir())},
            "llm": {"path": str(llm), "bytes": llm_bytes}}


def _cache_info(args: argparse.Namespace) -> int:
    info = _caches()
    if Path(info["llm"]["path"]).exists():
        from ..llm import ResponseCache

        with ResponseCache(info["llm"]["path"]) as c:
            info["llm"]["entries"] = len(c)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"home:   {info['home']}  ($MOMOKA_HOME)")
    print(f"models: {info['models']['path']}  {info['models']['bytes'] / 1e6:.1f} MB")
    n = info["llm"].get("entries")
    print(f"llm:    {info['llm']['path']}  {info['llm']['bytes'] / 1e6:.2f} MB"
          + (f", {n} answers" if n is not None else " (none yet)"))
    return 0


def _cache_clear(args: argparse.Namespace) -> int:
    info = _caches()
    if args.what in ("llm", "all"):
        p = Path(info["llm"]["path"])
        for q in (p, Path(f"{p}-wal"), Path(f"{p}-shm")):
            q.unlink(missing_ok=True)
        say(f"cleared the LLM cache {p}")
    if args.what in ("models", "all"):
        p = Path(info["models"]["path"])
        if p.is_dir():
            shutil.rmtree(p)
        say(f"cleared the model cache {p} (momoka models install reinstalls them)")
    return 0
