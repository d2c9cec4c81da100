"""Shared test fixtures.

``shared_data`` locates the real benchmark sets in ``../shared/data`` (beside
the repository, or wherever ``MOMOKA_SHARED_DATA`` points) and skips the test
cleanly when they are absent. Every test that reads the shared folder is marked
``data``: a test using one of :data:`DATA_FIXTURES` (directly or through another
fixture) is marked here at collection, and while the data are present a test
that opens, lists or passes to a subprocess a path under ``../shared`` without
the mark fails, so ``pytest -m data`` run without the data (``.ci/run`` does)
covers every test that depends on them. The plain-Python oracles the native code and the
methods are checked against are the package ``tests/_oracles`` (importable as
``_oracles``: this folder is put on ``sys.path`` here, and ``bench/`` does the same).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from momoka.eval.datasets import find_shared_data

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))


#: Fixtures that read the shared data; a test that uses one (directly or through other fixtures) is marked ``data``.
DATA_FIXTURES = frozenset({"shared_data", "squad_dir"})


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects on the marks
def pytest_collection_modifyitems(config, items):
    for item in items:
        if DATA_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.data)


class _SharedReads:
    """Records the paths under the shared folders that a test not marked ``data`` reads (an audit hook: files
    opened, folders listed, paths in a subprocess's command line); the test then fails naming the first one."""

    EVENTS = frozenset({"open", "os.listdir", "os.scandir", "subprocess.Popen"})

    def __init__(self, roots):
        roots = {os.path.realpath(r) for r in roots} | {os.path.abspath(r) for r in roots}
        self.pattern = re.compile("|".join(re.escape(r) + r"(?:/|$)" for r in sorted(roots)))
        self.item = None  # the running test when it is not marked data
        self.reads: dict[str, str] = {}  # nodeid -> the first path read

    def _hits(self, value) -> str | None:
        if isinstance(value, (str, bytes, os.PathLike)):
            try:
                s = os.fsdecode(value)
            except TypeError:
                return None
            if not os.path.isabs(s) and not s.startswith("-"):
                s = os.path.abspath(s)
            if self.pattern.search(s):
                return s
        elif isinstance(value, (list, tuple)):
            for v in value:
                if (hit := self._hits(v)) is not None:
                    return hit
        return None

    def __call__(self, event, args):
        if self.item is None or event not in self.EVENTS:
            return
        # open/listdir: the path; Popen: the executable, the arguments and the working folder (not the
        # environment, which carries MOMOKA_SHARED_DATA to every child of a session where it is set)
        hit = self._hits(args[:1] if event != "subprocess.Popen" else args[:3])
        if hit is not None:
            self.reads.setdefault(self.item, hit)


_shared_reads: _SharedReads | None = None


def pytest_configure(config):
    global _shared_reads
    data = find_shared_data(REPO_ROOT)
    roots = [p for p in (data, REPO_ROOT.parent / "shared") if p is not None and p.is_dir()]
    if roots and _shared_reads is None:
        _shared_reads = _SharedReads(roots)
        sys.addaudithook(_shared_reads)


def pytest_terminal_summary(terminalreporter):
    """Without the shared data, one line saying so: how many tests that read it skipped, how many ran on a
    bundled fallback (the skip list above names each)."""
    d = find_shared_data(REPO_ROOT)
    if d is not None and any(d.glob("*/documents.jsonl")):
        return
    reports = [r for key in ("passed", "skipped", "failed") for r in terminalreporter.stats.get(key, [])
               if getattr(r, "keywords", {}).get("data") and (r.when == "call" or r.skipped)]
    if reports:
        skipped = sum(r.skipped for r in reports)
        terminalreporter.write_line(f"no shared data sets ({d or '../shared/data'}): {skipped} tests marked data skipped, "
                                    f"{len(reports) - skipped} ran on bundled fallbacks")


@pytest.hookimpl(tryfirst=True)  # before the test's fixtures are set up
def pytest_runtest_setup(item):
    if _shared_reads is not None:
        _shared_reads.item = None if item.get_closest_marker("data") else item.nodeid


@pytest.fixture(autouse=True)
def _shared_data_reads_are_marked(request):
    """Fails a test not marked ``data`` that read the shared folders (see :class:`_SharedReads`)."""
    yield
    if _shared_reads is not None:
        _shared_reads.item = None
        hit = _shared_reads.reads.pop(request.node.nodeid, None)
        if hit is not None:
            pytest.fail(f"{request.node.nodeid} reads the shared data ({hit}) but is not marked data: mark it "
                        "(pytest.mark.data) or take the data from the shared_data fixture, so that it is "
                        "checked without the data too", pytrace=False)


@pytest.fixture(scope="session", autouse=True)
def _caches_in_a_temporary_folder(tmp_path_factory):
    """What the tests compute goes to folders of the test session, never to the user's ``$MOMOKA_HOME``:
    LLM answers (``MOMOKA_LLM_CACHE``, else ``llm.sqlite``) and computed model outputs such as the ppl
    chunker's log-probs and the GGUF conversions of ``tests/models/gguf`` (``MOMOKA_CACHE_DIR``, else
    ``cache/``). CLI subprocesses inherit both; tests that name their own cache still use theirs. Only
    ``momoka models install`` writes to ``$MOMOKA_HOME``. Both folders are removed at the end of the session,
    failed or not (pytest keeps a failed session's folders, three sessions' worth; the conversions are 1 GB)."""
    import shutil

    mp = pytest.MonkeyPatch()
    llm = tmp_path_factory.mktemp("llm-cache")
    computed = tmp_path_factory.mktemp("computed-cache")
    mp.setenv("MOMOKA_LLM_CACHE", str(llm / "llm.sqlite"))
    mp.setenv("MOMOKA_CACHE_DIR", str(computed))
    yield
    mp.undo()
    for d in (llm, computed):
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared data folder (skips when there is none, or when it holds no data set, as an empty folder
    named by ``MOMOKA_SHARED_DATA`` to hide the data does)."""
    d = find_shared_data(REPO_ROOT)
    if d is None:
        pytest.skip("../shared/data is not available")
    if not any(d.glob("*/documents.jsonl")):
        pytest.skip(f"the shared data folder {d} holds no data set")
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
