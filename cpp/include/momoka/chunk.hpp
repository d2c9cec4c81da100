// Chunking kernels: word starts (a word is a maximal run of non-whitespace
// characters; with solo=true each character of a script written without
// spaces -- CJK ideographs, kana, Thai, Lao, Khmer, Myanmar, Tibetan -- is a
// word by itself, so Chinese and Japanese text is measured in characters), whitespace trimming of
// many cut positions at once, and separator search. Offsets are indices into
// the code-unit array given (Python str offsets when fed a PEP 393 buffer).
// Whitespace is exactly Python's str.isspace().
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "momoka/tokenize.hpp"
#include "momoka/unicode_space.hpp"

namespace momoka::chunk {

using momoka::is_space;  // Python's str.isspace()

// A character of a script written without spaces: a word by itself.
inline bool solo(std::uint32_t c) {
  return c >= 0x0E00 && tok::classify(static_cast<char32_t>(c)) == tok::CpClass::kSingle;
}

// Start offsets of the words (see the top of this file).
template <class CharT>
std::vector<std::int64_t> word_starts(const CharT* s, std::size_t n, bool split_solo = false) {
  std::vector<std::int64_t> out;
  out.reserve(n / 6 + 16);
  bool joinable = false;  // the previous character continues a word
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<std::uint32_t>(s[i]);
    if (is_space(c)) {
      joinable = false;
      continue;
    }
    const bool so = split_solo && solo(c);
    if (so || !joinable) out.push_back(static_cast<std::int64_t>(i));
    joinable = !so;
  }
  return out;
}

// For each cut position b (clamped to [0, n]): lo = first offset >= b holding
// non-whitespace (n if none), hi = one past the last non-whitespace offset
// before b (0 if none).
template <class CharT>
void trim_bounds(const CharT* s, std::size_t n, const std::int64_t* cuts, std::size_t m, std::int64_t* lo,
                 std::int64_t* hi) {
  const auto N = static_cast<std::int64_t>(n);
  for (std::size_t k = 0; k < m; ++k) {
    std::int64_t b = cuts[k] < 0 ? 0 : (cuts[k] > N ? N : cuts[k]);
    std::int64_t a = b;
    while (a < N && is_space(static_cast<std::uint32_t>(s[a]))) ++a;
    lo[k] = a;
    std::int64_t e = b;
    while (e > 0 && is_space(static_cast<std::uint32_t>(s[e - 1]))) --e;
    hi[k] = e;
  }
}

// Offsets in [lo, hi) where sep (length L >= 1) occurs entirely inside
// [lo, hi); overlapping occurrences are all reported.
template <class CharT>
std::vector<std::int64_t> find_all(const CharT* s, std::size_t lo, std::size_t hi, const std::uint32_t* sep,
                                   std::size_t L) {
  std::vector<std::int64_t> out;
  if (L == 0 || hi < lo + L) return out;
  const std::uint32_t first = sep[0];
  for (std::size_t i = lo; i + L <= hi; ++i) {
    if (static_cast<std::uint32_t>(s[i]) != first) continue;
    std::size_t j = 1;
    while (j < L && static_cast<std::uint32_t>(s[i + j]) == sep[j]) ++j;
    if (j == L) out.push_back(static_cast<std::int64_t>(i));
  }
  return out;
}

// Words (as word_starts defines them) with an id per distinct word: ids[k]
// is the index of word k's first occurrence among the distinct words, in
// order of first appearance. Equal words are found by hashing and confirmed
// by comparing code units, so the ids are exact.
struct WordIds {
  std::vector<std::int64_t> starts, ends, ids;
  std::vector<std::int64_t> first;  // word index of each distinct word's first occurrence
};

