// Okapi BM25 over an inverted index that supports adding and deleting
// documents in place.
//
// Documents get dense slot ids 0, 1, 2, ... in the order they are added;
// deleting a document leaves a tombstone slot, so ids never change (its
// postings are dropped when the derived tables are next rebuilt). Scores
// follow Robertson & Zaragoza's Okapi BM25:
//
//   score(q, d) = sum over query tokens t (repeats counted) of
//                 idf(t) * tf(t,d) * (k1 + 1) / (tf(t,d) + k1 * (1 - b + b * |d| / avgdl))
//
// with two idf variants:
//   kOkapi  (default) idf = ln(N - df + 0.5) - ln(df + 0.5); a negative idf is
//           replaced by epsilon * (mean idf over the vocabulary). This is the
//           formula of rank_bm25's BM25Okapi, so rankings agree with it (the
//           mean is summed by df, not in term order: equal to rounding, and
//           independent of the order terms were first seen).
//   kLucene idf = ln(1 + (N - df + 0.5) / (df + 0.5)), always positive.
//
// N, df and avgdl count live documents only. Derived tables (idf per term,
// length norm per document, each term's largest contribution, skips) are
// rebuilt lazily on the first query after a change. Queries are safe to run
// from many threads at once; changes take an exclusive lock.
//
// Postings are compressed (bm25_postings.hpp); terms live in a compact
// dictionary (bm25_vocab.hpp). Top-k is MaxScore over float accumulators
// with exact rescoring (bm25_topk.hpp). The contract: top_k returns exactly
// the k best of scores() -- the same documents, the same scores bit for bit,
// ties by lower slot id.
#pragma once

