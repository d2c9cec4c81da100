"""``momoka index``, ``momoka query``, ``momoka ask`` and ``momoka quickstart``."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from .._validate import MAX_COUNT, check_int
from ..errors import ConfigError, InputError
from ..methods.base import DEFAULT_BUDGET
from .common import (
    add_chunker_arguments,
    add_llm_arguments,
    add_retriever_argument,
    chunker_of,
    add_option_argument,
    apply_llm_arguments,
    names_epilog,
    parse_options,
    say,
    split_names,
)

_RAW = argparse.RawDescriptionHelpFormatter


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "index", help="chunk, embed, enrich and relate documents into a store", formatter_class=_RAW,
        description="Index files or directories (.txt, .md, .html, .pdf, .docx) into a store. On an existing store the "
        "documents are added (with the store's own pipeline); --enrich/--relate names not yet in the "
        "store are added and run on every document.",
        epilog=names_epilog("chunker", "enricher", "relator"))
    p.add_argument("paths", nargs="+", help="files or directories to index (.txt .md .html .pdf .docx; a document's id is "
                   "its path without the extension, relative to the common root of PATHS)")
    p.add_argument("--store", required=True, help="store directory (created if missing)")
    add_chunker_arguments(p, note="; new stores only")
    p.add_argument("--enrich", action="append", default=None, metavar="NAME",
                   help="enricher(s) to run, e.g. --enrich title (comma-separated or repeated)")
    p.add_argument("--relate", action="append", default=None, metavar="NAME",
                   help="relator(s) to run, e.g. --relate paths (comma-separated or repeated)")
    add_option_argument(p)
    p.add_argument("--no-dense", action="store_true", help="BM25 only: no embedder, no vectors")
    p.add_argument("--embedder", default=None, metavar="ID",
                   help="embedder of a new store (default minilm-l6-v2-int8; minilm-l6-v2-int8-fused: the same "
                   "model with fused attention, about 1.4x less CPU per MB; see momoka models list); an existing "
                   "store keeps its own")
    p.add_argument("--no-headers", dest="headers", action="store_false",
                   help="index each chunk's text alone, without its contextual header (the document's title and "
                   "its section or title line, embedded and BM25-indexed with the chunk); new stores only")
    p.add_argument("--float16", action="store_true", help="store vectors as float16")
    p.add_argument("--overwrite", action="store_true", help="replace an existing store")
    p.add_argument("--replace", action="store_true",
                   help="re-index documents whose text changed since they were indexed (identical ones are "
                        "always skipped)")
    p.add_argument("--on-error", choices=("skip", "stop"), default="skip",
                   help="a file that cannot be read, or a link not followed: skip it with a warning (default; exit "
                        "status 1 when any was skipped) or stop before indexing anything")
    p.add_argument("--follow-links", action="store_true",
                   help="also follow symbolic links whose target is outside the PATHS given. Links in a folder: "
                        "those to files and folders inside the PATHS given are followed (a link to a folder that "
                        "contains it, a loop, is not); the others are skipped with a warning naming each, "
                        "unless --follow-links")
    p.add_argument("--encoding", default=None,
                   help="text encoding of every file (default: each file's own: its byte order mark, an HTML "
                        "page's declared charset, else UTF-8, else a guess with a warning)")
    p.add_argument("--commit-every", type=int, default=None, metavar="N",
                   help="commit a generation every N documents (default 256) or --commit-seconds, so an "
                        "interrupted run loses at most that much; rerun the command to finish it")
    p.add_argument("--commit-seconds", type=float, default=None, metavar="T",
                   help="commit a generation at least every T seconds (default 60)")
    p.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="run the per-document work in this process (default) or on Ray workers while this "
                        "process commits (needs momoka[ray])")
    p.add_argument("--address", default=None, metavar="ADDR",
                   help="with --engine ray: the Ray cluster to join (default: a running one, else a local one)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="with --engine ray: worker actors (default one per CPU of the cluster)")
    p.add_argument("--estimate", action="store_true",
                   help="print the chunks and the expected LLM/referee calls of the chunker and relators for "
                   "these documents, with the build's settings; runs no model and no LLM, builds nothing")
    add_llm_arguments(p)
    p.set_defaults(func=_index)

    p = sub.add_parser("query", help="search a store with any registered retriever", formatter_class=_RAW,
                       description="Print the best items for a question.", epilog=names_epilog("retriever"))
    p.add_argument("store", help="store directory")
    p.add_argument("question", help="the query")
    _add_k_budget(p, "items")
    add_retriever_argument(p)
    add_option_argument(p)
    p.add_argument("--doc", action="append", default=None, help="restrict to this doc id (repeatable)")
    _add_where(p)
    p.add_argument("--max-query-chars", type=int, default=None, metavar="N",
                   help="accept queries up to N characters (default 10000)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=_query)

    p = sub.add_parser("ask", help="retrieve, then answer: quoted evidence, or an LLM's answer citing the passages",
                       formatter_class=_RAW,
                       description="Retrieve passages for a question (as many as --budget characters hold) and "
                       "answer it. With an OpenAI-compatible endpoint (--llm-url, $MOMOKA_LLM_BASE_URL) the model "
                       "answers, citing passages as [n], each an exact span doc [start:end] of a stored document. "
                       "Without one, the sentences that best answer the question are quoted as evidence, each "
                       "doc [start:end]; --reader local answers with the small local model instead.",
                       epilog=names_epilog("retriever", "reader", "refiner"))
    p.add_argument("store", help="store directory")
    p.add_argument("question", help="the question")
    _add_k_budget(p, "retrieved items")
    add_retriever_argument(p)
    p.add_argument("--reader", default=None,
                   help="reader name (default: llm with an endpoint, else evidence; local: the local model)")
    p.add_argument("--refine", default=None, metavar="NAME",
                   help="refine the retrieved items before reading (ets: evidence sentences by tree search)")
    _add_where(p)
    add_option_argument(p)
    p.add_argument("--json", action="store_true", help="print the answer as JSON")
    p.add_argument("--estimate", action="store_true",
                   help="print the LLM requests and tokens the retriever, the reader and the refiner would cost "
                   "for this question (bounds where the count depends on the answers); calls nothing (the jerr "
                   "retriever runs its offline graph search to price its look-up)")
    add_llm_arguments(p)
    p.set_defaults(func=_ask)

    p = sub.add_parser(
        "quickstart", help="index a bundled example document and answer a question about it",
        description="Index momoka's bundled example document (installing the default embedder on first "
        "use), print the passages that answer a question about it and quote the sentences that best answer it "
        "(offline: nothing is generated).")
    p.add_argument("question", nargs="?", default=None, help="your own question about the example")
    p.add_argument("--store", default=None, help="where to keep the example store (default: a temporary folder)")
    p.add_argument("-k", type=int, default=3, help="number of passages (default 3)")
    p.set_defaults(func=_quickstart)


def _add_k_budget(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("-k", type=int, default=None, help=f"at most this many {what} (default: as many as fit the budget; "
                   "5 with --budget 0)")
    p.add_argument("--budget", type=int, default=DEFAULT_BUDGET, metavar="CHARS",
                   help=f"the top {what} whose total length fits in CHARS characters (default "
                   f"{DEFAULT_BUDGET}; 0: no budget, k items)")
    p.add_argument("--no-assemble", dest="assemble", action="store_false",
                   help="keep the longest prefix of the ranking that fits the budget; by default the context is "
                   "assembled: hits that touch merged into one passage, no text twice, the first item that does "
                   "not fit what is left cut to its sentences that best match the query, later ones skipped (the "
                   "next ones still fill the budget)")


def _add_where(p: argparse.ArgumentParser) -> None:
    p.add_argument("--where", action="append", default=None, metavar="KEY=VALUE",
                   help="search only passages whose document matches (repeatable; all must hold, a key repeated "
                   "matches any of its values): type=pdf|docx|html|markdown|text, folder=PATH (the document id's "
                   "or file's folder), title=TITLE, page=3-7")
    p.add_argument("--pages", default=None, metavar="A-B",
                   help="search only passages on these pages of PDFs (1-based: 3, 3-7, 3-); the same as "
                   "--where page=A-B")


def _where(args: argparse.Namespace) -> dict | None:
    """The ``where`` filter of :meth:`Index.search` from ``--where KEY=VALUE`` and ``--pages``."""
    out: dict = {}
    for it in args.where or []:
        key, eq, value = it.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ConfigError(f"--where takes KEY=VALUE (e.g. type=pdf), not {it!r}")
        if key != "page":
            out.setdefault(key, []).append(value)
        elif "page" in out:
            raise ConfigError("give one page range (--where page=A-B or --pages A-B)")
        else:
            out["page"] = value
    if args.pages is not None:
        if "page" in out:
            raise ConfigError("give one page range (--where page=A-B or --pages A-B)")
        out["page"] = args.pages
    return out or None


def _k_budget(args: argparse.Namespace) -> dict:
    """``k`` and ``budget`` for :meth:`Index.search` from ``-k`` and ``--budget``."""
    if args.k is not None:
        check_int(args.k, "-k", minimum=1, maximum=MAX_COUNT)
    check_int(args.budget, "--budget", minimum=0, maximum=MAX_COUNT)
    return {"k": args.k, "budget": args.budget or None, "assemble": args.assemble}


def _index(args: argparse.Namespace) -> int:
    from ..methods.pipeline import Index  # start-up: momoka.methods.pipeline
    from ..store.store import MANIFEST  # start-up: momoka.store.store

    apply_llm_arguments(args)
    opts = parse_options(args.option)
    enrich = split_names(args.enrich)
    relate = split_names(args.relate)
    chunker_opts = opts.pop(chunker_of(args), {})
    enrich_specs = [(n, opts.pop(n, {})) for n in enrich]
    relate_specs = [(n, opts.pop(n, {})) for n in relate]
    if opts:
        raise ConfigError(f"-o names {', '.join(sorted(opts))}, which this command does not run "
                          "(give options to the chunker, enrichers and relators named)")
    store = Path(args.store)
    if args.estimate:
        return _estimate(args, enrich_specs, relate_specs, chunker_opts)
    t0 = time.monotonic()
    existed = store.exists()
    on_error = "skip" if args.on_error == "skip" else "raise"
    engine = {"engine": args.engine, "workers": args.workers, "address": args.address}
    if args.engine == "ray":
        from ..methods.distributed import require_ray  # start-up: momoka.methods.distributed

        require_ray()
    if args.embedder and args.no_dense:
        raise ConfigError("--embedder and --no-dense exclude each other (--no-dense stores no vectors)")
    if (store / MANIFEST).exists() and not args.overwrite:
        if args.embedder:
            say("note: --embedder applies to new stores; this store keeps its own embedder")
        if args.chunker or args.size or chunker_opts:
            say("note: --chunker/--size and the chunker's -o options apply to new stores; this store keeps "
                "its own chunker")
        if not args.headers:
            say("note: --no-headers applies to new stores; this store indexes its chunks as it was built to")
        ix = Index.open(store, writable=True)
        _commit_options(ix, args)
        new_e = [s for s in enrich_specs if ix.store.pipeline.needs("enrich", s[0])]
        new_r = [s for s in relate_specs if ix.store.pipeline.needs("relate", s[0])]
        if new_e or new_r:
            resumed = [n for n, _ in new_e if ix.store.pipeline.pending("enrich", n)] + [n for n, _ in new_r if ix.store.pipeline.pending("relate", n)]
            fresh = [n for n, _ in new_e + new_r if n not in resumed]
            if fresh:
                say(f"adding {', '.join(fresh)} to the store's pipeline (runs on every document)")
            if resumed:
                say(f"resuming {', '.join(resumed)} on the documents an interrupted run left")
            ix.extend(enrich=new_e, relate=new_r, commit=True)
            ix.save()
        ix.add(args.paths, existing="replace" if args.replace else "skip", on_error=on_error,
               encoding=args.encoding, commit=True, follow_links=args.follow_links, **engine)
        ix.save()
    else:
        ix = Index.build(args.paths, store=store, chunker=chunker_of(args), size=args.size,
                         embedder=None if args.no_dense else (args.embedder or "default"), enrich=enrich_specs, relate=relate_specs,
                         vector_dtype="float16" if args.float16 else "float32", overwrite=args.overwrite,
                         on_error=on_error, encoding=args.encoding, commit_docs=args.commit_every,
                         commit_seconds=args.commit_seconds, headers=args.headers, follow_links=args.follow_links,
                         **engine, **chunker_opts)
    report = ix.report
    added = report.added
    n_chunks = sum(len(ix.store.documents[d].chunk_ids) for d in added)
    pipe = ix.corpus.pipeline
    extra = [c["name"] for c in pipe["enrich"] + pipe["relate"]]
    _say_skipped(report.skipped, say)
    if report.skipped and not (added or report.unchanged or report.replaced or report.redone):
        _nothing_indexed(ix, store, existed, report.skipped)
    notes = [f"{len(v)} {k}" for k, v in (("unchanged", report.unchanged), ("replaced", report.replaced)) if v]
    if report.redone:
        notes.append(f"{len(report.redone)} redone (LLM fallbacks asked again)")
    if report.skipped:
        notes.append(f"{len(report.skipped)} skipped")
    print(f"indexed {len(added)} document(s), {n_chunks} chunk(s) into {store} ({len(ix)} documents in the store) "
          f"in {time.monotonic() - t0:.1f}s" + (f"; {', '.join(notes)}" if notes else "")
          + (f"; pipeline: {', '.join(extra)}" if extra else ""))
    for c in pipe["enrich"] + pipe["relate"]:
        st = (c.get("settings") or {}).get("stats")
        if st:
            print(f"  {c['name']}: " + ", ".join(f"{k} {v}" for k, v in st.items() if isinstance(v, (int, float))))
    ix.close()
    return 1 if report.skipped else 0


#: Files of types momoka does not read are named one by one up to this many; past it, a count per type.
SKIPPED_NAMED = 5


def _nothing_indexed(ix, store: Path, existed: bool, skipped: list) -> None:
    """Every input was skipped: an error (exit status 2), as bad input is; a store this run created is removed
    rather than left empty, an existing one is as it was."""
    import shutil  # start-up: shutil, only for a run that indexed nothing

    ix.close()
    if not existed:
        shutil.rmtree(store, ignore_errors=True)
    why = skipped[0][1]  # names its file
    more = f"; and {len(skipped) - 1} more, warned about above" if len(skipped) > 1 else ""
    raise InputError(f"nothing indexed, every input was skipped ({why}{more}): "
                     + (f"{store} is as it was" if existed else f"no store was made at {store}"))


def _say_skipped(skipped: list, say) -> None:
    """One warning per file that failed to read; the files of other types one by one when there are few,
    else the first few and a count per type; then, once, what a folder is read for."""
    from ..methods.sources import NOT_TEXT, READS, UNSUPPORTED  # start-up: momoka.methods.sources

    kinds = []
    for src, why in skipped:
        if why.startswith((UNSUPPORTED, NOT_TEXT)):
            kinds.append((src, why))
        else:
            say(f"warning: skipped {src}: {why}")
    shown = kinds if len(kinds) <= SKIPPED_NAMED else kinds[:SKIPPED_NAMED - 2]
    for src, why in shown:
        say(f"warning: skipped {src}: {why}")
    if len(shown) < len(kinds):
        count: dict[str, int] = {}
        for src, why in kinds[len(shown):]:
            key = why[len(UNSUPPORTED) + 1:] if why.startswith(UNSUPPORTED) else "no extension, not text"
            count[key] = count.get(key, 0) + 1
        say(f"warning: skipped {len(kinds) - len(shown)} more file(s) that are not documents: "
            + ", ".join(f"{k} ({n})" for k, n in sorted(count.items(), key=lambda t: (-t[1], t[0]))))
    if kinds:
        say(f"note: {READS}")


def _commit_options(ix, args: argparse.Namespace) -> None:
    if args.commit_every:
        ix.writer.commit_docs = args.commit_every
    if args.commit_seconds:
        ix.writer.commit_seconds = args.commit_seconds


def _estimate(args: argparse.Namespace, enrich_specs: list, relate_specs: list, chunker_opts: dict) -> int:
    """Print what indexing would chunk and cost; runs no model and calls no LLM.

    The files indexing would skip (unsupported, unreadable, links not followed) are warned about one by one,
    as ``index`` does, and listed as ``"skipped"``; ``--on-error stop`` stops on the first, as ``index`` does.

    The chunker is the build's (same name and parameters, :func:`chunker_params`). A
    chunker that runs a model or an LLM is not run: its own ``estimate`` prices it
    from the text, and the relators are priced on stand-in chunks of the default
    chunker (said in the output).
    """
    from .. import registry  # start-up: momoka.registry (dataclasses)
    from ..methods.pipeline import DEFAULT_CHUNKER, chunker_params  # start-up: momoka.methods.pipeline
    # start-up: momoka.methods.sources
    from ..methods.sources import (expand_paths, jsonable, language_default_embedder, load_embedder,
                                   resolve_chunker, to_document)

    # the files index would skip are named here too (a warning each, and in the output), as index names them
    skipped: list = []
    strict = args.on_error == "stop"
    docs = []
    for x in expand_paths(args.paths, skipped, strict=strict, follow_links=args.follow_links):
        try:
            docs.append(to_document(x, encoding=args.encoding))
        except InputError as exc:
            if strict:
                raise
            skipped.append((str(x), str(exc)))
    _say_skipped(skipped, say)
    name = chunker_of(args)
    # its tokenizer and input limit only: no model is run. The build's embedder: without --embedder, the
    # language-aware default (a mostly Chinese corpus builds with the multilingual one, said in one line)
    emb = None
    if not args.no_dense:
        chosen = args.embedder or language_default_embedder(docs, say=say)
        emb = load_embedder(None if chosen == "default" else chosen)
    params = chunker_params(name, args.size, chunker_opts, embedder=emb, headers=getattr(args, "headers", True))
    chunker, _ = resolve_chunker(name, params, emb)
    out: dict = {"documents": len(docs), "skipped": [[str(src), why] for src, why in skipped],
                 "embedder": None if emb is None else emb.model_id,
                 "chunker": {"name": name, "params": jsonable(params)}}
    if getattr(chunker, "runs_model", False):
        priced = chunker.estimate(docs) if callable(getattr(chunker, "estimate", None)) else None
        out["chunker"]["estimate"] = priced if priced is not None else "runs a model; not run and not priced"
        stand_in, _ = resolve_chunker(DEFAULT_CHUNKER, chunker_params(DEFAULT_CHUNKER))
        chunks = [stand_in(d) for d in docs]
        out["chunks"] = None
        if relate_specs or enrich_specs:
            out["priced_on"] = (f"{sum(map(len, chunks))} stand-in chunks of {DEFAULT_CHUNKER} (size "
                                  f"{stand_in.size}): {name} is not run")
    else:
        chunks = [chunker(d) for d in docs]
        out["chunks"] = sum(len(c) for c in chunks)
    for kind, specs in (("enricher", enrich_specs), ("relator", relate_specs)):
        priced = out[kind + "s"] = {}
        for n, o in specs:
            comp = registry.create(kind, n, **o)
            est = getattr(comp, "estimate", None)
            priced[n] = est(docs, chunks) if callable(est) else "calls no LLM"
    print(json.dumps(out, indent=2))
    return 0


def _ask_estimate(args: argparse.Namespace, kb: dict) -> int:
    """Print what answering the question would cost per component; loads no model and calls nothing.

    The retriever, the reader and the refiner are built with the options ``ask`` gives them and priced
    by their own ``estimate``: the retriever's over the opened store with the number of items ``ask``
    asks it for (``estimate(question, k)``; the ``jerr`` retriever runs its graph search, which is
    offline, to know what its look-up would be asked), the others' from the question alone
    (``estimate(question)``). A component without one calls no LLM.
    """
    from .. import registry  # start-up: momoka.registry (dataclasses)
    from ..methods.pipeline import Index  # start-up: momoka.methods.pipeline
    from ..methods.standard.reader import default_reader  # start-up: momoka.methods.standard.reader

    opts = parse_options(args.option)  # each component's options taken as Index.ask takes them
    reader = args.reader or default_reader()
    with Index.open(args.store) as ix:
        est = getattr(ix.corpus.retriever(args.retriever, **opts.pop(args.retriever, {})), "estimate", None)
        priced = est(args.question, ix.corpus.search_depth(kb["k"], kb["budget"])) if callable(est) else "calls no LLM"
    out: dict = {"question": args.question, "retriever": {"name": args.retriever, "estimate": priced}}
    parts = [("refiner", args.refine, opts.pop(args.refine, {}))] if args.refine else []
    ropts = dict(opts.pop(reader, {}))
    ropts.setdefault("max_context_chars", kb["budget"])
    parts.insert(0, ("reader", reader, ropts))
    for kind, name, o in parts:
        if kind == "reader" and name == "evidence":
            out[kind] = {"name": name, "estimate": "calls no LLM"}
            continue
        est = getattr(registry.create(kind, name, **o), "estimate", None)
        out[kind] = {"name": name, "estimate": est(args.question) if callable(est) else "calls no LLM"}
    print(json.dumps(out, indent=2))
    return 0


def cite(span) -> str:
    """``doc [start:end]`` of a member or citation, with ``p. N`` (``pp. N-M`` across pages) before the offsets
    when it has a page."""
    page, last = span.page, span.page_end
    where = "" if page is None else (f"p. {page} " if last in (None, page) else f"pp. {page}-{last} ")
    return f"{span.doc_id} {where}[{span.start}:{span.end}]"


def print_result(result, as_json: bool) -> None:
    """Print a :class:`~momoka.methods.base.Result` (or its JSON), with the page of each span of a paged
    document."""
    if as_json:
        print(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
        return
    if not len(result):
        print("no matching passages")
    for it in result:
        spans = ", ".join(cite(m) for m in it.members)
        head = f"#{it.rank}  score {it.score:.4f}  {spans}"
        sec = " > ".join(it.section)
        if sec:
            head += f"  § {sec}"
        kind = it.provenance.get("kind")
        if kind and kind != "chunk":
            head += f"  ({kind})"
        asm = it.provenance.get("assembly") or {}
        if asm.get("widened") or asm.get("trimmed") or len(asm.get("hits", ())) > 1:
            notes = [f"hits {', '.join(f'#{r}' for r in asm['hits'])}"]
            if asm.get("widened"):
                notes.append(f"widened to paragraph: {', '.join(f'#{r}' for r in asm['widened'])}")
            if asm.get("trimmed"):
                notes.append(f"cut to its best sentences: {', '.join(f'#{r}' for r in asm['trimmed'])}")
            head += f"  ({'; '.join(notes)})"
        print(head)
        text = " ".join(it.text.split())
        print("    " + (text if len(text) <= 400 else text[:400] + " ..."))


def _query(args: argparse.Namespace) -> int:
    from .. import registry  # start-up: momoka.registry (dataclasses)
    from ..methods.pipeline import Index  # start-up: momoka.methods.pipeline

    opts = parse_options(args.option)
    registry.check_options_used({n: o for n, o in opts.items() if n != args.retriever}, [args.retriever])
    ix = Index.open(args.store)
    if args.max_query_chars:
        ix.corpus.max_query_chars = args.max_query_chars
    res = ix.search(args.question, retriever=args.retriever, doc_ids=args.doc, where=_where(args), **_k_budget(args),
                    **opts.pop(args.retriever, {}))
    print_result(res, args.json)
    return 0


def _ask(args: argparse.Namespace) -> int:
    from ..methods.pipeline import Index  # start-up: momoka.methods.pipeline

    apply_llm_arguments(args)
    kb = _k_budget(args)
    if args.estimate:
        return _ask_estimate(args, kb)
    ix = Index.open(args.store)
    ans = ix.ask(args.question, retriever=args.retriever, reader=args.reader, refine=args.refine,
                 k=kb["k"], budget=kb["budget"], assemble=kb["assemble"], options=parse_options(args.option),
                 where=_where(args))
    if args.json:
        print(json.dumps(ans.to_dict(), ensure_ascii=False, indent=2))
        return 0
    if ans.kind == "evidence":
        n = len(ans.citations)
        print(f"Evidence: the {n} sentence{'' if n == 1 else 's'} of the retrieved passages that best match the "
              "question, quoted from the documents (no answer was generated):")
        for c in ans.citations:
            print(f"[{c.number}] {cite(c)}  \"{' '.join(c.text.split())}\"")
        say(f"searched {len(ans.context)} passage(s); --reader local answers with the local model, "
            "--llm-url with an endpoint")
        return 0
    print(ans.text or "(no answer)")
    print()
    cited = {c.number for c in ans.citations}
    for c in ans.context:
        mark = "*" if c.number in cited else " "
        snippet = " ".join(c.text.split())
        print(f"{mark}[{c.number}] {cite(c)}  {snippet[:160]}{' ...' if len(snippet) > 160 else ''}")
    if ans.no_answer:
        say("the model found no answer in the passages (a larger --budget or another --retriever may help)")
    elif ans.cited_by == "overlap":
        say("the answer named no passage; * marks the passages holding most of its words")
    elif not ans.citations:
        say("the answer cites no passage")
    return 0


def _quickstart(args: argparse.Namespace) -> int:
    import tempfile  # start-up: tempfile

    from ..examples import QUICKSTART_DOCUMENT, QUICKSTART_QUESTION  # start-up: momoka.examples
    from ..methods.pipeline import Index  # start-up: momoka.methods.pipeline
    from ..store.store import MANIFEST  # start-up: momoka.store.store

    question = args.question or QUICKSTART_QUESTION
    tmp = None
    if args.store:
        store = Path(args.store)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="momoka-quickstart-")
        store = Path(tmp.name) / "store"
    try:
        if (store / MANIFEST).exists():
            ix = Index.open(store)
        else:
            say(f"indexing the example document {QUICKSTART_DOCUMENT.name} (the default embedder is "
                "installed on first use)")
            ix = Index.build([QUICKSTART_DOCUMENT], store=store, chunker="structure")
            ix.close()
        print(f"document: {QUICKSTART_DOCUMENT}")
        print(f"question: {question}\n")
        print_result(ix.search(question, k=args.k, retriever="hybrid"), False)
        ans = ix.ask(question)  # offline: the sentences that best answer it, quoted (nothing is generated)
        print("\nanswer (offline: the sentences of those passages that best answer the question, quoted):")
        for c in ans.citations:
            print(f"[{c.number}] {cite(c)}  \"{' '.join(c.text.split())}\"")
        print("\nnext: momoka index YOUR_FILES --store my.store && momoka query my.store \"your question\""
              "\n      momoka ask my.store \"your question\"   (quotes the evidence; --llm-url URL: an endpoint answers)")
    finally:
        if tmp is not None:
            tmp.cleanup()
    return 0
