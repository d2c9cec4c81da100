// Edit distance kernels on code-point sequences.
//
// * levenshtein: exact unit-cost edit distance. Common prefix and suffix are
//   stripped first; with a bound k the work is a banded (Ukkonen) dynamic
//   programme of width 2k+1 that stops as soon as every cell of a row exceeds
//   k, or, when the band would be wider than the bit-parallel cost, the
//   Myers/Hyyro bit-vector algorithm (64 rows per machine word, blocked for
//   long patterns) with the same early exit.
// * semi_global_*: bit-parallel scans where the alignment may start and end
//   anywhere in the text (the pattern must be used whole), the building block
//   of span location (locate.hpp).
//
// Characters are compared as uint32 code points; the pattern and the text may
// have different storage widths (uint8 / uint16 / uint32 units), so every
// index is an offset in the caller's string.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace momoka {

// Match-vector table of a pattern: for a character c, row(c)[b] has bit i set
// when pattern[64*b + i] == c. Characters below 256 are looked up directly,
// others through a small open-addressing table.
class PeqTable {
 public:
  template <class P>
  void build(const P* p, std::size_t m) {
    m_ = m;
    blocks_ = (m + 63) / 64;
    if (blocks_ == 0) blocks_ = 1;
    low_.assign(256 * blocks_, 0);
    zero_.assign(blocks_, 0);
    std::size_t cap = 16;
    while (cap < 2 * m + 2) cap <<= 1;
    keys_.assign(cap, kEmpty);
    slot_.assign(cap, 0);
    mask_ = cap - 1;
    high_.clear();
    for (std::size_t i = 0; i < m; ++i) {
      std::uint64_t* r = row_for_insert(static_cast<std::uint32_t>(p[i]));
      r[i / 64] |= std::uint64_t{1} << (i % 64);
    }
  }
  std::size_t blocks() const { return blocks_; }
  std::size_t size() const { return m_; }
  const std::uint64_t* row(std::uint32_t c) const {
    if (c < 256) return &low_[static_cast<std::size_t>(c) * blocks_];
    std::size_t h = hash(c) & mask_;
    for (;;) {
      const std::uint32_t k = keys_[h];
      if (k == c) return &high_[slot_[h] * blocks_];
      if (k == kEmpty) return zero_.data();
      h = (h + 1) & mask_;
    }
  }

 private:
  static constexpr std::uint32_t kEmpty = 0xFFFFFFFFu;
  static std::size_t hash(std::uint32_t c) {
    return static_cast<std::size_t>((static_cast<std::uint64_t>(c) * 0x9E3779B97F4A7C15ull) >> 32);
  }
  std::uint64_t* row_for_insert(std::uint32_t c) {
    if (c < 256) return &low_[static_cast<std::size_t>(c) * blocks_];
    std::size_t h = hash(c) & mask_;
    for (;;) {
      if (keys_[h] == c) return &high_[slot_[h] * blocks_];
      if (keys_[h] == kEmpty) {
        keys_[h] = c;
        slot_[h] = high_.size() / blocks_;
        high_.resize(high_.size() + blocks_, 0);
        return &high_[slot_[h] * blocks_];
      }
      h = (h + 1) & mask_;
    }
  }
  std::size_t m_ = 0, blocks_ = 1, mask_ = 0;
  std::vector<std::uint64_t> low_, high_, zero_;
  std::vector<std::uint32_t> keys_;
  std::vector<std::size_t> slot_;
};

namespace detail {

// One column step of Myers' algorithm on one 64-row block (Myers 1999,
// "advance block"). hin is the horizontal delta entering the top row of the
// block (-1, 0, +1); the returned value is the delta leaving the row marked
// by hbit (the block's last used row).
inline int advance_block(std::uint64_t& pv, std::uint64_t& mv, std::uint64_t eq, int hin,
                         std::uint64_t hbit) {
  const std::uint64_t xv = eq | mv;
  if (hin < 0) eq |= 1;
  const std::uint64_t xh = (((eq & pv) + pv) ^ pv) | eq;
  std::uint64_t ph = mv | ~(xh | pv);
  std::uint64_t mh = pv & xh;
  int hout = 0;
  if (ph & hbit) hout = 1;
  else if (mh & hbit) hout = -1;
  ph <<= 1;
  mh <<= 1;
  if (hin < 0) mh |= 1;
  else if (hin > 0) ph |= 1;
  pv = mh | ~(xv | ph);
  mv = ph & xv;
  return hout;
}

// Bit-parallel column scanner: feeds text characters one at a time and keeps
// the score of the pattern's last row. Global mode (top row 0,1,2,...) gives
// dist(pattern, text[0:j]); semi-global mode (top row all 0) gives
// min over s of dist(pattern, text[s:j]).
class MyersScanner {
 public:
  MyersScanner(const PeqTable& peq, bool global) : peq_(peq), global_(global) {
    const std::size_t m = peq.size();
    blocks_ = peq.blocks();
    pv_.assign(blocks_, ~std::uint64_t{0});
    mv_.assign(blocks_, 0);
    last_bit_ = m == 0 ? 0 : std::uint64_t{1} << ((m - 1) % 64);
    score_ = static_cast<std::int64_t>(m);
  }
  std::int64_t score() const { return score_; }
  void feed(std::uint32_t c) {
    if (peq_.size() == 0) {
      if (global_) ++score_;
      return;
    }
    const std::uint64_t* eq = peq_.row(c);
    if (blocks_ == 1) {
      score_ += advance_block(pv_[0], mv_[0], eq[0], global_ ? 1 : 0, last_bit_);
      return;
    }
    int carry = global_ ? 1 : 0;
    const std::size_t last = blocks_ - 1;
    for (std::size_t b = 0; b < last; ++b)
      carry = advance_block(pv_[b], mv_[b], eq[b], carry, std::uint64_t{1} << 63);
    score_ += advance_block(pv_[last], mv_[last], eq[last], carry, last_bit_);
  }

