// Top-k of momoka::bm25::Index (included at the end of bm25.hpp).
//
// MaxScore (Turtle & Flood 1995), term-at-a-time over a dense accumulator:
//
// * Query terms are taken in decreasing order of their upper bound (idf x
//   repeats x the list's largest tf part). While the bounds of the terms left
//   (`rest`) could still lift a document seen in none of the lists so far into
//   the top k, a term's whole list is accumulated (phase 1, "essential" terms).
// * The threshold is a lower bound of the k-th best score: a min-heap of k
//   distinct documents with their accumulated (partial, so never too high)
//   scores, offered a document only when its accumulator passes the heap's
//   minimum, refreshed from the accumulators at each term boundary. Nothing is
//   sorted or selected per term; a posting costs one compare beyond its add.
// * Phase 2 (the remaining, low-bound terms): a document is still a candidate
//   while acc + rest >= threshold; the candidates are kept sorted and pruned
//   at each term. Per term the cheaper of two ways is taken: look each
//   candidate up through the list's skips (few candidates, long list), or
//   merge the list with them (many).
// * Accumulators and the per-document tf-1 table are float (half the cache
//   footprint of double; the accumulator array is touched at random). Every
//   comparison allows a margin of (terms + 2) x 4e-6 x (|threshold| + the
//   query's whole bound + 1), far above float rounding over the query's
//   terms, so rounding never drops a winner.
// * The survivors (acc >= threshold - margin) are rescored exactly, in double
//   and in query-term order, so the scores equal scores() bit for bit; ties by
//   lower slot id.
//
// A query with a term of weight 0 (idf 0 under okapi with epsilon 0) cannot
// use the bounds (a document holding only that term scores 0 but is still a
// hit): it is scored exhaustively.
#pragma once

#if defined(__SSE2__) || defined(_M_X64)
#include <emmintrin.h>
#endif

namespace momoka::bm25 {

// Sorts slot ids below `bound` (LSD radix, 11 bits a pass; std::sort for few).
inline void radix_sort(std::vector<std::uint32_t>& v, std::vector<std::uint32_t>& tmp, std::size_t bound) {
  if (v.size() < 256) {
    std::sort(v.begin(), v.end());
    return;
  }
  tmp.resize(v.size());
  for (unsigned shift = 0; shift < 32 && (bound - 1) >> shift; shift += 11) {
    std::uint32_t count[2049] = {0};
    for (std::uint32_t x : v) ++count[((x >> shift) & 2047) + 1];
    for (int b = 0; b < 2048; ++b) count[b + 1] += count[b];
    for (std::uint32_t x : v) tmp[count[(x >> shift) & 2047]++] = x;
    v.swap(tmp);
  }
}

// Writes to out[0, count) the slots d < n with acc[d] >= cut and acc[d] > 0
// (0: not seen), in increasing order, without a branch per slot or group (at
// small N a branch on "this group holds one" is a coin toss). With SSE2, 4
// slots are compared at once and their indices packed by a 16-entry table
// (4 stored, the count advanced by the matches); `out` has room for n + 4.
// Returns the count. The cut is rounded to float, which can only let in more
// slots, never fewer.
inline std::size_t gather_above(const float* acc, std::size_t n, double cut_d, std::uint32_t* o) {
  const float cut = std::max(static_cast<float>(cut_d), std::numeric_limits<float>::denorm_min());
  std::size_t cnt = 0, d = 0;
#if defined(__SSE2__) || defined(_M_X64)
  // For each 4-bit mask: the offsets of its set bits, packed to the front, and their count.
  struct Packs {
    alignas(16) std::uint32_t off[16][4];
    std::uint32_t count[16];
    Packs() {
      for (unsigned m = 0; m < 16; ++m) {
        unsigned c = 0;
        for (unsigned j = 0; j < 4; ++j) off[m][j] = 0;
        for (unsigned j = 0; j < 4; ++j)
          if (m >> j & 1) off[m][c++] = j;
        count[m] = c;
      }
    }
  };
  static const Packs packs;
  const __m128 c = _mm_set1_ps(cut);
  for (; d + 4 <= n; d += 4) {
    const unsigned m = static_cast<unsigned>(_mm_movemask_ps(_mm_cmpge_ps(_mm_loadu_ps(acc + d), c)));
    const __m128i idx = _mm_add_epi32(_mm_set1_epi32(static_cast<int>(d)),
                                      _mm_load_si128(reinterpret_cast<const __m128i*>(packs.off[m])));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o + cnt), idx);
    cnt += packs.count[m];
  }