#include "momoka/bm25_postings.hpp"
#include "momoka/bm25_vocab.hpp"
#include "momoka/kernel_parallel.hpp"
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace momoka::bm25 {

enum class Idf : std::uint32_t { kOkapi = 0, kLucene = 1 };

struct Params {
  double k1 = 1.5;
  double b = 0.75;
  double epsilon = 0.25;
  Idf idf = Idf::kOkapi;
};

struct Hit {
  std::uint32_t doc;
  double score;
};

class Index {
 public:
  explicit Index(Params p = Params()) : params_(p) {
    if (!(p.k1 >= 0) || !(p.b >= 0 && p.b <= 1) || !(p.epsilon >= 0))
      throw std::invalid_argument("BM25 parameters out of range: need k1 >= 0, 0 <= b <= 1, epsilon >= 0");
  }

  const Params& params() const { return params_; }
  std::size_t n_slots() const { return doc_len_.size(); }
  std::size_t n_docs() const { return n_live_; }
  bool alive(std::uint32_t d) const { return d < alive_.size() && alive_[d]; }
  double avgdl() const { return n_live_ ? static_cast<double>(total_len_) / n_live_ : 0.0; }
  std::uint32_t doc_len(std::uint32_t d) const { return doc_len_.at(d); }

  std::size_t vocab_size() const {
    std::size_t n = 0;
    with_prepared([&]() { n = n_terms_live_; });
    return n;
  }

  std::size_t doc_freq(const std::string& term) const {
    std::size_t n = 0;
    with_prepared([&]() {
      const std::uint32_t id = vocab_.find(term);
      n = id == Vocab::kNone ? 0 : lists_[id].n;
    });
    return n;
  }

  // Adds one document given as its tokens; returns its slot id.
  std::uint32_t add(const std::vector<std::string>& tokens) {
    std::unique_lock<std::shared_mutex> l(mu_);
    if (doc_len_.size() >= 0xFFFFFFFEu) throw std::length_error("BM25 index is full (2^32 - 2 documents)");
    const std::uint32_t d = static_cast<std::uint32_t>(doc_len_.size());
    add_ids_.clear();
    for (const auto& t : tokens) add_ids_.push_back(term_id(t));
    std::sort(add_ids_.begin(), add_ids_.end());
    std::uint32_t distinct = 0;
    for (std::size_t i = 0; i < add_ids_.size(); ++distinct) {
      std::size_t j = i;
      while (j < add_ids_.size() && add_ids_[j] == add_ids_[i]) ++j;
      lists_[add_ids_[i]].append(d, static_cast<std::uint32_t>(j - i));  // slots grow: lists stay sorted
      i = j;
    }
    if (!distinct_stale_) n_distinct_.push_back(distinct);
    doc_len_.push_back(static_cast<std::uint32_t>(tokens.size()));
    alive_.push_back(1);
    total_len_ += tokens.size();
    ++n_live_;
    dirty_ = true;
    return d;
  }

  // Appends `other`'s slots after this index's: other's slot d becomes
  // n_slots() + d; returns (that first new slot, other's slot count). The result is
  // the state of one index that had this index's documents added and then
  // other's, in order, with the same deletions: each of other's terms is
  // interned in other's id order (terms of deleted documents included, as
  // sequential adds would), and only postings of other's live documents are
  // copied. Parameters must be equal (std::invalid_argument otherwise), as
  // must not `other` be this index. O(postings + terms of other).
  std::pair<std::size_t, std::size_t> append(const Index& other) {
    if (&other == this) throw std::invalid_argument("cannot append a BM25 index to itself");
    std::unique_lock<std::shared_mutex> l(mu_, std::defer_lock);
    std::shared_lock<std::shared_mutex> lo(other.mu_, std::defer_lock);
    std::lock(l, lo);  // both at once: a.append(b) beside b.append(a) cannot deadlock
    const Params& q = other.params_;
    if (q.k1 != params_.k1 || q.b != params_.b || q.epsilon != params_.epsilon || q.idf != params_.idf)
      throw std::invalid_argument("cannot append a BM25 index with different parameters (k1, b, epsilon, idf)");
    const std::size_t base = doc_len_.size();
    if (other.doc_len_.size() > 0xFFFFFFFEu - base) throw std::length_error("BM25 index is full (2^32 - 2 documents)");
    const auto off = static_cast<std::uint32_t>(base);
    for (std::size_t t = 0; t < other.vocab_.size(); ++t) {
      bool added;
      const std::uint32_t id = vocab_.intern(other.vocab_.term(static_cast<std::uint32_t>(t)), added);
      if (added) lists_.emplace_back();
      const List& src = other.lists_[t];
      if (!src.n) continue;
      List& dst = lists_[id];
      // Room for all of src (only its first delta can code longer), growing
      // geometrically so that appending many pieces stays linear.
      const std::size_t need = dst.bytes.size() + src.bytes.size() + 5;
      if (need > dst.bytes.capacity()) dst.bytes.reserve(std::max(need, dst.bytes.size() + dst.bytes.size() / 4 + 16));
      const auto* p = reinterpret_cast<const std::uint8_t*>(src.bytes.data());
      std::uint32_t doc = 0;
      for (std::uint32_t i = 0; i < src.n; ++i) {
        doc += get_varint(p);
        const std::uint32_t tf = get_varint(p);
        if (other.alive_[doc]) dst.append(off + doc, tf);  // new slots exceed all of ours: lists stay sorted
      }
    }
    doc_len_.insert(doc_len_.end(), other.doc_len_.begin(), other.doc_len_.end());
    alive_.insert(alive_.end(), other.alive_.begin(), other.alive_.end());
    total_len_ += other.total_len_;
    n_live_ += other.n_live_;
    dirty_ = true;
    distinct_stale_ = true;
    return {base, other.doc_len_.size()};
  }

  // Deletes a document; returns false when the slot is unknown or already deleted.
  bool remove(std::uint32_t d) {
    std::unique_lock<std::shared_mutex> l(mu_);
    if (d >= alive_.size() || !alive_[d]) return false;
    alive_[d] = 0;
    total_len_ -= doc_len_[d];
    --n_live_;
    deleted_ = true;
    dirty_ = true;
    return true;
  }

  // Scores of every slot for a query (0 for deleted slots and documents
  // sharing no term with the query), as rank_bm25's get_scores.
  std::vector<double> scores(const std::vector<std::string>& query) const {
    std::vector<double> out;
    with_prepared([&]() {
      out.assign(doc_len_.size(), 0.0);
      for (const auto& tw : query_terms(query)) {
        const double w = idf_[tw.first] * tw.second;
        for (Cursor c = cursor(tw.first); c.valid(); c.next()) out[c.doc()] += w * tf_part(c.tf(), c.doc());
      }
    });
    return out;
  }

  // Top-k documents by score (highest first; ties by lower slot id). Only
  // documents that contain at least one query token are returned. `mask`,
  // when not null, has one byte per slot: 0 excludes that slot.
  std::vector<Hit> top_k(const std::vector<std::string>& query, std::size_t k, const std::uint8_t* mask,
                         std::size_t mask_len) const {
    std::vector<Hit> hits;
    ScratchLease s(*this);
    with_prepared([&]() { top_k_locked(query, k, mask, mask_len, *s, hits); });
    s.done();
    return hits;
  }

  // Runs top_k for many queries over `n_threads` threads (0: hardware
  // concurrency). Results are in query order.
  std::vector<std::vector<Hit>> top_k_batch(const std::vector<std::vector<std::string>>& queries, std::size_t k,
                                            const std::uint8_t* mask, std::size_t mask_len,
                                            unsigned n_threads) const {
    std::vector<std::vector<Hit>> out(queries.size());
    with_prepared([&]() {
      momoka::parallel_each<Scratch>(queries.size(), static_cast<long>(n_threads),
                                     [&](std::size_t i, Scratch& s) {
                                       top_k_locked(queries[i], k, mask, mask_len, s, out[i]);
                                     });
    });
    return out;
  }

  // Which of `terms` (tokens) each slot of `docs` holds, for re-ranking a
  // candidate list by query-term coverage without re-tokenising its texts:
  // out[i * terms.size() + j] = 1 when slot docs[i] is live and has a posting
  // of terms[j], else 0; n_distinct[i] = how many distinct terms slot docs[i]
  // holds (0 when it is unknown or deleted). `out` holds docs.size() *
  // terms.size() bytes, `n_distinct` docs.size() values. The postings are read
  // through their skips in slot order, O(candidates + blocks) per term; the
  // distinct counts are kept per slot (counted again from the postings after
  // an append or a load, on the first call).
  void holds(const std::vector<std::uint32_t>& docs, const std::vector<std::string>& terms, std::uint8_t* out,
             std::uint32_t* n_distinct) const {
    const std::size_t nd = docs.size(), nt = terms.size();
    std::fill(out, out + nd * nt, std::uint8_t{0});
    with_fresh([this]() { return dirty_ || distinct_stale_; },
               [this]() {
                 if (dirty_) prepare_locked();
                 if (distinct_stale_) count_distinct_locked();
               },
               [&]() {
                 std::vector<std::size_t> order;  // the live candidates, by slot
                 order.reserve(nd);
                 for (std::size_t i = 0; i < nd; ++i) {
                   const bool live = alive(docs[i]);
                   n_distinct[i] = live ? n_distinct_[docs[i]] : 0;
                   if (live) order.push_back(i);
                 }
                 std::sort(order.begin(), order.end(),
                           [&](std::size_t a, std::size_t b) { return docs[a] < docs[b]; });
                 for (std::size_t j = 0; j < nt; ++j) {
                   const std::uint32_t id = vocab_.find(terms[j]);
                   if (id == Vocab::kNone || lists_[id].n == 0) continue;
                   if (const std::uint8_t* row = dense_row(id)) {
                     for (std::size_t i : order) out[i * nt + j] = row[docs[i]] != 0;
                     continue;
                   }
                   Cursor c = cursor(id);
                   for (std::size_t i : order) {
                     c.advance_to(docs[i]);
                     if (!c.valid()) break;
                     if (c.doc() == docs[i]) out[i * nt + j] = 1;
                   }
                 }
               });
  }

  // Bytes held by postings, skips and per-slot / per-term tables (not
  // counting allocator overhead).
  std::size_t memory_bytes() const {
    std::size_t n = 0;
    with_prepared([&]() {
      n = doc_len_.size() * (4 + 1 + 8 + 4) + skips_.size() * sizeof(Skip) + vocab_.size() * (sizeof(List) + 8 + 8 + 4) +
          vocab_.bytes() + dense_terms_.size() * 4 + dense_.size() + n_distinct_.size() * 4;
      for (std::size_t t = 0; t < vocab_.size(); ++t) n += lists_[t].bytes.capacity();
    });
    return n;
  }

  // --- serialisation (bm25_io.hpp) -----------------------------------------
  static constexpr std::uint32_t kFormatVersion = 2;
  template <class Put>
  void write(Put&& put) const;
  std::string serialize() const {
    std::string out;
    write([&](const void* p, std::size_t n) { out.append(static_cast<const char*>(p), n); });
    return out;
  }
  static Index deserialize(const char* data, std::size_t n);

  Index(Index&& o) noexcept { move_from(std::move(o)); }
  Index& operator=(Index&& o) noexcept {
    move_from(std::move(o));
    return *this;
  }
  Index(const Index&) = delete;
  Index& operator=(const Index&) = delete;

 private:
  struct Scratch {
    std::vector<float> acc;    // pruning accumulators (float: half the cache footprint; exact rescoring after)
    std::vector<double> dacc;  // exact accumulators of the exhaustive path
    std::vector<std::uint8_t> seen;
    std::vector<std::uint32_t> touched;
    std::vector<std::uint32_t> cand;
    std::vector<std::uint32_t> tmp;
    std::vector<std::pair<float, std::uint32_t>> heap;  // min-heap of (score, doc): a lower bound of the k-th
  };

  // A Scratch from the index's pool (its per-slot arrays are all zero
  // between queries: a query clears what it touched), so a query does not
  // allocate and zero arrays of one entry per slot (5 bytes a slot: 5 MB a
  // query at a million passages). The pool holds at most one Scratch per
  // query running at once; a query that throws drops its Scratch, whose
  // arrays may then not be zero.
  class ScratchLease {
   public:
    explicit ScratchLease(const Index& ix) : ix_(ix) {
      std::lock_guard<std::mutex> l(ix.scratch_mu_);
      if (!ix.scratch_pool_.empty()) {
        s_ = std::move(ix.scratch_pool_.back());
        ix.scratch_pool_.pop_back();
      }
      if (!s_) s_ = std::make_unique<Scratch>();
    }
    Scratch& operator*() { return *s_; }
    void done() {  // the query finished: its Scratch is clean again
      std::lock_guard<std::mutex> l(ix_.scratch_mu_);
      ix_.scratch_pool_.push_back(std::move(s_));
    }

   private:
    const Index& ix_;
    std::unique_ptr<Scratch> s_;
  };

  struct QTerm {
    std::uint32_t term;
    double w;   // idf * repeats in the query
    double ub;  // w * largest tf part in the list
  };

  void move_from(Index&& o) {
    params_ = o.params_;
    vocab_ = std::move(o.vocab_);
    lists_ = std::move(o.lists_);
    doc_len_ = std::move(o.doc_len_);
    alive_ = std::move(o.alive_);
    total_len_ = o.total_len_;
    n_live_ = o.n_live_;
    n_terms_live_ = o.n_terms_live_;
    deleted_ = o.deleted_;
    idf_ = std::move(o.idf_);
    norm_ = std::move(o.norm_);
    part1_ = std::move(o.part1_);
    maxpart_ = std::move(o.maxpart_);
    skips_ = std::move(o.skips_);
    skip_start_ = std::move(o.skip_start_);
    dense_terms_ = std::move(o.dense_terms_);
    dense_ = std::move(o.dense_);
    dirty_ = true;
    n_distinct_ = std::move(o.n_distinct_);
    distinct_stale_ = o.distinct_stale_;
  }

  std::uint32_t term_id(const std::string& t) {
    bool added;
    const std::uint32_t id = vocab_.intern(t, added);
    if (added) lists_.emplace_back();
    return id;
  }

  Cursor cursor(std::uint32_t t) const {
    return Cursor(lists_[t], skips_.data() + skip_start_[t], skip_start_[t + 1] - skip_start_[t]);
  }

  // Runs f under a shared lock once `stale` (read under the lock) is false,
  // calling `fix` under the exclusive lock while it is true.
  template <class Stale, class Fix, class F>
  void with_fresh(Stale&& stale, Fix&& fix, F&& f) const {
    while (true) {
      {
        std::shared_lock<std::shared_mutex> l(mu_);
        if (!stale()) {
          f();
          return;
        }
      }
      std::unique_lock<std::shared_mutex> l(mu_);
      if (stale()) fix();
    }
  }

  // Runs f under a shared lock with the derived tables up to date.
  template <class F>
  void with_prepared(F&& f) const {
    with_fresh([this]() { return dirty_; }, [this]() { prepare_locked(); }, f);
  }

  // Runs f under a shared lock with no postings of deleted documents left.
  template <class F>
  void with_compacted(F&& f) const {
    with_fresh([this]() { return deleted_; }, [this]() { compact_locked(); }, f);
  }

  // Each slot's number of distinct terms, from the postings (those of
  // deleted slots are not read after: holds() reports 0 for them).
  void count_distinct_locked() const {
    n_distinct_.assign(doc_len_.size(), 0);
    for (const auto& li : lists_) {
      const auto* p = reinterpret_cast<const std::uint8_t*>(li.bytes.data());
      std::uint32_t doc = 0;
      for (std::uint32_t i = 0; i < li.n; ++i) {
        doc += get_varint(p);
        get_varint(p);
        ++n_distinct_[doc];
      }
    }
    distinct_stale_ = false;
  }

  // Drops the postings of deleted documents (re-coding the lists).
  void compact_locked() const {
    for (auto& li : lists_) {
      if (!li.n) continue;
      List fresh;
      const auto* p = reinterpret_cast<const std::uint8_t*>(li.bytes.data());
      std::uint32_t doc = 0;
      for (std::uint32_t i = 0; i < li.n; ++i) {
        doc += get_varint(p);
        const std::uint32_t tf = get_varint(p);
        if (alive_[doc]) fresh.append(doc, tf);
      }
      if (fresh.n != li.n) {
        fresh.bytes.shrink_to_fit();
        li = std::move(fresh);
      }
    }
    deleted_ = false;
  }

  void prepare_locked() const {
    if (deleted_) compact_locked();
    const double N = static_cast<double>(n_live_);
    auto okapi = [N](double df) { return std::log(N - df + 0.5) - std::log(df + 0.5); };
    idf_.assign(vocab_.size(), 0.0);
    std::size_t cnt = 0;
    std::vector<std::uint32_t> negative;
    std::vector<std::uint32_t> df_count;  // okapi: terms per document frequency
    if (params_.idf == Idf::kOkapi) df_count.assign(n_live_ + 1, 0);
    for (std::size_t t = 0; t < vocab_.size(); ++t) {
      const std::uint32_t n = lists_[t].n;
      if (n == 0) continue;
      const double df = static_cast<double>(n);
      double v;
      if (params_.idf == Idf::kOkapi) {
        v = okapi(df);
        if (v < 0) negative.push_back(static_cast<std::uint32_t>(t));
        if (n >= df_count.size()) df_count.resize(n + 1, 0);  // (lists hold live documents only here)
        ++df_count[n];
      } else {
        v = std::log(1.0 + (N - df + 0.5) / (df + 0.5));
      }
      idf_[t] = v;
      ++cnt;
    }
    n_terms_live_ = cnt;
    if (params_.idf == Idf::kOkapi && cnt) {
      // The mean idf summed by document frequency (count x idf, df
      // increasing): it depends on the terms' df values only, not on the
      // order terms were first seen, so an index appended from pieces whose
      // saved copies dropped terms of deleted documents (append) floors
      // negative idf bit for bit as one built in order does.
      double sum = 0.0;
      for (std::size_t df = 1; df < df_count.size(); ++df)
        if (df_count[df]) sum += static_cast<double>(df_count[df]) * okapi(static_cast<double>(df));
      const double eps = params_.epsilon * (sum / static_cast<double>(cnt));
      for (std::uint32_t t : negative) idf_[t] = eps;
    }
    const double avg = avgdl();
    norm_.assign(doc_len_.size(), 0.0);
    for (std::size_t d = 0; d < doc_len_.size(); ++d)
      norm_[d] = params_.k1 * (1.0 - params_.b + (avg > 0 ? params_.b * doc_len_[d] / avg : 0.0));
    part1_.resize(doc_len_.size());
    for (std::size_t d = 0; d < doc_len_.size(); ++d)
      part1_[d] = static_cast<float>((params_.k1 + 1.0) / (1.0 + norm_[d]));
    // Skips and each list's largest tf part, in one pass over the postings.
    maxpart_.assign(vocab_.size(), 0.0);
    skip_start_.assign(vocab_.size() + 1, 0);
    skips_.clear();
    for (std::size_t t = 0; t < vocab_.size(); ++t) {
      skip_start_[t] = static_cast<std::uint32_t>(skips_.size());
      const List& li = lists_[t];
      const auto* base = reinterpret_cast<const std::uint8_t*>(li.bytes.data());
      const auto* p = base;
      std::uint32_t doc = 0;
      double mx = 0.0;
      for (std::uint32_t i = 0; i < li.n; ++i) {
        const std::uint32_t off = static_cast<std::uint32_t>(p - base), prev = doc;
        doc += get_varint(p);
        const std::uint32_t tf = get_varint(p);
        if (i % kBlock == 0) skips_.push_back(Skip{prev, doc, off});
        mx = std::max(mx, tf_part(tf, doc));
      }
      maxpart_[t] = mx;
    }
    skip_start_[vocab_.size()] = static_cast<std::uint32_t>(skips_.size());
    build_dense_locked();
    dirty_ = false;
  }

  // Dense tf rows of the terms in at least 1/kDenseDiv of the slots (the
  // stopword-like terms: few, and a row of one byte per slot is then at most
  // kDenseDiv bytes a posting, against 2-3 for the coded list). MaxScore
  // meets these terms last, in phase 2 and in the rescoring, where each
  // candidate's tf is then one byte read instead of a decode through the
  // list (at small N the candidates sit in every block, so skipping saves
  // nothing there). tf >= 255 is stored as 255 and read from the list.
  static constexpr std::size_t kDenseDiv = 8;
  static constexpr std::uint32_t kDenseMinDf = 256;
  void build_dense_locked() const {
    const std::size_t ns = doc_len_.size();
    dense_terms_.clear();
    for (std::size_t t = 0; t < vocab_.size(); ++t) {
      const std::uint32_t n = lists_[t].n;
      if (n >= kDenseMinDf && static_cast<std::size_t>(n) * kDenseDiv >= ns)
        dense_terms_.push_back(static_cast<std::uint32_t>(t));
    }
    dense_.assign(dense_terms_.size() * ns, 0);
    dense_.shrink_to_fit();
    for (std::size_t r = 0; r < dense_terms_.size(); ++r) {
      std::uint8_t* row = dense_.data() + r * ns;
      for (Cursor c = cursor(dense_terms_[r]); c.valid(); c.next())
        row[c.doc()] = static_cast<std::uint8_t>(std::min<std::uint32_t>(c.tf(), 255));
    }
  }

  // Term t's dense tf row, or null.
  const std::uint8_t* dense_row(std::uint32_t t) const {
    const auto it = std::lower_bound(dense_terms_.begin(), dense_terms_.end(), t);
    if (it == dense_terms_.end() || *it != t) return nullptr;
    return dense_.data() + static_cast<std::size_t>(it - dense_terms_.begin()) * doc_len_.size();
  }

  // tf of term t in slot d through its dense row (0: absent).
  std::uint32_t dense_tf(const std::uint8_t* row, std::uint32_t t, std::uint32_t d) const {
    const std::uint32_t v = row[d];
    if (v < 255) return v;
    Cursor c = cursor(t);  // tf >= 255: the list has it
    c.advance_to(d);
    return c.tf();
  }

  double tf_part(std::uint32_t tf_i, std::uint32_t d) const {
    const double tf = static_cast<double>(tf_i);
    return tf * (params_.k1 + 1.0) / (tf + norm_[d]);
  }

  // tf_part in float for pruning: a tf-1 posting (most of them) reads a
  // per-document table of 4 bytes instead of dividing.
  // tf > 1 derives the length norm from the same table (norm = (k1 + 1) /
  // part1 - 1), so one 4-byte array per document is all a posting reads.
  float tf_part_f(std::uint32_t tf_i, std::uint32_t d) const {
    const float p1 = part1_[d];
    if (tf_i == 1) return p1;
    const float tf = static_cast<float>(tf_i), k1p1 = static_cast<float>(params_.k1 + 1.0);
    return tf * k1p1 / (tf - 1.0f + k1p1 / p1);
  }

  // Unique known query terms with their multiplicity, in first-occurrence order.
  std::vector<std::pair<std::uint32_t, double>> query_terms(const std::vector<std::string>& query) const {
    std::vector<std::pair<std::uint32_t, double>> qt;
    for (const auto& t : query) {
      const std::uint32_t id = vocab_.find(t);
      if (id == Vocab::kNone || lists_[id].n == 0) continue;
      bool found = false;
      for (auto& e : qt)
        if (e.first == id) {
          e.second += 1.0;
          found = true;
          break;
        }
      if (!found) qt.emplace_back(id, 1.0);
    }
    return qt;
  }

  static constexpr std::size_t kScanDiv = 16;  // top_k: gather candidates by a scan when >= 1/16 of the slots were seen
  static double margin(double theta) { return 1e-9 * (std::fabs(theta) + 1.0); }

  // Top-k with MaxScore pruning, and its exhaustive fallback (bm25_topk.hpp).
  void top_k_locked(const std::vector<std::string>& query, std::size_t k, const std::uint8_t* mask,
                    std::size_t mask_len, Scratch& s, std::vector<Hit>& hits) const;
  void top_k_exhaustive(const std::vector<std::pair<std::uint32_t, double>>& qt, std::size_t k,
                        const std::uint8_t* mask, std::size_t mask_len, Scratch& s, std::vector<Hit>& hits) const;
  void rescore_and_select(const std::vector<std::pair<std::uint32_t, double>>& qt, std::size_t k,
                          const std::vector<std::uint32_t>& cand, std::vector<Hit>& hits) const;

  Params params_;
  Vocab vocab_;
  mutable std::vector<List> lists_;  // compaction (on prepare) rewrites them, not their meaning
  std::vector<std::uint32_t> doc_len_;
  std::vector<std::uint8_t> alive_;
  std::vector<std::uint32_t> add_ids_;
  std::uint64_t total_len_ = 0;
  std::size_t n_live_ = 0;

  mutable std::shared_mutex mu_;
  mutable std::mutex scratch_mu_;                              // guards scratch_pool_
  mutable std::vector<std::unique_ptr<Scratch>> scratch_pool_;  // clean Scratches of finished queries
  mutable bool dirty_ = true;
  mutable bool deleted_ = false;  // some list may hold postings of deleted documents
  mutable std::size_t n_terms_live_ = 0;
  mutable std::vector<double> idf_;
  mutable std::vector<double> norm_;
  mutable std::vector<float> part1_;  // tf part of a tf-1 posting, per document, rounded to float
  mutable std::vector<double> maxpart_;
  mutable std::vector<Skip> skips_;
  mutable std::vector<std::uint32_t> skip_start_;
  mutable std::vector<std::uint32_t> dense_terms_;  // terms with a dense tf row, increasing (row r: dense_terms_[r])
  mutable std::vector<std::uint8_t> dense_;          // the rows, n_slots() bytes each
  mutable std::vector<std::uint32_t> n_distinct_;    // distinct terms per slot (holds())
  mutable bool distinct_stale_ = true;               // n_distinct_ is to be counted from the postings
};

}  // namespace momoka::bm25

#include "momoka/bm25_io.hpp"
#include "momoka/bm25_topk.hpp"
