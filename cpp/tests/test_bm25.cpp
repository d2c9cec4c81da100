// BM25 scoring and top-k (bm25.hpp, bm25_topk.hpp) on four tiny documents
// scored by hand, and the BM25 file (bm25_file.hpp): round trip, the trailer's
// bytes, and rejection of damaged files.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "check.hpp"
#include "momoka/bm25_file.hpp"

namespace {

using momoka::bm25::Hit;
using momoka::bm25::Idf;
using momoka::bm25::Index;
using momoka::bm25::Params;
using Tokens = std::vector<std::string>;

// d0 "apple banana"         |d| = 2
// d1 "apple cherry cherry"  |d| = 3
// d2 "banana cherry"        |d| = 2
// d3 "date"                 |d| = 1
// N = 4, avgdl = 8 / 4 = 2; df: apple 2, banana 2, cherry 2, date 1.
void add_docs(Index& ix) {
  ix.add({"apple", "banana"});
  ix.add({"apple", "cherry", "cherry"});
  ix.add({"banana", "cherry"});
  ix.add({"date"});
}

// k1 = 1.5, b = 0.75: K(d) = k1 (1 - b + b |d| / avgdl)
//   K(d0) = K(d2) = 1.5 (0.25 + 0.75) = 1.5;  K(d1) = 1.5 (0.25 + 1.125) = 2.0625;
//   K(d3) = 1.5 (0.25 + 0.375) = 0.9375.
// tf part = tf (k1 + 1) / (tf + K):
//   tf 1 in d0/d2: 2.5 / 2.5 = 1;  tf 1 in d1: 2.5 / 3.0625;  tf 2 in d1: 5 / 4.0625;  tf 1 in d3: 2.5 / 1.9375.
// Lucene idf = ln(1 + (N - df + 0.5) / (df + 0.5)): df 2 -> ln 2;  df 1 -> ln(1 + 3.5 / 1.5) = ln(10/3).
const double kLn2 = std::log(2.0);
const double kApple1 = kLn2 * 2.5 / 3.0625;  // apple in d1     = 0.565834...
const double kCherry1 = kLn2 * 5.0 / 4.0625;  // cherry x2 in d1 = 0.853104...

Params lucene() {
  Params p;
  p.idf = Idf::kLucene;
  return p;
}

void check_hits(const std::vector<Hit>& got, const std::vector<Hit>& want, int line) {
  bool ok = got.size() == want.size();
  for (std::size_t i = 0; ok && i < got.size(); ++i)
    ok = got[i].doc == want[i].doc && std::fabs(got[i].score - want[i].score) <= 1e-12;
  if (!ok) {
    std::string s;
    for (const auto& h : got) s += " (" + std::to_string(h.doc) + ", " + std::to_string(h.score) + ")";
    momoka::check::fail(__FILE__, line, "hits differ, got" + s);
  }
}

}  // namespace

MOMOKA_TEST(scores_by_hand_lucene) {
  Index ix(lucene());
  add_docs(ix);
  CHECK_NEAR(ix.avgdl(), 2.0, 0.0);
  const auto s = ix.scores({"apple", "banana"});
  CHECK_EQ(s.size(), 4u);
  CHECK_NEAR(s[0], 2 * kLn2, 1e-12);  // ln2 * 1 + ln2 * 1
  CHECK_NEAR(s[1], kApple1, 1e-12);
  CHECK_NEAR(s[2], kLn2, 1e-12);  // banana, tf part 1
  CHECK_NEAR(s[3], 0.0, 0.0);     // no query term
  const auto c = ix.scores({"cherry"});
  CHECK_NEAR(c[1], kCherry1, 1e-12);
  CHECK_NEAR(c[2], kLn2, 1e-12);
  // A repeated query token counts twice: 2 x idf(date) x tf part in d3.
  const auto d = ix.scores({"date", "date"});
  CHECK_NEAR(d[3], 2 * std::log(10.0 / 3.0) * 2.5 / 1.9375, 1e-12);
}

MOMOKA_TEST(okapi_idf_by_hand) {
  Index ix;  // okapi: idf = ln(N - df + 0.5) - ln(df + 0.5)
  add_docs(ix);
  // date: df 1 -> ln 3.5 - ln 1.5 = ln(7/3); tf part in d3 2.5 / 1.9375.
  CHECK_NEAR(ix.scores({"date"})[3], std::log(7.0 / 3.0) * 2.5 / 1.9375, 1e-12);
  // apple: df 2 -> ln 2.5 - ln 2.5 = 0 (not negative, so no epsilon floor).
  CHECK_NEAR(ix.scores({"apple"})[0], 0.0, 1e-15);
  // A weight-0 term still makes its documents hits (scored exhaustively): d0 and d1 at 0.
  check_hits(ix.top_k({"apple"}, 5, nullptr, 0), {{0, 0.0}, {1, 0.0}}, __LINE__);
}