#endif
  for (; d < n; ++d) {
    o[cnt] = static_cast<std::uint32_t>(d);
    cnt += acc[d] >= cut;
  }
  return cnt;
}

// Keeps the k best hits, highest score first, ties by lower slot.
inline void keep_best(std::vector<Hit>& hits, std::size_t k) {
  auto better = [](const Hit& a, const Hit& b) { return a.score > b.score || (a.score == b.score && a.doc < b.doc); };
  if (hits.size() > k) {
    std::nth_element(hits.begin(), hits.begin() + static_cast<std::ptrdiff_t>(k), hits.end(), better);
    hits.resize(k);
  }
  std::sort(hits.begin(), hits.end(), better);
}

inline void Index::top_k_locked(const std::vector<std::string>& query, std::size_t k, const std::uint8_t* mask,
                                std::size_t mask_len, Scratch& s, std::vector<Hit>& hits) const {
  hits.clear();
  if (k == 0) return;
  const auto qt = query_terms(query);
  if (qt.empty()) return;
  const std::size_t ns = doc_len_.size();
  if (s.acc.size() < ns) {
    s.acc.resize(ns, 0.0f);
    s.seen.resize(ns, 0);
  }
  std::vector<QTerm> q;
  for (const auto& tw : qt) {
    const double w = idf_[tw.first] * tw.second;
    // The accumulator's 0 means "not seen", so every contribution must be > 0.
    if (!(w > 1e-20)) return top_k_exhaustive(qt, k, mask, mask_len, s, hits);
    q.push_back(QTerm{tw.first, w, w * maxpart_[tw.first]});
  }
  std::stable_sort(q.begin(), q.end(), [](const QTerm& a, const QTerm& b) { return a.ub > b.ub; });
  const std::size_t m = q.size();
  std::vector<double> rest(m + 1, 0.0);  // rest[i]: bound of terms i.. together
  for (std::size_t i = m; i-- > 0;) rest[i] = rest[i + 1] + q[i].ub;
  const double mscale = static_cast<double>(m + 2) * 4e-6, mbase = rest[0] + 1.0;
  auto margin_f = [&](double theta) { return mscale * (std::fabs(theta) + mbase); };

  // The threshold heap: s.seen[d] = 1 while d is in it.
  auto& heap = s.heap;
  heap.clear();
  const auto cmp = [](const std::pair<float, std::uint32_t>& a, const std::pair<float, std::uint32_t>& b) {
    return a.first > b.first;
  };
  float hmin = -std::numeric_limits<float>::infinity();  // heap minimum once it holds k, else -inf
  auto offer = [&](std::uint32_t d, float a) {
    if (s.seen[d]) return;  // already in; its entry is refreshed at the next term boundary
    if (heap.size() == k) {
      std::pop_heap(heap.begin(), heap.end(), cmp);
      s.seen[heap.back().second] = 0;
      heap.pop_back();
    }
    heap.emplace_back(a, d);
    std::push_heap(heap.begin(), heap.end(), cmp);
    s.seen[d] = 1;
    if (heap.size() == k) hmin = heap.front().first;
  };
  auto refresh = [&]() {
    for (auto& e : heap) e.first = s.acc[e.second];
    std::make_heap(heap.begin(), heap.end(), cmp);
    if (heap.size() == k) hmin = heap.front().first;
  };

  // Phase 1: whole lists, while a document seen in none of them could still enter.
  // s.touched[0, nt): the documents seen, appended without a branch.
  std::size_t nt = 0, i = 0;
  for (; i < m; ++i) {
    refresh();
    if (rest[i] < hmin - margin_f(hmin)) break;
    const float w = static_cast<float>(q[i].w);
    const std::size_t need = nt + lists_[q[i].term].n;
    if (s.touched.size() < need) s.touched.resize(std::max(need, 2 * s.touched.size()));
    std::uint32_t* const tp = s.touched.data();
    for (Cursor c = cursor(q[i].term); c.valid(); c.next()) {
      const std::uint32_t d = c.doc();
      if (mask && (d >= mask_len || !mask[d])) continue;
      float a = s.acc[d];
      tp[nt] = d;
      nt += a == 0.0f;
      a += w * tf_part_f(c.tf(), d);
      s.acc[d] = a;
      if (a > hmin) offer(d, a);
    }
  }
  // Phase 2: the remaining terms, only for the candidates (sorted), those
  // whose accumulator plus the bounds left can still reach the threshold.
  // When the documents seen are at least 1/kScanDiv of the slots, the sorted
  // candidates come from one pass over the accumulators (an unseen slot's
  // is 0) instead of a sort.
  const bool scan = ns <= kScanDiv * nt;
  s.cand.clear();
  double cut = 0.0;
  if (i < m) {
    refresh();
    cut = hmin - margin_f(hmin) - rest[i];  // > 0: phase 1 stopped because rest[i] < hmin
    if (scan) {
      if (s.tmp.size() < ns + 4) s.tmp.resize(ns + 4);
      s.cand.assign(s.tmp.begin(), s.tmp.begin() + static_cast<std::ptrdiff_t>(gather_above(s.acc.data(), ns, cut, s.tmp.data())));
    } else {
      for (std::size_t t = 0; t < nt; ++t)
        if (s.acc[s.touched[t]] >= cut) s.cand.push_back(s.touched[t]);
      radix_sort(s.cand, s.tmp, ns);
    }
  }
  for (std::size_t j = i; j < m && !s.cand.empty(); ++j) {
    if (j > i) {
      refresh();
      cut = hmin - margin_f(hmin) - rest[j];  // (grows with j: a document dropped stays out)
      std::size_t kept = 0;
      std::uint32_t* const cp = s.cand.data();
      for (std::uint32_t d : s.cand) {
        cp[kept] = d;
        kept += s.acc[d] >= cut;
      }
      s.cand.resize(kept);
    }
    const float w = static_cast<float>(q[j].w);
    if (const std::uint8_t* row = dense_row(q[j].term)) {
      // A dense row: one byte per candidate. tf 0 and 1 (most) take no
      // branch: part1 x tf is 0 or exactly part1, and adding 0 leaves the
      // accumulator as it was (a document not in the heap is at or below
      // hmin, so nothing is offered then).
      for (std::uint32_t d : s.cand) {
        const std::uint32_t tf = row[d];
        const float part = tf > 1 ? tf_part_f(tf < 255 ? tf : dense_tf(row, q[j].term, d), d)
                                  : part1_[d] * static_cast<float>(tf);
        const float a = s.acc[d] + w * part;
        s.acc[d] = a;
        if (a > hmin) offer(d, a);
      }
      continue;
    }
    Cursor c = cursor(q[j].term);
    if (scan && s.cand.size() * 4 > lists_[q[j].term].n) {
      // The candidates are the slots whose accumulator reaches the cut: each
      // posting is tested there, without a merge with the candidate list.
      for (; c.valid(); c.next()) {
        const std::uint32_t d = c.doc();
        float a = s.acc[d];
        if (a < cut) continue;
        a += w * tf_part_f(c.tf(), d);
        s.acc[d] = a;
        if (a > hmin) offer(d, a);
      }
      continue;
    }
    if (s.cand.size() * 16 < lists_[q[j].term].n) {  // few candidates: jump to each through the skips
      for (std::uint32_t d : s.cand) {
        c.advance_to(d);
        if (!c.valid()) break;
        if (c.doc() != d) continue;
        const float a = s.acc[d] + w * tf_part_f(c.tf(), d);
        s.acc[d] = a;
        if (a > hmin) offer(d, a);
      }
    } else {  // many: merge the list with them
      auto it = s.cand.begin();
      const auto end = s.cand.end();
      for (; c.valid() && it != end; c.next()) {
        const std::uint32_t d = c.doc();
        while (it != end && *it < d) ++it;
        if (it == end || *it != d) continue;
        const float a = s.acc[d] + w * tf_part_f(c.tf(), d);
        s.acc[d] = a;
        if (a > hmin) offer(d, a);
      }
    }
  }
  refresh();
  for (const auto& e : heap) s.seen[e.second] = 0;
  const double fcut = hmin - margin_f(hmin);
  s.cand.clear();
  for (std::size_t t = 0; t < nt; ++t) {
    const std::uint32_t d = s.touched[t];
    if (s.acc[d] >= fcut) s.cand.push_back(d);
    s.acc[d] = 0.0f;
  }
  radix_sort(s.cand, s.tmp, ns);
  rescore_and_select(qt, k, s.cand, hits);
}

