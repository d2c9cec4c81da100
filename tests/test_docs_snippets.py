"""Every code block of ``README.md`` and ``docs/*.md`` runs as written.

The fence's tag says what a block is (docs/contributing.md explains it):

* ``python``: run. The Python blocks of one page run in one fresh
  interpreter, so a page's later blocks may use the names its earlier blocks
  defined; a traceback names the page and its line.
* ``bash`` / ``sh``: run, each block with ``bash -euo pipefail``.

A page's runnable blocks run in the order a reader meets them, Python and shell
interleaved, in one working folder: a Python block sees the files (stores, ...)
the shell blocks above it made, and the other way round.
* anything else (``text``, ``json``, ...): shown, not run: CLI synopses, store
  layouts, sample output, diagrams. A fence without a tag is an error, so a
  command cannot slip through untested by accident.

A runnable block preceded by the line ``<!-- not run: REASON -->`` is not run
(benchmarks and table runs that take many CPU minutes); each is listed as a
skipped test with its reason.

Each page's snippets run in a working folder under pytest's ``tmp_path`` that
holds a small real corpus cut from the bundled example document: ``report.md``,
``new.md``, ``new.txt``, ``notes/`` (two files) and ``docs/`` (one file per
section). Data sets are found by name (``--data squad_v1_dev_half_a``) under
the shared data folder; a page that uses one is skipped when it is absent.
``MOMOKA_HOME`` is a temporary folder whose ``models`` links to the installed
models, so the caches the snippets write (LLM answers, log-probs) stay under
``tmp_path``; ``momoka`` and ``python`` on the snippets' PATH are this
interpreter running the momoka under test.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import momoka
from momoka.examples import QUICKSTART_DOCUMENT
from momoka.models import momoka_home, models_dir

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
RUN_TAGS = {"python": "python", "bash": "shell", "sh": "shell"}
NOT_RUN = re.compile(r"^<!--\s*not run:(.*?)-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^\s`]*)")
TIMEOUT_S = 600


@dataclass(frozen=True)
class Block:
    page: str  # path relative to the repository
    line: int  # 1-based line of the opening fence
    tag: str
    code: str
    not_run: str | None  # the reason given in <!-- not run: REASON -->, None when it runs

    @property
    def kind(self) -> str | None:
        return RUN_TAGS.get(self.tag)

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def parse_blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown page, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    page = path.relative_to(REPO).as_posix()
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, tag = len(m.group(1)), m.group(2), m.group(3).lower()
        close = re.compile(r"^\s*" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}\s*$")
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            j += 1
        if j == len(lines):
            raise AssertionError(f"{page}:{i + 1}: code fence never closed")
        body = "\n".join(ln[indent:] if not ln[:indent].strip() else ln.lstrip() for ln in lines[i + 1:j])
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        marker = NOT_RUN.match(lines[k].strip()) if k >= 0 else None
        blocks.append(Block(page, i + 1, tag, body + "\n", marker.group(1).strip() if marker else None))
        i = j + 1
    return blocks


BLOCKS = {p.relative_to(REPO).as_posix(): parse_blocks(p) for p in PAGES}
SKIPPED = [b for bs in BLOCKS.values() for b in bs if b.kind and b.not_run is not None]


# ------------------------------------------------------------------ the corpus
def _sections(text: str) -> list[tuple[str, str]]:
    """(title, body) of each ``## `` section of a Markdown text."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return [(parts[i].strip(), parts[i + 1].strip()) for i in range(1, len(parts) - 1, 2)]


