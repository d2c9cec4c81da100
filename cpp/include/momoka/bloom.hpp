// Bloom filter with k probes derived from one 64-bit key hash by enhanced
// double hashing (Dillinger & Manolios 2004), sized from a capacity and a
// target false-positive rate: m = -n ln p / (ln 2)^2 bits, k = round(m/n ln 2).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "momoka/kernel_hash.hpp"

namespace momoka {

class BloomFilter {
 public:
  BloomFilter(std::uint64_t capacity, double fp_rate) : capacity_(capacity), fp_rate_(fp_rate) {
    const double ln2 = std::log(2.0);
    double m = std::ceil(-static_cast<double>(capacity) * std::log(fp_rate) / (ln2 * ln2));
    if (m < 64) m = 64;
    bits_ = static_cast<std::uint64_t>(m);
    k_ = static_cast<std::uint32_t>(std::lround(m / static_cast<double>(capacity) * ln2));
    if (k_ < 1) k_ = 1;
    if (k_ > 64) k_ = 64;
    words_.assign((bits_ + 63) / 64, 0);
  }

  std::uint64_t bits() const { return bits_; }
  std::uint32_t hashes() const { return k_; }
  std::uint64_t capacity() const { return capacity_; }
  double fp_rate() const { return fp_rate_; }
  std::uint64_t count() const { return count_; }

  // Adds a key given its 64-bit hash; returns true when some bit was new
  // (the key was certainly not present before).
  bool add_hash(std::uint64_t h) {
    std::uint64_t x = h, y = mix64(h ^ 0x5851F42D4C957F2Dull) | 1;
    bool fresh = false;
    for (std::uint32_t i = 0; i < k_; ++i) {
      const std::uint64_t bit = reduce(x);
      std::uint64_t& w = words_[bit >> 6];
      const std::uint64_t mask = std::uint64_t{1} << (bit & 63);
      if (!(w & mask)) {
        w |= mask;
        fresh = true;
      }
      x += y;
      y += i;
    }
    if (fresh) ++count_;
    return fresh;
  }
  bool contains_hash(std::uint64_t h) const {
    std::uint64_t x = h, y = mix64(h ^ 0x5851F42D4C957F2Dull) | 1;
    for (std::uint32_t i = 0; i < k_; ++i) {
      const std::uint64_t bit = reduce(x);
      if (!(words_[bit >> 6] & (std::uint64_t{1} << (bit & 63)))) return false;
      x += y;
      y += i;
    }
    return true;
  }

  // Serialisation: magic, version, k, bits, capacity, fp rate, count, words
  // (little-endian).
  std::string to_bytes() const {
    std::string out;
    out.append(kMagic, 8);
    put(out, std::uint32_t{kVersion});
    put(out, k_);
    put(out, bits_);
    put(out, capacity_);
    put(out, fp_rate_);
    put(out, count_);
    out.append(reinterpret_cast<const char*>(words_.data()), words_.size() * 8);
    return out;
  }
  static BloomFilter from_bytes(const char* p, std::size_t n) {
    constexpr std::size_t header = 8 + 4 + 4 + 8 + 8 + 8 + 8;
    if (n < header || std::memcmp(p, kMagic, 8) != 0)
      throw std::invalid_argument("not a serialised momoka BloomFilter (bad magic or too short)");
    std::size_t o = 8;
    const auto version = get<std::uint32_t>(p, o);
    if (version != kVersion)
      throw std::invalid_argument("unsupported BloomFilter format version " + std::to_string(version));
    BloomFilter f;
    f.k_ = get<std::uint32_t>(p, o);
    f.bits_ = get<std::uint64_t>(p, o);
    f.capacity_ = get<std::uint64_t>(p, o);
    f.fp_rate_ = get<double>(p, o);
    f.count_ = get<std::uint64_t>(p, o);
    const std::size_t words = (f.bits_ + 63) / 64;
    if (f.k_ < 1 || f.k_ > 64 || f.bits_ < 64 || n - header != words * 8)
      throw std::invalid_argument("corrupted BloomFilter bytes (inconsistent header or size)");
    f.words_.resize(words);
    std::memcpy(f.words_.data(), p + header, words * 8);
    return f;
  }

 private:
  BloomFilter() = default;
  static constexpr char kMagic[9] = "MMKBLOOM";
  static constexpr std::uint32_t kVersion = 1;
  std::uint64_t reduce(std::uint64_t x) const {
    return static_cast<std::uint64_t>((static_cast<unsigned __int128>(mix64(x)) * bits_) >> 64);
  }
  template <class V>
  static void put(std::string& out, V v) {
    out.append(reinterpret_cast<const char*>(&v), sizeof(V));
  }
  template <class V>
  static V get(const char* p, std::size_t& o) {
    V v;
    std::memcpy(&v, p + o, sizeof(V));
    o += sizeof(V);
    return v;
  }
  std::uint64_t capacity_ = 0;
  double fp_rate_ = 0;
  std::uint64_t bits_ = 0;
  std::uint32_t k_ = 1;
  std::uint64_t count_ = 0;
  std::vector<std::uint64_t> words_;
};

}  // namespace momoka
