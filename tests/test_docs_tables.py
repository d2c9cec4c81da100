"""The quality tables of the README and docs/ state n, and none prints three decimals on fewer than 30 questions
without an interval.

A quality table is a markdown table (outside code blocks) whose head, rows or caption name a quality measure (recall,
precision, MRR, F1, EM, accuracy, coverage, hit, margin) and whose cells hold a fraction or a percentage. Its n is
stated when the head, a row's first cell, a ``questions`` / ``n`` column or the caption (the paragraph just above
the table) gives a number of questions (or queries): ``(300 q)``, ``60 questions``, ``first 12 questions``,
``n = 40``, ``200 queries``, or a ``set (questions)`` / ``margin (n)`` column with the count in each row. A figure with three decimals on fewer than 30 questions (the row's
own n where it gives one, else the smallest n of the table) needs an interval in the table or its caption: a
``[low, high]`` bracket, a ``95 %`` / ``CI`` / ``interval`` mention. Otherwise round it to what it supports and
say what one question is worth.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

QUALITY = re.compile(r"recall|precision|\bmrr\b|\bf1\b|\bem\b|accuracy|coverage|\bcomplete\b|\bhit\b|margin|\bR@\d",
                     re.IGNORECASE)
FRACTION = re.compile(r"(?<![\d.])(?:0|1)\.\d{2,}(?![\d])|\d+(?:\.\d+)? ?%|[+-]\d+\.\d\b")
THREE = re.compile(r"(?<![\d.,])\d*\.\d{3}(?![\d])")
N_PATTERNS = [re.compile(p) for p in (
    r"\((\d[\d,]*) q\)", r"\b(\d[\d,]*) questions?\b", r"\bfirst (\d[\d,]*) questions?\b", r"\bn = (\d[\d,]*)",
    r"\bfirst (\d[\d,]*)\b(?! documents| stories| story| chunks| characters)", r"\((\d[\d,]*)\)",
    r"\b(\d[\d,]*) queries\b", r"\((\d+) each\b",
)]
INTERVAL = re.compile(r"\[[^\]]*[-−+]?\d[^\]]*,[^\]]*\]|95 ?%|\bCI\b|interval", re.IGNORECASE)
SEPARATOR = re.compile(r"^\s*\|(\s*:?-{3,}:?\s*\|)+\s*$")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _numbers(text: str) -> list[int]:
    out = []
    for p in N_PATTERNS:
        out += [int(m.group(1).replace(",", "")) for m in p.finditer(text)]
    return out


def tables(path: Path):
    """(line number, head, body rows, caption) of each markdown table outside code blocks."""
    lines = path.read_text(encoding="utf-8").split("\n")
    fence, i = False, 0
    while i < len(lines):
        if lines[i].lstrip().startswith("```"):
            fence = not fence
        if (not fence and lines[i].lstrip().startswith("|") and i + 1 < len(lines)
                and SEPARATOR.match(lines[i + 1])):
            j = i + 2
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                j += 1
            # the caption: the paragraph just above, blank lines and one code block skipped
            k, cap, skipped_code = i - 1, [], False
            while k >= 0 and not lines[k].strip():
                k -= 1
            if k >= 0 and lines[k].strip().startswith("```") and not skipped_code:
                skipped_code = True
                k -= 1
                while k >= 0 and not lines[k].strip().startswith("```"):
                    k -= 1
                k -= 1
                while k >= 0 and (not lines[k].strip() or lines[k].strip().startswith("<!--")):
                    k -= 1
            while k >= 0 and lines[k].strip() and not lines[k].lstrip().startswith(("|", "#", "```")):
                cap.insert(0, lines[k])
                k -= 1
            yield i + 1, lines[i], lines[i + 2:j], "\n".join(cap)
            i = j
            continue
        i += 1


def problems(path: Path, root: Path = ROOT) -> list[str]:
    out = []
    for line, head, rows, caption in tables(path):
        body = "\n".join(rows)
        if not (QUALITY.search(head) or QUALITY.search(caption) or QUALITY.search(body)) or not FRACTION.search(body):
            continue
        head_cells = [c.lower() for c in _cells(head)]
        n_cols = [i for i, c in enumerate(head_cells) if c in ("n", "questions") or c.endswith("(n)")]
        table_ns = _numbers(head) + _numbers(caption)
        where = f"{path.relative_to(root)}:{line} ({head[:60]}...)"
        row_ns, carried = [], None
        for r in rows:
            cells = _cells(r)
            own = _numbers(cells[0]) if cells and cells[0] else []
            for c in n_cols:
                if c < len(cells):
                    cell = cells[c]
                    own += _numbers(cell) if head_cells[c].endswith("(n)") else \
                        [int(x.replace(",", "")) for x in re.findall(r"\d[\d,]*", cell)]
            if own:
                carried = min(own)
            elif cells and cells[0]:
                carried = None
            row_ns.append(carried)
        if not table_ns and not any(n is not None for n in row_ns):
            out.append(f"{where}: no n (questions) in the head, the rows or the caption")
            continue
        has_interval = bool(INTERVAL.search(head) or INTERVAL.search(body) or INTERVAL.search(caption))
        for r, n in zip(rows, row_ns):
            n = n if n is not None else (min(table_ns) if table_ns else None)
            if n is not None and n < 30 and THREE.search(r) and not has_interval:
                out.append(f"{where}: three decimals on {n} questions without an interval: {r[:80]}")
                break
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_quality_tables_state_n_and_intervals(page):
    assert problems(page) == []


def test_the_check_catches_an_unfixed_table(tmp_path):
    """A table as some were before: three decimals on 6 questions, no n beside it, no interval."""
    bad = tmp_path / "bad.md"
    bad.write_text("Sentence-level evidence, each question's own document.\n\n"
                   "| evidence | recall | precision | F1 |\n|---|---|---|---|\n"
                   "| ets | 0.194 | 0.306 | 0.026 |\n| dense@k | 0.278 | 0.389 | 0.048 |\n", encoding="utf-8")
    assert any("no n" in p for p in problems(bad, tmp_path))
    bad.write_text("hotpotqa_dev500_long (first 6 questions with sentence gold):\n\n"
                   "| evidence | recall | precision | F1 |\n|---|---|---|---|\n"
                   "| ets | 0.194 | 0.306 | 0.026 |\n", encoding="utf-8")
    assert any("three decimals on 6 questions" in p for p in problems(bad, tmp_path))
    bad.write_text("hotpotqa_dev500_long, first 6 questions (a smoke test):\n\n"
                   "| evidence | recall | precision | F1 |\n|---|---|---|---|\n"
                   "| ets | 0.19 | 0.31 | 0.03 |\n", encoding="utf-8")
    assert problems(bad, tmp_path) == []
