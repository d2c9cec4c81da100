"""``momoka serve``: answer searches over HTTP from a store that keeps growing."""

from __future__ import annotations

import argparse
import signal

from .. import settings
from .common import add_option_argument, names_epilog, parse_options, say


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``serve`` command."""
    p = sub.add_parser(
        "serve", help="answer searches over HTTP (JSON), following the store's new commits",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Serve searches over HTTP with JSON, on 127.0.0.1 unless --host says otherwise:\n"
                    "  POST /search  {\"query\", \"k\", \"budget\", \"retriever\", \"options\", \"doc_ids\"} (only query is\n"
                    "                required) -> {\"generation\", \"hits\": [{doc_id, start, end, text, score, ...}]}\n"
                    "  GET /health   -> {store, generation, documents, chunks, ...}\n"
                    "Each answer comes from one commit of the store; new commits are served without a restart.\n"
                    "Errors are JSON {\"error\": ...} with status 400 (bad input), 401 (no or wrong --token), 404,\n"
                    "405, 408 (too slow), 413 (body over --max-body), 503 (busy, or over --max-connections) or 500.",
        epilog=names_epilog("retriever"))
    p.add_argument("store", help="store directory")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8765, help="port to listen on (default 8765; 0: any free port)")
    p.add_argument("--retriever", default="hybrid", help="retriever of requests that name none (default hybrid)")
    p.add_argument("-k", type=int, default=None, help="items per answer for requests that give neither k nor budget "
                   "(default 5)")
    p.add_argument("--budget", type=int, default=None, metavar="CHARS",
                   help="context budget in characters for requests that give neither k nor budget (default none)")
    add_option_argument(p)
    p.add_argument("--workers", type=int, default=4, metavar="N",
                   help="searches run at once, on a thread pool off the event loop (default 4)")
    p.add_argument("--queue", type=int, default=64, metavar="N",
                   help="requests that may wait for a worker; more get 503 (default 64)")
    p.add_argument("--poll", type=float, default=0.5, metavar="S",
                   help="seconds between checks for a new commit of the store (default 0.5)")
    g = p.add_argument_group("limits on what one client can cost")
    g.add_argument("--max-body", type=int, default=1024 * 1024, metavar="BYTES",
                   help="largest request body; a larger Content-Length is answered 413 without reading the body "
                        "(default 1048576: 1 MiB)")
    g.add_argument("--read-timeout", type=float, default=10.0, metavar="S",
                   help="seconds a request's head may take to arrive, and again its body; else 408 and the "
                        "connection is closed (default 10)")
    g.add_argument("--idle-timeout", type=float, default=10.0, metavar="S",
                   help="seconds a connection may stay silent before a request (or between two) before it is "
                        "closed (default 10)")
    g.add_argument("--max-connections", type=int, default=512, metavar="N",
                   help="connections served at once; one more is answered 503 and closed (default 512)")
    g.add_argument("--token", default=None,
                   help="a bearer token every request must send (Authorization: Bearer TOKEN; else 401), 16 or "
                        "more of A-Z a-z 0-9 - . _ ~ + / = (default $MOMOKA_SERVE_TOKEN, which keeps it out of "
                        "the process list; needed with a --host other than loopback)")
    p.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    from ..serve import QueryServer  # start-up: momoka.serve

    server = QueryServer(args.store, host=args.host, port=args.port, retriever=args.retriever, k=args.k,
                         budget=args.budget, options=parse_options(args.option), workers=args.workers,
                         queue=args.queue, poll=args.poll, max_body=args.max_body, read_timeout=args.read_timeout,
                         idle_timeout=args.idle_timeout, max_connections=args.max_connections,
                         token=args.token if args.token is not None else settings.get_text("MOMOKA_SERVE_TOKEN"))

    def _term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _term)
    try:
        server.start()
        h = server.health()
        say(f"serving {h['store']} (generation {h['generation']}, {h['documents']} documents, {h['chunks']} chunks) "
            f"on {server.url}{' (bearer token required)' if h['auth'] else ''}")
        server.serve_forever()
    except KeyboardInterrupt:  # serve_forever stopped the server on its way out
        say("stopped")
    return 0