// Rescores `cand` (sorted) exactly, in query-term order (the order and
// arithmetic of scores()), and keeps the k best.
inline void Index::rescore_and_select(const std::vector<std::pair<std::uint32_t, double>>& qt, std::size_t k,
                                      const std::vector<std::uint32_t>& cand, std::vector<Hit>& hits) const {
  hits.clear();
  hits.reserve(cand.size());
  for (std::uint32_t d : cand) hits.push_back(Hit{d, 0.0});
  for (const auto& tw : qt) {
    const double w = idf_[tw.first] * tw.second;
    if (const std::uint8_t* row = dense_row(tw.first)) {
      for (auto& h : hits)
        if (const std::uint32_t tf = dense_tf(row, tw.first, h.doc)) h.score += w * tf_part(tf, h.doc);
      continue;
    }
    Cursor c = cursor(tw.first);
    for (auto& h : hits) {
      c.advance_to(h.doc);
      if (!c.valid()) break;
      if (c.doc() == h.doc) h.score += w * tf_part(c.tf(), h.doc);
    }
  }
  keep_best(hits, k);
}

// Every posting of every query term, in query-term order; hits are the
// documents holding any query term (scores may be 0).
inline void Index::top_k_exhaustive(const std::vector<std::pair<std::uint32_t, double>>& qt, std::size_t k,
                                    const std::uint8_t* mask, std::size_t mask_len, Scratch& s,
                                    std::vector<Hit>& hits) const {
  s.touched.clear();
  if (s.dacc.size() < doc_len_.size()) s.dacc.resize(doc_len_.size(), 0.0);
  for (const auto& tw : qt) {
    const double w = idf_[tw.first] * tw.second;
    for (Cursor c = cursor(tw.first); c.valid(); c.next()) {
      const std::uint32_t d = c.doc();
      if (mask && (d >= mask_len || !mask[d])) continue;
      if (!s.seen[d]) {
        s.seen[d] = 1;
        s.touched.push_back(d);
      }
      s.dacc[d] += w * tf_part(c.tf(), d);
    }
  }
  hits.clear();
  hits.reserve(s.touched.size());
  for (std::uint32_t d : s.touched) {
    hits.push_back(Hit{d, s.dacc[d]});
    s.dacc[d] = 0.0;
    s.seen[d] = 0;
  }
  keep_best(hits, k);
}

}  // namespace momoka::bm25
