"""Convert CRUD-RAG's question-answering data into the layout of the shared evaluation sets.

CRUD-RAG (``IAAR-Shanghai/CRUD_RAG``; Lyu et al., 2024) is the Chinese RAG benchmark that MoC and
Meta-Chunking evaluate on. Its question-answering tasks (one, two or three news articles per item) ship,
beside a corpus of news articles (``data/80000_docs/documents_dup_part_*``: one article a line,
``DATE，正文：TEXT``), the QuestEval sub-questions of each item (``src/quest_eval/QuestAnswer{1Doc,2Docs,
3Docs}_quest_gt_save.json``: item id -> ``{"key_info": [...], "question": [...], "answers": [...]}``). The
items' own file (``data/crud_split/split_merged.json``) and some corpus parts may be absent from a
checkout; this converter needs only the files above.

Conversion:

* **Source articles of an item.** An item's key facts (``key_info``) are searched verbatim in the
  corpus. The article holding the most of them is the item's first source; for the 2- and 3-article
  tasks the key facts it holds are set aside and the search repeats over the rest, up to two or three
  sources. A source must hold at least ``--min-key-info`` (2) of the facts still unplaced and at
  least half of them. Articles that hold exactly the same facts as the best one (the same news in
  several outlets) are kept together as alternatives. Items with no such article (its article is in
  a corpus part the checkout lacks, or its facts are paraphrases) are dropped and counted.
* **Questions.** Each sub-question of a placed item whose answer occurs verbatim in one of its source
  articles is a question; every occurrence there is an evidence span, and the spans are alternatives
  (``evidence_mode: "any"``): retrieving one is enough. Answers ``无法推断`` ("cannot be inferred"),
  answers of fewer than ``--min-answer-chars`` characters, and answers not found verbatim in a source
  are dropped and counted. ``doc_id``/``evidence`` name the first source article holding the answer,
  ``evidence_multi`` every ``[doc_id, start, end]``; ``task`` (``1doc``, ``2docs``, ``3docs``) keeps the
  tasks apart, ``item`` names the CRUD item and ``n_sources`` its number of source articles.
* **Documents.** Every source article of a kept question, plus ``--distractors`` (default 3,000)
  other articles drawn with ``--seed`` (default 0) from the rest of the corpus. A document's text is
  its article after ``正文：`` with surrounding whitespace removed; ``date`` keeps the part before it.
  Questions come in task order (``1doc`` first), items in file order.

Usage::

    python bench/data/crud_rag.py CHECKOUT OUT [--tasks 1doc,2docs,3docs] [--distractors 3000] [--seed 0]

``CHECKOUT`` is a folder holding the repository's files (a clone, or the files of a snapshot); ``OUT``
receives ``documents.jsonl``, ``questions.jsonl``, ``dataset.json``, ``stats.json`` and ``README.md``.
The data's licence does not allow shipping it: keep the output out of the repository.
"""

from __future__ import annotations

import argparse
import bisect
import json
import random
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

TASKS = {"1doc": ("QuestAnswer1Doc", 1), "2docs": ("QuestAnswer2Docs", 2), "3docs": ("QuestAnswer3Docs", 3)}
CORPUS_GLOB = "data/80000_docs/documents_dup_part_*"
QUEST_DIR = "src/quest_eval"
UNANSWERABLE = "无法推断"
BODY_MARK = "，正文："


class ConvertError(Exception):
    """The checkout lacks what the conversion needs."""


def _part_key(path: Path) -> tuple:
    return tuple(int(n) for n in re.findall(r"\d+", path.name))


def read_corpus(checkout: Path) -> tuple[list[str], list[str], list[str]]:
    """``(ids, dates, texts)`` of the corpus articles, in part order, exact duplicates dropped."""
    parts = sorted(checkout.glob(CORPUS_GLOB), key=_part_key)
    if not parts:
        raise ConvertError(f"{checkout}: no corpus parts ({CORPUS_GLOB})")
    ids, dates, texts, seen = [], [], [], set()
    for part in parts:
        for n, line in enumerate(part.read_text(encoding="utf-8").split("\n")):
            date, mark, body = line.partition(BODY_MARK)
            text = body.strip() if mark else line.strip()
            if not text or text in seen:
                continue
            seen.add(text)
            ids.append(f"crud_{part.name.replace('documents_dup_', '')}_{n:04d}")
            dates.append(date.strip(" []") if mark else "")
            texts.append(text)
    return ids, dates, texts


class Finder:
    """Verbatim search of strings over all articles (one joined text, ``str.find``)."""

    def __init__(self, texts: list[str]):
        self.texts = texts
        self.big = "\n".join(texts)
        self.starts, p = [], 0
        for t in texts:
            self.starts.append(p)
            p += len(t) + 1

    def articles_with(self, s: str) -> set[int]:
        """The articles holding ``s`` verbatim (by index)."""
        out, p = set(), self.big.find(s)
        while p >= 0:
            a = bisect.bisect_right(self.starts, p) - 1
            end = self.starts[a] + len(self.texts[a])
            if p + len(s) <= end:  # not a match across the line break between two articles
                out.add(a)
                p = self.big.find(s, end + 1)  # the next article
            else:
                p = self.big.find(s, p + 1)
        return out


