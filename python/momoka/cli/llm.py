"""``momoka llm``: check an LLM endpoint, inspect the response cache, list prompts, serve the local model."""

from __future__ import annotations

import argparse
import json
import sys
import time

from .. import settings
from ..errors import ConfigError
from .common import deprecated_alias


def register(subparsers) -> None:
    """Add the ``llm`` command and its sub-commands."""
    p = subparsers.add_parser("llm", help="LLM clients: ping an endpoint, cache stats, prompts, serve the local model")
    sub = p.add_subparsers(dest="llm_command", metavar="SUBCOMMAND")

    ping = sub.add_parser("ping", help="send one short request and print the answer, latency and usage")
    _client_args(ping)
    ping.add_argument("--message", default="Reply with the single word: pong", help="the user message to send")
    ping.add_argument("--max-tokens", type=int, default=16)
    ping.set_defaults(func=_ping)

    st = sub.add_parser("stats", help="entries and size of the on-disk response cache")
    st.add_argument("--cache", default=None, help="cache file (default: $MOMOKA_LLM_CACHE or ~/.cache/momoka/llm.sqlite)")
    st.add_argument("--json", action="store_true", help="print JSON")
    st.set_defaults(func=_stats)

    pr = sub.add_parser("prompts", help="list the prompt templates, or print one")
    pr.add_argument("name", nargs="?", help="template name (omit to list them)")
    pr.set_defaults(func=_prompts)

    sv = sub.add_parser("serve", help="serve the local model behind an OpenAI-compatible API on 127.0.0.1")
    sv.add_argument("--model-dir", default=None, help="causal LM directory (default: the installed default model)")
    sv.add_argument("--host", default="127.0.0.1")
    sv.add_argument("--port", type=int, default=8000)
    sv.add_argument("--cache", default=None, help="response cache file (default: none)")
    sv.set_defaults(func=_serve)

    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])


def add_client_args(p: argparse.ArgumentParser) -> None:
    """Add the LLM client options (``--llm-url``, ``--llm-model``, ``--llm-api-key``, ``--local``, ``--model-dir``,
    ``--llm-timeout``, ``--concurrency``, ``--llm-cache``) to another command's parser."""
    _client_args(p)
    p.add_argument("--concurrency", type=int, default=16, help="LLM requests in flight (default 16)")
    p.add_argument("--llm-cache", default=None,
                   help="LLM response cache file (default $MOMOKA_LLM_CACHE or ~/.cache/momoka/llm.sqlite); 'off' disables it")


def client_from_args(a, **kwargs):
    """Build the client ``add_client_args`` describes: an OpenAIClient when ``--llm-url`` or
    ``$MOMOKA_LLM_BASE_URL`` is given and ``--local`` is not, else a LocalClient."""
    from ..llm import LocalClient, OpenAIClient  # start-up: momoka.llm

    cache = getattr(a, "llm_cache", None)
    cache = False if cache == "off" else (cache or True)
    if not a.local and (a.base_url or settings.get_text("MOMOKA_LLM_BASE_URL")):
        return OpenAIClient(a.model, base_url=a.base_url, api_key=a.api_key, timeout=a.timeout,
                            concurrency=getattr(a, "concurrency", 16), cache=cache, **kwargs)
    return LocalClient(model_dir=a.model_dir, cache=cache, **kwargs)


def print_usage(client, file=None) -> None:
    """Print the client's accounting table (for the end of CLI runs) to stderr."""
    print(client.stats(), file=file or sys.stderr)


def _client_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--llm-url", "--base-url", dest="base_url", default=None, action=deprecated_alias("--base-url"),
                   help="OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1 (default $MOMOKA_LLM_BASE_URL; "
                   "--base-url is a deprecated alias)")
    p.add_argument("--llm-model", "--model", dest="model", default=None, action=deprecated_alias("--model"),
                   help="model name at --llm-url (default $MOMOKA_LLM_MODEL, else the one model the server lists; "
                   "--model is a deprecated alias)")
    p.add_argument("--llm-api-key", "--api-key", dest="api_key", default=None, action=deprecated_alias("--api-key"),
                   help="API key (default $MOMOKA_LLM_API_KEY; --api-key is a deprecated alias)")
    p.add_argument("--local", action="store_true", help="use the local causal LM instead of a server")
    p.add_argument("--model-dir", default=None, help="local model directory (with --local)")
    p.add_argument("--llm-timeout", "--timeout", dest="timeout", type=float, default=30.0, metavar="S",
                   action=deprecated_alias("--timeout"), help="seconds per request (default 30)")


def _make_client(a):
    if a.local:
        from ..llm import LocalClient  # start-up: momoka.llm

        return LocalClient(model_dir=a.model_dir, cache=False, progress=False)
    from ..llm import OpenAIClient, RetryPolicy  # start-up: momoka.llm

    return OpenAIClient(a.model, base_url=a.base_url, api_key=a.api_key, cache=False, timeout=a.timeout,
                        retry=RetryPolicy(max_retries=1), progress=False)


def _ping(a) -> int:
    if a.max_tokens < 1:
        raise ConfigError("--max-tokens must be >= 1")
    client = _make_client(a)
    try:
        t0 = time.perf_counter()
        res = client.complete_batch([a.message], max_tokens=a.max_tokens, temperature=0, method="ping")[0]
        dt = time.perf_counter() - t0
    finally:
        client.close()
    if not res.ok:
        raise res.error  # type: ignore[misc]
    print(f"model: {client.model}")
    print(f"answer: {res.text!r}")
    print(f"latency: {dt * 1000:.1f} ms, prompt tokens: {res.prompt_tokens}, completion tokens: {res.completion_tokens}")
    return 0


def _stats(a) -> int:
    from ..llm import ResponseCache, default_cache_path  # start-up: momoka.llm

    path = a.cache or default_cache_path()
    from pathlib import Path  # start-up: pathlib

    if not Path(path).exists():
        raise ConfigError(f"no LLM cache at {path}")
    with ResponseCache(path) as c:
        st = c.stats()
    if a.json:
        print(json.dumps(st, indent=2))
        return 0
    print(f"cache: {st['path']}")
    print(f"entries: {st['entries']}   size: {st['bytes'] / 1e6:.2f} MB")
    for row in st["by_model"]:
        print(f"  {row['model']:<40} {row['kind']:<8} {row['entries']}")
    return 0


def _prompts(a) -> int:
    from ..llm import prompts  # start-up: momoka.llm.prompts

    if not a.name:
        for n in prompts.names():
            t = prompts.get(n)
            print(f"{n:<26} {{{', '.join(t.placeholders)}}}  {t.source}")
        return 0
    t = prompts.get(a.name)
    print(f"# {t.name} — {t.source}")
    if t.note:
        print(f"# note: {t.note}")
    if t.system is not None:
        print(f"[system]\n{t.system}\n[user]")
    print(t.template)
    return 0


def _serve(a) -> int:
    from ..llm import LocalClient  # start-up: momoka.llm
    from ..llm.server import serve_openai  # start-up: momoka.llm.server

    client = LocalClient(model_dir=a.model_dir, cache=a.cache or False, progress=False)
    srv = serve_openai(client, host=a.host, port=a.port)
    print(f"serving {client.model} at {srv.url}/v1 (Ctrl-C to stop)", file=sys.stderr, flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        print(client.stats(), file=sys.stderr)
    return 0