MOMOKA_TEST(top_k_order_ties_and_k_beyond_n) {
  Index ix(lucene());
  add_docs(ix);
  // apple banana: d0 2 ln2 = 1.386 > d2 ln2 = 0.693 > d1 0.566; d3 holds no query term.
  check_hits(ix.top_k({"apple", "banana"}, 10, nullptr, 0), {{0, 2 * kLn2}, {2, kLn2}, {1, kApple1}}, __LINE__);
  check_hits(ix.top_k({"apple", "banana"}, 2, nullptr, 0), {{0, 2 * kLn2}, {2, kLn2}}, __LINE__);
  // banana: d0 and d2 tie at ln 2 (same length, tf 1): the lower slot first.
  check_hits(ix.top_k({"banana"}, 5, nullptr, 0), {{0, kLn2}, {2, kLn2}}, __LINE__);
  check_hits(ix.top_k({"banana"}, 1, nullptr, 0), {{0, kLn2}}, __LINE__);
  // apple banana cherry: d1 0.566 + 0.853 = 1.419 beats the tie d0 = d2 = 2 ln 2 = 1.386.
  check_hits(ix.top_k({"apple", "banana", "cherry"}, 1, nullptr, 0), {{1, kApple1 + kCherry1}}, __LINE__);
  check_hits(ix.top_k({"apple", "banana", "cherry"}, 3, nullptr, 0),
             {{1, kApple1 + kCherry1}, {0, 2 * kLn2}, {2, 2 * kLn2}}, __LINE__);
  CHECK(ix.top_k({"apple"}, 0, nullptr, 0).empty());
  CHECK(ix.top_k({"unknown"}, 3, nullptr, 0).empty());
  // A mask of one byte per slot excludes d0 and d1.
  const std::uint8_t mask[] = {0, 0, 1, 1};
  check_hits(ix.top_k({"apple", "banana", "cherry"}, 3, mask, 4), {{2, 2 * kLn2}}, __LINE__);
}

MOMOKA_TEST(top_k_batch_equals_single_queries) {
  Index ix(lucene());
  add_docs(ix);
  const std::vector<Tokens> qs = {{"cherry"}, {"date"}, {"apple", "banana"}};
  const auto res = ix.top_k_batch(qs, 2, nullptr, 0, 2);
  CHECK_EQ(res.size(), 3u);
  check_hits(res[0], {{1, kCherry1}, {2, kLn2}}, __LINE__);
  check_hits(res[1], {{3, std::log(10.0 / 3.0) * 2.5 / 1.9375}}, __LINE__);
  check_hits(res[2], {{0, 2 * kLn2}, {2, kLn2}}, __LINE__);
}

MOMOKA_TEST(file_round_trip) {
  momoka::tok::Options opt;
  opt.stem = true;
  opt.stopwords = {"the", "a"};
  momoka::bm25::TextIndex ti(lucene(), opt);
  add_docs(*ti.ix);
  ti.ix->remove(3);
  const std::string bytes = ti.serialize();

  // The trailer after the index bytes: "MMKTOK\0\0", lowercase 1, stem 1, u32 2 stopwords
  // sorted ("a", "the"), each as u32 length + bytes, then u64 offset of the trailer:
  // 8 + 2 + 4 + (4 + 1) + (4 + 3) + 8 = 34 bytes.
  const std::string index_bytes = ti.ix->serialize();
  CHECK_EQ(bytes.size(), index_bytes.size() + 34);
  CHECK(bytes.compare(0, index_bytes.size(), index_bytes) == 0);
  std::string trailer;
  trailer.append("MMKTOK\0\0", 8);
  trailer.append("\x01\x01", 2);
  trailer.append("\x02\0\0\0", 4);
  trailer.append("\x01\0\0\0" "a", 5);
  trailer.append("\x03\0\0\0" "the", 7);
  std::uint64_t off = index_bytes.size();
  trailer.append(reinterpret_cast<const char*>(&off), 8);  // little-endian host (the format's byte order)
  CHECK(bytes.compare(index_bytes.size(), std::string::npos, trailer) == 0);

  const auto back = momoka::bm25::TextIndex::deserialize(bytes.data(), bytes.size());
  CHECK(back.opt.lowercase);
  CHECK(back.opt.stem);
  CHECK(back.opt.stopwords == opt.stopwords);
  CHECK(back.ix->params().idf == Idf::kLucene);
  CHECK_EQ(back.ix->n_slots(), 4u);
  CHECK_EQ(back.ix->n_docs(), 3u);
  CHECK(!back.ix->alive(3));
  for (const Tokens& q : std::vector<Tokens>{{"apple", "banana"}, {"cherry"}, {"date"}}) {
    const auto a = ti.ix->scores(q), b = back.ix->scores(q);
    CHECK(a == b);  // bit for bit
  }
  CHECK(back.serialize() == bytes);

  // Through a file.
  const std::string path = "test_bm25_round_trip.tmp";
  ti.save(path);
  const auto loaded = momoka::bm25::TextIndex::load(path);
  std::remove(path.c_str());
  CHECK(loaded.serialize() == bytes);
  CHECK_THROWS(momoka::bm25::TextIndex::load("no/such/dir/x.bm25"), std::runtime_error, "cannot open");
}

MOMOKA_TEST(damaged_files_are_rejected) {
  momoka::bm25::TextIndex ti;
  add_docs(*ti.ix);
  const std::string bytes = ti.serialize();
  CHECK_THROWS(momoka::bm25::TextIndex::deserialize(bytes.data(), 10), std::runtime_error, "too short");
  // Dropping the last byte moves the offset field: no trailer where it points.
  CHECK_THROWS(momoka::bm25::TextIndex::deserialize(bytes.data(), bytes.size() - 1), std::runtime_error,
               "not a momoka BM25 index");
  std::string bad = bytes;
  bad[0] = 'X';  // the index magic
  CHECK_THROWS(momoka::bm25::TextIndex::deserialize(bad.data(), bad.size()), std::runtime_error,
               "not a momoka BM25 index");
  // Settings must match to append.
  momoka::tok::Options stemmed;
  stemmed.stem = true;
  momoka::bm25::TextIndex other(Params(), stemmed);
  CHECK_THROWS(ti.append(other), std::invalid_argument, "different tokeniser settings");
}