def occurrences(text: str, s: str) -> list[tuple[int, int]]:
    """Every (non-overlapping) ``[start, end)`` of ``s`` in ``text``."""
    out, p = [], text.find(s)
    while p >= 0:
        out.append((p, p + len(s)))
        p = text.find(s, p + len(s))
    return out


def place_item(item: dict, n_sources: int, finder: Finder, min_key_info: int, n_probe: int = 3) -> list[list[int]]:
    """The item's source articles: up to ``n_sources`` groups of alternatives (see the module docstring)."""
    facts = [f for f in dict.fromkeys(item.get("key_info") or []) if isinstance(f, str) and len(f.strip()) >= 2]
    groups: list[list[int]] = []
    left = list(facts)
    while left and len(groups) < n_sources:
        cands: set[int] = set()
        for f in sorted(left, key=len, reverse=True)[:n_probe]:
            cands |= finder.articles_with(f)
        cands -= {a for g in groups for a in g}
        if not cands:
            break
        held = {a: frozenset(f for f in left if f in finder.texts[a]) for a in cands}
        best = max(len(h) for h in held.values())
        if best < min_key_info or 2 * best < len(left):
            break
        top = min((a for a in cands if len(held[a]) == best), key=lambda a: (sorted(held[a]), a))
        group = sorted(a for a in cands if held[a] == held[top])
        groups.append(group)
        left = [f for f in left if f not in held[top]]
    return groups


