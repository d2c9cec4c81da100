"""Token counts from a ``tokenizers.Tokenizer``, under the re-encoding contract.

:class:`HFSource` turns a tokenizer into :class:`~momoka.chunking._atoms.Atoms`
for a document and, after packing, makes every chunk of a size-limited
chunker encode to at most ``size`` tokens when encoded again (see its
docstring and docs/chunking.md).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import numpy as np

from .. import _core
from ._atoms import Atoms, TokenSource


#: Pre-tokenizers that never join text across whitespace and drop it: a word's count is context-free.
_WORD_SAFE_PRETOKENIZERS = {"Whitespace", "WhitespaceSplit", "BertPreTokenizer"}
#: Pre-tokenizers whose pieces never hold a non-whitespace character followed by whitespace, so the
#: tokens of a text are those of its units "whitespace before a word + the word", each on its own.
#: Pre-tokenizers that split more finely but never at whitespace: "local" only inside a Sequence whose
#: other members split at whitespace (alone, "a b" stays one piece the model can join across the space).
_SPLIT_ONLY_PRETOKENIZERS = {"Digits", "Punctuation", "UnicodeScripts"}
#: Normalizers that act on characters one at a time (or only at the start of the text). Not "Strip": a
#: unit " foo" counted alone loses its space, inside a chunk it keeps it.
_LOCAL_NORMALIZERS = {"BertNormalizer", "NFC", "NFD", "NFKC", "NFKD", "Lowercase", "StripAccents", "Prepend"}


def _pretokenizer_kind(conf: dict | None) -> str:
    """"word" (whitespace dropped), "local" (units counted alone add up) or "other" for a pre-tokenizer's JSON."""
    kind = _kind(conf)
    return "other" if kind == "split-only" else kind


def _kind(conf: dict | None) -> str:
    """:func:`_pretokenizer_kind`, with "split-only" for the members of _SPLIT_ONLY_PRETOKENIZERS."""
    if not conf:
        return "other"  # no pre-tokenization: the model sees the whole text
    t = conf.get("type")
    if t == "Sequence":
        kinds = [_kind(c) for c in conf.get("pretokenizers", [])]
        if not kinds or "other" in kinds or all(k == "split-only" for k in kinds):
            return "other"
        return "word" if "word" in kinds else "local"
    if t in _WORD_SAFE_PRETOKENIZERS:
        return "word"
    if t in _SPLIT_ONLY_PRETOKENIZERS:
        return "split-only"
    if t == "ByteLevel" and conf.get("use_regex", True):
        return "local"  # GPT-2's pattern: only a single space joins the word after it
    if t == "Metaspace" and conf.get("split", True):
        return "local"
    return "other"


def _normalizer_is_local(conf: dict | None) -> bool:
    if not conf:
        return True
    t = conf.get("type")
    if t == "Sequence":
        return all(_normalizer_is_local(c) for c in conf.get("normalizers", []))
    return t in _LOCAL_NORMALIZERS


def _component_conf(component: Any) -> dict | None:
    """A pre-tokenizer's / normalizer's JSON (None when absent or unreadable)."""
    if component is None:
        return None
    try:
        return json.loads(component.__getstate__())
    except Exception:  # noqa: BLE001 - unreadable: treated as unknown by the callers
        return {"type": "unknown"}


_ANALYSED: dict[int, tuple] = {}
#: Distinct units (a word, or a word with the whitespace before it) whose counts a tokenizer keeps.
_CACHE_UNITS = 1 << 20  # id(tokenizer) -> (tokenizer, counting copy, kind, added tokens)


