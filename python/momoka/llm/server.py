"""A small HTTP/1.1 server on asyncio, and an OpenAI-compatible endpoint over any momoka client.

``serve_openai(client, port=8000)`` exposes ``POST /v1/chat/completions``,
``GET /v1/models`` and, for a client that scores text token by token (a
:class:`LocalClient`), ``POST /v1/completions`` with ``echo`` and ``logprobs``: the
prompt's tokens, their character offsets and log-probabilities, which is how
:meth:`OpenAIClient.logprob_many` scores a continuation (free text completion there
answers 501). So a momoka :class:`LocalClient` can stand in for a hosted API
(``momoka llm serve``), scoring included. The server binds 127.0.0.1 by default.

The HTTP layer is deliberately tiny (keep-alive, Content-Length bodies, no
chunked uploads); handlers may also drop the connection or write raw bytes,
which the fault-injecting test server uses.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from ..errors import ConfigError, MomokaError

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 408: "Request Timeout",
            422: "Unprocessable Entity", 429: "Too Many Requests", 500: "Internal Server Error",
            501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable"}


@dataclass
class Request:
    """An HTTP request as the handler sees it."""

    method: str
    path: str
    headers: dict
    body: bytes

    def json(self):
        """The body parsed as JSON (raises ValueError)."""
        return json.loads(self.body)


@dataclass
class Response:
    """An HTTP response; ``body`` may be bytes, str, or a JSON-able object."""

    status: int = 200
    body: object = b""
    headers: dict = field(default_factory=dict)


class Drop:
    """Handler result: close the connection without answering."""


class Raw:
    """Handler result: write these bytes verbatim, then close the connection."""

    def __init__(self, data: bytes):
        self.data = data


Handler = Callable[[Request], Awaitable[object]]


def _encode(resp: Response) -> bytes:
    body = resp.body
    ctype = resp.headers.get("Content-Type")
    if isinstance(body, (bytes, bytearray)):
        data = bytes(body)
    elif isinstance(body, str):
        data = body.encode("utf-8")
        ctype = ctype or "text/plain; charset=utf-8"
    else:
        data = json.dumps(body).encode("utf-8")
        ctype = ctype or "application/json"
    head = [f"HTTP/1.1 {resp.status} {_REASONS.get(resp.status, 'Status')}", f"Content-Length: {len(data)}"]
    if ctype:
        head.append(f"Content-Type: {ctype}")
    for k, v in resp.headers.items():
        if k != "Content-Type":
            head.append(f"{k}: {v}")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data


class HTTPServer:
    """Serve ``handler`` on ``host:port`` (port 0 picks a free one) from a background thread.

    ``start()`` returns once the socket listens; ``url`` is then
    ``http://host:port``. ``stop()`` closes it. Usable as a context manager.
    """

    def __init__(self, handler: Handler, host: str = "127.0.0.1", port: int = 0):
        self.handler = handler
        self.host = host
        self.port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._writers: set = set()

    @property
    def url(self) -> str:
        """``http://host:port`` of the running server."""
        return f"http://{self.host}:{self.port}"

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                try:
                    line = await reader.readline()
                except (ConnectionError, asyncio.IncompleteReadError):
                    return
                if not line:
                    return
                parts = line.decode("latin-1").split()
                if len(parts) < 2:
                    return
                method, path = parts[0], parts[1]
                headers = {}
                while True:
                    h = await reader.readline()
                    if h in (b"\r\n", b"\n", b""):
                        break
                    k, _, v = h.decode("latin-1").partition(":")
                    headers[k.strip().lower()] = v.strip()
                n = int(headers.get("content-length", "0") or 0)
                body = await reader.readexactly(n) if n else b""
                try:
                    result = await self.handler(Request(method, path, headers, body))
                except Exception as exc:  # a bug in a handler becomes a 500
                    result = Response(500, {"error": {"message": f"{type(exc).__name__}: {exc}"}})
                if isinstance(result, Drop) or result is Drop:
                    writer.transport.abort()
                    return
                if isinstance(result, Raw):
                    writer.write(result.data)
                    await writer.drain()
                    writer.close()
                    return
                writer.write(_encode(result))  # type: ignore[arg-type]
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    writer.close()
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self._writers.discard(writer)

    def start(self) -> "HTTPServer":
        """Start listening in a daemon thread; returns self."""
        ready = threading.Event()
        errors: list = []

        def run():
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(self._client, self.host, self.port, backlog=1024, limit=2**24)
                )
                self.port = self._server.sockets[0].getsockname()[1]
            except OSError as exc:
                errors.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="momoka-http", daemon=True)
        self._thread.start()
        ready.wait()
        if errors:
            raise ConfigError(f"cannot listen on {self.host}:{self.port}: {errors[0]}")
        return self

    def stop(self) -> None:
        """Stop serving and close open connections."""
        loop = self._loop
        if loop is None:
            return

        async def shutdown():
            if self._server is not None:
                self._server.close()
            for w in list(self._writers):
                w.transport.abort()
            me = asyncio.current_task()
            others = [t for t in asyncio.all_tasks() if t is not me]
            for t in others:
                t.cancel()
            await asyncio.gather(*others, return_exceptions=True)
            loop.stop()

        asyncio.run_coroutine_threadsafe(shutdown(), loop)
        if self._thread is not None:
            self._thread.join(5)
        self._loop = None

    def __enter__(self) -> "HTTPServer":
        return self.start() if self._loop is None else self

    def __exit__(self, *exc) -> None:
        self.stop()

    def serve_forever(self) -> None:
        """Start (if needed) and block until interrupted."""
        if self._loop is None:
            self.start()
        try:
            while self._thread is not None and self._thread.is_alive():
                self._thread.join(0.5)
        finally:
            self.stop()