#: A user's own files, for the README's snippets: a report of another kind than the bundled example (in French,
#: sharing no word with the README's example questions, so a BM25 search for them finds nothing).
OWN_DOCUMENT = """# Rapport annuel de la coopérative

## Récoltes

Les vignes du coteau sud ont donné trois cents hectolitres cette année, un peu moins qu'en moyenne,
car le printemps fut froid et les gelées d'avril ont touché les parcelles basses.

## Finances

Le chiffre d'affaires atteint quatre cent mille euros. Les dépenses de matériel ont doublé
avec l'achat d'un nouveau pressoir, payé pour moitié par une subvention régionale.

## Adhérents

La coopérative compte désormais quarante-deux familles. Cinq jeunes viticulteurs nous ont rejoints,
et deux anciens membres ont pris leur retraite après trente ans de vendanges.

## Conclusions

Le conseil propose de planter des cépages plus tardifs, moins sensibles aux gelées, et de vendre
davantage en bouteilles plutôt qu'en vrac, afin de mieux valoriser la qualité des vins.
"""

#: The corpora the snippets run on: the bundled example (every page), and a user's own files (the README).
CORPORA = {"example": None, "own": OWN_DOCUMENT}


def make_corpus(folder: Path, document: str | None = None) -> None:
    """The files the snippets name, cut from the bundled example document (or from ``document``)."""
    folder.mkdir(parents=True, exist_ok=True)
    text = QUICKSTART_DOCUMENT.read_text(encoding="utf-8") if document is None else document
    (folder / "report.md").write_text(text, encoding="utf-8")
    secs = _sections(text)
    assert len(secs) >= 4, "the example document has fewer sections than the corpus needs"

    def md(title, body):
        return f"# {title}\n\n{body}\n"

    def txt(title, body):
        return f"{title}\n\n{body}\n"

    (folder / "notes").mkdir()
    (folder / "docs").mkdir()
    for n, (title, body) in enumerate(secs):
        slug = re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_")
        if n % 2 == 0:
            (folder / "docs" / f"{slug}.md").write_text(md(title, body), encoding="utf-8")
        else:
            (folder / "docs" / f"{slug}.txt").write_text(txt(title, body), encoding="utf-8")
    (folder / "notes" / "construction.md").write_text(md(*secs[0]), encoding="utf-8")
    (folder / "notes" / "light.txt").write_text(txt(*secs[1]), encoding="utf-8")
    (folder / "new.md").write_text(md(*secs[-1]), encoding="utf-8")
    (folder / "new.txt").write_text(txt(*secs[-2]), encoding="utf-8")


def snippet_env(tmp: Path, data: Path | None) -> dict[str, str]:
    """The environment of the snippets: this momoka, a temporary MOMOKA_HOME over the installed models."""
    home = tmp / "momoka-home"
    home.mkdir()
    models = models_dir()
    if models.is_dir():
        (home / "models").symlink_to(models, target_is_directory=True)
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    (bin_dir / "python3").symlink_to(sys.executable)
    launcher = bin_dir / "momoka"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m momoka "$@"\n', encoding="utf-8")
    launcher.chmod(0o755)
    env = dict(os.environ)
    src = str(Path(momoka.__file__).resolve().parents[1])  # the folder holding the momoka under test
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    env["PATH"] = os.pathsep.join((str(bin_dir), env.get("PATH", "")))
    env["MOMOKA_HOME"] = str(home)
    env["MOMOKA_PROGRESS"] = "0"
    for name in ("MOMOKA_LLM_CACHE", "MOMOKA_LLM_BASE_URL", "MOMOKA_LLM_MODEL", "MOMOKA_LLM_API_KEY"):
        env.pop(name, None)
    if data is not None:
        env["MOMOKA_DATA"] = str(data)
    return env


# ------------------------------------------------------------------ running
#: Runs a page's blocks in order: Python blocks in this one interpreter, shell blocks in ``bash -euo pipefail``
#: in the same working folder. A failing shell block stops the run with its exit status and a line naming it.
DRIVER = """\
import json, subprocess, sys
ns = {"__name__": "__main__"}
for kind, page, line, code in json.load(open(sys.argv[1], encoding="utf-8")):
    print(f"--- {page}:{line}", flush=True)
    if kind == "python":
        exec(compile("\\n" * line + code, page, "exec"), ns)
        sys.stdout.flush()
        sys.stderr.flush()
        continue
    rc = subprocess.run(["bash", "-euo", "pipefail", "-c", code]).returncode
    if rc:
        print(f"--- shell failed {rc}", flush=True)
        sys.exit(rc)
"""


