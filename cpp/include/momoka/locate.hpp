// Fuzzy span location (semi-global alignment) with exact offsets.
//
// locate finds the substring text[s:e] (lo <= s <= e <= hi) with the smallest
// unit-cost edit distance to the pattern. Ties go to the smallest s, then the
// smallest e. Two passes give exactly that answer:
//   1. a reverse semi-global bit-vector scan (pattern and text reversed): after
//      reading text[s] its last-row score is min_e dist(pattern, text[s:e]),
//      so the leftmost s reaching the minimum d* is found in one sweep;
//   2. a forward anchored (global) scan from s: the first e whose score is d*.
//
// Locator adds a q-gram index of one text for many queries. By the pigeonhole
// principle an alignment with at most P-1 edits leaves at least one of P
// disjoint pattern pieces unchanged, so only the regions around exact piece
// occurrences need the bit-vector scan. The result is certified: if the best
// region holds a match with distance <= P-1 it is the global optimum (with
// the same leftmost tie-break), otherwise more pieces are tried or the whole
// range is scanned.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "momoka/edit_distance.hpp"

namespace momoka {

struct Match {
  std::int64_t start = -1;
  std::int64_t end = -1;
  std::int64_t distance = -1;
  bool found() const { return start >= 0; }
};

// True when a is a better match than b (smaller distance, then leftmost).
inline bool better_match(const Match& a, const Match& b) {
  if (!a.found()) return false;
  if (!b.found()) return true;
  return std::tie(a.distance, a.start, a.end) < std::tie(b.distance, b.start, b.end);
}

// Pattern prepared for locate: forward and reversed match-vector tables.
struct PreparedPattern {
  std::vector<std::uint32_t> p;
  PeqTable fwd, rev;
  template <class P>
  PreparedPattern(const P* s, std::size_t m) : p(m) {
    for (std::size_t i = 0; i < m; ++i) p[i] = static_cast<std::uint32_t>(s[i]);
    fwd.build(p.data(), m);
    std::vector<std::uint32_t> r(p.rbegin(), p.rend());
    rev.build(r.data(), m);
  }
  std::size_t size() const { return p.size(); }
};

namespace detail {

// Reverse semi-global scan for patterns of at most 64 code points: after
// reading text[s] the score is min_e dist(pattern, text[s:e]). Keeps the
// leftmost s with the smallest score.
template <class T>
void reverse_scan_1(const PeqTable& rev, std::size_t m, const T* text, std::size_t lo, std::size_t hi,
                    std::int64_t& best, std::size_t& bs) {
  std::uint64_t pv = ~std::uint64_t{0}, mv = 0;
  const std::uint64_t hbit = std::uint64_t{1} << (m - 1);
  std::int64_t score = static_cast<std::int64_t>(m);
  std::uint64_t small[256];
  const bool direct = sizeof(T) == 1;
  if (direct)
    for (unsigned c = 0; c < 256; ++c) small[c] = rev.row(c)[0];
  for (std::size_t s = hi; s-- > lo;) {
    const std::uint64_t eq = direct ? small[static_cast<std::uint32_t>(text[s]) & 0xFF]
                                    : rev.row(static_cast<std::uint32_t>(text[s]))[0];
    const std::uint64_t xv = eq | mv;
    const std::uint64_t xh = (((eq & pv) + pv) ^ pv) | eq;
    std::uint64_t ph = mv | ~(xh | pv);
    std::uint64_t mh = pv & xh;
    score += static_cast<std::int64_t>((ph & hbit) != 0) - static_cast<std::int64_t>((mh & hbit) != 0);
    ph <<= 1;
    mh <<= 1;
    pv = mh | ~(xv | ph);
    mv = ph & xv;
    if (score <= best) {
      best = score;
      bs = s;
    }
  }
}

}  // namespace detail

// Exact best match of the pattern inside text[lo:hi] (full bit-vector scan).
template <class T>
Match locate_range(const PreparedPattern& pat, const T* text, std::size_t lo, std::size_t hi) {
  const std::int64_t m = static_cast<std::int64_t>(pat.size());
  Match r;
  if (m == 0) {
    r.start = r.end = static_cast<std::int64_t>(lo);
    r.distance = 0;
    return r;
  }
  std::int64_t best = m;
  std::size_t bs = hi;
  if (m <= 64) {
    detail::reverse_scan_1(pat.rev, pat.size(), text, lo, hi, best, bs);
  } else {
    detail::MyersScanner rs(pat.rev, /*global=*/false);
    for (std::size_t s = hi; s-- > lo;) {
      rs.feed(static_cast<std::uint32_t>(text[s]));
      if (rs.score() <= best) {
        best = rs.score();
        bs = s;
      }
    }
  }
  std::size_t be = bs;
  if (best < m) {
    detail::MyersScanner fs(pat.fwd, /*global=*/true);
    for (std::size_t e = bs; e < hi; ++e) {
      fs.feed(static_cast<std::uint32_t>(text[e]));
      if (fs.score() == best) {
        be = e + 1;
        break;
      }
    }
  }
  r.start = static_cast<std::int64_t>(bs);
  r.end = static_cast<std::int64_t>(be);
  r.distance = best;
  return r;
}

template <class T, class P>
Match locate(const P* pattern, std::size_t m, const T* text, std::size_t lo, std::size_t hi,
             bool bounded, std::size_t k) {
  PreparedPattern pat(pattern, m);
  Match r = locate_range(pat, text, lo, hi);
  if (bounded && r.distance > static_cast<std::int64_t>(k)) return Match{};
  return r;
}

// q-gram index over one text, answering many locate queries.
class Locator {
 public:
  explicit Locator(std::vector<std::uint32_t> text, std::size_t q = 4) : text_(std::move(text)), q_(q) {
    if (q_ == 0) q_ = 1;
    const std::size_t n = text_.size();
    if (n < q_) return;
    const std::size_t ngrams = n - q_ + 1;
    std::size_t size = 1024;
    bits_ = 10;
    while (size < ngrams) {
      size <<= 1;
      ++bits_;
    }
    offsets_.assign(size + 1, 0);
    std::vector<std::uint32_t> h(ngrams);
    for (std::size_t i = 0; i < ngrams; ++i) {
      h[i] = bucket(&text_[i]);
      ++offsets_[h[i] + 1];
    }
    for (std::size_t b = 0; b < size; ++b) offsets_[b + 1] += offsets_[b];
    positions_.resize(ngrams);
    std::vector<std::uint32_t> fill(offsets_.begin(), offsets_.end() - 1);
    for (std::size_t i = 0; i < ngrams; ++i) positions_[fill[h[i]]++] = static_cast<std::uint32_t>(i);
  }

