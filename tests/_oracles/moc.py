"""Plain-Python transcriptions of the Meta-Chunking / MoC reference rules (METHODS 1.3, 1.5), for tests."""

from __future__ import annotations


def ref_minima(s, threshold):
    """METHODS 1.3 boundary rule, written as the spec states it, one index at a time."""
    out = []
    for i in range(1, len(s) - 1):
        if s[i] < s[i - 1] and s[i] < s[i + 1]:
            if max(s[i - 1] - s[i], s[i + 1] - s[i]) >= threshold:
                out.append(i)
        elif s[i] < s[i - 1] and s[i] == s[i + 1]:
            if s[i - 1] - s[i] >= threshold:
                out.append(i)
    return out


def ref_chunks(n, minima):
    """Sentence-index groups of the 'nolist' assembly: the minimum ends its chunk."""
    points = [0] + list(minima) + [n - 1]
    out = []
    for j in range(len(points) - 1):
        lo = points[j] if j == 0 else points[j] + 1
        out.append(list(range(lo, points[j + 1] + 1)))
    return out


def ref_msp_splits(margins):
    """METHODS 1.5 recursion: indices i where sentence i+1 starts a new chunk."""
    theta, seen, out = 0, [], []
    for i, m in enumerate(margins):
        seen.append(m)
        if m > theta:
            pass
        else:
            out.append(i)
        if len(seen) >= 5:
            theta = sum(seen[-5:]) / 5
    return out
