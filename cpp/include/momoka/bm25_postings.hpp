// Compressed posting lists of the BM25 index.
//
// One list per term: the documents containing it in increasing slot order,
// each as two LEB128 varints, (doc - previous doc, tf); the first doc is
// coded relative to 0. Typical 100-word passages take 2-3 bytes a posting.
// The list bytes are the same in memory and on disk.
//
// Skips: every kBlock postings the index keeps (previous doc, first doc,
// byte offset), so a cursor can jump to the first posting >= a target
// without decoding the blocks in between (MaxScore's candidate look-ups).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace momoka::bm25 {

constexpr std::uint32_t kBlock = 64;

inline void put_varint(std::string& s, std::uint32_t v) {
  while (v >= 0x80) {
    s.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  s.push_back(static_cast<char>(v));
}

// Decodes one varint from trusted bytes (built or validated by this index).
inline std::uint32_t get_varint(const std::uint8_t*& p) {
  std::uint32_t v = *p++;
  if (v < 0x80) return v;
  v &= 0x7F;
  int shift = 7;
  while (true) {
    const std::uint32_t b = *p++;
    v |= (b & 0x7F) << shift;
    if (b < 0x80) return v;
    shift += 7;
  }
}

// Decodes one varint from untrusted bytes; false when it runs past `end` or
// is longer than 5 bytes.
inline bool get_varint_checked(const std::uint8_t*& p, const std::uint8_t* end, std::uint32_t& out) {
  std::uint64_t v = 0;
  for (int i = 0; i < 5; ++i) {
    if (p >= end) return false;
    const std::uint32_t b = *p++;
    v |= static_cast<std::uint64_t>(b & 0x7F) << (7 * i);
    if (b < 0x80) {
      if (v > 0xFFFFFFFFull) return false;
      out = static_cast<std::uint32_t>(v);
      return true;
    }
  }
  return false;
}

// One term's postings: the coded bytes, their count and the last doc (the
// base of the next delta).
struct List {
  std::string bytes;
  std::uint32_t n = 0;
  std::uint32_t last = 0;

  void append(std::uint32_t doc, std::uint32_t tf) {
    // Grow by a quarter, not double: the build's peak holds every list's slack.
    if (bytes.size() + 10 > bytes.capacity()) bytes.reserve(bytes.size() + bytes.size() / 4 + 16);
    put_varint(bytes, n ? doc - last : doc);
    put_varint(bytes, tf);
    last = doc;
    ++n;
  }
};

struct Skip {
  std::uint32_t prev_doc;   // doc before the block (0 for the first block)
  std::uint32_t first_doc;  // first doc of the block
  std::uint32_t offset;     // byte offset of the block's first posting
};

// Forward cursor over one list.
class Cursor {
 public:
  Cursor(const List& l, const Skip* skips, std::uint32_t n_skips)
      : p_(reinterpret_cast<const std::uint8_t*>(l.bytes.data())),
        data_(p_),
        n_(l.n),
        skips_(skips),
        n_skips_(n_skips) {
    if (n_) decode();
  }

  bool valid() const { return idx_ < n_; }
  std::uint32_t doc() const { return doc_; }
  std::uint32_t tf() const { return tf_; }

  void next() {
    if (++idx_ < n_) decode();
  }

  // Moves to the first posting with doc >= target (or past the end).
  void advance_to(std::uint32_t target) {
    if (idx_ >= n_ || doc_ >= target) return;
    const std::uint32_t b = idx_ / kBlock;
    std::uint32_t nb = b;
    while (nb + 1 < n_skips_ && skips_[nb + 1].first_doc <= target) ++nb;
    if (nb != b) {
      idx_ = nb * kBlock;
      p_ = data_ + skips_[nb].offset;
      doc_ = skips_[nb].prev_doc;
      decode();
    }
    while (doc_ < target) {
      if (++idx_ >= n_) return;
      decode();
    }
  }

 private:
  void decode() {
    doc_ += get_varint(p_);
    tf_ = get_varint(p_);
  }

  const std::uint8_t* p_;
  const std::uint8_t* data_;
  std::uint32_t n_;
  const Skip* skips_;
  std::uint32_t n_skips_;
  std::uint32_t idx_ = 0;
  std::uint32_t doc_ = 0;
  std::uint32_t tf_ = 0;
};

// Checks untrusted list bytes: exactly `n` postings filling `bytes`, docs
// strictly increasing and below `slots`, tf >= 1. Calls on_doc(doc) for each.
template <class F>
bool validate_list(const std::string& bytes, std::uint32_t n, std::uint64_t slots, F&& on_doc) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(bytes.data());
  const auto* end = p + bytes.size();
  std::uint64_t doc = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    std::uint32_t delta, tf;
    if (!get_varint_checked(p, end, delta) || !get_varint_checked(p, end, tf)) return false;
    if ((i > 0 && delta == 0) || tf == 0) return false;
    doc += delta;
    if (doc >= slots) return false;
    on_doc(static_cast<std::uint32_t>(doc));
  }
  return p == end;
}

}  // namespace momoka::bm25