  const std::vector<std::uint32_t>& text() const { return text_; }
  std::size_t size() const { return text_.size(); }

  Match locate(const PreparedPattern& pat, std::size_t lo, std::size_t hi, bool bounded,
               std::size_t k) const {
    const std::size_t m = pat.size();
    const std::uint32_t* t = text_.data();
    auto full = [&]() {
      Match r = locate_range(pat, t, lo, hi);
      if (bounded && r.distance > static_cast<std::int64_t>(k)) return Match{};
      return r;
    };
    if (m == 0 || positions_.empty() || hi - lo <= 4 * (m + 64)) return full();
    const std::size_t max_pieces = m / q_;
    if (max_pieces == 0) return full();
    std::size_t pieces;
    if (bounded) {
      if (k + 1 > max_pieces) return full();
      pieces = k + 1;
    } else {
      pieces = std::max<std::size_t>(1, std::min(max_pieces, m / 6));
    }
    Match best;
    // (region start, region end, piece id)
    std::vector<std::tuple<std::int64_t, std::int64_t, std::uint32_t>> regions;
    struct Merged {
      std::int64_t a, b;
      std::size_t pieces;
    };
    std::vector<Merged> merged;
    std::vector<std::uint32_t> ids;
    for (;;) {
      const std::int64_t K = bounded ? static_cast<std::int64_t>(k) : static_cast<std::int64_t>(pieces) - 1;
      const std::size_t L = m / pieces;
      regions.clear();
      for (std::size_t i = 0; i < pieces; ++i) {
        const std::size_t off = i * L;
        const std::uint32_t* piece = pat.p.data() + off;
        // The rarest q-gram inside the piece gives the fewest candidates.
        std::size_t best_g = 0, best_cnt = ~std::size_t{0};
        std::uint32_t best_b = 0;
        for (std::size_t g = 0; g + q_ <= L; ++g) {
          const std::uint32_t b = bucket(piece + g);
          const std::size_t cnt = offsets_[b + 1] - offsets_[b];
          if (cnt < best_cnt) {
            best_cnt = cnt;
            best_g = g;
            best_b = b;
            if (cnt == 0) break;
          }
        }
        if (best_cnt == 0) continue;
        for (std::size_t x = offsets_[best_b]; x < offsets_[best_b + 1]; ++x) {
          const std::size_t tp = positions_[x];
          if (tp < best_g) continue;
          const std::size_t ps = tp - best_g;
          if (ps < lo || ps + L > hi) continue;
          if (!std::equal(piece, piece + L, t + ps)) continue;
          std::int64_t a = static_cast<std::int64_t>(ps) - static_cast<std::int64_t>(off) - K;
          std::int64_t b = static_cast<std::int64_t>(ps) - static_cast<std::int64_t>(off) +
                           static_cast<std::int64_t>(m) + K;
          a = std::max<std::int64_t>(a, static_cast<std::int64_t>(lo));
          b = std::min<std::int64_t>(b, static_cast<std::int64_t>(hi));
          regions.emplace_back(a, b, static_cast<std::uint32_t>(i));
        }
      }
      // Merge overlapping regions. Every piece-hit region of one alignment
      // contains that alignment, so they all fall in one merged region, which
      // therefore holds at least pieces - d distinct piece hits when the
      // alignment has d edits.
      std::sort(regions.begin(), regions.end());
      merged.clear();
      std::size_t r = 0;
      while (r < regions.size()) {
        std::int64_t a = std::get<0>(regions[r]), b = std::get<1>(regions[r]);
        ids.assign(1, std::get<2>(regions[r]));
        ++r;
        while (r < regions.size() && std::get<0>(regions[r]) <= b) {
          b = std::max(b, std::get<1>(regions[r]));
          ids.push_back(std::get<2>(regions[r]));
          ++r;
        }
        std::sort(ids.begin(), ids.end());
        const std::size_t distinct = static_cast<std::size_t>(std::unique(ids.begin(), ids.end()) - ids.begin());
        merged.push_back({a, b, distinct});
      }
      // Most promising regions first; skip those that cannot hold a match
      // as good as the best so far.
      std::stable_sort(merged.begin(), merged.end(),
                       [](const Merged& x, const Merged& y) { return x.pieces > y.pieces; });
      for (const Merged& g : merged) {
        const std::int64_t bound = best.found() ? std::min<std::int64_t>(K, best.distance) : K;
        if (static_cast<std::int64_t>(g.pieces) < static_cast<std::int64_t>(pieces) - bound) break;
        Match mm = locate_range(pat, t, static_cast<std::size_t>(g.a), static_cast<std::size_t>(g.b));
        if (better_match(mm, best)) best = mm;
      }
      if (best.found() && best.distance <= K) return best;
      // No alignment with <= K edits exists anywhere in the range.
      if (bounded) return Match{};
      const std::size_t next = best.found() ? static_cast<std::size_t>(best.distance) + 1 : 2 * pieces;
      if (next > max_pieces) return full();
      pieces = next;
    }
  }

 private:
  std::uint32_t bucket(const std::uint32_t* s) const {
    std::uint64_t h = 0x243F6A8885A308D3ull;
    for (std::size_t i = 0; i < q_; ++i) h = (h ^ s[i]) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 31;
    h *= 0xD6E8FEB86659FD93ull;
    return static_cast<std::uint32_t>(h >> (64 - bits_));
  }
  std::vector<std::uint32_t> text_;
  std::size_t q_;
  unsigned bits_ = 10;
  std::vector<std::size_t> offsets_;
  std::vector<std::uint32_t> positions_;
};

}  // namespace momoka
