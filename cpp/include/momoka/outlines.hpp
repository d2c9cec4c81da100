// Recovery of meta-chunker outlines (MoC section 3.2.4).
//
// A meta-chunker writes each chunk as head + mask + tail. The chunks are
// consecutive in the text, so recovery walks the text once with a cursor:
//   * the head of outline i is first tried anchored where chunk i-1 ended
//     (optionally after whitespace); only when that fails is it searched in a
//     growing window after the cursor;
//   * the tail of outline i is searched forward from the head, and every
//     candidate end e (tail distance within the bound) is scored together with
//     how well the head of outline i+1 matches right after e; the cheapest
//     candidate wins, leftmost on ties. A phrase that repeats elsewhere in the
//     text can match the tail alone, but rarely the tail followed by the next
//     head, which is what makes recovery robust;
//   * outlines that cannot be placed are flagged and take an empty span; the
//     gaps between placed chunks go to the chunk before them, so the spans of
//     all outlines tile the text.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "momoka/edit_distance.hpp"
#include "momoka/locate.hpp"
#include "momoka/unicode_space.hpp"

namespace momoka {

struct OutlineSpec {
  std::vector<std::uint32_t> head;  // text before the first mask (the whole outline without a mask)
  std::vector<std::uint32_t> tail;  // text after the last mask (empty without a mask)
  bool has_mask = true;
};

struct RecoveredChunk {
  std::int64_t start = 0, end = 0;              // tiling span
  std::int64_t match_start = -1, match_end = -1;  // where head start .. tail end matched
  std::int64_t head_distance = -1, tail_distance = -1;
  bool placed = false;
};

class OutlineRecoverer {
 public:
  OutlineRecoverer(const std::uint32_t* text, std::size_t n, double max_error, std::size_t window)
      : t_(text), n_(n), max_error_(max_error), window_(window) {}

  std::vector<RecoveredChunk> run(const std::vector<OutlineSpec>& outlines) {
    const std::size_t count = outlines.size();
    std::vector<RecoveredChunk> out(count);
    std::vector<PreparedPattern> heads, tails;
    heads.reserve(count);
    tails.reserve(count);
    for (const auto& o : outlines) {
      heads.emplace_back(o.head.data(), o.head.size());
      tails.emplace_back(o.tail.data(), o.tail.size());
    }
    std::size_t cursor = 0;
    for (std::size_t i = 0; i < count; ++i) {
      RecoveredChunk& rc = out[i];
      const PreparedPattern& h = heads[i];
      if (h.size() == 0 && tails[i].size() == 0) continue;  // nothing to anchor on
      const std::size_t tau_h = tau(h.size());
      Match hm = find_head(h, cursor, tau_h);
      if (!hm.found()) continue;
      std::size_t match_end = static_cast<std::size_t>(hm.end);
      std::int64_t tail_d = 0;
      const PreparedPattern& tl = tails[i];
      if (outlines[i].has_mask && tl.size() > 0) {
        const PreparedPattern* next = i + 1 < count ? &heads[i + 1] : nullptr;
        auto [e, d] = find_tail(tl, static_cast<std::size_t>(hm.start), static_cast<std::size_t>(hm.end),
                                tau(tl.size()), next);
        if (d < 0) continue;  // tail nowhere: the outline is not placed
        match_end = e;
        tail_d = d;
      }
      rc.placed = true;
      rc.match_start = hm.start;
      rc.match_end = static_cast<std::int64_t>(match_end);
      rc.head_distance = hm.distance;
      rc.tail_distance = tail_d;
      cursor = match_end;
    }
    // Tile: each placed chunk runs from its match start to the next placed
    // chunk's match start; the first starts at 0 and the last ends at n.
    std::int64_t prev_end = 0;
    std::int64_t last_placed = -1;
    for (std::size_t i = 0; i < count; ++i) {
      if (!out[i].placed) continue;
      out[i].start = last_placed < 0 ? 0 : out[i].match_start;
      if (last_placed >= 0) out[static_cast<std::size_t>(last_placed)].end = out[i].start;
      last_placed = static_cast<std::int64_t>(i);
    }
    if (last_placed >= 0) out[static_cast<std::size_t>(last_placed)].end = static_cast<std::int64_t>(n_);
    for (std::size_t i = 0; i < count; ++i) {
      if (out[i].placed) {
        prev_end = out[i].end;
      } else {
        out[i].start = out[i].end = prev_end;
      }
    }
    if (last_placed < 0 && count > 0) {
      // Nothing placed: the first outline keeps the whole text (flagged).
      for (auto& r : out) r.start = r.end = static_cast<std::int64_t>(n_);
      out[0].start = 0;
    }
    return out;
  }

