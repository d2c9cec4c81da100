// The BM25 index's term dictionary: every term's bytes in one arena, ids
// 0, 1, 2, ... in order of first appearance, and an open-addressing table of
// ids (linear probing, at most half full). About 8 + 4 + len bytes a term,
// against ~130 for a hash map of std::string plus a second copy by id --
// at 100k passages the dictionary is the larger part of the build's memory.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace momoka::bm25 {

class Vocab {
 public:
  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;

  std::size_t size() const { return off_.size() - 1; }

  std::string_view term(std::uint32_t id) const {
    return std::string_view(chars_.data() + off_[id], off_[id + 1] - off_[id]);
  }

  // The id of `t`, or kNone.
  std::uint32_t find(std::string_view t) const {
    if (slots_.empty()) return kNone;
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = hash(t) & mask;; i = (i + 1) & mask) {
      const std::uint32_t s = slots_[i];
      if (!s) return kNone;
      if (term(s - 1) == t) return s - 1;
    }
  }

  // The id of `t`, adding it when new (`added` says which).
  std::uint32_t intern(std::string_view t, bool& added) {
    std::uint32_t id = find(t);
    added = id == kNone;
    if (!added) return id;
    if (chars_.size() + t.size() > 0xFFFFFFFFull || size() >= 0x7FFFFFFEu)
      throw std::length_error("BM25 vocabulary is full (4 GB of term bytes or 2^31 terms)");
    if ((size() + 1) * 2 > slots_.size()) grow();
    id = static_cast<std::uint32_t>(size());
    chars_.append(t);
    off_.push_back(static_cast<std::uint32_t>(chars_.size()));
    place(id);
    return id;
  }

  std::size_t bytes() const { return chars_.capacity() + 4 * off_.capacity() + 4 * slots_.capacity(); }

 private:
  static std::uint64_t hash(std::string_view t) {  // FNV-1a
    std::uint64_t h = 1469598103934665603ull;
    for (unsigned char c : t) h = (h ^ c) * 1099511628211ull;
    return h ^ (h >> 29);
  }

  void place(std::uint32_t id) {
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = hash(term(id)) & mask;
    while (slots_[i]) i = (i + 1) & mask;
    slots_[i] = id + 1;
  }

  void grow() {
    slots_.assign(slots_.empty() ? 16 : slots_.size() * 2, 0);
    for (std::uint32_t id = 0; id < size(); ++id) place(id);
  }

  std::string chars_;
  std::vector<std::uint32_t> off_{0};
  std::vector<std::uint32_t> slots_;  // id + 1; 0 = empty
};

}  // namespace momoka::bm25