def _analyse(tok: Any) -> tuple:
    """(tokenizer to count with, kind of pre-tokenization, added-token strings, units joinable, a dict
    of unit counts), cached per tokenizer object."""
    hit = _ANALYSED.get(id(tok))
    if hit is not None and hit[0] is tok:
        return hit[1:]
    pre = _component_conf(getattr(tok, "pre_tokenizer", None))
    kind = _pretokenizer_kind(pre)
    # units can be encoded joined (see HFSource._unit_counts) unless a Metaspace turns spaces into
    # word prefixes (then a separator would join the word after it)
    joinable = kind != "other" and "Metaspace" not in str(pre)
    if not _normalizer_is_local(_component_conf(getattr(tok, "normalizer", None))):
        kind = "other"
    try:
        added = [a.content for a in tok.get_added_tokens_decoder().values() if a.content]
    except Exception:  # noqa: BLE001 - no added tokens to look for
        added = []
    counter = tok
    if getattr(tok, "padding", None) or getattr(tok, "truncation", None):
        # an embedder's tokenizer pads/truncates to its window: count on a copy that does neither
        counter = type(tok).from_str(tok.to_str())
        counter.no_padding()
        counter.no_truncation()
    if len(_ANALYSED) >= 16:
        _ANALYSED.pop(next(iter(_ANALYSED)))
    _ANALYSED[id(tok)] = (tok, counter, kind, added, joinable, {})
    return _ANALYSED[id(tok)][1:]


