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
  s.touched.clear();
  std::size_t i = 0;
  for (; i < m; ++i) {
    refresh();
    if (rest[i] < hmin - margin_f(hmin)) break;
    const float w = static_cast<float>(q[i].w);
    for (Cursor c = cursor(q[i].term); c.valid(); c.next()) {
      const std::uint32_t d = c.doc();
      if (mask && (d >= mask_len || !mask[d])) continue;
      float a = s.acc[d];
      if (a == 0.0f) s.touched.push_back(d);
      a += w * tf_part_f(c.tf(), d);
      s.acc[d] = a;
      if (a > hmin) offer(d, a);
    }
  }
  // Phase 2: the remaining terms, only for the candidates (sorted), those
  // whose accumulator plus the bounds left can still reach the threshold.
  s.cand.clear();
  if (i < m) {
    refresh();
    const double cut = hmin - margin_f(hmin) - rest[i];  // > 0: phase 1 stopped because rest[i] < hmin
    for (std::uint32_t d : s.touched)
      if (s.acc[d] >= cut) s.cand.push_back(d);
    radix_sort(s.cand, s.tmp, ns);
  }
  for (std::size_t j = i; j < m && !s.cand.empty(); ++j) {
    if (j > i) {
      refresh();
      const double cut = hmin - margin_f(hmin) - rest[j];
      s.cand.erase(std::remove_if(s.cand.begin(), s.cand.end(), [&](std::uint32_t d) { return s.acc[d] < cut; }),
                   s.cand.end());
    }
    const float w = static_cast<float>(q[j].w);
    Cursor c = cursor(q[j].term);
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
  for (std::uint32_t d : s.touched) {
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
