// Okapi BM25 over an inverted index that supports adding and deleting
// documents in place.
//
// Documents get dense slot ids 0, 1, 2, ... in the order they are added;
// deleting a document removes its postings and leaves a tombstone slot, so
// ids never change. Scores follow Robertson & Zaragoza's Okapi BM25:
//
//   score(q, d) = sum over query tokens t (repeats counted) of
//                 idf(t) * tf(t,d) * (k1 + 1) / (tf(t,d) + k1 * (1 - b + b * |d| / avgdl))
//
// with two idf variants:
//   kOkapi  (default) idf = ln(N - df + 0.5) - ln(df + 0.5); a negative idf is
//           replaced by epsilon * (mean idf over the vocabulary). This is the
//           formula of rank_bm25's BM25Okapi, so rankings agree with it.
//   kLucene idf = ln(1 + (N - df + 0.5) / (df + 0.5)), always positive.
//
// N, df and avgdl count live documents only. Derived tables (idf per term,
// length norm per document) are rebuilt lazily on the first query after a
// change. Queries are safe to run from many threads at once; changes take an
// exclusive lock.
#pragma once

#include "momoka/kernel_parallel.hpp"
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>
#include <string>
#include <thread>
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

struct Posting {
  std::uint32_t doc;
  std::uint32_t tf;
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
  std::size_t vocab_size() const { return n_terms_live_; }
  bool alive(std::uint32_t d) const { return d < alive_.size() && alive_[d]; }
  double avgdl() const { return n_live_ ? static_cast<double>(total_len_) / n_live_ : 0.0; }
  std::uint32_t doc_len(std::uint32_t d) const { return doc_len_.at(d); }

  std::size_t doc_freq(const std::string& term) const {
    std::shared_lock<std::shared_mutex> l(mu_);
    auto it = vocab_.find(term);
    return it == vocab_.end() ? 0 : postings_[it->second].size();
  }

  // Adds one document given as its tokens; returns its slot id.
  std::uint32_t add(const std::vector<std::string>& tokens) {
    std::unique_lock<std::shared_mutex> l(mu_);
    if (doc_len_.size() >= 0xFFFFFFFEu) throw std::length_error("BM25 index is full (2^32 - 2 documents)");
    const std::uint32_t d = static_cast<std::uint32_t>(doc_len_.size());
    // Term frequencies of this document, in first-occurrence order.
    std::unordered_map<std::uint32_t, std::uint32_t> tf;
    std::vector<std::uint32_t> order;
    tf.reserve(tokens.size());
    for (const auto& t : tokens) {
      std::uint32_t id = term_id(t);
      auto r = tf.emplace(id, 0);
      if (r.second) order.push_back(id);
      ++r.first->second;
    }
    for (std::uint32_t id : order) {
      if (postings_[id].empty()) ++n_terms_live_;
      postings_[id].push_back(Posting{d, tf[id]});  // slots grow, so lists stay sorted
    }
    doc_len_.push_back(static_cast<std::uint32_t>(tokens.size()));
    alive_.push_back(1);
    doc_terms_.push_back(std::move(order));
    total_len_ += tokens.size();
    ++n_live_;
    dirty_ = true;
    return d;
  }