 private:
  std::size_t tau(std::size_t len) const {
    return static_cast<std::size_t>(max_error_ * static_cast<double>(len));
  }
  std::size_t skip_ws(std::size_t p) const {
    while (p < n_ && is_space(t_[p])) ++p;
    return p;
  }
  // Best (distance, end) of the pattern aligned to start exactly at p.
  std::pair<std::int64_t, std::size_t> anchored(const PreparedPattern& pat, std::size_t p, std::size_t tau) const {
    const std::int64_t m = static_cast<std::int64_t>(pat.size());
    std::int64_t best = m;
    std::size_t be = p;
    if (m == 0) return {0, p};
    detail::MyersScanner g(pat.fwd, /*global=*/true);
    const std::size_t stop = std::min(n_, p + pat.size() + tau);
    for (std::size_t e = p; e < stop; ++e) {
      g.feed(t_[e]);
      if (g.score() < best) {
        best = g.score();
        be = e + 1;
      }
    }
    return {best, be};
  }
  // Cost of the pattern starting anywhere in the whitespace run at p (the
  // run itself included, so chunks that begin with a space are found);
  // ties go to the rightmost start.
  std::int64_t start_cost(const PreparedPattern& pat, std::size_t p, std::size_t tau,
                          std::size_t* where = nullptr, std::size_t* end = nullptr) const {
    std::size_t q = p;
    while (q < n_ && q - p < 64 && is_space(t_[q])) ++q;
    std::pair<std::int64_t, std::size_t> best{-1, 0};
    std::size_t w = q;
    for (std::size_t x = q + 1; x-- > p;) {
      auto a = anchored(pat, x, tau);
      if (best.first < 0 || a.first < best.first) {
        best = a;
        w = x;
      }
    }
    if (where) *where = w;
    if (end) *end = best.second;
    return best.first;
  }
  Match find_head(const PreparedPattern& h, std::size_t c, std::size_t tau_h) const {
    Match r;
    if (h.size() == 0) {
      r.start = r.end = static_cast<std::int64_t>(skip_ws(c));
      r.distance = 0;
      return r;
    }
    std::size_t w = 0, e = 0;
    const std::int64_t d = start_cost(h, c, tau_h, &w, &e);
    if (d <= static_cast<std::int64_t>(tau_h)) {
      r.start = static_cast<std::int64_t>(w);
      r.end = static_cast<std::int64_t>(e);
      r.distance = d;
      return r;
    }
    std::size_t width = std::max<std::size_t>(window_, 4 * h.size() + 64);
    for (;;) {
      const std::size_t hi = c + width >= n_ ? n_ : c + width;
      Match m = locate_range(h, t_, c, hi);
      if (m.found() && m.distance <= static_cast<std::int64_t>(tau_h)) return m;
      if (hi == n_) return Match{};
      width *= 4;
    }
  }
  // Returns (end, distance) of the tail, distance -1 when not found.
  std::pair<std::size_t, std::int64_t> find_tail(const PreparedPattern& tl, std::size_t head_start,
                                                 std::size_t head_end, std::size_t tau_t,
                                                 const PreparedPattern* next) const {
    const std::size_t tau_n = next ? tau(next->size()) : 0;
    const std::int64_t no_next_penalty = static_cast<std::int64_t>(tau_t) + 1;
    (void)no_next_penalty;
    auto next_cost = [&](std::size_t e) -> std::int64_t {
      if (!next) return skip_ws(e) == n_ ? 0 : no_next_penalty;
      if (next->size() == 0) return 0;
      // A next head that matches nowhere here says nothing: cap its cost so
      // that the tail distance and position decide.
      return std::min<std::int64_t>(start_cost(*next, e, tau_n), static_cast<std::int64_t>(tau_n) + 1);
    };
    detail::MyersScanner sc(tl.fwd, /*global=*/false);
    // Candidates are ranked by (tail distance + next-head cost), then by
    // whether the tail's last character matches the text, then leftmost.
    std::int64_t best_key = -1, best_d = -1;
    std::size_t best_e = 0;
    const std::uint32_t last = tl.p.back();
    const std::int64_t good = std::max<std::int64_t>(1, static_cast<std::int64_t>(tau_t + tau_n) / 2);
    const std::size_t slack = tl.size() + 2 * tau_t + 72;
    std::size_t width = std::max<std::size_t>(window_, 1024);
    std::size_t pos = head_start;
    for (;;) {
      const std::size_t stop = head_end + width >= n_ ? n_ : head_end + width;
      for (; pos < stop; ++pos) {
        sc.feed(t_[pos]);
        const std::size_t e = pos + 1;
        if (e < head_end) continue;
        const std::int64_t d = sc.score();
        if (d > static_cast<std::int64_t>(tau_t)) continue;
        const std::int64_t key = 2 * (d + next_cost(e)) + (t_[e - 1] == last ? 0 : 1);
        if (best_key < 0 || key < best_key) {
          best_key = key;
          best_d = d;
          best_e = e;
        }
      }
      if (stop == n_) break;
      // Stop early once a candidate is clearly good and its neighbourhood
      // has been scanned completely.
      if (best_key >= 0 && best_key / 2 <= good && best_e + slack <= stop) break;
      width *= 2;
    }
    return {best_e, best_d};
  }

  const std::uint32_t* t_;
  std::size_t n_;
  double max_error_;
  std::size_t window_;
};

}  // namespace momoka