def run_blocks(blocks: list[Block], work: Path, env: dict) -> None:
    """Run ``blocks`` (Python and shell) in their order in the folder ``work``; fail naming the block that failed."""
    spec = work.parent / f"{work.name}-blocks.json"
    spec.write_text(json.dumps([(b.kind, b.page, b.line, b.code) for b in blocks]), encoding="utf-8")
    out = subprocess.run([sys.executable, "-c", DRIVER, str(spec)], cwd=work, env=env,
                         capture_output=True, text=True, timeout=TIMEOUT_S)
    if out.returncode != 0:
        ran = re.findall(r"^--- (\S+)$", out.stdout, flags=re.M)
        where = ran[-1] if ran else blocks[0].where
        block = next((b for b in blocks if b.where == where), blocks[0])
        if re.search(r"^--- shell failed \d+$", out.stdout, flags=re.M):
            pytest.fail(f"shell block at {where} failed (exit {out.returncode}):\n{block.code}\n"
                        f"{out.stdout[-3000:]}\n{out.stderr[-6000:]}", pytrace=False)
        pytest.fail(f"Python block at {where} failed "
                    f"(exit {out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-6000:]}", pytrace=False)


def run_python(blocks: list[Block], work: Path, env: dict) -> None:
    """Run Python ``blocks`` in order in one interpreter, in the folder ``work``."""
    run_blocks(blocks, work, env)


def run_shell(block: Block, work: Path, env: dict) -> None:
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", block.code], cwd=work, env=env,
                         capture_output=True, text=True, timeout=TIMEOUT_S)
    if out.returncode != 0:
        pytest.fail(f"shell block at {block.where} failed (exit {out.returncode}):\n{block.code}\n"
                    f"{out.stdout[-3000:]}\n{out.stderr[-6000:]}", pytrace=False)


def _uses_data(blocks: list[Block]) -> bool:
    return any(re.search(r"--data\b|load_dataset\(", b.code) for b in blocks)


def _runnable(page: str) -> list[Block]:
    return [b for b in BLOCKS[page] if b.kind and b.not_run is None]


def _page_params() -> list:
    """(page, corpus) for every page on the example corpus, and the README on a user's own files too; pages
    whose snippets read the shared data sets are marked ``data``."""
    out = []
    for p in BLOCKS:
        marks = [pytest.mark.data] if _uses_data(_runnable(p)) else []
        out.append(pytest.param(p, "example", marks=marks, id=p))
        if p == "README.md":
            out.append(pytest.param(p, "own", marks=marks, id=f"{p}-own-files"))
    return out


PAGE_PARAMS = _page_params()


# ------------------------------------------------------------------ tests
@pytest.mark.parametrize("page", list(BLOCKS), ids=list(BLOCKS))
def test_fences_are_tagged(page):
    """Every fence says what it holds, and a runnable block holds no placeholder."""
    for b in BLOCKS[page]:
        assert b.tag, (f"{b.where}: code fence without a tag: tag it python or bash to run it, "
                       "text (or json, ...) when it is not a command")
        if b.kind and b.not_run is None:
            code = "\n".join(line.split("#", 1)[0] for line in b.code.splitlines())  # comments may say "..."
            assert "..." not in code, f"{b.where}: '...' placeholder in a block that runs; give real values"


@pytest.mark.models
@pytest.mark.parametrize(("page", "corpus"), PAGE_PARAMS)
def test_page_snippets_run(page, corpus, tmp_path, request):
    """The page's runnable blocks in the order a reader meets them, in one folder holding the small corpus
    (``corpus``: cut from the bundled example, or for the README also from :data:`OWN_DOCUMENT`)."""
    runnable = _runnable(page)
    if not runnable:
        pytest.skip(f"{page} has no block that runs")
    data = request.getfixturevalue("shared_data") if _uses_data(runnable) else None
    home_before = sorted(p.name for p in momoka_home().iterdir()) if momoka_home().is_dir() else []
    env = snippet_env(tmp_path, data)
    make_corpus(tmp_path / "work", CORPORA[corpus])
    run_blocks(runnable, tmp_path / "work", env)
    home_after = sorted(p.name for p in momoka_home().iterdir()) if momoka_home().is_dir() else []
    assert home_after == home_before, "the snippets wrote into the user's MOMOKA_HOME"