class HFSource(TokenSource):
    """A ``tokenizers.Tokenizer``, counted so that chunks re-encode within the limit.

    The contract (:meth:`fit`): a chunk of a size-limited chunker never holds
    more than ``size`` tokens when its text is encoded again by the same
    tokenizer (without special tokens, padding or truncation: a tokenizer
    that pads or truncates, as an embedder's ``tokenizer.json`` may, is
    counted on a copy that does neither), except a chunk of one character
    that alone encodes to more tokens than the limit.

    When the tokenizer's normalizer and pre-tokenizer are local (they never
    join a word with the whitespace after it: WordPiece/BERT, GPT-2-style
    byte-level BPE, Metaspace, ...), the document is not encoded at all: each
    distinct word is encoded once alone and once with the whitespace before
    it, and the larger of the two counts is the word's weight; a chunk whose
    ends are word boundaries then holds at most the sum of its weights (its
    first word counts alone, the others with the whitespace before them).
    Chunks cut inside a word, or holding a word heavier than the limit, are
    encoded and re-cut if they exceed it. Other tokenizers (or a text holding
    one of the tokenizer's added tokens) encode the document in pieces with
    offsets, and every chunk is checked by encoding it.
    """

    name = "tokenizers"
    piece_chars = 32768

    def __init__(self, tok: Any):
        self.tokenizer, self.kind, self._added, self.joinable, self._cache = _analyse(tok)
        self.word_safe = self.kind == "word"

    def _counts(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0, dtype=np.int64)
        encs = self.tokenizer.encode_batch(texts, add_special_tokens=False)
        return np.fromiter((len(e.ids) for e in encs), dtype=np.int64, count=len(encs))

    def _unit_counts(self, units: list[str], sep: str | None) -> np.ndarray:
        """Token count of each unit encoded alone.

        Counts are kept per tokenizer (up to ``_CACHE_UNITS`` distinct units,
        then forgotten), so words common to many documents are encoded once.
        With ``sep`` (a tokenizer whose pre-tokenizer keeps units apart, see
        ``joinable``), the units are joined by ``sep`` into a few long texts,
        encoded in parallel, and each token counted in the unit where it
        starts: the same counts as encoding each unit alone, without one
        ``Encoding`` object per unit (which costs more than the encoding).
        """
        cache = self._cache
        miss = list({u: None for u in units if u not in cache})
        if miss:
            cache.update(zip(miss, self._encode_units(miss, sep).tolist()))
        counts = np.fromiter((cache[u] for u in units), dtype=np.int64, count=len(units))
        if len(cache) > _CACHE_UNITS:
            cache.clear()
        return counts

    def _encode_units(self, units: list[str], sep: str | None) -> np.ndarray:
        if sep is None or not self.joinable or len(units) < 256:
            return self._counts(units)
        n = len(units)
        cuts = np.linspace(0, n, min(64, max(2, n // 4096)) + 1).astype(np.int64).tolist()
        texts, frames = [], []
        for a, b in zip(cuts[:-1], cuts[1:]):
            part = units[a:b]
            lens = np.fromiter(map(len, part), dtype=np.int64, count=len(part))
            st = np.zeros(len(part), dtype=np.int64)
            np.cumsum(lens[:-1] + len(sep), out=st[1:])
            texts.append(sep.join(part))
            frames.append((st, st + lens))
        encs = self.tokenizer.encode_batch(texts, add_special_tokens=False)
        out = []
        for enc, (st, en) in zip(encs, frames):
            ts = np.fromiter(itertools.chain.from_iterable(enc.offsets), dtype=np.int64).reshape(-1, 2)[:, 0]
            k = np.searchsorted(st, ts, side="right") - 1
            ok = (k >= 0) & (ts < en[np.maximum(k, 0)])  # tokens of a separator are nobody's
            out.append(np.bincount(k[ok], minlength=st.size))
        return np.concatenate(out).astype(np.int64, copy=False)

    def _local_for(self, text: str) -> bool:
        return self.kind != "other" and not any(a in text for a in self._added)

    def atoms(self, text: str) -> Atoms:
        if self._local_for(text):
            return self._word_atoms(text)
        return self._atoms_by_offsets(text)

    def _word_atoms(self, text: str) -> Atoms:
        # words: whitespace runs (exact counts where whitespace is dropped); otherwise each character
        # of a script written without spaces is a word of its own too, so cuts can fall between them
        # (such a run may encode to other counts than its characters alone: :meth:`fit` checks it)
        starts, ends, ids, first = _core.chunk_word_ids(text, not self.word_safe)
        if starts.size == 0:
            return Atoms(starts, np.zeros(0, dtype=np.int64))
        fs, fe = starts[first].tolist(), ends[first].tolist()
        words = [text[a:b] for a, b in zip(fs, fe)]
        if self.word_safe:  # whitespace is dropped: a word counts the same anywhere
            return Atoms(starts, self._unit_counts(words, "\n")[ids])
        # the whitespace before each word, as a small key: its one character, or an id of the run
        prev_end = np.empty_like(starts)
        prev_end[0] = 0
        prev_end[1:] = ends[:-1]
        glen = starts - prev_end
        gkey = np.zeros(starts.size, dtype=np.int64)  # 0: no whitespace before the word
        one = np.flatnonzero(glen == 1)
        if one.size:
            cps = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
            gkey[one] = cps[starts[one] - 1].astype(np.int64) + 1
        many = np.flatnonzero(glen > 1)
        runs: dict[str, int] = {}
        if many.size:
            base = 0x110001
            keys = [runs.setdefault(text[a:b], base + len(runs))
                    for a, b in zip(prev_end[many].tolist(), starts[many].tolist())]
            gkey[many] = keys
        nwords = len(words)
        pair = gkey * nwords + ids
        upair, inv = np.unique(pair, return_inverse=True)
        run_of = {v: k for k, v in runs.items()}
        gk, wid = np.divmod(upair, nwords)
        gl, wl = gk.tolist(), wid.tolist()
        ctx = np.zeros(upair.size, dtype=np.int64)
        # units after whitespace are encoded joined with nothing between: as the text has them
        spaced = [k for k, g in enumerate(gl) if g]
        if spaced:
            texts = [(chr(gl[k] - 1) if gl[k] < 0x110001 else run_of[gl[k]]) + words[wl[k]] for k in spaced]
            ctx[np.asarray(spaced, dtype=np.int64)] = self._unit_counts(texts, "")
        glued = [k for k, g in enumerate(gl) if not g]  # no whitespace before: the word as it is
        if glued:
            ctx[np.asarray(glued, dtype=np.int64)] = self._unit_counts([words[wl[k]] for k in glued], "\n")
        inv = inv.reshape(-1)
        atoms = Atoms(starts, ctx[inv])
        # A chunk's first word counts alone (lead = alone - with whitespace); known where there is
        # no whitespace before it, else computed by :meth:`refine` for the words that start chunks.
        atoms.lead_known = gkey == 0
        atoms.word_ids = ids
        atoms.words = words
        return atoms

    def refine(self, atoms: Atoms, spans: np.ndarray) -> bool:
        """Learn the leads of the words that start ``spans``; True when the chunks must be packed again.

        The packer first assumes a word at a chunk's start counts as it does after
        whitespace; the words actually starting chunks are then encoded alone,
        and where one counts more, the chunks are packed again with that lead.
        """
        known = getattr(atoms, "lead_known", None)
        if known is None or len(spans) == 0 or atoms.starts.size == 0:
            return False
        k = np.searchsorted(atoms.starts, spans[:, 0], side="left")
        k = np.unique(k[k < atoms.starts.size])
        k = k[~known[k]]
        if k.size == 0:
            return False
        wid = atoms.word_ids[k]
        bare = self._unit_counts([atoms.words[w] for w in wid.tolist()], "\n")
        lead = np.zeros(atoms.starts.size, dtype=np.int64) if atoms.lead is None else atoms.lead
        lead[k] = bare - atoms.weights[k]
        known[k] = True
        atoms.lead = lead if lead.any() else None
        return bool((lead[k] > 0).any())

    def _atoms_by_offsets(self, text: str) -> Atoms:
        # Cut the text into pieces just before a whitespace character so no
        # token spans a cut, encode the pieces in parallel, shift offsets.
        n = len(text)
        bases = [0]
        pos = 0
        while pos + self.piece_chars < n:
            cut = pos + self.piece_chars
            k = cut
            while k > pos and not text[k].isspace():
                k -= 1
            if k == pos:  # no whitespace in the window: cut forward instead
                k = cut
                while k < n and not text[k].isspace():
                    k += 1
                if k >= n:
                    break
            bases.append(k)
            pos = k
        ends = bases[1:] + [n]
        pieces = [text[a:b] for a, b in zip(bases, ends)]
        encs = self.tokenizer.encode_batch(pieces, add_special_tokens=False)
        parts = [self._token_starts(enc, base) for base, enc in zip(bases, encs)]
        starts = np.sort(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)
        # a token starting on whitespace (a lone space token, or a word token
        # carrying its leading space) is counted from the next non-whitespace
        # character, so every atom, hence every cut, starts on text
        starts = _core.chunk_trim_bounds(text, starts)[0]
        # several tokens may start at one offset (bytes of one character)
        first = np.ones(starts.size, dtype=bool)
        np.not_equal(starts[1:], starts[:-1], out=first[1:])
        if first.all():
            return Atoms(starts, None)
        idx = np.flatnonzero(first)
        counts = np.diff(np.append(idx, starts.size)).astype(np.int64)
        return Atoms(starts[idx], counts)

    @staticmethod
    def _token_starts(enc: Any, base: int) -> np.ndarray:
        offs = np.fromiter(itertools.chain.from_iterable(enc.offsets), dtype=np.int64).reshape(-1, 2)
        offs = offs[offs[:, 1] > offs[:, 0]]  # drop empty (special) tokens
        return offs[:, 0] + base

    def count(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def fit(self, text: str, spans: np.ndarray, size: int, atoms: Atoms) -> np.ndarray:
        """``spans`` (trimmed, from :class:`Atoms` counts) with every chunk over ``size`` re-cut.

        Which chunks are encoded: all of them in the general case; with a
        local tokenizer only those cut inside a word or whose weights sum
        past ``size`` (the others are within the limit by construction).
        """
        if len(spans) == 0:
            return spans
        s, e = spans[:, 0], spans[:, 1]
        if self._local_for(text):
            sum_w = atoms.measure(s, e)  # exact for a chunk of whole words
            sl, el = s.tolist(), e.tolist()
            n = len(text)
            mid = np.fromiter(((a > 0 and not text[a - 1].isspace()) or (b < n and not text[b].isspace())
                               for a, b in zip(sl, el)), dtype=bool, count=len(sl))
            flag = mid | (sum_w > size)
            known = getattr(atoms, "lead_known", None)
            if known is not None and atoms.starts.size:  # a first word whose lead was not learnt
                k = np.minimum(np.searchsorted(atoms.starts, s, side="left"), atoms.starts.size - 1)
                flag |= ~known[k]
            if not self.word_safe and atoms.starts.size:
                # atoms glued to the one before (characters of a run without spaces): counts unchecked
                glued = np.flatnonzero(_core.chunk_trim_bounds(text, atoms.starts)[1] == atoms.starts)
                if glued.size:
                    g = atoms.starts[glued]
                    flag |= np.searchsorted(g, e, side="left") > np.searchsorted(g, s, side="right")
            check = np.flatnonzero(flag)
        else:
            check = np.arange(len(spans))
        if check.size == 0:
            return spans
        counts = self._counts([text[a:b] for a, b in zip(s[check].tolist(), e[check].tolist())])
        over = check[counts > size]
        if over.size == 0:
            return spans
        out, last = [], 0
        for k in over.tolist():
            out.append(spans[last:k])
            pieces = self._recut(text, int(s[k]), int(e[k]), size)
            if k + 1 < len(spans):  # with overlap, what the next chunk starts on is covered by it
                pieces = pieces[: max(1, int(np.searchsorted(pieces[:, 0], s[k + 1], side="left")))]
            out.append(pieces)
            last = k + 1
        out.append(spans[last:])
        return np.concatenate(out).astype(np.int64, copy=False)

    def _recut(self, text: str, a: int, b: int, size: int) -> np.ndarray:
        """Cut text[a:b] at token starts into trimmed spans that each encode to at most ``size`` tokens.

        The tokens of text[a:b] encoded alone give the cut candidates and a
        first guess (the last cut with at most ``size`` tokens before it);
        each piece is encoded to check it, and a piece over the limit moves
        its cut back by binary search.
        """
        enc = self.tokenizer.encode(text[a:b], add_special_tokens=False)
        tok = np.sort(_core.chunk_trim_bounds(text, self._token_starts(enc, a))[0])
        cand = np.unique(tok)
        cand = cand[(cand > a) & (cand < b)]
        bounds = np.append(cand, b)
        before = np.searchsorted(tok, bounds, side="left")  # tokens starting before each cut

        def piece(p: int, j: int) -> tuple[int, int]:
            lo, hi = _core.chunk_trim_bounds(text, np.array([p, int(bounds[j])], dtype=np.int64))
            return int(lo[0]), int(hi[1])

        def fits(p: int, j: int) -> bool:
            cs, ce = piece(p, j)
            return ce <= cs or self.count(text[cs:ce]) <= size

        out = []
        pos, i = a, 0  # bounds[i:] are the cuts after pos
        while pos < b:
            base = int(np.searchsorted(tok, pos, side="left"))
            j = max(i, int(np.searchsorted(before, base + size, side="right")) - 1)
            if j > i and not fits(pos, j):
                lo, hi = i, j - 1
                while lo < hi:
                    mid = (lo + hi + 1) // 2
                    if fits(pos, mid):
                        lo = mid
                    else:
                        hi = mid - 1
                j = lo
            cs, ce = piece(pos, j)
            if ce - cs > 1 and j == i and not fits(pos, j):
                # even the first token's span re-encodes over the limit alone (WordPiece may join two
                # characters in a word that it splits alone): cut by characters, at least one
                lo, hi = cs + 1, ce - 1
                while lo < hi:
                    mid = (lo + hi + 1) // 2
                    if self.count(text[cs:mid]) <= size:
                        lo = mid
                    else:
                        hi = mid - 1
                out.append((cs, lo))
                pos = int(_core.chunk_trim_bounds(text, np.array([lo], dtype=np.int64))[0][0])
                continue
            if ce > cs:
                out.append((cs, ce))
            pos, i = int(bounds[j]), j + 1
        return np.asarray(out, dtype=np.int64).reshape(-1, 2)
