"""A scripted OpenAI-compatible server on 127.0.0.1 for tests and benchmarks.

``ScriptedServer(script)`` answers each request with what ``script(request,
index)`` returns: :class:`Reply` (a chat completion after an optional delay),
:class:`Status` (an HTTP error, e.g. 429 with Retry-After), :class:`Drop`
(close the connection), :class:`Garbage` (200 with malformed JSON) or
:class:`Shape` (200 with any JSON object). It records every request (path, JSON body, headers) and the
largest number of requests it had in flight at once. ``routes`` maps other
paths (e.g. ``/v1/completions``) to their own scripts.

The default script answers ``"echo: <last user message>"`` after ``delay``
seconds, with usage counted in whitespace words.

Run ``python -m momoka.llm.testing --delay 0.05`` to serve the default script
from a separate process (it prints ``PORT <n>`` once listening).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import dataclass, field
from typing import Callable

from .server import Drop as _Drop
from .server import HTTPServer, Raw, Request, Response


@dataclass
class Reply:
    """Answer with a chat completion of ``text`` (token counts default to word counts)."""

    text: str
    delay: float = 0.0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str = "stop"


@dataclass
class Status:
    """Answer with HTTP ``code`` (and ``headers``, e.g. ``{"Retry-After": "1"}``)."""

    code: int
    headers: dict = field(default_factory=dict)
    delay: float = 0.0
    message: str = "scripted error"


@dataclass
class Drop:
    """Close the connection without answering (after ``delay``)."""

    delay: float = 0.0


@dataclass
class Garbage:
    """Answer 200 with a body that is not JSON."""

    body: bytes = b'{"choices": [ {"message": '
    delay: float = 0.0


@dataclass
class Shape:
    """Answer 200 with ``obj`` as JSON (use it for wrong shapes)."""

    obj: object
    delay: float = 0.0


def words(s: str) -> int:
    """Whitespace word count (the scripted server's token count)."""
    return len(s.split())


def prompt_words(body: dict) -> int:
    """Word count of every message content of a chat request."""
    return sum(words(m.get("content", "")) for m in body.get("messages", []) if isinstance(m, dict))


def last_user(body: dict) -> str:
    """Content of the last user message of a chat request ('' if none)."""
    for m in reversed(body.get("messages", [])):
        if isinstance(m, dict) and m.get("role") == "user":
            return str(m.get("content", ""))
    return ""


class ScriptedServer(HTTPServer):
    """See the module docstring. ``base_url`` is ``http://127.0.0.1:<port>/v1``."""

    def __init__(self, script: Callable[[dict, int], object] | None = None, *, delay: float = 0.0, port: int = 0,
                 routes: dict | None = None):
        self.delay = delay
        self.routes = dict(routes or {})
        self.headers: list[dict] = []
        self.script = script or (lambda body, i: Reply("echo: " + last_user(body), delay=self.delay))
        self.requests: list[tuple[str, dict | None]] = []
        self.inflight = 0
        self.max_inflight = 0
        super().__init__(self._handle, "127.0.0.1", port)

    @property
    def base_url(self) -> str:
        """The API root to give a client."""
        return self.url + "/v1"

    @property
    def count(self) -> int:
        """Requests received so far."""
        return len(self.requests)

    def chat_bodies(self) -> list[dict]:
        """Bodies of the chat-completion requests received, in order."""
        return [b for p, b in self.requests if p.endswith("/chat/completions") and b is not None]

    def reset(self) -> None:
        """Forget recorded requests and the in-flight maximum."""
        self.requests.clear()
        self.max_inflight = 0

    async def _handle(self, req: Request):
        try:
            body = req.json()
        except ValueError:
            body = None
        index = len(self.requests)
        self.requests.append((req.path, body))
        self.headers.append(dict(req.headers))
        self.inflight += 1
        self.max_inflight = max(self.max_inflight, self.inflight)
        try:
            route = self.routes.get(req.path.split("?")[0])
            fn = route if route is not None else self.script
            action = fn(body if isinstance(body, dict) else {}, index)
            delay = getattr(action, "delay", 0.0)
            if delay:
                await asyncio.sleep(delay)
            if isinstance(action, Reply):
                pt = action.prompt_tokens if action.prompt_tokens is not None else prompt_words(body or {})
                ct = action.completion_tokens if action.completion_tokens is not None else words(action.text)
                return Response(200, {
                    "id": f"chatcmpl-{index}", "object": "chat.completion", "created": 0,
                    "model": (body or {}).get("model", "scripted"),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": action.text},
                                 "finish_reason": action.finish_reason}],
                    "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct},
                })
            if isinstance(action, Status):
                return Response(action.code, {"error": {"message": action.message}}, dict(action.headers))
            if isinstance(action, Drop):
                return _Drop()
            if isinstance(action, Garbage):
                return Response(200, action.body, {"Content-Type": "application/json"})
            if isinstance(action, Shape):
                return Response(200, json.dumps(action.obj).encode(), {"Content-Type": "application/json"})
            if isinstance(action, (Response, Raw)):
                return action
            raise TypeError(f"script returned {action!r}")
        finally:
            self.inflight -= 1


def main(argv: list[str] | None = None) -> int:
    """Serve the default echo script: ``python -m momoka.llm.testing --delay S [--port N]``."""
    ap = argparse.ArgumentParser(prog="python -m momoka.llm.testing")
    ap.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args(argv)
    srv = ScriptedServer(delay=a.delay, port=a.port).start()
    print(f"PORT {srv.port}", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
