"""A small HTTP/1.1 server on asyncio, and an OpenAI-compatible endpoint over any momoka client.

``serve_openai(client, port=8000)`` exposes ``POST /v1/chat/completions``,
``GET /v1/models`` and, for a client that scores text token by token (a
:class:`LocalClient`), ``POST /v1/completions`` with ``echo`` and ``logprobs``: the
prompt's tokens, their character offsets and log-probabilities, which is how
:meth:`OpenAIClient.logprob_many` scores a continuation (free text completion there
answers 501). So a momoka :class:`LocalClient` can stand in for a hosted API
(``momoka llm serve``), scoring included. The server binds 127.0.0.1 by default.

The HTTP layer (:class:`HTTPServer`) is deliberately tiny (keep-alive,
Content-Length bodies, no chunked uploads); handlers may also drop the
connection or write raw bytes, which the fault-injecting test server uses. It
bounds what one client can cost, and answers what it refuses itself, as JSON
made by ``error(status, message)``, closing the connection after it:

- a request head (request line and headers) of at most :data:`MAX_LINE` bytes a
  line and :data:`MAX_HEADERS` lines (else 414 or 431); a malformed request
  line, header line, ``Content-Length`` (negative, not digits, given twice with
  two values) is 400, a ``Transfer-Encoding`` 411, another HTTP version 505;
- a body declared larger than ``max_body`` bytes is 413, answered from the
  headers without reading the body (``Expect: 100-continue`` is honoured, so a
  client that asks first sends nothing);
- a connection is closed when no request starts within ``idle_timeout``
  seconds (on connecting or after an answer); a request's head must arrive
  within ``read_timeout`` seconds of its first byte and its body within
  ``read_timeout`` seconds of its head (else 408: a client sending a byte a
  second holds nothing for long), and an answer the client does not read
  within ``read_timeout`` drops the connection;
- at most ``max_connections`` connections are served at once; one more is
  answered 503 and closed.

A connection closed after such an answer is half-closed and what the client
still sends is read and discarded for up to :data:`LINGER` seconds, so the
client sees the answer rather than a reset. Nothing a client sends prints a
traceback: a failure inside the connection code is one line on stderr.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from .._validate import check_float, check_int
from ..errors import ConfigError, MomokaError

_REASONS = {100: "Continue", 200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
            405: "Method Not Allowed", 408: "Request Timeout", 411: "Length Required", 413: "Content Too Large",
            414: "URI Too Long", 422: "Unprocessable Entity", 429: "Too Many Requests",
            431: "Request Header Fields Too Large", 500: "Internal Server Error", 501: "Not Implemented",
            502: "Bad Gateway", 503: "Service Unavailable", 505: "HTTP Version Not Supported"}

#: Default limits of :class:`HTTPServer` (``momoka serve`` sets its own, tighter ones).
MAX_BODY = 16 * 1024 * 1024
READ_TIMEOUT = 60.0
IDLE_TIMEOUT = 75.0
MAX_CONNECTIONS = 512
#: The longest request line or header line in bytes, and the most header lines, of a request.
MAX_LINE = 8192
MAX_HEADERS = 100
#: Bytes a connection buffers before it stops reading from the socket (a line longer than MAX_LINE is refused).
_STREAM_LIMIT = 64 * 1024
#: Seconds a connection closed after an error answer keeps discarding what the client still sends.
LINGER = 2.0
#: File descriptors kept free beside the connections (the listening socket, the store's files, logs).
SPARE_FILES = 64

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_VERSION = re.compile(r"HTTP/(\d)\.(\d)")
_DIGITS = re.compile(r"[0-9]+")
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


@dataclass
class Request:
    """An HTTP request as the handler sees it (header names in lower case)."""

    method: str
    path: str
    headers: dict
    body: bytes

    def json(self):
        """The body parsed as JSON; raises ValueError with a one-line reason for a body that is not UTF-8,
        not JSON (``NaN`` and ``Infinity`` included), or nested too deeply to parse."""
        try:
            text = self.body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"the request body is not valid UTF-8 (byte {exc.start})") from None
        try:
            return json.loads(text, parse_constant=_no_constant)
        except RecursionError:
            raise ValueError("the request body is not valid JSON: nested too deeply") from None
        except ValueError as exc:
            raise ValueError(f"the request body is not valid JSON: {exc}") from None


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


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


class HTTPError(Exception):
    """A request the HTTP layer answers itself with ``status`` and a one-line ``message``, then closes."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class _Gone(Exception):
    """The client closed the connection (or sent an incomplete request before closing)."""


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


def error_json(status: int, message: str) -> Response:
    """The default answer of a refused request: ``{"error": {"message", "type"}}`` (OpenAI's shape)."""
    return Response(status, {"error": {"message": message,
                                       "type": "invalid_request_error" if status < 500 else "server_error"}})