  // Deletes a document; returns false when the slot is unknown or already deleted.
  bool remove(std::uint32_t d) {
    std::unique_lock<std::shared_mutex> l(mu_);
    if (d >= alive_.size() || !alive_[d]) return false;
    for (std::uint32_t id : doc_terms_[d]) {
      auto& pl = postings_[id];
      auto it = std::lower_bound(pl.begin(), pl.end(), d,
                                 [](const Posting& p, std::uint32_t v) { return p.doc < v; });
      if (it != pl.end() && it->doc == d) pl.erase(it);
      if (pl.empty()) --n_terms_live_;
    }
    std::vector<std::uint32_t>().swap(doc_terms_[d]);
    alive_[d] = 0;
    total_len_ -= doc_len_[d];
    --n_live_;
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
        for (const Posting& p : postings_[tw.first]) out[p.doc] += w * tf_part(p);
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
    Scratch s;
    with_prepared([&]() { top_k_locked(query, k, mask, mask_len, s, hits); });
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

  // --- serialisation ------------------------------------------------------
  // Layout (little-endian): "MMKBM25\0", u32 version, f64 k1, b, epsilon,
  // u32 idf, u64 slots, slots x (u32 length, u8 alive), u64 terms,
  // terms x (u32 byte length, bytes, u32 postings, postings x (u32 doc, u32 tf)).
  static constexpr std::uint32_t kFormatVersion = 1;

  std::string serialize() const {
    std::shared_lock<std::shared_mutex> l(mu_);
    std::string out;
    out.append("MMKBM25\0", 8);
    put(out, kFormatVersion);
    put(out, params_.k1);
    put(out, params_.b);
    put(out, params_.epsilon);
    put(out, static_cast<std::uint32_t>(params_.idf));
    put(out, static_cast<std::uint64_t>(doc_len_.size()));
    for (std::size_t d = 0; d < doc_len_.size(); ++d) {
      put(out, doc_len_[d]);
      put(out, alive_[d]);
    }
    put(out, static_cast<std::uint64_t>(n_terms_live_));
    for (std::size_t t = 0; t < terms_.size(); ++t) {
      if (postings_[t].empty()) continue;
      put(out, static_cast<std::uint32_t>(terms_[t].size()));
      out.append(terms_[t]);
      put(out, static_cast<std::uint32_t>(postings_[t].size()));
      for (const Posting& p : postings_[t]) {
        put(out, p.doc);
        put(out, p.tf);
      }
    }
    return out;
  }

  static Index deserialize(const char* data, std::size_t n) {
    Reader r{data, n, 0};
    if (n < 8 || std::memcmp(data, "MMKBM25\0", 8) != 0) throw std::runtime_error("not a momoka BM25 index");
    r.pos = 8;
    auto version = r.get<std::uint32_t>();
    if (version > kFormatVersion)
      throw std::runtime_error("BM25 index format version " + std::to_string(version) +
                               " is newer than this momoka supports (" + std::to_string(kFormatVersion) + ")");
    Params p;
    p.k1 = r.get<double>();
    p.b = r.get<double>();
    p.epsilon = r.get<double>();
    auto idf = r.get<std::uint32_t>();
    if (idf > 1) throw std::runtime_error("BM25 index: unknown idf variant");
    p.idf = static_cast<Idf>(idf);
    Index ix(p);
    auto slots = r.get<std::uint64_t>();
    if (slots > n) throw std::runtime_error("BM25 index is truncated or corrupted");
    ix.doc_len_.resize(slots);
    ix.alive_.resize(slots);
    ix.doc_terms_.resize(slots);
    for (std::size_t d = 0; d < slots; ++d) {
      ix.doc_len_[d] = r.get<std::uint32_t>();
      ix.alive_[d] = r.get<std::uint8_t>();
      if (ix.alive_[d]) {
        ix.total_len_ += ix.doc_len_[d];
        ++ix.n_live_;
      }
    }
    auto nterms = r.get<std::uint64_t>();
    if (nterms > n) throw std::runtime_error("BM25 index is truncated or corrupted");
    for (std::size_t t = 0; t < nterms; ++t) {
      auto len = r.get<std::uint32_t>();
      std::string term = r.bytes(len);
      std::uint32_t id = ix.term_id(term);
      auto np = r.get<std::uint32_t>();
      if (np > n) throw std::runtime_error("BM25 index is truncated or corrupted");
      auto& pl = ix.postings_[id];
      if (!pl.empty()) throw std::runtime_error("BM25 index: duplicate term");
      pl.reserve(np);
      std::uint32_t prev = 0;
      for (std::uint32_t i = 0; i < np; ++i) {
        Posting q{r.get<std::uint32_t>(), r.get<std::uint32_t>()};
        if (q.doc >= slots || !ix.alive_[q.doc] || (i > 0 && q.doc <= prev))
          throw std::runtime_error("BM25 index is corrupted (bad posting)");
        prev = q.doc;
        pl.push_back(q);
        ix.doc_terms_[q.doc].push_back(id);
      }
      if (np) ++ix.n_terms_live_;
    }
    if (r.pos != n) throw std::runtime_error("BM25 index has trailing bytes (corrupted)");
    ix.dirty_ = true;
    return ix;
  }

  Index(Index&& o) noexcept { move_from(std::move(o)); }
  Index& operator=(Index&& o) noexcept {
    move_from(std::move(o));
    return *this;
  }
  Index(const Index&) = delete;
  Index& operator=(const Index&) = delete;

 private:
  struct Scratch {
    std::vector<double> acc;
    std::vector<std::uint8_t> seen;
    std::vector<std::uint32_t> touched;
  };

  struct Reader {
    const char* data;
    std::size_t n;
    std::size_t pos;
    template <class T>
    T get() {
      if (pos + sizeof(T) > n) throw std::runtime_error("BM25 index is truncated or corrupted");
      T v;
      std::memcpy(&v, data + pos, sizeof(T));
      pos += sizeof(T);
      return v;
    }
    std::string bytes(std::size_t len) {
      if (pos + len > n) throw std::runtime_error("BM25 index is truncated or corrupted");
      std::string s(data + pos, len);
      pos += len;
      return s;
    }
  };

  template <class T>
  static void put(std::string& out, T v) {
    char buf[sizeof(T)];
    std::memcpy(buf, &v, sizeof(T));
    out.append(buf, sizeof(T));
  }

  void move_from(Index&& o) {
    params_ = o.params_;
    vocab_ = std::move(o.vocab_);
    terms_ = std::move(o.terms_);
    postings_ = std::move(o.postings_);
    doc_len_ = std::move(o.doc_len_);
    alive_ = std::move(o.alive_);
    doc_terms_ = std::move(o.doc_terms_);
    total_len_ = o.total_len_;
    n_live_ = o.n_live_;
    n_terms_live_ = o.n_terms_live_;
    idf_ = std::move(o.idf_);
    norm_ = std::move(o.norm_);
    weight_ = std::move(o.weight_);
    dirty_ = true;
  }

  std::uint32_t term_id(const std::string& t) {
    auto it = vocab_.find(t);
    if (it != vocab_.end()) return it->second;
    std::uint32_t id = static_cast<std::uint32_t>(terms_.size());
    vocab_.emplace(t, id);
    terms_.push_back(t);
    postings_.emplace_back();
    return id;
  }

  // Runs f under a shared lock with the derived tables up to date.
  template <class F>
  void with_prepared(F&& f) const {
    while (true) {
      {
        std::shared_lock<std::shared_mutex> l(mu_);
        if (!dirty_) {
          f();
          return;
        }
      }
      std::unique_lock<std::shared_mutex> l(mu_);
      if (dirty_) prepare_locked();
    }
  }

  void prepare_locked() const {
    const double N = static_cast<double>(n_live_);
    idf_.assign(terms_.size(), 0.0);
    double sum = 0.0;
    std::size_t cnt = 0;
    std::vector<std::uint32_t> negative;
    for (std::size_t t = 0; t < terms_.size(); ++t) {
      const double df = static_cast<double>(postings_[t].size());
      if (df == 0) continue;
      double v;
      if (params_.idf == Idf::kOkapi) {
        v = std::log(N - df + 0.5) - std::log(df + 0.5);
        if (v < 0) negative.push_back(static_cast<std::uint32_t>(t));
      } else {
        v = std::log(1.0 + (N - df + 0.5) / (df + 0.5));
      }
      idf_[t] = v;
      sum += v;
      ++cnt;
    }
    if (params_.idf == Idf::kOkapi && cnt) {
      const double eps = params_.epsilon * (sum / static_cast<double>(cnt));
      for (std::uint32_t t : negative) idf_[t] = eps;
    }
    const double avg = avgdl();
    norm_.assign(doc_len_.size(), 0.0);
    for (std::size_t d = 0; d < doc_len_.size(); ++d)
      norm_[d] = params_.k1 * (1.0 - params_.b + (avg > 0 ? params_.b * doc_len_[d] / avg : 0.0));
    // Term part of every posting, so that a query only multiplies and adds.
    weight_.resize(postings_.size());
    for (std::size_t t = 0; t < postings_.size(); ++t) {
      const auto& pl = postings_[t];
      auto& w = weight_[t];
      w.resize(pl.size());
      for (std::size_t i = 0; i < pl.size(); ++i) w[i] = tf_part(pl[i]);
    }
    dirty_ = false;
  }

  double tf_part(const Posting& p) const {
    const double tf = static_cast<double>(p.tf);
    return tf * (params_.k1 + 1.0) / (tf + norm_[p.doc]);
  }

  // Unique known query terms with their multiplicity.
  std::vector<std::pair<std::uint32_t, double>> query_terms(const std::vector<std::string>& query) const {
    std::vector<std::pair<std::uint32_t, double>> qt;
    for (const auto& t : query) {
      auto it = vocab_.find(t);
      if (it == vocab_.end() || postings_[it->second].empty()) continue;
      bool found = false;
      for (auto& e : qt)
        if (e.first == it->second) {
          e.second += 1.0;
          found = true;
          break;
        }
      if (!found) qt.emplace_back(it->second, 1.0);
    }
    return qt;
  }

  void top_k_locked(const std::vector<std::string>& query, std::size_t k, const std::uint8_t* mask,
                    std::size_t mask_len, Scratch& s, std::vector<Hit>& hits) const {
    hits.clear();
    if (k == 0) return;
    const std::size_t ns = doc_len_.size();
    if (s.acc.size() < ns) {
      s.acc.resize(ns, 0.0);
      s.seen.resize(ns, 0);
    }
    s.touched.clear();
    for (const auto& tw : query_terms(query)) {
      const double w = idf_[tw.first] * tw.second;
      const auto& pl = postings_[tw.first];
      const double* wt = weight_[tw.first].data();
      const std::size_t np = pl.size();
      for (std::size_t i = 0; i < np; ++i) {
        const std::uint32_t d = pl[i].doc;
        if (mask && (d >= mask_len || !mask[d])) continue;
        if (!s.seen[d]) {
          s.seen[d] = 1;
          s.touched.push_back(d);
        }
        s.acc[d] += w * wt[i];
      }
    }
    hits.reserve(s.touched.size());
    for (std::uint32_t d : s.touched) {
      hits.push_back(Hit{d, s.acc[d]});
      s.acc[d] = 0.0;
      s.seen[d] = 0;
    }
    auto better = [](const Hit& a, const Hit& b) { return a.score > b.score || (a.score == b.score && a.doc < b.doc); };
    if (hits.size() > k) {
      std::nth_element(hits.begin(), hits.begin() + static_cast<std::ptrdiff_t>(k), hits.end(), better);
      hits.resize(k);
    }
    std::sort(hits.begin(), hits.end(), better);
  }

  Params params_;
  std::unordered_map<std::string, std::uint32_t> vocab_;
  std::vector<std::string> terms_;
  std::vector<std::vector<Posting>> postings_;
  std::vector<std::uint32_t> doc_len_;
  std::vector<std::uint8_t> alive_;
  std::vector<std::vector<std::uint32_t>> doc_terms_;
  std::uint64_t total_len_ = 0;
  std::size_t n_live_ = 0;
  std::size_t n_terms_live_ = 0;

  mutable std::shared_mutex mu_;
  mutable bool dirty_ = true;
  mutable std::vector<double> idf_;
  mutable std::vector<double> norm_;
  mutable std::vector<std::vector<double>> weight_;
};

}  // namespace momoka::bm25
