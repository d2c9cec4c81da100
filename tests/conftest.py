"""Shared test fixtures.

``shared_data`` locates the real benchmark sets in ``../shared/data`` (beside
the repository, or wherever ``MOMOKA_SHARED_DATA`` points) and skips the test
cleanly when they are absent. The plain-Python oracles the native code and the
methods are checked against are the package ``tests/_oracles`` (importable as
``_oracles``: this folder is put on ``sys.path`` here, and ``bench/`` does the same).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from momoka.eval.datasets import find_shared_data

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session", autouse=True)
def _caches_in_a_temporary_folder(tmp_path_factory):
    """What the tests compute goes to folders of the test session, never to the user's ``$MOMOKA_HOME``:
    LLM answers (``MOMOKA_LLM_CACHE``, else ``llm.sqlite``) and computed model outputs such as the ppl
    chunker's log-probs (``MOMOKA_CACHE_DIR``, else ``cache/``). CLI subprocesses inherit both; tests that
    name their own cache still use theirs. Only ``momoka models install`` writes to ``$MOMOKA_HOME``."""
    mp = pytest.MonkeyPatch()
    mp.setenv("MOMOKA_LLM_CACHE", str(tmp_path_factory.mktemp("llm-cache") / "llm.sqlite"))
    mp.setenv("MOMOKA_CACHE_DIR", str(tmp_path_factory.mktemp("computed-cache")))
    yield
    mp.undo()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    d = find_shared_data(REPO_ROOT)
    if d is None:
        pytest.skip("../shared/data is not available")
    return d


@pytest.fixture
def make_server():
    """Scripted OpenAI-compatible servers on 127.0.0.1 (:mod:`momoka.llm.testing`).

    Factory: ``make_server(script=None, delay=0.0, routes=None)`` -> a started ScriptedServer (stopped after the test).
    """
    from momoka.llm.testing import ScriptedServer

    started = []

    def make(script=None, delay=0.0, routes=None):
        srv = ScriptedServer(script, delay=delay, routes=routes).start()
        started.append(srv)
        return srv

    yield make
    for s in started:
        s.stop()


class CountingEndpoint:
    """``momoka llm serve``'s handler over the local model, on 127.0.0.1, counting the requests it receives.

    ``url`` is the API root (``.../v1``); ``requests`` the ``(path, body)`` received, in order; ``calls()``
    their number (``path``: only those ending so, e.g. ``"/completions"``); ``asked(name)`` the chat requests
    whose conversation opens with prompt ``name`` of :mod:`momoka.llm.prompts` (its text up to the first
    field), ``bodies(name)`` those requests' bodies; ``reset()`` forgets them.
    """

    def __init__(self, lm):
        from momoka.llm import LocalClient
        from momoka.llm.server import HTTPServer, openai_handler

        self.local = LocalClient(lm, cache=False, progress=False)
        inner = openai_handler(self.local, "smollm2")
        self.requests: list[tuple[str, dict]] = []

        async def handle(req):
            if req.method == "POST":
                try:
                    body = req.json()
                except ValueError:
                    body = {}
                self.requests.append((req.path.split("?")[0], body if isinstance(body, dict) else {}))
            return await inner(req)

        self.server = HTTPServer(handle).start()
        self.url = self.server.url + "/v1"

    def calls(self, path: str = "") -> int:
        return sum(p.endswith(path) for p, _ in self.requests)

    def asked(self, name: str) -> int:
        return len(self.bodies(name))

    def bodies(self, name: str) -> list[dict]:
        """The bodies of the chat requests :meth:`asked` counts, in order."""
        from momoka.llm import prompts

        head = prompts.get(name).template.split("{")[0].strip()
        assert len(head) >= 12, f"prompt {name} opens with a field: no text to recognise it by"

        def opens(body):
            msgs = body.get("messages") or []
            return bool(msgs) and head in "\n".join(str(m.get("content", "")) for m in msgs[:2])

        return [b for p, b in self.requests if p.endswith("/chat/completions") and opens(b)]

    def reset(self) -> None:
        self.requests.clear()

    def stop(self) -> None:
        self.server.stop()


@pytest.fixture(scope="module")
def local_endpoint():
    """A real OpenAI-compatible server (:class:`CountingEndpoint`) over the default causal LM, shared by a
    module's tests; skips when the model is not installed."""
    from momoka.errors import ModelNotInstalledError

    try:
        from momoka.models import default_causal_lm

        lm = default_causal_lm()
    except (ImportError, ModelNotInstalledError) as exc:
        pytest.skip(f"causal LM unavailable: {exc}")
    ep = CountingEndpoint(lm)
    yield ep
    ep.stop()


@pytest.fixture
def use_endpoint(local_endpoint, tmp_path, monkeypatch):
    """Point every component at :func:`local_endpoint` through ``MOMOKA_LLM_*`` (as ``--llm-url`` does), with a
    fresh LLM cache (so each call reaches the server) and fallbacks allowed (the 135M model's unusable answers
    fall back with a warning instead of stopping the stage); its request count starts at zero."""
    monkeypatch.setenv("MOMOKA_LLM_BASE_URL", local_endpoint.url)
    monkeypatch.setenv("MOMOKA_LLM_MODEL", "smollm2")
    monkeypatch.setenv("MOMOKA_LLM_CACHE", str(tmp_path / "llm-e2e.sqlite"))
    monkeypatch.setenv("MOMOKA_LLM_MAX_FAILED", "1")
    local_endpoint.reset()
    return local_endpoint
