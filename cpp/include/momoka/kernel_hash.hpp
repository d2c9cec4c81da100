// Small, fast 64-bit hashing used by the dedup kernels (SimHash features,
// Bloom filter keys). Not cryptographic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace momoka {

// SplitMix64 finaliser: a bijective mixer with good avalanche.
inline std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

// FNV-1a over code points (one step per code point, not per byte).
constexpr std::uint64_t kFnvOffset = 0xCBF29CE484222325ull;
constexpr std::uint64_t kFnvPrime = 0x100000001B3ull;
inline std::uint64_t fnv_step(std::uint64_t h, std::uint32_t cp) { return (h ^ cp) * kFnvPrime; }

inline std::uint64_t rotl64(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// Hash of a byte string, 8 bytes per step.
inline std::uint64_t hash_bytes(const void* data, std::size_t n, std::uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = mix64(seed ^ (static_cast<std::uint64_t>(n) * 0x9E3779B97F4A7C15ull));
  while (n >= 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    h ^= mix64(w + 0x632BE59BD9B4E019ull);
    h = rotl64(h, 29) * 0x9E3779B97F4A7C15ull + 0x85EBCA77C2B2AE63ull;
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    std::uint64_t w = 0;
    std::memcpy(&w, p, n);
    h ^= mix64(w ^ (static_cast<std::uint64_t>(n) << 56));
    h = rotl64(h, 29) * 0x9E3779B97F4A7C15ull;
  }
  return mix64(h);
}

}  // namespace momoka