template <class CharT>
WordIds word_ids(const CharT* s, std::size_t n, bool split_solo = false) {
  WordIds w;
  w.starts.reserve(n / 6 + 16);
  w.ends.reserve(n / 6 + 16);
  std::size_t i = 0;
  while (i < n) {
    while (i < n && is_space(static_cast<std::uint32_t>(s[i]))) ++i;
    if (i >= n) break;
    std::size_t j = i + 1;
    if (!(split_solo && solo(static_cast<std::uint32_t>(s[i]))))
      while (j < n && !is_space(static_cast<std::uint32_t>(s[j])) &&
             !(split_solo && solo(static_cast<std::uint32_t>(s[j]))))
        ++j;
    w.starts.push_back(static_cast<std::int64_t>(i));
    w.ends.push_back(static_cast<std::int64_t>(j));
    i = j;
  }
  const std::size_t nw = w.starts.size();
  w.ids.resize(nw);
  // open addressing on a 64-bit FNV-1a hash; the table grows with the number
  // of distinct words (small, cache-resident), not with the number of words
  struct Slot {
    std::uint64_t hash;
    std::int64_t id;  // -1: empty
  };
  std::size_t cap = 1024;
  std::vector<Slot> table(cap, Slot{0, -1});
  auto insert_slot = [&](std::vector<Slot>& t, std::uint64_t h, std::int64_t id) {
    std::size_t pos = static_cast<std::size_t>(h) & (t.size() - 1);
    while (t[pos].id >= 0) pos = (pos + 1) & (t.size() - 1);
    t[pos] = Slot{h, id};
  };
  for (std::size_t k = 0; k < nw; ++k) {
    const CharT* p = s + w.starts[k];
    const std::size_t len = static_cast<std::size_t>(w.ends[k] - w.starts[k]);
    std::uint64_t h = 1469598103934665603ULL;
    for (std::size_t t = 0; t < len; ++t) {
      h ^= static_cast<std::uint64_t>(p[t]);
      h *= 1099511628211ULL;
    }
    std::size_t pos = static_cast<std::size_t>(h) & (cap - 1);
    while (true) {
      const Slot& sl = table[pos];
      if (sl.id < 0) {
        const auto id = static_cast<std::int64_t>(w.first.size());
        w.ids[k] = id;
        w.first.push_back(static_cast<std::int64_t>(k));
        table[pos] = Slot{h, id};
        if (w.first.size() * 2 > cap) {  // keep the load under 1/2
          cap <<= 1;
          std::vector<Slot> bigger(cap, Slot{0, -1});
          for (const Slot& o : table)
            if (o.id >= 0) insert_slot(bigger, o.hash, o.id);
          table.swap(bigger);
        }
        break;
      }
      if (sl.hash == h) {
        const std::size_t f = static_cast<std::size_t>(w.first[static_cast<std::size_t>(sl.id)]);
        const std::size_t flen = static_cast<std::size_t>(w.ends[f] - w.starts[f]);
        if (flen == len && std::equal(p, p + len, s + w.starts[f])) {
          w.ids[k] = sl.id;
          break;
        }
      }
      pos = (pos + 1) & (cap - 1);
    }
  }
  return w;
}

// One level of the separator hierarchy. Either sorted cut offsets over the
// whole text (sentence or paragraph starts; sep_len 0), or a separator
// string searched on demand inside the range being split (a cut right after
// each occurrence lying inside the range). A cut c is used inside [lo, hi)
// only when lo < c < hi.
struct CutLevel {
  const std::int64_t* cuts = nullptr;
  std::size_t n = 0;
  std::int64_t sep_len = 0;
  std::vector<std::uint32_t> pattern;  // non-empty: search this string instead of using cuts
};

// Greedy recursive packing (see python/momoka/chunking/_splitter.py, whose
// pure-Python Splitter.recursive and Splitter.pack this mirrors exactly).
// Sizes are characters (length after trimming whitespace) when atom_starts
// is null, else tokens: cum[k] tokens start before atom k, and a span holds
// the tokens whose start lies inside it, plus lead[k] when atom k is the
// first atom of the span (lead may be null: no correction; a byte-level BPE
// counts a word at the start of a text apart from the space that joins it
// elsewhere). Emits untrimmed (start, end) spans.
template <class CharT>
class RecursivePacker {
 public:
  RecursivePacker(const CharT* s, std::size_t n, std::vector<CutLevel> levels, std::int64_t size,
                  const std::int64_t* atom_starts, const std::int64_t* cum, std::size_t n_atoms,
                  bool keep_oversize, const std::int64_t* lead = nullptr)
      : s_(s), n_(static_cast<std::int64_t>(n)), levels_(std::move(levels)), size_(size),
        atoms_(atom_starts), cum_(cum), n_atoms_(n_atoms), keep_oversize_(keep_oversize), lead_(lead) {}

  std::vector<std::int64_t> out;  // flat (start, end) pairs

  void run(std::int64_t lo, std::int64_t hi) { split(lo, hi, 0); }

 private:
  const CharT* s_;
  std::int64_t n_;
  std::vector<CutLevel> levels_;
  std::int64_t size_;
  const std::int64_t* atoms_;
  const std::int64_t* cum_;
  std::size_t n_atoms_;
  bool keep_oversize_;
  const std::int64_t* lead_;

  bool space(std::int64_t i) const { return is_space(static_cast<std::uint32_t>(s_[i])); }
  std::int64_t first_nonws(std::int64_t b) const {
    while (b < n_ && space(b)) ++b;
    return b;
  }
  std::int64_t last_nonws_end(std::int64_t b) const {
    while (b > 0 && space(b - 1)) --b;
    return b;
  }
  std::int64_t tokens_before(std::int64_t pos) const {
    const std::int64_t* it = std::lower_bound(atoms_, atoms_ + n_atoms_, pos);
    return cum_[it - atoms_];
  }
  std::int64_t lead_of(std::size_t p) const { return lead_ && p < n_atoms_ ? lead_[p] : 0; }
  std::int64_t measure(std::int64_t a, std::int64_t b) const {
    if (atoms_) {
      const std::size_t pa = static_cast<std::size_t>(std::lower_bound(atoms_, atoms_ + n_atoms_, a) - atoms_);
      const std::int64_t t = tokens_before(b) - cum_[pa];
      return t > 0 ? t + lead_of(pa) : 0;
    }
    const std::int64_t x = first_nonws(a);
    if (x >= b) return 0;
    const std::int64_t e = last_nonws_end(b);
    return e > x ? e - x : 0;
  }
  void emit(std::int64_t a, std::int64_t b) {
    out.push_back(a);
    out.push_back(b);
  }

