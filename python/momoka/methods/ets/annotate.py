"""ETS MCTS annotation (papers/002 section 3.2): evidence trees, and their paths as policy/value training data.

For one question with gold answer ``y`` and ``N`` candidate sentences (:func:`candidate_sentences`),
the native engine (:class:`momoka.mcts.MCTS`) searches over the candidates from a
virtual root (item ``N``, the empty evidence set):

* **selection**: UCT, ``w = 1.4`` (ETS eq. 1);
* **expansion**: ``expansion="scored"``: the first time a node is expanded, every
  candidate ``d`` off its path is scored by the reader likelihood
  ``P(y | q, path + d)`` (eq. 2) through ask/tell, and the top ``M = 3`` are kept,
  expanded best first;
* **simulation**: the reader answers from the new leaf's evidence (root to leaf, in
  document order); reward 1 if the answer is correct (normalised EM or F1 >= 0.8),
  else ``P(y | q, evidence)``;
* **backup**: running mean ``V += (R - V) / N`` (eq. 3); 20 iterations; depth <= 5.

Every visited node is the end of one evidence path. :func:`export_paths` writes each
as one JSON line in the policy-training form (the paper's eq. 4): the policy input
(``prompt``: ETS App. D extraction prompt over the candidates), the target it is
trained to generate (``completion``: the path's sentences, one per line, in path order),
the per-step value targets ``V(s_t)`` and visit counts, and the label ``correct``
(the reader answered correctly from this evidence: a positive path ``x+``) or not
(``x-``). The correct paths train the policy (NLL), all paths the value head (MSE).
See ``docs/ets.md``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..._validate import check_float, check_int
from ...errors import ConfigError, InputError
from ...llm import prompts
from ...progress import Progress
from .beam import extraction_background, extraction_target
from .candidates import DEFAULT_N, Sentence, candidate_sentences
from .reader import CORRECTNESS_MODES, Reader, is_correct

__all__ = ["AnnotationConfig", "Annotation", "annotate_question", "annotate_dataset", "export_paths"]


@dataclass(frozen=True)
class AnnotationConfig:
    """ETS annotation settings (paper and METHODS.md section 4 defaults)."""

    n: int = DEFAULT_N          # candidate sentences (embedder pre-filter)
    top_m: int = 3              # children kept per expansion (M)
    iterations: int = 20        # MCTS simulations per question
    max_depth: int = 5          # evidence sentences per path at most
    c: float = 1.4              # UCT exploration weight w
    correctness: str = "em_or_f1"
    f1_threshold: float = 0.8
    max_tokens: int = 16        # reader answer length
    seed: int = 0

    def check(self) -> "AnnotationConfig":
        """Raise :class:`ConfigError` for an impossible setting; return self."""
        for name in ("n", "top_m", "iterations", "max_depth", "max_tokens"):
            check_int(getattr(self, name), name, minimum=1)
        check_float(self.c, "c", minimum=0)
        if self.correctness not in CORRECTNESS_MODES:
            raise ConfigError(f"correctness must be one of {CORRECTNESS_MODES}, got {self.correctness!r}")
        if not 0 < self.f1_threshold <= 1:
            raise ConfigError(f"f1_threshold must lie in (0, 1], got {self.f1_threshold!r}")
        return self


@dataclass
class Annotation:
    """The outcome of :func:`annotate_question`.

    ``nodes``: per visited tree node (root excluded, creation order) a dict with
    ``path`` (candidate indices, path order), ``value`` (running mean V), ``visits``,
    ``answer`` (the reader's answer from the path's evidence), ``correct``,
    ``likelihood`` (P(y | q, evidence)) and ``reward``; plus the call counts.
    """

    question: str
    answers: tuple[str, ...]
    candidates: list[Sentence]
    nodes: list[dict]
    likelihood_calls: int
    answer_calls: int
    seconds: float


def annotate_question(question: str, answers: Sequence[str], candidates: Sequence[Sentence], reader: Reader,
                      config: AnnotationConfig = AnnotationConfig()) -> Annotation:
    """Run the ETS MCTS annotation for one question over ``candidates`` (module docstring).

    The likelihood is of the first gold answer; correctness accepts any of them.
    """
    from ...mcts import MCTS  # start-up: momoka.mcts

    config.check()
    answers = tuple(a for a in answers if isinstance(a, str) and a.strip())
    if not answers:
        raise InputError("annotation needs at least one non-empty gold answer")
    cands = list(candidates)
    t0 = time.perf_counter()
    n = len(cands)
    if n == 0:
        return Annotation(question, answers, cands, [], 0, 0, 0.0)
    gold = answers[0]
    lik: dict[tuple[int, ...], float] = {}   # evidence set (document order) -> P(y | q, evidence)
    ans: dict[tuple[int, ...], str] = {}     # evidence set -> the reader's answer
    sims: dict[tuple[int, ...], dict] = {}   # path (path order) -> simulation outcome
    calls = {"lik": 0, "ans": 0}

    def evidence(key: tuple[int, ...]) -> list[str]:
        return [cands[i].text for i in key]

    def likelihoods(keys: list[tuple[int, ...]]) -> None:
        todo = sorted({k for k in keys if k not in lik})
        if todo:
            vals = reader.likelihoods(question, gold, [evidence(k) for k in todo])
            calls["lik"] += len(todo)
            lik.update(zip(todo, (float(v) for v in vals)))

    def judge(batch) -> list[float]:
        paths = [tuple(int(x) for x in p[1:]) + (int(c),) for p, c in zip(batch.paths, batch.cand.tolist())]
        keys = [tuple(sorted(p)) for p in paths]
        is_score = batch.is_score.tolist()
        likelihoods([k for k, s in zip(keys, is_score) if s])
        out: list[float] = []
        wrong: list[int] = []
        for j, (p, k, s) in enumerate(zip(paths, keys, is_score)):
            if s:
                out.append(lik[k])
                continue
            if k not in ans:
                ans[k] = reader.answer(question, evidence(k), max_tokens=config.max_tokens)
                calls["ans"] += 1
            ok = is_correct(ans[k], answers, mode=config.correctness, f1_threshold=config.f1_threshold)
            sims[p] = {"answer": ans[k], "correct": ok}
            out.append(1.0)
            if not ok:
                wrong.append(j)
        likelihoods([keys[j] for j in range(len(keys)) if not is_score[j]])  # already scored at expansion
        for j in range(len(keys)):
            if not is_score[j]:
                sims[paths[j]]["likelihood"] = lik[keys[j]]
        for j in wrong:
            out[j] = lik[keys[j]]
        for j in range(len(keys)):
            if not is_score[j]:
                sims[paths[j]]["reward"] = out[j]
        return out

    eng = MCTS(n + 1, roots=[n], iterations=config.iterations, rollout_len=1, rollout_scope="leaf",
               rollout_return="last", backup="mean", c=config.c, expansion="scored", top_m=config.top_m,
               reward="path", max_depth=config.max_depth, path_cap=config.max_depth, seed=config.seed, threads=1)
    eng.run(judge, batch_size=4096)
    t = eng.tree(0)
    items, parent = t["item"].tolist(), t["parent"].tolist()
    nodes: list[dict] = []
    for v in range(1, len(items)):
        if t["visits"][v] == 0:
            continue
        path, u = [], v
        while u > 0:
            path.append(items[u])
            u = parent[u]
        path.reverse()
        steps, u = [], v
        while u > 0:
            steps.append({"value": float(t["mean"][u]), "visits": int(t["visits"][u])})
            u = parent[u]
        steps.reverse()
        sim = sims[tuple(path)]
        nodes.append({"path": path, "value": float(t["mean"][v]), "visits": int(t["visits"][v]), "steps": steps,
                      **sim})
    return Annotation(question, answers, cands, nodes, calls["lik"], calls["ans"], time.perf_counter() - t0)


def export_paths(qid: str, ann: Annotation, *, reader_name: str = "", dataset: str = "") -> list[dict]:
    """The annotation's evidence paths as JSON-serialisable records (the policy/value training format).

    One record per visited node: ``prompt`` (ETS App. D extraction prompt over the
    candidates in document order), ``completion`` (the path's sentences, one per
    line, path order), ``steps`` (each sentence with its exact span and its value
    target ``value`` = V(s_t) and ``visits``), ``label`` (``"correct"`` or
    ``"incorrect"``), ``reward``, ``likelihood``, ``reader_answer``, and where
    it came from.
    """
    background = extraction_background([c.text for c in ann.candidates])
    prompt = prompts.render("ets.extraction", background=background, query=ann.question)
    out = []
    for k, nd in enumerate(ann.nodes):
        sents = [ann.candidates[i] for i in nd["path"]]
        out.append({
            "qid": qid,
            "path_index": k,
            "dataset": dataset,
            "question": ann.question,
            "answers": list(ann.answers),
            "label": "correct" if nd["correct"] else "incorrect",
            "prompt": prompt,
            "completion": extraction_target([s.text for s in sents]),
            "steps": [{"doc_id": s.doc_id, "start": s.start, "end": s.end, "text": s.text,
                       "candidate": i, "value": st["value"], "visits": st["visits"]}
                      for s, i, st in zip(sents, nd["path"], nd["steps"])],
            "value": nd["value"],
            "reward": nd["reward"],
            "likelihood": nd["likelihood"],
            "reader_answer": nd["answer"],
            "reader": reader_name,
            "n_candidates": len(ann.candidates),
        })
    return out


def _resume(out: Path) -> set[str]:
    """Question ids finished in an earlier run; lines of an unfinished question are dropped from ``out``."""
    done_file = out.with_name(out.name + ".done")
    done = set(done_file.read_text(encoding="utf-8").split()) if done_file.is_file() else set()
    if out.is_file():
        keep, dropped = [], 0
        with open(out, encoding="utf-8") as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    dropped += 1
                    continue
                if rec.get("qid") in done:
                    keep.append(line if line.endswith("\n") else line + "\n")
                else:
                    dropped += 1
        if dropped:
            tmp = out.with_name(out.name + ".tmp")
            tmp.write_text("".join(keep), encoding="utf-8")
            os.replace(tmp, out)
    return done


def annotate_dataset(data: str | os.PathLike, out: str | os.PathLike, *, limit: int | None = None,
                     reader: Reader | None = None, embedder: Any = None,
                     config: AnnotationConfig = AnnotationConfig(), progress: bool | None = None) -> dict:
    """Annotate the questions of an evaluation set (``momoka.eval.load_dataset``) and append their paths to ``out``.

    Candidates are the top ``config.n`` sentences of each question's whole document.
    Resumable: a question's paths are appended together, then its id goes to
    ``out + ".done"``; a rerun skips finished questions and drops the lines of one
    that was cut off. ``limit``: the first ``limit`` questions of the set. Returns
    a summary: questions annotated now and before, paths, correct/incorrect, seconds.
    """
    from ...eval.datasets import load_dataset  # start-up: momoka.eval.datasets

    config.check()
    if limit is not None:
        limit = check_int(limit, "limit", minimum=1)
    ds = load_dataset(data, limit=limit)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = _resume(out)
    todo = [q for q in ds.questions if q.qid not in done and q.answers]
    if reader is None:
        reader = Reader()
    if embedder is None:
        from ...models import Embedder  # start-up: momoka.models

        embedder = Embedder.default()
    summary = {"dataset": ds.name, "questions": 0, "skipped": len(ds.questions) - len(todo), "paths": 0,
               "correct": 0, "incorrect": 0, "seconds": 0.0, "likelihood_calls": 0, "answer_calls": 0}
    docs: dict[str, Any] = {}
    with Progress("ets annotate", total=len(todo), unit="questions", enabled=progress) as bar:
        for q in todo:
            t0 = time.perf_counter()
            if q.doc_id not in docs:
                docs = {q.doc_id: ds.document(q.doc_id).to_document()}
            cands = candidate_sentences(q.question, documents=[docs[q.doc_id]], embedder=embedder, n=config.n)
            ann = annotate_question(q.question, q.answers, cands, reader, config)
            recs = export_paths(q.qid, ann, reader_name=reader.name, dataset=ds.name)
            with open(out, "a", encoding="utf-8") as f:
                f.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs))
            with open(out.with_name(out.name + ".done"), "a", encoding="utf-8") as f:
                f.write(q.qid + "\n")
            ok = sum(r["label"] == "correct" for r in recs)
            summary["questions"] += 1
            summary["paths"] += len(recs)
            summary["correct"] += ok
            summary["incorrect"] += len(recs) - ok
            summary["likelihood_calls"] += ann.likelihood_calls
            summary["answer_calls"] += ann.answer_calls
            summary["seconds"] += time.perf_counter() - t0
            bar.update(1, paths=summary["paths"], correct=summary["correct"])
    summary["config"] = asdict(config)
    return summary
