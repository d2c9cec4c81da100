// Levenshtein distance (edit_distance.hpp) on classic pairs, code points of
// different storage widths, the bounded variant, and against a textbook
// Wagner-Fischer table on random strings (the reference is written here, not
// taken from the header).
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "check.hpp"
#include "momoka/edit_distance.hpp"

namespace {

std::size_t lev(const std::string& a, const std::string& b, bool bounded = false, std::size_t k = 0) {
  return momoka::levenshtein(reinterpret_cast<const std::uint8_t*>(a.data()), a.size(),
                             reinterpret_cast<const std::uint8_t*>(b.data()), b.size(), bounded, k);
}

// Wagner & Fischer (1974): d[i][j] = min(d[i-1][j] + 1, d[i][j-1] + 1, d[i-1][j-1] + (a[i-1] != b[j-1])).
std::size_t reference(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j)
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1] ? 1u : 0u)});
  return d[a.size()][b.size()];
}

}  // namespace

MOMOKA_TEST(classic_pairs) {
  // kitten -> sitten (k/s) -> sittin (e/i) -> sitting (+g)
  CHECK_EQ(lev("kitten", "sitting"), 3u);
  CHECK_EQ(lev("sitting", "kitten"), 3u);
  // flaw -> law (-f) -> lawn (+n)
  CHECK_EQ(lev("flaw", "lawn"), 2u);
  // saturday -> sturday (-a) -> surday (-t) -> sunday (r/n)
  CHECK_EQ(lev("saturday", "sunday"), 3u);
  CHECK_EQ(lev("same", "same"), 0u);
  CHECK_EQ(lev("abc", "xyz"), 3u);
}

MOMOKA_TEST(empty_strings) {
  CHECK_EQ(lev("", ""), 0u);
  CHECK_EQ(lev("", "abc"), 3u);  // three insertions
  CHECK_EQ(lev("abcd", ""), 4u);  // four deletions
}

MOMOKA_TEST(code_points_of_mixed_widths) {
  // "naïve" vs "naive": one substitution (U+00EF for 'i'), whatever the unit width.
  const std::uint8_t a8[] = {'n', 'a', 0xEF, 'v', 'e'};
  const std::uint32_t b32[] = {'n', 'a', 'i', 'v', 'e'};
  CHECK_EQ(momoka::levenshtein(a8, 5, b32, 5), 1u);
  // 日本語 vs 日本人: the last code point differs (U+8A9E vs U+4EBA), in UCS-2 and UCS-4 storage.
  const std::uint16_t c16[] = {0x65E5, 0x672C, 0x8A9E};
  const std::uint32_t d32[] = {0x65E5, 0x672C, 0x4EBA};
  CHECK_EQ(momoka::levenshtein(c16, 3, d32, 3), 1u);
  // An astral code point (U+1F600) counts as one: "a😀b" vs "ab" is one deletion.
  const std::uint32_t e32[] = {'a', 0x1F600, 'b'};
  const std::uint8_t f8[] = {'a', 'b'};
  CHECK_EQ(momoka::levenshtein(e32, 3, f8, 2), 1u);
  // Code points that agree in their low byte are still different: U+0161 vs U+0061.
  const std::uint16_t g16[] = {0x0161};
  const std::uint8_t h8[] = {0x61};
  CHECK_EQ(momoka::levenshtein(g16, 1, h8, 1), 1u);
}

MOMOKA_TEST(bounded_returns_k_plus_one_beyond_k) {
  // d(kitten, sitting) = 3: a bound below it reports k + 1, a bound at or above it the distance.
  CHECK_EQ(lev("kitten", "sitting", true, 1), 2u);
  CHECK_EQ(lev("kitten", "sitting", true, 2), 3u);
  CHECK_EQ(lev("kitten", "sitting", true, 3), 3u);
  CHECK_EQ(lev("kitten", "sitting", true, 10), 3u);
  // Lengths 10 and 2 differ by 8 > k = 3: at least 8 deletions, so k + 1.
  CHECK_EQ(lev("abcdefghij", "ab", true, 3), 4u);
}

MOMOKA_TEST(longer_than_one_machine_word) {
  // 100 'a's against the same with 'b' at positions 10 and 80: after the common
  // prefix (10) and suffix (19) are stripped, 71 units remain on each side (more
  // than 64 rows: two bit-vector blocks). b has two 'b's that a lacks, so at least
  // 2 edits; two substitutions do it.
  std::string a(100, 'a'), b = a;
  b[10] = 'b';
  b[80] = 'b';
  CHECK_EQ(lev(a, b), 2u);
  CHECK_EQ(lev(a, b, true, 1), 2u);
  CHECK_EQ(lev(a, b, true, 5), 2u);
}

MOMOKA_TEST(matches_wagner_fischer_on_random_strings) {
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> len(0, 150), ch(0, 3), kd(0, 40);
  for (int it = 0; it < 300; ++it) {
    std::string a, b;
    for (int i = len(rng); i > 0; --i) a.push_back(static_cast<char>('a' + ch(rng)));
    for (int i = len(rng); i > 0; --i) b.push_back(static_cast<char>('a' + ch(rng)));
    const std::size_t want = reference(a, b);
    CHECK_EQ(lev(a, b), want);
    const std::size_t k = static_cast<std::size_t>(kd(rng));
    CHECK_EQ(lev(a, b, true, k), std::min(want, k + 1));
  }
}
