// SimHash fingerprints (Charikar 2002) and near-duplicate search by
// permuted-table block indexing (Manku et al. 2007).
//
// Features: word n-grams or character n-grams of a normalised text (ASCII
// letters lower-cased). A feature's 64-bit hash is FNV-1a over its code points
// (word n-grams joined by one space) followed by the SplitMix64 finaliser.
// Bit b of the fingerprint is 1 when the (weighted) number of features with
// bit b set exceeds the number with it clear.
//
// Near duplicates within Hamming distance k: split the 64 bits into k+1
// blocks; two fingerprints within distance k agree exactly on at least one
// block (pigeonhole), so sorting by each block and comparing only items with
// equal block values finds every pair without comparing all pairs.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <unordered_map>
#include <utility>
#include <vector>

#include "momoka/kernel_hash.hpp"
#include "momoka/unicode_space.hpp"

namespace momoka {

// WordChar: word unigrams plus character n-grams of the same text, in one fingerprint
// (JERR entity names: METHODS.md section 5).
enum class SimTokenizer { Word, Char, WordChar };

// Characters that make up words: ASCII letters, digits and '_', and non-ASCII
// code points outside whitespace and the common punctuation blocks.
inline bool is_word_cp(std::uint32_t c) {
  if (c < 128) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  }
  if (is_space(c)) return false;
  if (c <= 0xBF || c == 0xD7 || c == 0xF7) return false;
  if (c >= 0x2000 && c <= 0x206F) return false;
  if (c >= 0x2E00 && c <= 0x2E7F) return false;
  if (c >= 0x3000 && c <= 0x303F) return false;
  if (c >= 0xFF00 && c <= 0xFF0F) return false;
  if (c >= 0xFF1A && c <= 0xFF20) return false;
  if (c >= 0xFF3B && c <= 0xFF40) return false;
  if (c >= 0xFF5B && c <= 0xFF65) return false;
  return true;
}
inline std::uint32_t lower_ascii(std::uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

// Whitespace and word-character tables for code points below 256.
struct CharClasses {
  unsigned char space[256];
  unsigned char word[256];
  CharClasses() {
    for (std::uint32_t c = 0; c < 256; ++c) {
      space[c] = is_space(c) ? 1 : 0;
      word[c] = is_word_cp(c) ? 1 : 0;
    }
  }
};
inline const CharClasses& char_classes() {
  static const CharClasses t;
  return t;
}

using FeatureWeights = std::unordered_map<std::uint64_t, double>;

inline std::uint64_t feature_hash_finish(std::uint64_t fnv) { return mix64(fnv); }

namespace detail {

struct ByteExpand {
  std::uint64_t t[256];
  ByteExpand() {
    for (unsigned v = 0; v < 256; ++v) {
      std::uint64_t x = 0;
      for (unsigned i = 0; i < 8; ++i)
        if ((v >> i) & 1u) x |= std::uint64_t{1} << (8 * i);
      t[v] = x;
    }
  }
};
inline const ByteExpand& byte_expand() {
  static const ByteExpand e;
  return e;
}

// Per-bit counts of feature hashes: eight byte-lane counters per 64-bit word
// (flushed every 255 features) so each feature costs eight adds.
class BitCounter {
 public:
  void add(std::uint64_t h) {
    const auto& t = byte_expand().t;
    for (int j = 0; j < 8; ++j) lanes_[j] += t[(h >> (8 * j)) & 0xFF];
    ++total_;
    if (++pending_ == 255) flush();
  }
  // Adds many hashes with the lane counters held in locals (registers).
  void add_all(const std::uint64_t* hs, std::size_t n) {
    const std::uint64_t* t = byte_expand().t;
    std::size_t i = 0;
    while (i < n) {
      const std::size_t stop = std::min<std::size_t>(n, i + (255 - pending_));
      std::uint64_t l0 = lanes_[0], l1 = lanes_[1], l2 = lanes_[2], l3 = lanes_[3];
      std::uint64_t l4 = lanes_[4], l5 = lanes_[5], l6 = lanes_[6], l7 = lanes_[7];
      for (std::size_t x = i; x < stop; ++x) {
        const std::uint64_t h = hs[x];
        l0 += t[h & 0xFF];
        l1 += t[(h >> 8) & 0xFF];
        l2 += t[(h >> 16) & 0xFF];
        l3 += t[(h >> 24) & 0xFF];
        l4 += t[(h >> 32) & 0xFF];
        l5 += t[(h >> 40) & 0xFF];
        l6 += t[(h >> 48) & 0xFF];
        l7 += t[h >> 56];
      }
      lanes_[0] = l0; lanes_[1] = l1; lanes_[2] = l2; lanes_[3] = l3;
      lanes_[4] = l4; lanes_[5] = l5; lanes_[6] = l6; lanes_[7] = l7;
      pending_ += static_cast<unsigned>(stop - i);
      total_ += stop - i;
      i = stop;
      if (pending_ == 255) flush();
    }
  }
  std::uint64_t fingerprint() {
    flush();
    std::uint64_t out = 0;
    for (int b = 0; b < 64; ++b)
      if (2 * static_cast<std::uint64_t>(cnt_[b]) > total_) out |= std::uint64_t{1} << b;
    return out;
  }

 private:
  void flush() {
    for (int j = 0; j < 8; ++j) {
      std::uint64_t x = lanes_[j];
      for (int i = 0; i < 8; ++i) cnt_[8 * j + i] += static_cast<std::uint32_t>((x >> (8 * i)) & 0xFF);
      lanes_[j] = 0;
    }
    pending_ = 0;
  }
  std::uint64_t lanes_[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::uint32_t cnt_[64] = {0};
  std::uint64_t total_ = 0;
  unsigned pending_ = 0;
};

class WeightedCounter {
 public:
  void add(std::uint64_t h, double w) {
    for (int b = 0; b < 64; ++b) v_[b] += ((h >> b) & 1u) ? w : -w;
  }
  std::uint64_t fingerprint() const {
    std::uint64_t out = 0;
    for (int b = 0; b < 64; ++b)
      if (v_[b] > 0) out |= std::uint64_t{1} << b;
    return out;
  }

 private:
  double v_[64] = {0};
};

}  // namespace detail

// Calls f(feature_hash) for every feature of the text.
template <class T, class F>
void for_each_feature(const T* s, std::size_t n, SimTokenizer tok, std::size_t ngram,
                      std::vector<std::uint32_t>& buf, std::vector<std::pair<std::uint32_t, std::uint32_t>>& words,
                      F&& f) {
  buf.clear();
  if (tok == SimTokenizer::Char) {
    // Normalise: lower-case ASCII, collapse whitespace runs, strip the ends.
    buf.resize(n + 1);
    std::uint32_t* out = buf.data();
    std::size_t len = 0;
    bool pending_space = false;
    const auto& cls = char_classes();
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t c = static_cast<std::uint32_t>(s[i]);
      const bool space = c < 256 ? (cls.space[c] != 0) : is_space(c);
      if (space) {
        pending_space = len > 0;
        continue;
      }
      if (pending_space) out[len++] = 0x20;
      pending_space = false;
      out[len++] = lower_ascii(c);
    }
    buf.resize(len);
    if (len == 0) return;
    const std::size_t g = std::min(ngram, len);
    for (std::size_t i = 0; i + g <= len; ++i) {
      std::uint64_t h = kFnvOffset;
      for (std::size_t j = 0; j < g; ++j) h = fnv_step(h, out[i + j]);
      f(feature_hash_finish(h));
    }
    return;
  }
  words.clear();
  const auto& cls = char_classes();
  auto wordc = [&](std::uint32_t c) { return c < 256 ? cls.word[c] != 0 : is_word_cp(c); };
  buf.resize(n);
  std::uint32_t* out = buf.data();
  std::size_t len = 0;
  std::size_t i = 0;
  while (i < n) {
    while (i < n && !wordc(static_cast<std::uint32_t>(s[i]))) ++i;
    if (i >= n) break;
    const std::size_t b = len;
    while (i < n && wordc(static_cast<std::uint32_t>(s[i]))) out[len++] = lower_ascii(static_cast<std::uint32_t>(s[i++]));
    words.emplace_back(static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(len - b));
  }
  buf.resize(len);
  if (words.empty()) return;
  const std::size_t g = std::min(ngram, words.size());
  for (std::size_t w = 0; w + g <= words.size(); ++w) {
    std::uint64_t h = kFnvOffset;
    for (std::size_t j = 0; j < g; ++j) {
      if (j) h = fnv_step(h, 0x20);
      const auto [off, len] = words[w + j];
      for (std::uint32_t x = 0; x < len; ++x) h = fnv_step(h, buf[off + x]);
    }
    f(feature_hash_finish(h));
  }
}

// Scratch space reused across texts by one thread.
struct SimhashScratch {
  std::vector<std::uint32_t> buf;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> words;
  std::vector<std::uint64_t> hashes;
};

template <class T>
std::uint64_t simhash(const T* s, std::size_t n, SimTokenizer tok, std::size_t ngram,
                      const FeatureWeights* weights, SimhashScratch& scratch) {
  if (tok == SimTokenizer::WordChar) {
    // Both feature sets feed one counter: word unigrams, then character n-grams.
    auto both = [&](auto&& f) {
      for_each_feature(s, n, SimTokenizer::Word, 1, scratch.buf, scratch.words, f);
      for_each_feature(s, n, SimTokenizer::Char, ngram, scratch.buf, scratch.words, f);
    };
    if (weights == nullptr) {
      scratch.hashes.clear();
      both([&](std::uint64_t h) { scratch.hashes.push_back(h); });
      detail::BitCounter acc;
      acc.add_all(scratch.hashes.data(), scratch.hashes.size());
      return acc.fingerprint();
    }
    detail::WeightedCounter acc;
    both([&](std::uint64_t h) {
      auto it = weights->find(h);
      acc.add(h, it == weights->end() ? 1.0 : it->second);
    });
    return acc.fingerprint();
  }
  if (weights == nullptr) {
    // Hash all features first (independent work that pipelines well), then count.
    scratch.hashes.clear();
    for_each_feature(s, n, tok, ngram, scratch.buf, scratch.words,
                     [&](std::uint64_t h) { scratch.hashes.push_back(h); });
    detail::BitCounter acc;
    acc.add_all(scratch.hashes.data(), scratch.hashes.size());
    return acc.fingerprint();
  }
  detail::WeightedCounter acc;
  for_each_feature(s, n, tok, ngram, scratch.buf, scratch.words, [&](std::uint64_t h) {
    auto it = weights->find(h);
    acc.add(h, it == weights->end() ? 1.0 : it->second);
  });
  return acc.fingerprint();
}

inline int hamming64(std::uint64_t a, std::uint64_t b) { return __builtin_popcountll(a ^ b); }

// All pairs (i < j) with hamming(h[i], h[j]) <= k, sorted.
inline std::vector<std::pair<std::uint32_t, std::uint32_t>> near_duplicate_pairs(const std::uint64_t* h,
                                                                                std::size_t n, int k) {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> out;
  if (n < 2) return out;
  const int blocks = std::min(k + 1, 64);
  std::vector<int> shift(blocks), width(blocks);
  {
    int pos = 0;
    for (int b = 0; b < blocks; ++b) {
      width[b] = 64 / blocks + (b < 64 % blocks ? 1 : 0);
      shift[b] = pos;
      pos += width[b];
    }
  }
  auto key = [&](std::uint64_t x, int b) -> std::uint64_t {
    const std::uint64_t mask = width[b] >= 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << width[b]) - 1);
    return (x >> shift[b]) & mask;
  };
  std::vector<std::uint32_t> order(n), tmp(n);
  std::vector<std::uint32_t> counts;
  for (int b = 0; b < blocks; ++b) {
    if (width[b] <= 22) {
      // Counting sort on the block value.
      counts.assign((std::size_t{1} << width[b]) + 1, 0);
      for (std::size_t i = 0; i < n; ++i) ++counts[key(h[i], b) + 1];
      for (std::size_t v = 1; v < counts.size(); ++v) counts[v] += counts[v - 1];
      for (std::size_t i = 0; i < n; ++i) order[counts[key(h[i], b)]++] = static_cast<std::uint32_t>(i);
    } else {
      std::iota(order.begin(), order.end(), 0u);
      std::sort(order.begin(), order.end(), [&](std::uint32_t x, std::uint32_t y) {
        const std::uint64_t kx = key(h[x], b), ky = key(h[y], b);
        return kx < ky || (kx == ky && x < y);
      });
    }
    std::size_t g = 0;
    while (g < n) {
      const std::uint64_t kv = key(h[order[g]], b);
      std::size_t e = g + 1;
      while (e < n && key(h[order[e]], b) == kv) ++e;
      for (std::size_t x = g; x < e; ++x) {
        const std::uint64_t hx = h[order[x]];
        for (std::size_t y = x + 1; y < e; ++y) {
          const std::uint64_t d = hx ^ h[order[y]];
          if (__builtin_popcountll(d) > k) continue;
          // Report each pair once: from the first block on which it agrees.
          bool earlier = false;
          for (int c = 0; c < b && !earlier; ++c) earlier = key(d, c) == 0;
          if (earlier) continue;
          std::uint32_t i = order[x], j = order[y];
          if (i > j) std::swap(i, j);
          out.emplace_back(i, j);
        }
      }
      g = e;
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Connected components of the near-duplicate graph: label = smallest member index.
inline std::vector<std::int64_t> cluster_labels(std::size_t n,
                                                const std::vector<std::pair<std::uint32_t, std::uint32_t>>& pairs) {
  std::vector<std::uint32_t> parent(n);
  std::iota(parent.begin(), parent.end(), 0u);
  auto find = [&](std::uint32_t x) {
    while (parent[x] != x) {
      parent[x] = parent[parent[x]];
      x = parent[x];
    }
    return x;
  };
  for (const auto& [a, b] : pairs) {
    std::uint32_t ra = find(a), rb = find(b);
    if (ra == rb) continue;
    if (ra < rb) parent[rb] = ra;
    else parent[ra] = rb;
  }
  std::vector<std::int64_t> labels(n);
  for (std::size_t i = 0; i < n; ++i) labels[i] = find(static_cast<std::uint32_t>(i));
  return labels;
}

}  // namespace momoka
