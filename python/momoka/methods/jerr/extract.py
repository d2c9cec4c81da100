"""JERR extraction: per unit of text, a synopsis, entities with their mentions and directed edges.

A *unit* is a run of consecutive store chunks of about the paper's chunk size
(``unit_tokens``, 600 tokens as for QuALITY; 4 characters per token). Two
back-ends fill a :class:`UnitExtraction` per unit:

* ``offline`` (no LLM): entities are capitalised noun phrases (a capitalised
  word at a sentence start only when the document also writes it capitalised
  mid-sentence; a leading "The" dropped) and the document's own most repeated
  content words; an edge joins two entities mentioned in one sentence, in
  mention order, its attribute the (at most three) content words between the
  two mentions, its span the sentence; the synopsis is extractive (the unit's
  sentences naming most entities, in document order).
* ``llm``: the paper's prompts (App. A, :mod:`momoka.llm.prompts` ``jerr.*``):
  a synopsis per unit (A.1), information atoms (A.2) and 3 core elements (A.3)
  from the synopsis, and one edge-attribute question (A.4) per ordered pair of
  elements. Every stage is one ``complete_batch`` over all units (answers are
  cached by the client, so an interrupted build resumes where it stopped).
  A unit any of whose answers is unusable (a request that failed for good, an
  empty synopsis, atoms or elements that cannot be parsed as a list) falls
  back to the offline extraction: nothing is lost. It is counted
  (``fallback_parse``) and, given a
  :class:`~momoka.methods.fallbacks.FallbackTally`, reported there (item: the
  unit's ``[start, end]``); its unusable answers are removed from the LLM
  cache, so asking again reaches the model.

Mentions and edge spans are character offsets of the document.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

from ...errors import LLMResponseError
from ...llm import prompts
from ...store.bm25 import ENGLISH_STOPWORDS
from ...llm.parsers import NumberedListParser
from ...text import split_sentences

__all__ = ["Unit", "UnitExtraction", "make_units", "extract_offline", "extract_llm", "estimate_llm",
           "CHARS_PER_TOKEN", "content_words"]

#: Characters per token for unit sizes and estimates.
CHARS_PER_TOKEN = 4
_STOP = frozenset(ENGLISH_STOPWORDS)
_WORD = re.compile(r"\w+")
_CAP = re.compile(r"[A-Z][\w'’-]*(?:(?:\s+(?:of|de|van|von|the))?\s+[A-Z][\w'’-]*)*")
_NONE = re.compile(r"^\W*(none|no\b|n/?a|nothing|unknown|not (?:applicable|related|mentioned))", re.I)


def content_words(text: str) -> list[str]:
    """Lower-case word tokens of ``text`` without the BM25 stop words (JERR's query keywords)."""
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


@dataclass
class Unit:
    """Consecutive store chunks of one document read as one JERR chunk."""

    doc_id: str
    chunk_ids: list[int]
    spans: list[tuple[int, int]]  # per chunk, document offsets
    text: str  # document text from the first chunk's start to the last chunk's end

    @property
    def start(self) -> int:
        return self.spans[0][0]

    @property
    def end(self) -> int:
        return self.spans[-1][1]

    def chunks_at(self, a: int, b: int) -> list[int]:
        """The chunks of the unit overlapping document offsets ``[a, b)``."""
        return [c for c, (s, e) in zip(self.chunk_ids, self.spans) if s < b and a < e] or [self.chunk_ids[0]]


@dataclass
class UnitExtraction:
    """What one unit gave: synopsis, entities (name -> chunk ids), edges (a, b, attribute, span)."""

    synopsis: str
    entities: dict[str, list[int]] = field(default_factory=dict)
    edges: list[tuple[str, str, str, tuple[int, int]]] = field(default_factory=list)
    atoms: list[str] = field(default_factory=list)
    backend: str = "offline"


def make_units(doc_id: str, text: str, spans: Sequence[tuple[int, int]], chunk_ids: Sequence[int],
               unit_tokens: int = 600) -> list[Unit]:
    """Group a document's chunks (in order) into units of at most ``unit_tokens`` tokens (at least one chunk)."""
    limit = unit_tokens * CHARS_PER_TOKEN
    units: list[Unit] = []
    cur: list[int] = []
    cur_sp: list[tuple[int, int]] = []
    for cid, (s, e) in zip(chunk_ids, spans):
        if cur and e - cur_sp[0][0] > limit:
            units.append(Unit(doc_id, cur, cur_sp, text[cur_sp[0][0]:cur_sp[-1][1]]))
            cur, cur_sp = [], []
        cur.append(int(cid))
        cur_sp.append((int(s), int(e)))
    if cur:
        units.append(Unit(doc_id, cur, cur_sp, text[cur_sp[0][0]:cur_sp[-1][1]]))
    return units


# --------------------------------------------------------------------------- offline


def _doc_vocabulary(text: str, repeated_terms: int, min_count: int) -> tuple[set[str], list[str]]:
    """Capitalised words seen mid-sentence, and the document's most repeated content words."""
    mid = set()
    for m in re.finditer(r"(?<=[a-z,;:]\s)([A-Z][\w'’-]*)", text):
        mid.add(m.group(1))
    counts = Counter(w for w in content_words(text) if len(w) >= 4 and not w.isdigit())
    terms = [w for w, c in counts.most_common(repeated_terms) if c >= min_count]
    return mid, terms


def _mentions(sent: str, off: int, mid_caps: set[str], terms: set[str]) -> list[tuple[str, int, int]]:
    """Entity mentions (name, start, end) of one sentence, in order, overlaps resolved to the earlier/longer."""
    out: list[tuple[str, int, int]] = []
    for m in _CAP.finditer(sent):
        name, a = m.group(0), m.start()
        words = name.split()
        while len(words) > 1 and words[0].lower() in _STOP:  # "The Ruler", "But Korvin"
            a = sent.index(words[1], a + len(words[0]))
            words = words[1:]
        if len(words) == 1:
            w = words[0]
            at_start = not sent[:a].strip() or sent[:a].rstrip()[-1:] in "\"'“‘(—-"
            if w.lower() in _STOP or len(w) < 2 or (at_start and w not in mid_caps):
                continue
        name = re.sub(r"['’]s$", "", " ".join(words))  # "Korvin's" is Korvin
        if name:
            out.append((name, off + a, off + a + len(name)))
    for m in _WORD.finditer(sent):
        w = m.group(0).lower()
        if w in terms and not any(s <= off + m.start() < e for _, s, e in out):
            out.append((w, off + m.start(), off + m.end()))
    out.sort(key=lambda x: x[1])
    return out


def extract_offline(units: Sequence[Unit], doc_text: str, *, repeated_terms: int = 20, min_count: int = 3,
                    max_mentions: int = 8, synopsis_sentences: int = 2) -> list[UnitExtraction]:
    """The offline back-end for the units of one document (see the module docstring)."""
    mid_caps, terms_l = _doc_vocabulary(doc_text, repeated_terms, min_count)
    terms = set(terms_l)
    out = []
    for u in units:
        st, en = split_sentences(u.text)
        ents: dict[str, list[int]] = {}
        edges: list[tuple[str, str, str, tuple[int, int]]] = []
        scored = []
        for s, e in zip(st.tolist(), en.tolist()):
            sent = u.text[s:e]
            ms = _mentions(sent, u.start + s, mid_caps, terms)
            for name, a, b in ms:
                got = ents.setdefault(name, [])
                for c in u.chunks_at(a, b):
                    if c not in got:
                        got.append(c)
            seen: list[tuple[str, int, int]] = []
            for m in ms:
                if all(m[0] != x[0] for x in seen):
                    seen.append(m)
            seen = seen[:max_mentions]
            for i in range(len(seen)):
                for j in range(i + 1, len(seen)):
                    between = content_words(doc_text[seen[i][2]:seen[j][1]])[:3]
                    edges.append((seen[i][0], seen[j][0], " ".join(between) or "co-occurs",
                                  (u.start + s, u.start + e)))
            scored.append((-len(seen), s, e))
        best = sorted(sorted(scored)[:synopsis_sentences], key=lambda x: x[1])
        syn = " ".join(" ".join(u.text[s:e].split()) for _, s, e in best)
        out.append(UnitExtraction(syn, ents, edges, backend="offline"))
    return out


# --------------------------------------------------------------------------- LLM

_ELEMENTS = NumberedListParser(min_items=1, max_words=6)
_ATOMS = NumberedListParser(min_items=1, max_words=None)


def _texts(results: Sequence[Any], stats: dict, what: str) -> list[str | None]:
    out = []
    for r in results:
        stats["prompt_tokens"] = stats.get("prompt_tokens", 0) + int(getattr(r, "prompt_tokens", 0) or 0)
        stats["completion_tokens"] = stats.get("completion_tokens", 0) + int(getattr(r, "completion_tokens", 0) or 0)
        stats["llm_calls"] = stats.get("llm_calls", 0) + 1
        if getattr(r, "cached", False):
            stats["cached"] = stats.get("cached", 0) + 1
        if not r.ok:
            stats[f"failed_{what}"] = stats.get(f"failed_{what}", 0) + 1
            out.append(None)
        else:
            out.append((r.text or "").strip())
    return out


def _mentioned(atoms: list[str], name: str) -> str:
    low = name.lower()
    hit = [a for a in atoms if low in a.lower()]
    return " ".join(hit or atoms)


def extract_llm(units: Sequence[Unit], doc_text: str, llm: Any, stats: dict, *, max_tokens: int = 256,
                max_chars: int = 6000, fallbacks: Any = None, **offline: Any) -> list[UnitExtraction]:
    """The LLM back-end for the units of one document; ``stats`` gains calls, tokens and fallbacks.

    ``fallbacks`` (a :class:`~momoka.methods.fallbacks.FallbackTally`, optional) counts each unit asked
    and each unit that fell back to the offline extraction (see the module docstring).
    """
    params = {"temperature": 0, "max_tokens": max_tokens}
    edge_params = {"temperature": 0, "max_tokens": 16}
    n = len(units)
    bad: dict[int, str] = {}  # unit -> the first unusable answer (or why)
    forget: list[tuple[list, dict, str]] = []  # received but unusable answers: (messages, params, method)

    def unusable(i: int, why: str, msgs: list | None = None, prm: dict | None = None, method: str = "") -> None:
        bad.setdefault(i, why)
        if msgs is not None:
            forget.append((msgs, prm, method))

    syn_msgs = [prompts.messages("jerr.synopsis", text=u.text[:max_chars]) for u in units]
    syn = _texts(llm.complete_batch(syn_msgs, method="jerr.synopsis", **params), stats, "synopsis")
    for i, s in enumerate(syn):
        if s is None:
            unusable(i, "the synopsis request failed")
        elif not s:
            unusable(i, "an empty synopsis", syn_msgs[i], params, "jerr.synopsis")
    live = [i for i in range(n) if i not in bad]
    ent_msgs = [prompts.messages("jerr.entities", text=syn[i]) for i in live]
    elem_msgs = [prompts.messages("jerr.elements", text=syn[i]) for i in live]
    got = _texts(llm.complete_batch(ent_msgs + elem_msgs, method="jerr.elements", **params), stats, "elements")
    parsed: dict[int, tuple[list[str], list[str]]] = {}
    for k, i in enumerate(live):
        vals = []
        for raw, msgs, parse in ((got[k], ent_msgs[k], _ATOMS), (got[len(live) + k], elem_msgs[k], _ELEMENTS)):
            if raw is None:
                unusable(i, "the request failed")
                continue
            try:
                vals.append(parse(raw))
            except LLMResponseError:
                unusable(i, raw, msgs, params, "jerr.elements")
        if len(vals) == 2:
            parsed[i] = (vals[0], vals[1][:3])
    pairs: list[tuple[int, str, str, str, str]] = []
    for i, (atoms, elems) in parsed.items():
        for a in range(len(elems)):
            for b in range(a + 1, len(elems)):
                pairs.append((i, elems[a], elems[b], _mentioned(atoms, elems[a]), _mentioned(atoms, elems[b])))
    edges: dict[int, list] = {i: [] for i in parsed}
    if pairs:
        msgs = [prompts.messages("jerr.edge_attributes", atoms1=a1, atoms2=a2, element1=e1, element2=e2)
                for _, e1, e2, a1, a2 in pairs]
        ans = _texts(llm.complete_batch(msgs, method="jerr.edge_attributes", **edge_params), stats, "edges")
        for (i, e1, e2, _, _), a in zip(pairs, ans):
            if a is None:
                unusable(i, "an edge request failed")
            elif not a or _NONE.match(a):
                stats["edges_none"] = stats.get("edges_none", 0) + 1
            else:
                attr = " ".join(a.strip().strip(".\"'").split()[:3])
                edges[i].append((e1, e2, attr, (units[i].start, units[i].end)))
    fallback = extract_offline(units, doc_text, **offline) if bad else None
    out: list[UnitExtraction] = []
    for i, u in enumerate(units):
        if fallbacks is not None:
            fallbacks.ask(u.doc_id)
        if i in bad:
            stats["fallback_parse"] = stats.get("fallback_parse", 0) + 1
            if fallbacks is not None:
                fallbacks.fail(u.doc_id, [u.start, u.end], bad[i])
            fb = fallback[i]
            fb.backend = "offline-fallback"
            out.append(fb)
            continue
        atoms, elems = parsed[i]
        ents = {}
        for name in elems:
            low = name.lower()
            ents[name] = [c for c, (s, e) in zip(u.chunk_ids, u.spans) if low in doc_text[s:e].lower()] or \
                list(u.chunk_ids)
        out.append(UnitExtraction(syn[i], ents, edges[i], atoms, backend="llm"))
    forget_fn = getattr(llm, "forget", None)
    if forget and callable(forget_fn):
        for method in sorted({m for _, _, m in forget}):
            prm = next(p for _, p, m in forget if m == method)
            forget_fn([msgs for msgs, _, m in forget if m == method], method=method, **prm)
    return out


def estimate_llm(units: Sequence[Unit], *, max_tokens: int = 256, max_chars: int = 6000) -> dict:
    """Pre-run estimate of LLM calls and tokens: ``llm_calls``, the synopsis, entity and element questions of
    every unit (3 per unit); ``llm_calls_max``, plus one edge question per pair of a unit's elements (at most
    3 elements, so at most 3 pairs): 6 per unit. A unit whose synopsis is unusable is asked nothing more."""
    def tmpl(n):
        return len(prompts.get(n).template) // CHARS_PER_TOKEN

    n = len(units)
    unit_tok = sum(min(len(u.text), max_chars) // CHARS_PER_TOKEN for u in units)
    syn_tok = n * max_tokens  # the synopsis is read twice (atoms, elements), at most max_tokens each
    prompt = (unit_tok + n * tmpl("jerr.synopsis") + 2 * syn_tok + n * (tmpl("jerr.entities") + tmpl("jerr.elements"))
              + 3 * n * (tmpl("jerr.edge_attributes") + 2 * max_tokens // 2))
    return {"units": n, "llm_calls": 3 * n, "llm_calls_max": 6 * n, "prompt_tokens_max": int(prompt),
            "completion_tokens_max": int(3 * n * max_tokens + 3 * n * 16)}
