"""Inputs shared by the kernel benchmarks (real text from ../shared/data, seeded edits)."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

ALPHABET_EN = "abcdefghijklmnopqrstuvwxyz "


def load_texts(folder: Path) -> list[str]:
    with open(folder / "documents.jsonl", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def english_text(shared_data: Path, n: int = 200_000) -> str:
    """The first n characters of the SQuAD half-A documents joined by blank lines."""
    text = "\n\n".join(load_texts(shared_data / "squad_v1_dev_half_a"))
    return text[:n]


def chinese_text(n: int = 200_000, seed: int = 0) -> str:
    """A Chinese text built from jieba's dictionary (real words, weighted by their corpus frequency).

    jieba ships dict.txt (word, frequency, part of speech) from a large Chinese
    corpus. Words are drawn by frequency into clauses of 4-12 words ended by
    Chinese punctuation. Not fluent prose, but real vocabulary and realistic
    character statistics (common characters and words repeat as in text).
    """
    import jieba  # the `bench` extra (callers importorskip it)

    path = Path(jieba.__file__).parent / "dict.txt"
    words, freqs = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and all("\u4e00" <= ch <= "\u9fff" for ch in parts[0]):
                words.append(parts[0])
                freqs.append(int(parts[1]))
    rng = random.Random(seed)
    cum = list(itertools.accumulate(freqs))
    out: list[str] = []
    size = 0
    while size < n:
        clause = "".join(rng.choices(words, cum_weights=cum, k=rng.randint(4, 12)))
        clause += rng.choice("，，，。。；！？")
        out.append(clause)
        size += len(clause)
    return "".join(out)[:n]


def apply_edits(s: str, k: int, rng: random.Random, alphabet: str) -> str:
    """k random single-character edits (substitution, insertion or deletion)."""
    chars = list(s)
    for _ in range(k):
        op = rng.randrange(3)
        if op == 0 and chars:
            chars[rng.randrange(len(chars))] = rng.choice(alphabet)
        elif op == 1:
            chars.insert(rng.randrange(len(chars) + 1), rng.choice(alphabet))
        elif chars:
            del chars[rng.randrange(len(chars))]
    return "".join(chars)
