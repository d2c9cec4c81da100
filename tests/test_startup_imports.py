"""What a command imports: only what it needs (the start-up time of the CLI is mostly imports).

Each case runs in a fresh interpreter and lists ``sys.modules`` after the
command; the assertions are about the import graph, not about timing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import momoka
import pytest

# Never needed to answer a BM25 query or print help: HTTP client, distributed engine, framework adapters,
# plotting, the LLM stack and the causal LM (its onnxruntime session), the methods that use them.
HEAVY = ("aiohttp", "ray", "langchain", "langchain_core", "llama_index", "matplotlib", "onnxruntime",
         "momoka.llm", "momoka.models.causal_lm", "momoka.models.causal_session", "momoka.methods.jerr", "momoka.methods.ets",
         "momoka.methods.momoka", "momoka.methods.moc", "momoka.methods.mcindex", "momoka.eval")

SRC = str(Path(momoka.__file__).resolve().parents[1])  # the momoka under test: the checkout or site-packages


def _modules_after(code: str) -> set[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def _loaded(mods: set[str], names) -> list[str]:
    return sorted(m for m in mods for n in names if m == n or m.startswith(n + "."))


@pytest.fixture(scope="module")
def bm25_store(tmp_path_factory) -> Path:
    """A BM25-only store (no embedder needed) of two small documents."""
    from momoka import Index

    root = tmp_path_factory.mktemp("startup")
    (root / "a.txt").write_text("The lighthouse was automated in 1986. Keepers left the island.", encoding="utf-8")
    (root / "b.txt").write_text("Oil prices rose sharply in 1973. The embargo ended in March 1974.", encoding="utf-8")
    Index.build([root / "a.txt", root / "b.txt"], store=root / "s", embedder=None).close()
    return root / "s"


def test_bm25_query_imports_no_llm_http_or_framework(bm25_store):
    mods = _modules_after(
        "import contextlib, io, momoka\n"
        "from momoka.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        f"    assert main(['query', {str(bm25_store)!r}, 'when was it automated', '--retriever', 'bm25']) == 0\n"
        "assert 'lighthouse' in out.getvalue()")
    assert "momoka.methods.standard.retrievers" in mods  # the query did run through the registry
    assert _loaded(mods, HEAVY) == []
    assert "importlib.metadata" not in mods  # the version is a literal


def test_help_imports_no_method_package_nor_numpy():
    mods = _modules_after(
        "import contextlib, io\n"
        "from momoka.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        "        main(['--help'])\n"
        "    except SystemExit as e:\n"
        "        assert e.code == 0")
    assert _loaded(mods, HEAVY + ("numpy", "momoka.methods.standard", "momoka.methods.pipeline", "momoka.store")) == []


def test_import_momoka_is_light_and_index_loads_on_use():
    mods = _modules_after("import momoka\nassert momoka.__version__")
    assert _loaded(mods, HEAVY + ("numpy", "momoka.methods.pipeline")) == []
    mods = _modules_after("import momoka\nfrom momoka import Index\nassert Index.__module__ == 'momoka.methods.pipeline'")
    assert "momoka.methods.pipeline" in mods


def test_subcommand_help_still_lists_every_registered_name(capsys):
    """The names in ``--help`` come from the registry when help is shown (all packages are then imported)."""
    from momoka.cli import main
    from momoka import registry

    with pytest.raises(SystemExit) as e:
        main(["query", "--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for name in registry.available("retriever"):
        assert f"  {name} " in text, name
    assert "jerr" in registry.available("retriever") and "trail" in text
