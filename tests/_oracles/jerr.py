"""Plain-Python references for JERR's dedup (used by the tests and the dedup benchmark).

SimHash: bit votes over word unigrams ([a-z0-9_]+ of the lower-cased name)
plus character trigrams of the whitespace-collapsed lower-cased name, each
feature hashed by :func:`momoka.kernels.feature_hash`. Exact dedup: a dict of
normalised names; near dedup: every pair compared, union-find keeping the
smaller (first-seen) index as the root.
"""

from __future__ import annotations

import re

from momoka.kernels import feature_hash


def ref_simhash(text: str) -> int:
    t = " ".join(text.lower().split())
    feats = re.findall(r"[a-z0-9_]+", t) + ([t[i:i + 3] for i in range(len(t) - 2)] if len(t) >= 3 else [t])
    v = [0] * 64
    for f in feats:
        h = feature_hash(f)
        for b in range(64):
            v[b] += 1 if (h >> b) & 1 else -1
    return sum(1 << b for b in range(64) if v[b] > 0)


def ref_dedup(names, k=3):
    keys = [" ".join(n.lower().split()) for n in names]
    first: dict[str, int] = {}
    rep = list(range(len(names)))
    exact = 0
    uniq = []
    for i, key in enumerate(keys):
        if key in first:
            rep[i] = first[key]
            exact += 1
        else:
            first[key] = i
            uniq.append(i)
    parent = {i: i for i in uniq}

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x

    fps = {i: ref_simhash(keys[i]) for i in uniq}
    for a in range(len(uniq)):
        for b in range(a + 1, len(uniq)):
            i, j = uniq[a], uniq[b]
            if bin(fps[i] ^ fps[j]).count("1") <= k:
                ri, rj = find(i), find(j)
                if ri != rj:
                    parent[max(ri, rj)] = min(ri, rj)  # the first seen stays the representative
    near = sum(1 for i in uniq if find(i) != i)
    return [find(rep[i]) for i in range(len(names))], exact, near
