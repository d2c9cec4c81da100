"""What the generation runtime changes for the tasks that generate with the local model: ``momoka ask``, the
MoC meta-chunker and an ``ask --refine ets`` question, each with ``MOMOKA_LLM_RUNTIME=onnx`` (before) and
``llama`` and ``auto`` (after).

* ``ask``: ``momoka ask STORE QUESTION`` (the local model reads, no endpoint) as a process, wall time, on a
  store of the first three SQuAD (half A) documents built once with ``momoka index``; and the same with
  ``--refine ets`` (ETS's evidence search runs on log-probs, so only its reading changes);
* ``meta``: :class:`momoka.methods.moc.meta.MetaChunker` on the local model over the first 3,000 characters
  of the first SQuAD document, in a child process, seconds per 1,000 characters.

Each run gets an empty LLM response cache (``MOMOKA_LLM_CACHE`` in a temporary folder), runs are
interleaved by runtime, best of ``--reps``. Prints ``uptime`` before and after; ``--out`` keeps the numbers.

Run: PYTHONPATH=python python bench/micro/bench_models_decode_tasks.py [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUNTIMES = ("onnx", "llama", "auto")
QUESTION = "When did the 1973 oil crisis begin?"
META_CHARS = 3000

META_CHILD = r"""
import json, sys, time
from momoka.llm.local import LocalClient
from momoka.methods.moc.meta import MetaChunker
from momoka.text import Document
text = open(sys.argv[1], encoding="utf-8").read()
ch = MetaChunker(LocalClient(cache=False))
t = time.perf_counter()
chunks = ch(Document(doc_id="d", text=text))
print(json.dumps({"s": time.perf_counter() - t, "chunks": len(chunks)}))
"""


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    from momoka.eval.datasets import find_shared_data

    data = find_shared_data(REPO)
    if data is None:
        sys.exit("needs ../shared/data (or MOMOKA_SHARED_DATA)")
    docs = [json.loads(line) for line in (data / "squad_v1_dev_half_a" / "documents.jsonl").open(encoding="utf-8")]
    res: dict = {"uptime_before": uptime(), "question": QUESTION, "runs": {}}
    print(res["uptime_before"], flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        src = tmp / "docs"
        src.mkdir()
        for d in docs[:3]:
            (src / f"{d['doc_id']}.txt").write_text(d["text"], encoding="utf-8")
        meta_text = tmp / "meta.txt"
        meta_text.write_text(docs[0]["text"][:META_CHARS], encoding="utf-8")
        store = tmp / "store"
        env = dict(os.environ, MOMOKA_PROGRESS="0")
        subprocess.run([sys.executable, "-m", "momoka", "index", str(src), "--store", str(store)], env=env, check=True,
                       capture_output=True)
        tasks = {
            "ask": [sys.executable, "-m", "momoka", "ask", str(store), QUESTION, "--json"],
            "ask --refine ets": [sys.executable, "-m", "momoka", "ask", str(store), QUESTION, "--refine", "ets",
                                 "--json"],
            "meta": [sys.executable, "-c", META_CHILD, str(meta_text)],
        }
        for rep in range(args.reps):
            for task, cmd in tasks.items():
                for rt in RUNTIMES:
                    e = dict(env, MOMOKA_LLM_RUNTIME=rt, MOMOKA_LLM_CACHE=str(tmp / f"cache-{task}-{rt}-{rep}.sqlite"))
                    t = time.perf_counter()
                    p = subprocess.run(cmd, env=e, capture_output=True, text=True)
                    wall = time.perf_counter() - t
                    if p.returncode:
                        sys.exit(f"{task} ({rt}) failed: {p.stderr.strip()[-2000:]}")
                    out = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
                    row = {"wall_s": wall}
                    if task == "meta":
                        m = json.loads(out)
                        row.update(chunk_s=m["s"], s_per_1000_chars=m["s"] / META_CHARS * 1000, chunks=m["chunks"])
                    else:
                        try:
                            row["answer"] = json.loads(p.stdout).get("answer", "")[:200]
                        except ValueError:
                            row["answer"] = out[:200]
                    res["runs"].setdefault(task, {}).setdefault(rt, []).append(row)
                    print(f"{task:18s} {rt:6s} {wall:7.2f} s  {json.dumps({k: v for k, v in row.items() if k != 'wall_s'})[:150]}",
                          flush=True)
    print("\nbest of", args.reps)
    res["best"] = {}
    for task, by_rt in res["runs"].items():
        key = "s_per_1000_chars" if task == "meta" else "wall_s"
        best = {rt: min(r[key] for r in rows) for rt, rows in by_rt.items()}
        res["best"][task] = {"measure": key, **best}
        print(f"{task:18s} {key:16s} " + "  ".join(f"{rt} {v:6.2f}" for rt, v in best.items())
              + f"   onnx/llama {best['onnx'] / best['llama']:.2f}x")
    res["uptime_after"] = uptime()
    print(res["uptime_after"])
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    return res


if __name__ == "__main__":
    main()