@pytest.mark.parametrize("block", SKIPPED, ids=[b.where for b in SKIPPED])
def test_not_run_blocks_say_why(block):
    """Each block kept out of the test run gives its reason (listed as a skip with it)."""
    assert block.not_run, f"{block.where}: <!-- not run: REASON --> needs a reason"
    pytest.skip(f"{block.where}: not run: {block.not_run}")


# ------------------------------------------------------------------ the harness itself
def test_parse_blocks_reads_tags_markers_and_indented_fences(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text(
        "# T\n\n"
        "```python\nx = 1\n```\n\n"              # lines 3-5
        "<!-- not run: takes an hour -->\n\n"    # line 7
        "```bash\nsleep 3600\n```\n\n"           # lines 9-11
        "- item\n\n"
        "    ```text\n    a\n      b\n    ```\n"  # lines 15-18: indented in a list
        "````\nno tag\n````\n",                 # lines 19-21
        encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    got = parse_blocks(page)
    assert [(b.line, b.tag, b.code, b.not_run, b.kind) for b in got] == [
        (3, "python", "x = 1\n", None, "python"),
        (9, "bash", "sleep 3600\n", "takes an hour", "shell"),
        (15, "text", "a\n  b\n", None, None),
        (19, "", "no tag\n", None, None),
    ]


def test_a_failing_block_fails_and_names_its_line(tmp_path):
    env = snippet_env(tmp_path, None)
    work = tmp_path / "w"
    make_corpus(work)
    ok = Block("p.md", 3, "python", "import momoka\nn = len(open('report.md').read())\n", None)
    bad = Block("p.md", 9, "python", "assert n > 0\nraise SystemExit(n - n + 3)\n", None)
    run_python([ok], work, env)
    with pytest.raises(pytest.fail.Exception, match=r"p\.md:9"):
        run_python([ok, bad], work, env)
    with pytest.raises(pytest.fail.Exception, match=r"p\.md:5 failed \(exit 1\)"):
        run_shell(Block("p.md", 5, "bash", "false | true\n", None), work, env)  # pipefail
    with pytest.raises(pytest.fail.Exception, match="No such file"):
        run_shell(Block("p.md", 5, "bash", "cat missing.md\n", None), work, env)
    run_shell(Block("p.md", 5, "bash", "test -f report.md && test -d notes && momoka --version\n", None), work, env)


def test_blocks_run_in_the_order_a_reader_meets_them(tmp_path):
    # a shell block's file is there for the Python block below it, and the Python block's for the next shell block
    env = snippet_env(tmp_path, None)
    work = tmp_path / "w"
    make_corpus(work)
    blocks = [Block("p.md", 3, "bash", "echo one > made_by_shell.txt\n", None),
              Block("p.md", 7, "python", "seen = open('made_by_shell.txt').read().strip()\n"
                                         "open('made_by_python.txt', 'w').write(seen + ' two')\n", None),
              Block("p.md", 12, "bash", 'test "$(cat made_by_python.txt)" = "one two"\n', None),
              Block("p.md", 15, "python", "assert seen == 'one'\n", None)]
    run_blocks(blocks, work, env)
    # a failing shell block names its line and stops the page: the block after it does not run
    stop = [Block("p.md", 3, "bash", "echo x > a.txt\nexit 3\n", None),
            Block("p.md", 8, "python", "open('after.txt', 'w').write('ran')\n", None)]
    with pytest.raises(pytest.fail.Exception, match=r"shell block at p\.md:3 failed \(exit 3\)"):
        run_blocks(stop, work, env)
    assert (work / "a.txt").exists() and not (work / "after.txt").exists()