def _ensure_files(n: int) -> None:
    """Raise the soft limit of open files to ``n`` when it is lower; ConfigError when the hard limit is lower."""
    try:
        import resource  # start-up: resource (POSIX only)
    except ImportError:
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= n:
        return
    if hard != resource.RLIM_INFINITY and hard < n:
        raise ConfigError(f"{n - SPARE_FILES} connections need {n} open files, but the limit is {hard} "
                          f"(ulimit -n); lower max_connections")
    resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))


class HTTPServer:
    """Serve ``handler`` on ``host:port`` (port 0 picks a free one) from a background thread.

    ``start()`` returns once the socket listens; ``url`` is then
    ``http://host:port``. ``stop()`` closes it. Usable as a context manager.
    ``max_body`` (bytes), ``read_timeout`` and ``idle_timeout`` (seconds) and
    ``max_connections`` bound what a client can cost (see the module
    docstring); ``error(status, message)`` makes the answer to a request the
    server refuses itself (default :func:`error_json`). ``stats`` counts the
    connections refused (``rejected``), timed out (``timed_out``) and answered
    with an error by the HTTP layer (``bad_requests``).
    """

    def __init__(self, handler: Handler, host: str = "127.0.0.1", port: int = 0, *, max_body: int = MAX_BODY,
                 read_timeout: float = READ_TIMEOUT, idle_timeout: float = IDLE_TIMEOUT,
                 max_connections: int = MAX_CONNECTIONS, error: Callable[[int, str], Response] = error_json):
        self.handler = handler
        self.host = host
        self.port = port
        self.max_body = check_int(max_body, "max_body", minimum=1)
        self.read_timeout = check_float(read_timeout, "read_timeout", minimum=0, above=True, unit="seconds")
        self.idle_timeout = check_float(idle_timeout, "idle_timeout", minimum=0, above=True, unit="seconds")
        self.max_connections = check_int(max_connections, "max_connections", minimum=1)
        self.error = error
        self.stats = {"rejected": 0, "timed_out": 0, "bad_requests": 0}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._writers: set = set()

    @property
    def url(self) -> str:
        """``http://host:port`` of the running server."""
        return f"http://{self.host}:{self.port}"

    @property
    def connections(self) -> int:
        """Connections open now (at most ``max_connections``)."""
        return len(self._writers)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._connection(reader, writer)
        except asyncio.CancelledError:  # stop(): the connection is aborted; a cancelled task would log a traceback
            writer.transport.abort()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._writers) >= self.max_connections:
            self.stats["rejected"] += 1
            await self._refuse(reader, writer, self.error(
                503, f"server busy: {len(self._writers)} connections open, the limit; try again"))
            return
        self._writers.add(writer)
        clean = False
        try:
            await self._serve(reader, writer)
            clean = True
        except HTTPError as exc:
            self.stats["bad_requests"] += 1
            await self._refuse(reader, writer, self.error(exc.status, exc.message))
        except (_Gone, ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception as exc:  # noqa: BLE001 - a bug here must not print a traceback per client
            print(f"momoka: error: HTTP connection failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        finally:
            self._writers.discard(writer)
            if clean:
                writer.close()  # sends what is still buffered, then closes
            else:
                writer.transport.abort()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer the requests of one connection until it closes (raises HTTPError for one to refuse)."""
        while True:
            try:
                first = await asyncio.wait_for(reader.readexactly(1), self.idle_timeout)
            except asyncio.TimeoutError:
                self.stats["timed_out"] += 1
                return
            try:
                method, path, version, headers = await asyncio.wait_for(self._head(reader, first),
                                                                        self.read_timeout)
            except asyncio.TimeoutError:
                self.stats["timed_out"] += 1
                raise HTTPError(408, f"the request head did not arrive within {self.read_timeout:g} s") from None
            n = self._length(headers)
            if n and headers.get("expect", "").lower() == "100-continue":
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            try:
                body = await asyncio.wait_for(reader.readexactly(n), self.read_timeout) if n else b""
            except asyncio.TimeoutError:
                self.stats["timed_out"] += 1
                raise HTTPError(408, f"the request body ({n:,} bytes) did not arrive within "
                                     f"{self.read_timeout:g} s") from None
            try:
                result = await self.handler(Request(method, path, headers, body))
            except Exception as exc:  # a bug in a handler becomes a 500
                result = self.error(500, f"{type(exc).__name__}: {exc}")
            if isinstance(result, Drop) or result is Drop:
                return
            if isinstance(result, Raw):
                writer.write(result.data)
                await self._drain(writer)
                return
            tokens = {t.strip() for t in headers.get("connection", "").lower().split(",")}
            close = "close" in tokens or (version == "HTTP/1.0" and "keep-alive" not in tokens)
            if close:
                result.headers.setdefault("Connection", "close")  # type: ignore[union-attr]
            writer.write(_encode(result))  # type: ignore[arg-type]
            await self._drain(writer)
            if close:
                return

    async def _drain(self, writer: asyncio.StreamWriter) -> None:
        try:
            await asyncio.wait_for(writer.drain(), self.read_timeout)
        except asyncio.TimeoutError:  # the client does not read its answer
            self.stats["timed_out"] += 1
            raise _Gone from None

    async def _line(self, reader: asyncio.StreamReader, status: int, what: str) -> bytes:
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError:
            raise _Gone from None
        except asyncio.LimitOverrunError:
            raise HTTPError(status, f"{what} is longer than {MAX_LINE:,} bytes") from None
        if len(line) > MAX_LINE:
            raise HTTPError(status, f"{what} is longer than {MAX_LINE:,} bytes")
        return line

    async def _head(self, reader: asyncio.StreamReader, first: bytes) -> tuple[str, str, str, dict]:
        """The request line and headers (``first``: the byte already read)."""
        line = first + await self._line(reader, 414, "the request line")
        for _ in range(4):  # a client may send an empty line before a request (after a body)
            if line.strip(b"\r\n"):
                break
            line = await self._line(reader, 414, "the request line")
        parts = line.rstrip(b"\r\n").decode("latin-1").split(" ")
        if len(parts) != 3 or not _TOKEN.fullmatch(parts[0]) or not parts[1] or not parts[1].isprintable():
            raise HTTPError(400, "malformed request line: expected METHOD /path HTTP/1.1")
        method, path, version = parts
        m = _VERSION.fullmatch(version)
        if not m:
            raise HTTPError(400, f"malformed request line: {version[:20]!r} is not an HTTP version")
        if m.group(1) != "1":
            raise HTTPError(505, f"{version} is not served; use HTTP/1.1")
        headers: dict[str, str] = {}
        lengths: set[str] = set()
        for _ in range(MAX_HEADERS + 1):
            raw = await self._line(reader, 431, "a header line")
            if raw in (b"\r\n", b"\n"):
                return method, path, version, _with_length(headers, lengths)
            if len(headers) >= MAX_HEADERS:
                break
            text = raw.rstrip(b"\r\n").decode("latin-1")
            name, colon, value = text.partition(":")
            if not colon or not _TOKEN.fullmatch(name):
                raise HTTPError(400, "malformed header line: expected Name: value")
            value = value.strip(" \t")
            if _BAD_VALUE.search(value):
                raise HTTPError(400, f"header {name} holds a control character")
            key = name.lower()
            if key == "content-length":
                lengths.add(value)
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        raise HTTPError(431, f"more than {MAX_HEADERS} header lines")

    def _length(self, headers: dict) -> int:
        """The body's length from ``Content-Length`` (0 without one); HTTPError when it cannot be served."""
        if "transfer-encoding" in headers:
            raise HTTPError(411, "Transfer-Encoding is not supported; send the body with a Content-Length")
        raw = headers.get("content-length", "0")
        if not _DIGITS.fullmatch(raw):
            shown = raw if len(raw) <= 40 else raw[:40] + "..."
            raise HTTPError(400, f"Content-Length must be a number of bytes (digits only), got {shown!r}")
        if len(raw) > 18 or int(raw) > self.max_body:
            shown = f"{int(raw):,}" if len(raw) <= 30 else f"a {len(raw)}-digit number of"
            raise HTTPError(413, f"the request body of {shown} bytes is over the limit of {self.max_body:,} bytes")
        return int(raw)

    async def _refuse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, resp: Response) -> None:
        """Answer ``resp`` and close: half-close, then discard what the client still sends for up to LINGER s."""
        resp.headers.setdefault("Connection", "close")
        try:
            writer.write(_encode(resp))
            await asyncio.wait_for(writer.drain(), LINGER)
            if writer.can_write_eof():
                writer.write_eof()
            end = time.monotonic() + LINGER
            while (left := end - time.monotonic()) > 0:
                if not await asyncio.wait_for(reader.read(65536), left):
                    writer.close()  # the client read the answer and closed
                    return
        except (asyncio.TimeoutError, ConnectionError, OSError):
            pass
        writer.transport.abort()

    def start(self) -> "HTTPServer":
        """Start listening in a daemon thread; returns self."""
        _ensure_files(self.max_connections + SPARE_FILES)
        ready = threading.Event()
        errors: list = []

        def run():
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(self._client, self.host, self.port, backlog=1024, limit=_STREAM_LIMIT)
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


def _with_length(headers: dict, lengths: set) -> dict:
    if len(lengths) > 1:
        raise HTTPError(400, "Content-Length is given twice with two values")
    if lengths:
        headers["content-length"] = next(iter(lengths))
    return headers


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
