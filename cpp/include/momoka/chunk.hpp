// Chunking kernels: whitespace-delimited word starts, whitespace trimming of
// many cut positions at once, and separator search. Offsets are indices into
// the code-unit array given (Python str offsets when fed a PEP 393 buffer).
// Whitespace is exactly Python's str.isspace().
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace momoka::chunk {

// Python's str.isspace() (Py_UNICODE_ISSPACE): no code point above U+3000.
inline bool is_space(std::uint32_t c) {
  if (c < 128) return (c >= 9 && c <= 13) || (c >= 28 && c <= 32);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Start offsets of the maximal runs of non-whitespace characters.
template <class CharT>
std::vector<std::int64_t> word_starts(const CharT* s, std::size_t n) {
  std::vector<std::int64_t> out;
  out.reserve(n / 6 + 16);
  bool prev_space = true;
  for (std::size_t i = 0; i < n; ++i) {
    const bool sp = is_space(static_cast<std::uint32_t>(s[i]));
    if (!sp && prev_space) out.push_back(static_cast<std::int64_t>(i));
    prev_space = sp;
  }
  return out;
}

// For each cut position b (clamped to [0, n]): lo = first offset >= b holding
// non-whitespace (n if none), hi = one past the last non-whitespace offset
// before b (0 if none).
template <class CharT>
void trim_bounds(const CharT* s, std::size_t n, const std::int64_t* cuts, std::size_t m, std::int64_t* lo,
                 std::int64_t* hi) {
  const auto N = static_cast<std::int64_t>(n);
  for (std::size_t k = 0; k < m; ++k) {
    std::int64_t b = cuts[k] < 0 ? 0 : (cuts[k] > N ? N : cuts[k]);
    std::int64_t a = b;
    while (a < N && is_space(static_cast<std::uint32_t>(s[a]))) ++a;
    lo[k] = a;
    std::int64_t e = b;
    while (e > 0 && is_space(static_cast<std::uint32_t>(s[e - 1]))) --e;
    hi[k] = e;
  }
}

// Offsets in [lo, hi) where sep (length L >= 1) occurs entirely inside
// [lo, hi); overlapping occurrences are all reported.
template <class CharT>
std::vector<std::int64_t> find_all(const CharT* s, std::size_t lo, std::size_t hi, const std::uint32_t* sep,
                                   std::size_t L) {
  std::vector<std::int64_t> out;
  if (L == 0 || hi < lo + L) return out;
  const std::uint32_t first = sep[0];
  for (std::size_t i = lo; i + L <= hi; ++i) {
    if (static_cast<std::uint32_t>(s[i]) != first) continue;
    std::size_t j = 1;
    while (j < L && static_cast<std::uint32_t>(s[i + j]) == sep[j]) ++j;
    if (j == L) out.push_back(static_cast<std::int64_t>(i));
  }
  return out;
}

}  // namespace momoka::chunk