def _error(status: int, message: str, etype: str = "invalid_request_error") -> Response:
    return Response(status, {"error": {"message": message, "type": etype}})


def openai_handler(client, model_name: str | None = None) -> Handler:
    """An OpenAI-compatible request handler answering from ``client`` (any momoka client).

    Model calls run in a worker thread through the client's synchronous API, so
    its cache and accounting apply.
    """
    name = model_name or getattr(client, "model", "momoka")
    allowed = ("temperature", "top_p", "max_tokens", "stop", "seed")

    async def handle(req: Request):
        loop = asyncio.get_running_loop()
        path = req.path.split("?")[0].rstrip("/")
        if req.method == "GET" and path in ("/v1/models", "/models"):
            return Response(200, {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "momoka"}]})
        if req.method != "POST":
            return _error(405, f"{req.method} {path} is not served")
        try:
            body = req.json()
        except ValueError:
            return _error(400, "the request body is not valid JSON")
        if not isinstance(body, dict):
            return _error(400, "the request body must be a JSON object")
        params = {k: body[k] for k in allowed if body.get(k) is not None}
        if "max_completion_tokens" in body and "max_tokens" not in params:
            params["max_tokens"] = body["max_completion_tokens"]
        if body.get("stream"):
            return _error(400, "stream=true is not supported")
        if path in ("/v1/chat/completions", "/chat/completions"):
            msgs = body.get("messages")
            try:
                res = await loop.run_in_executor(None, lambda: client.complete_batch([msgs], method="serve", **params)[0])
            except MomokaError as exc:
                return _error(400, str(exc))
            if not res.ok:
                return _error(500, str(res.error), "server_error")
            return Response(200, {
                "id": "chatcmpl-" + uuid.uuid4().hex[:24],
                "object": "chat.completion",
                "created": int(time.time()),
                "model": name,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": res.text},
                             "finish_reason": res.finish_reason or "stop"}],
                "usage": {"prompt_tokens": res.prompt_tokens, "completion_tokens": res.completion_tokens,
                          "total_tokens": res.prompt_tokens + res.completion_tokens},
            })
        if path in ("/v1/completions", "/completions"):
            return await _completions(body, loop)
        return _error(404, f"no route {path}")

    async def _completions(body: dict, loop) -> Response:
        """``/completions`` with ``echo`` and ``logprobs``: the prompt's tokens and their log-probabilities.

        Only scoring is served (what :meth:`OpenAIClient.logprob_many` sends); free text
        completion without a chat template is refused with 501.
        """
        scorer = getattr(client, "text_logprobs", None)
        prompt = body.get("prompt")
        if not (body.get("echo") and body.get("logprobs") is not None):
            return _error(501, "only prompt scoring (echo=true with logprobs) is served on /completions; "
                          "use /chat/completions for answers", "not_implemented")
        if not callable(scorer):
            return _error(501, "this model cannot score a prompt token by token", "not_implemented")
        if not isinstance(prompt, str) or not prompt:
            return _error(400, "prompt must be one non-empty string")
        try:
            spans, lps = await loop.run_in_executor(None, scorer, prompt)
        except MomokaError as exc:
            return _error(400, str(exc))
        return Response(200, {
            "id": "cmpl-" + uuid.uuid4().hex[:24],
            "object": "text_completion",
            "created": int(time.time()),
            "model": name,
            # echo with no generated token: the scored prompt is the whole text
            "choices": [{"index": 0, "text": prompt, "finish_reason": "length",
                         "logprobs": {"tokens": [prompt[a:b] for a, b in spans], "token_logprobs": lps,
                                      "text_offset": [a for a, _ in spans], "top_logprobs": None}}],
            "usage": {"prompt_tokens": len(spans), "completion_tokens": 0, "total_tokens": len(spans)},
        })

    return handle


def serve_openai(client, host: str = "127.0.0.1", port: int = 0, model_name: str | None = None) -> HTTPServer:
    """Start an OpenAI-compatible server over ``client``; returns the running :class:`HTTPServer`."""
    return HTTPServer(openai_handler(client, model_name), host, port).start()
