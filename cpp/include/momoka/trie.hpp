// Trie over sequences of 32-bit symbols (code points of a string, or token
// ids). Edges live in one open-addressing hash table keyed by
// (parent, symbol); siblings are linked for ordered enumeration. Each node
// counts the keys below it, which answers unique-prefix queries.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "momoka/kernel_hash.hpp"

namespace momoka {

class Trie {
 public:
  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;

  Trie() { clear(); }

  void clear() {
    nodes_.assign(1, Node{});
    keys_.assign(1024, kEmptyKey);
    vals_.assign(1024, 0);
    used_ = 0;
    size_ = 0;
  }
  std::size_t size() const { return size_; }
  std::size_t node_count() const { return nodes_.size(); }

  // Inserts a key; returns true when it was new. With count_duplicates, every
  // call (new or not) adds one to the counts along the path.
  template <class T>
  bool insert(const T* s, std::size_t n, bool count_duplicates = false) {
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < n; ++i) v = child_or_add(v, static_cast<std::uint32_t>(s[i]));
    const bool fresh = !nodes_[v].terminal;
    nodes_[v].terminal = true;
    if (fresh || count_duplicates) {
      std::uint32_t u = 0;
      ++nodes_[0].count;
      for (std::size_t i = 0; i < n; ++i) {
        u = child(u, static_cast<std::uint32_t>(s[i]));
        ++nodes_[u].count;
      }
    }
    if (fresh) ++size_;
    return fresh;
  }
  // Node reached by the sequence, or kNone.
  template <class T>
  std::uint32_t walk(const T* s, std::size_t n) const {
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < n && v != kNone; ++i) v = child(v, static_cast<std::uint32_t>(s[i]));
    return v;
  }
  template <class T>
  bool contains(const T* s, std::size_t n) const {
    const std::uint32_t v = walk(s, n);
    return v != kNone && nodes_[v].terminal;
  }
  // Number of keys that start with the prefix.
  std::size_t count_prefix(const std::uint32_t* s, std::size_t n) const {
    const std::uint32_t v = walk(s, n);
    return v == kNone ? 0 : nodes_[v].count;
  }
  // Length of the longest prefix of s shared with some key.
  std::size_t longest_common_prefix(const std::uint32_t* s, std::size_t n) const {
    std::uint32_t v = 0;
    std::size_t i = 0;
    for (; i < n; ++i) {
      const std::uint32_t c = child(v, s[i]);
      if (c == kNone) break;
      v = c;
    }
    return i;
  }
  // Length of the longest key that is a prefix of s, or -1.
  std::int64_t longest_prefix_key(const std::uint32_t* s, std::size_t n) const {
    std::uint32_t v = 0;
    std::int64_t best = nodes_[0].terminal ? 0 : -1;
    for (std::size_t i = 0; i < n; ++i) {
      v = child(v, s[i]);
      if (v == kNone) break;
      if (nodes_[v].terminal) best = static_cast<std::int64_t>(i + 1);
    }
    return best;
  }
  // Shortest prefix length of s shared by no other key (counts include
  // duplicates when inserted with count_duplicates); n when none is unique.
  std::size_t unique_prefix_length(const std::uint32_t* s, std::size_t n) const {
    std::uint32_t v = 0;
    if (nodes_[0].count == 1) return 0;
    for (std::size_t i = 0; i < n; ++i) {
      v = child(v, s[i]);
      if (v == kNone) return n;
      if (nodes_[v].count == 1) return i + 1;
    }
    return n;
  }
  // All keys starting with the prefix, in symbol order, at most limit.
  std::vector<std::vector<std::uint32_t>> keys_with_prefix(const std::uint32_t* s, std::size_t n,
                                                           std::size_t limit) const {
    std::vector<std::vector<std::uint32_t>> out;
    const std::uint32_t v = walk(s, n);
    if (v == kNone || limit == 0) return out;
    std::vector<std::uint32_t> path(s, s + n);
    collect(v, path, out, limit);
    return out;
  }

 private:
  struct Node {
    std::uint32_t first_child = kNone;
    std::uint32_t next_sibling = kNone;
    std::uint32_t symbol = 0;
    std::uint32_t count = 0;
    bool terminal = false;
  };
  static constexpr std::uint64_t kEmptyKey = ~std::uint64_t{0};

  static std::uint64_t edge_key(std::uint32_t parent, std::uint32_t sym) {
    return (static_cast<std::uint64_t>(parent) << 32) | sym;
  }
  std::uint32_t child(std::uint32_t parent, std::uint32_t sym) const {
    const std::uint64_t key = edge_key(parent, sym);
    const std::size_t mask = keys_.size() - 1;
    std::size_t h = mix64(key) & mask;
    for (;;) {
      const std::uint64_t k = keys_[h];
      if (k == key) return vals_[h];
      if (k == kEmptyKey) return kNone;
      h = (h + 1) & mask;
    }
  }
  std::uint32_t child_or_add(std::uint32_t parent, std::uint32_t sym) {
    if ((used_ + 1) * 4 > keys_.size() * 3) grow();
    const std::uint64_t key = edge_key(parent, sym);
    const std::size_t mask = keys_.size() - 1;
    std::size_t h = mix64(key) & mask;
    for (;;) {
      const std::uint64_t k = keys_[h];
      if (k == key) return vals_[h];
      if (k == kEmptyKey) break;
      h = (h + 1) & mask;
    }
    const std::uint32_t id = static_cast<std::uint32_t>(nodes_.size());
    Node nd;
    nd.symbol = sym;
    nd.next_sibling = nodes_[parent].first_child;
    nodes_.push_back(nd);
    nodes_[parent].first_child = id;
    keys_[h] = key;
    vals_[h] = id;
    ++used_;
    return id;
  }
  void grow() {
    std::vector<std::uint64_t> ok;
    std::vector<std::uint32_t> ov;
    ok.swap(keys_);
    ov.swap(vals_);
    keys_.assign(ok.size() * 2, kEmptyKey);
    vals_.assign(ok.size() * 2, 0);
    const std::size_t mask = keys_.size() - 1;
    for (std::size_t i = 0; i < ok.size(); ++i) {
      if (ok[i] == kEmptyKey) continue;
      std::size_t h = mix64(ok[i]) & mask;
      while (keys_[h] != kEmptyKey) h = (h + 1) & mask;
      keys_[h] = ok[i];
      vals_[h] = ov[i];
    }
  }
  void collect(std::uint32_t v, std::vector<std::uint32_t>& path, std::vector<std::vector<std::uint32_t>>& out,
               std::size_t limit) const {
    if (out.size() >= limit) return;
    if (nodes_[v].terminal) out.push_back(path);
    std::vector<std::uint32_t> kids;
    for (std::uint32_t c = nodes_[v].first_child; c != kNone; c = nodes_[c].next_sibling) kids.push_back(c);
    std::sort(kids.begin(), kids.end(),
              [&](std::uint32_t a, std::uint32_t b) { return nodes_[a].symbol < nodes_[b].symbol; });
    for (std::uint32_t c : kids) {
      if (out.size() >= limit) return;
      path.push_back(nodes_[c].symbol);
      collect(c, path, out, limit);
      path.pop_back();
    }
  }

  std::vector<Node> nodes_;
  std::vector<std::uint64_t> keys_;
  std::vector<std::uint32_t> vals_;
  std::size_t used_ = 0;
  std::size_t size_ = 0;
};

}  // namespace momoka