def convert(checkout: Path, out: Path, *, tasks=("1doc", "2docs", "3docs"), distractors: int = 3000, seed: int = 0,
            min_key_info: int = 2, min_answer_chars: int = 2, log=print) -> dict:
    """Write the set to ``out``; returns the counts written to ``stats.json``."""
    checkout, out = Path(checkout), Path(out)
    ids, dates, texts = read_corpus(checkout)
    log(f"corpus: {len(texts)} distinct articles")
    finder = Finder(texts)
    questions, used, counts = [], set(), {}
    for task in tasks:
        if task not in TASKS:
            raise ConvertError(f"unknown task {task!r}; choose from {', '.join(TASKS)}")
        stem, n_src = TASKS[task]
        path = checkout / QUEST_DIR / f"{stem}_quest_gt_save.json"
        if not path.is_file():
            raise ConvertError(f"{checkout}: missing {QUEST_DIR}/{path.name}")
        items = json.loads(path.read_text(encoding="utf-8"))
        c = Counter()
        for key, item in items.items():
            c["items"] += 1
            qs, ans = item.get("question") or [], item.get("answers") or []
            c["sub_questions"] += len(qs)
            groups = place_item(item, n_src, finder, min_key_info)
            if not groups:
                c["items_not_placed"] += 1
                c["dropped_item_not_placed"] += len(qs)
                continue
            c["items_placed"] += 1
            c[f"items_with_{len(groups)}_sources"] += 1
            sources = [a for g in groups for a in g]
            for i, (q, a) in enumerate(zip(qs, ans)):
                a = (a or "").strip()
                if a == UNANSWERABLE or not a:
                    c["dropped_unanswerable"] += 1
                    continue
                if len(a) < min_answer_chars:
                    c["dropped_short_answer"] += 1
                    continue
                multi = [[ids[s], st, en] for s in sources for st, en in occurrences(texts[s], a)]
                if not multi:
                    c["dropped_answer_not_verbatim"] += 1
                    continue
                first = multi[0][0]
                questions.append({
                    "qid": f"crud_{task}_{key}_q{i}", "doc_id": first, "question": q, "answers": [a],
                    "evidence": [[s, e] for d, s, e in multi if d == first], "evidence_multi": multi,
                    "doc_ids": list(dict.fromkeys(d for d, _, _ in multi)), "task": task, "item": key,
                    "n_sources": len(groups), "key_info": list(item.get("key_info") or []),
                })
                used.update(s for s in sources if any(d == ids[s] for d, _, _ in multi))
                c["questions"] += 1
                c["evidence_spans"] += len(multi)
        counts[task] = dict(c)
        log(f"{task}: {dict(c)}")
    if len(questions) == 0:
        raise ConvertError("no question could be located; is this a CRUD-RAG checkout?")
    rest = [a for a in range(len(texts)) if a not in used]
    extra = random.Random(seed).sample(rest, min(distractors, len(rest)))
    keep = sorted(used | set(extra))
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "documents.jsonl", "w", encoding="utf-8") as f:
        for a in keep:
            f.write(json.dumps({"doc_id": ids[a], "title": "", "text": texts[a], "date": dates[a],
                                "source": a in used}, ensure_ascii=False) + "\n")
    by_id = {ids[a]: texts[a] for a in keep}
    for q in questions:  # every span is checked against the text written
        for d, s, e in q["evidence_multi"]:
            assert by_id[d][s:e] == q["answers"][0], (q["qid"], d, s, e)
    with open(out / "questions.jsonl", "w", encoding="utf-8") as f:
        for q in questions:
            f.write(json.dumps(q, ensure_ascii=False) + "\n")
    stats = {"evidence_mode": "any", "documents": len(keep), "source_documents": len(used),
             "distractors": len(extra), "corpus_articles": len(texts), "questions": len(questions),
             "questions_by_task": dict(Counter(q["task"] for q in questions)),
             "questions_with_several_source_docs": sum(len(q["doc_ids"]) > 1 for q in questions),
             "mean_doc_chars": round(sum(len(texts[a]) for a in keep) / len(keep), 1), "tasks": counts,
             "options": {"tasks": list(tasks), "distractors": distractors, "seed": seed,
                         "min_key_info": min_key_info, "min_answer_chars": min_answer_chars}}
    (out / "dataset.json").write_text(json.dumps({"evidence_mode": "any"}) + "\n", encoding="utf-8")
    (out / "stats.json").write_text(json.dumps(stats, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    (out / "README.md").write_text(_readme(checkout, stats), encoding="utf-8")
    return stats


def _commit(checkout: Path) -> str:
    try:
        r = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30)
        return r.stdout.strip() if r.returncode == 0 else "unknown (not a git checkout; give --commit)"
    except OSError:
        return "unknown (git not found; give --commit)"


def _readme(checkout: Path, stats: dict, commit: str | None = None) -> str:
    commit = stats.get("commit") or commit or _commit(checkout)
    lines = [
        "# crud_rag_qa — CRUD-RAG question answering (Chinese news), sub-questions with located answers", "",
        f"- **Source repo:** `IAAR-Shanghai/CRUD_RAG`, commit `{commit}`. Corpus: "
        f"`{CORPUS_GLOB}` ({stats['corpus_articles']:,} distinct articles in the parts present); questions: "
        f"`{QUEST_DIR}/QuestAnswer{{1Doc,2Docs,3Docs}}_quest_gt_save.json` (QuestEval sub-questions with "
        "answers and key facts of each item).",
        "- **License:** the repository is Apache-2.0 (its README); the news articles are Chinese news "
        "outlets' text. Evaluation only: do not redistribute or ship it.",
        f"- **Counts:** {stats['documents']:,} documents ({stats['source_documents']:,} source articles, "
        f"{stats['distractors']:,} distractors drawn with seed {stats['options']['seed']}), mean "
        f"{stats['mean_doc_chars']:,} characters; {stats['questions']:,} questions "
        f"({', '.join(f'{k} {v}' for k, v in stats['questions_by_task'].items())}), every one with evidence; "
        f"{stats['questions_with_several_source_docs']} have evidence in more than one article.",
        "- **Evidence:** every occurrence of the answer in the item's source article(s), checked "
        "`text[s:e] == answer`; the spans are alternatives (`evidence_mode: any`).",
        "- **Per task** (items placed, questions kept, and why the others were dropped):", "",
    ]
    for task, c in stats["tasks"].items():
        lines.append(f"  - `{task}`: " + ", ".join(f"{k} {v}" for k, v in c.items()))
    lines += ["", "- **Conversion:** `bench/data/crud_rag.py` of the momoka repository (its docstring gives the "
              "rules); options " + json.dumps(stats["options"]) + ".",
              "- **Extra fields:** `task` (`1doc`, `2docs`, `3docs`), `item` (CRUD item id), `n_sources`, "
              "`key_info`, `doc_ids`, `evidence_multi`; documents carry `date` and `source` (a source article "
              "of some question, or a distractor).",
              "- **Caveat:** the corpus holds near-duplicate reports of the same news; a distractor may state "
              "an answer too, and it does not count as evidence.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkout", type=Path, help="folder holding CRUD_RAG's files")
    p.add_argument("out", type=Path, help="output folder")
    p.add_argument("--tasks", default="1doc,2docs,3docs", help="tasks, in order (default 1doc,2docs,3docs)")
    p.add_argument("--distractors", type=int, default=3000, help="articles added besides the sources (default 3000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the distractor draw (default 0)")
    p.add_argument("--min-key-info", type=int, default=2, help="key facts a source article must hold (default 2)")
    p.add_argument("--min-answer-chars", type=int, default=2, help="shortest answer kept (default 2)")
    p.add_argument("--commit", default=None, help="the snapshot's commit, for the README (default: git rev-parse)")
    a = p.parse_args(argv)
    if a.distractors < 0:
        p.error("--distractors must be >= 0")
    try:
        stats = convert(a.checkout, a.out, tasks=tuple(t.strip() for t in a.tasks.split(",") if t.strip()),
                        distractors=a.distractors, seed=a.seed, min_key_info=a.min_key_info,
                        min_answer_chars=a.min_answer_chars, log=lambda m: print(m, file=sys.stderr))
    except ConvertError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if a.commit:
        stats["commit"] = a.commit
        (a.out / "README.md").write_text(_readme(a.checkout, stats), encoding="utf-8")
        (a.out / "stats.json").write_text(json.dumps(stats, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps({k: stats[k] for k in ("documents", "questions", "questions_by_task")}, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
