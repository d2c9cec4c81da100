"""Nothing written outside ``$MOMOKA_HOME``: ``momoka index`` and ``momoka query`` leave an empty ``HOME`` empty.

The reference is the file system itself: the commands run as a new user's would (``python -m momoka``, in a
fresh process) with ``HOME`` set to an empty temporary folder, ``XDG_CACHE_HOME`` unset (so a library that
caches under ``~/.cache`` would write into that ``HOME``) and ``MOMOKA_HOME`` a temporary folder that sees
the installed models; afterwards ``HOME`` holds nothing. onnxruntime's official builds write a device id and
an events database under ``~/.cache/Microsoft/DeveloperTools/.onnxruntime/`` when imported, unless
``ORT_DISABLE_TELEMETRY=1`` (which ``import momoka`` sets); the second test shows the check sees that folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from momoka.models import models_dir

pytestmark = pytest.mark.models

DOC = ("# Harbour\n\nThe harbour froze in the winter of 1902, and the ferry stopped for six weeks.\n\n"
       "## Light\n\nThe keeper lit the lamp at dusk and wound the clockwork every four hours.\n")


def _env(tmp_path: Path) -> dict[str, str]:
    if not (models_dir() / "manifest.json").is_file():
        pytest.skip("the default models are not installed (momoka models install)")
    home = tmp_path / "home"
    home.mkdir()
    momoka_home = tmp_path / "momoka-home"
    momoka_home.mkdir()
    (momoka_home / "models").symlink_to(models_dir(), target_is_directory=True)  # read only
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "ORT_DISABLE_TELEMETRY")}
    src = str(Path(__import__("momoka").__file__).resolve().parents[1])  # the momoka under test
    env.update(HOME=str(home), MOMOKA_HOME=str(momoka_home), MOMOKA_PROGRESS="0",
               PYTHONPATH=os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p))
    return env


def _momoka(env: dict, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-m", "momoka", *args], cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, (args, p.stderr[-2000:])
    return p


def _written(home: Path) -> list[str]:
    return sorted(str(p.relative_to(home)) for p in home.rglob("*"))


def test_index_and_query_leave_an_empty_home_empty(tmp_path):
    env = _env(tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "harbour.md").write_text(DOC, encoding="utf-8")
    _momoka(env, tmp_path, "index", "docs", "--store", "s")
    out = _momoka(env, tmp_path, "query", "s", "when did the harbour freeze?").stdout
    assert "1902" in out  # the commands did their work (dense and BM25: the models ran)
    assert _written(tmp_path / "home") == []


def test_the_check_sees_onnxruntimes_folder_when_its_telemetry_is_left_on(tmp_path):
    # the reason for the setting: with ORT_DISABLE_TELEMETRY=0 (a user's explicit choice, which momoka keeps)
    # onnxruntime writes into HOME as soon as momoka opens a model
    env = dict(_env(tmp_path), ORT_DISABLE_TELEMETRY="0")
    env.pop("CI", None)  # onnxruntime writes nothing on a machine that says it is CI (as CI=true does)
    (tmp_path / "a.txt").write_text(DOC, encoding="utf-8")
    _momoka(env, tmp_path, "index", "a.txt", "--store", "s")
    assert any(w.startswith(os.path.join(".cache", "Microsoft")) for w in _written(tmp_path / "home"))
