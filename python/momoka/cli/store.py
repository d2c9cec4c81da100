"""``momoka store verify|merge`` and ``momoka cache info|clear``."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from ..errors import StoreCorruptedError
from .common import say

#: The caches ``momoka cache`` shows and clears (see :func:`_caches`).
_CACHES = ("models", "llm", "computed", "test-gguf")


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
    m = ssub.add_parser("merge", help="merge a store's segments into one",
                        description="Merge every segment of the store into one (each commit adds a segment; "
                        "the merge policy merges the newest ones as they pile up). Drops the data of deleted "
                        "chunks and gives each dense view one HNSW graph. Takes the writer lock.")
    m.add_argument("store", help="store directory")
    m.set_defaults(func=_merge)

    p = sub.add_parser("cache", help="show or empty momoka's caches (models, LLM answers, computed scores)",
                       description="Everything momoka writes under $MOMOKA_HOME (default ~/.cache/momoka): the "
                       "installed models (models/), the LLM response cache (llm.sqlite, or $MOMOKA_LLM_CACHE), "
                       "computed model outputs (cache/, or $MOMOKA_CACHE_DIR) and GGUF conversions older test suites "
                       "left (test-gguf/). "
                       "Other entries of the folder are listed and never removed.")
    csub = p.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    i = csub.add_parser("info", help="where the caches are and how big")
    i.add_argument("--json", action="store_true", help="print as JSON")
    i.set_defaults(func=_cache_info)
    c = csub.add_parser("clear", help="empty a cache")
    c.add_argument("what", choices=(*_CACHES, "all"), help="which cache to empty (all: every one)")
    c.set_defaults(func=_cache_clear)


def _verify(args: argparse.Namespace) -> int:
    from ..store import Store  # start-up: momoka.store
    from ..store._verify import verify_store  # start-up: momoka.store._verify

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


def _merge(args: argparse.Namespace) -> int:
    from ..store import Store  # start-up: momoka.store

    with Store.open(args.store, writable=True) as st:
        before = len(st.segments)
        merged = st.merge(everything=True)
        print(f"{'merged' if merged else 'nothing to merge'}: {before} segment(s) -> {len(st.segments)}; "
              f"{st.n_chunks} chunks in {st.manifest['dir']}")
    return 0


def _dir_bytes(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else 0


def _caches() -> dict:
    """Every cache momoka writes under its home, by name: ``{"path", "bytes"}`` (plus ``"files"`` when one
    cache is several files), and ``other``: entries of the home that are not momoka's (listed, never removed)."""
    from ..llm.cache import default_cache_path  # start-up: momoka.llm.cache
    from ..models.catalog import computed_cache_dir, momoka_home, models_dir  # start-up: momoka.models.catalog

    home = momoka_home()
    llm = default_cache_path()
    llm_files = [llm, Path(f"{llm}-wal"), Path(f"{llm}-shm")]
    out = {"home": str(home),
           "models": {"path": str(models_dir()), "bytes": _dir_bytes(models_dir())},
           "llm": {"path": str(llm), "bytes": sum(q.stat().st_size for q in llm_files if q.exists()),
                   "files": [str(q) for q in llm_files]},
           # model outputs computed once and reused (perplexity log-probs of the ppl chunker, ...)
           "computed": {"path": str(computed_cache_dir()), "bytes": _dir_bytes(computed_cache_dir())},
           # conversions earlier test suites kept here (tests now keep theirs in their session's computed cache)
           "test-gguf": {"path": str(home / "test-gguf"), "bytes": _dir_bytes(home / "test-gguf")}}
    known = {Path(v["path"]) for k, v in out.items() if isinstance(v, dict)} | set(llm_files)
    other = sorted(p for p in home.iterdir() if p not in known) if home.is_dir() else []
    out["other"] = [{"path": str(p), "bytes": _dir_bytes(p) if p.is_dir() else p.lstat().st_size} for p in other]
    return out


def _cache_info(args: argparse.Namespace) -> int:
    info = _caches()
    if Path(info["llm"]["path"]).exists():
        from ..llm import ResponseCache  # start-up: momoka.llm

        with ResponseCache(info["llm"]["path"]) as c:
            info["llm"]["entries"] = len(c)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"home:      {info['home']}  ($MOMOKA_HOME)")
    for name in _CACHES:
        c = info[name]
        note = ""
        if name == "llm":
            n = c.get("entries")
            note = f", {n} answers" if n is not None else " (none yet)"
        print(f"{name + ':':<10} {c['path']}  {c['bytes'] / 1e6:.2f} MB{note}")
    for o in info["other"]:
        print(f"{'other:':<10} {o['path']}  {o['bytes'] / 1e6:.2f} MB (not momoka's; left alone)")
    return 0


def _cache_clear(args: argparse.Namespace) -> int:
    info = _caches()
    names = _CACHES if args.what == "all" else (args.what,)
    for name in names:
        c = info[name]
        for q in [Path(f) for f in c.get("files", [c["path"]])]:
            if q.is_dir():
                shutil.rmtree(q)
            else:
                q.unlink(missing_ok=True)
        say(f"cleared the {name} cache {c['path']}" + (" (momoka models install reinstalls them)"
                                                       if name == "models" else ""))
    for o in info["other"] if args.what == "all" else []:
        say(f"left {o['path']} alone: momoka did not write it")
    return 0
