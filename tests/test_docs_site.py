"""The documentation site builds: ``mkdocs build --strict`` over ``docs/``.

The build renders every page of ``docs/`` and the API reference that
mkdocstrings generates from the docstrings (``docs/api.md``); in strict mode a
broken link between pages, a link to a missing anchor or an unresolved
cross-reference fails it. Skips only when mkdocs or mkdocstrings' Python
handler is not installed (the ``docs`` extra: ``pip install ".[docs]"``).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings_handlers.python") is None,
    reason='mkdocs and mkdocstrings[python] are not installed (pip install ".[docs]")',
)


def _build(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        capture_output=True, text=True, timeout=600,
    )


def test_site_builds_strict_with_api_reference(tmp_path):
    site = tmp_path / "site"
    out = _build(REPO / "mkdocs.yml", site)
    assert out.returncode == 0, out.stdout + out.stderr
    # every page of docs/ became a page of the site (no explicit nav leaves one out)
    for page in sorted((REPO / "docs").glob("*.md")):
        name = "index.html" if page.stem == "index" else f"{page.stem}/index.html"
        assert (site / name).is_file(), f"docs/{page.name} is missing from the site"
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    # objects from the docstrings of each public module, and from the native core's stub (_core.pyi)
    for anchor in ("momoka.Index.build", "momoka.errors.MomokaError", "momoka.text.Document",
                   "momoka.chunking.get_chunker", "momoka.models.Embedder", "momoka.llm.OpenAIClient",
                   "momoka.kernels.levenshtein", "momoka.mcts.MCTS", "momoka.eval.load_dataset",
                   "momoka.integrations.langchain.MomokaRetriever", "momoka._core.BM25Index.add"):
        assert f'id="{anchor}"' in api, f"{anchor} is not in the API reference"


def test_strict_build_fails_on_a_broken_link(tmp_path):
    """The same configuration over a page with a broken link must fail (strict mode is on)."""
    config = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [the missing page](missing.md).\n", encoding="utf-8")
    assert "docs_dir: docs\n" in config and "paths: [python]" in config
    config = config.replace("docs_dir: docs\n", f"docs_dir: {docs.as_posix()}\n")
    config = config.replace("paths: [python]", f"paths: [{(REPO / 'python').as_posix()}]")
    (tmp_path / "mkdocs.yml").write_text(config, encoding="utf-8")
    out = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert out.returncode != 0
    assert "missing.md" in out.stdout + out.stderr