  // Per-boundary values: size(B[i]..B[j]) == hi[j] - lo[i]. Boundaries are
  // sorted, so token counts come from one forward walk over the atoms.
  void values(const std::vector<std::int64_t>& B, std::vector<std::int64_t>& lo,
              std::vector<std::int64_t>& hi) const {
    lo.resize(B.size());
    hi.resize(B.size());
    if (atoms_) {
      std::size_t p = static_cast<std::size_t>(std::lower_bound(atoms_, atoms_ + n_atoms_, B[0]) - atoms_);
      for (std::size_t k = 0; k < B.size(); ++k) {
        while (p < n_atoms_ && atoms_[p] < B[k]) ++p;
        hi[k] = cum_[p];
        lo[k] = cum_[p] - lead_of(p);
      }
      return;
    }
    for (std::size_t k = 0; k < B.size(); ++k) {
      lo[k] = first_nonws(B[k]);
      hi[k] = last_nonws_end(B[k]);
    }
  }

  // Greedy join of the pieces of B; pieces too big alone go to split(level).
  void pack(const std::vector<std::int64_t>& B, std::size_t level, bool hard) {
    const std::size_t m = B.size() - 1;
    std::vector<std::int64_t> lo, hi;
    values(B, lo, hi);
    std::size_t i = 0;
    while (i < m) {
      const std::int64_t limit = lo[i] + size_;
      // last j with hi[j] <= limit (hi is non-decreasing)
      std::size_t j = static_cast<std::size_t>(std::upper_bound(hi.begin() + i, hi.end(), limit) - hi.begin());
      j = j == 0 ? 0 : j - 1;
      if (j > m) j = m;
      if (j <= i) {
        if (hard || keep_oversize_) {
          emit(B[i], B[i + 1]);
        } else {
          split(B[i], B[i + 1], level);
        }
        ++i;
        continue;
      }
      emit(B[i], B[j]);
      i = j;
    }
  }

  // Cuts of one level strictly inside (lo, hi), sorted and unique, framed by lo and hi.
  bool level_bounds(const CutLevel& L, std::int64_t lo, std::int64_t hi, std::vector<std::int64_t>& B) const {
    B.clear();
    B.push_back(lo);
    if (!L.pattern.empty()) {
      const std::size_t len = L.pattern.size();
      const std::uint32_t first = L.pattern[0];
      for (std::int64_t i = lo; i + static_cast<std::int64_t>(len) < hi + 1; ++i) {
        if (static_cast<std::uint32_t>(s_[i]) != first) continue;
        std::size_t j = 1;
        while (j < len && static_cast<std::uint32_t>(s_[i + static_cast<std::int64_t>(j)]) == L.pattern[j]) ++j;
        if (j < len) continue;
        const std::int64_t c = i + static_cast<std::int64_t>(len);
        if (c > lo && c < hi && c != B.back()) B.push_back(c);
      }
    } else {
      const std::int64_t* a = std::upper_bound(L.cuts, L.cuts + L.n, lo);
      const std::int64_t* b = std::lower_bound(L.cuts, L.cuts + L.n, hi);
      for (const std::int64_t* c = a; c < b; ++c) {
        if (*c != B.back()) B.push_back(*c);
      }
    }
    if (B.size() == 1) return false;
    B.push_back(hi);
    return true;
  }

  void hard_split(std::int64_t lo, std::int64_t hi) {
    if (keep_oversize_) {
      emit(lo, hi);
      return;
    }
    if (!atoms_) {
      std::int64_t pos = lo;
      while (pos < hi && space(pos)) ++pos;
      while (pos < hi) {
        const std::int64_t end = pos + size_;
        if (end >= hi) {
          emit(pos, hi);
          break;
        }
        emit(pos, end);
        std::int64_t nxt = end;
        while (nxt < hi && space(nxt)) ++nxt;
        if (nxt >= hi) break;
        pos = nxt;
      }
      return;
    }
    const std::int64_t* a = std::upper_bound(atoms_, atoms_ + n_atoms_, lo);
    const std::int64_t* b = std::lower_bound(atoms_, atoms_ + n_atoms_, hi);
    std::vector<std::int64_t> B;
    B.reserve(static_cast<std::size_t>(b - a) + 2);
    B.push_back(lo);
    B.insert(B.end(), a, b);
    B.push_back(hi);
    pack(B, 0, true);
  }

  void split(std::int64_t lo, std::int64_t hi, std::size_t level) {
    if (measure(lo, hi) <= size_) {
      emit(lo, hi);
      return;
    }
    std::vector<std::int64_t> B;
    for (; level < levels_.size(); ++level) {
      if (!level_bounds(levels_[level], lo, hi, B)) continue;
      pack(B, level + 1, false);
      return;
    }
    hard_split(lo, hi);
  }
};

}  // namespace momoka::chunk