 private:
  const PeqTable& peq_;
  bool global_;
  std::size_t blocks_ = 1;
  std::vector<std::uint64_t> pv_, mv_;
  std::uint64_t last_bit_ = 0;
  std::int64_t score_ = 0;
};

template <class A, class B>
inline bool eq_cp(A a, B b) {
  return static_cast<std::uint32_t>(a) == static_cast<std::uint32_t>(b);
}

// Banded DP (Ukkonen): exact distance when it is <= k, else k+1.
// Requires |n - m| <= k. O((2k+1) * n) time, O(m) memory.
template <class A, class B>
std::size_t banded_levenshtein(const A* a, std::size_t n, const B* b, std::size_t m, std::size_t k) {
  const std::size_t inf = k + 1;
  std::vector<std::size_t> prev(m + 2, inf), cur(m + 2, inf);
  for (std::size_t j = 0; j <= std::min(m, k); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    const std::size_t jlo = i > k ? i - k : 1;
    const std::size_t jhi = std::min(m, i + k);
    if (jlo > m + 1) return inf;
    cur[jlo - 1] = (jlo == 1 && i <= k) ? i : inf;
    std::size_t row_min = cur[jlo - 1];
    const auto ai = a[i - 1];
    for (std::size_t j = jlo; j <= jhi; ++j) {
      std::size_t v = prev[j - 1] + (eq_cp(ai, b[j - 1]) ? 0 : 1);
      v = std::min(v, prev[j] + 1);
      v = std::min(v, cur[j - 1] + 1);
      if (v > inf) v = inf;
      cur[j] = v;
      row_min = std::min(row_min, v);
    }
    if (jhi + 1 <= m) cur[jhi + 1] = inf;
    if (row_min > k) return inf;
    std::swap(prev, cur);
  }
  return std::min(prev[m], inf);
}

}  // namespace detail

// Unit-cost Levenshtein distance. With bounded=true, returns min(d, k+1)
// and may stop early once the distance is known to exceed k.
template <class A, class B>
std::size_t levenshtein(const A* a, std::size_t n, const B* b, std::size_t m, bool bounded = false,
                        std::size_t k = 0) {
  // Strip the common prefix and suffix: they never change the distance.
  while (n > 0 && m > 0 && detail::eq_cp(a[0], b[0])) { ++a; ++b; --n; --m; }
  while (n > 0 && m > 0 && detail::eq_cp(a[n - 1], b[m - 1])) { --n; --m; }
  const std::size_t diff = n > m ? n - m : m - n;
  if (bounded && diff > k) return k + 1;
  if (n == 0 || m == 0) return bounded ? std::min(n + m, k + 1) : n + m;
  // Make b the shorter one (the bit-vector pattern).
  if (m > n) return levenshtein(b, m, a, n, bounded, k);
  const std::size_t blocks = (m + 63) / 64;
  if (bounded && (2 * k + 1) < 3 * blocks * 8 / 2) {
    return detail::banded_levenshtein(a, n, b, m, k);
  }
  PeqTable peq;
  peq.build(b, m);
  detail::MyersScanner sc(peq, /*global=*/true);
  for (std::size_t j = 0; j < n; ++j) {
    sc.feed(static_cast<std::uint32_t>(a[j]));
    if (bounded) {
      // The last-row score can drop by at most one per remaining column.
      const std::int64_t lower = sc.score() - static_cast<std::int64_t>(n - 1 - j);
      if (lower > static_cast<std::int64_t>(k)) return k + 1;
    }
  }
  const std::size_t d = static_cast<std::size_t>(sc.score());
  return bounded ? std::min(d, k + 1) : d;
}

}  // namespace momoka
