// BM25 scoring and top-k (bm25.hpp, bm25_topk.hpp) on four tiny documents
// scored by hand, and the BM25 file (bm25_file.hpp): round trip, the trailer's
// bytes, and rejection of damaged files.
#include <algorithm>
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

// The small-N paths of top_k (bm25.hpp, bm25_topk.hpp): a term in >= 1/8 of
// the slots (and >= 256 of them) gets a dense tf row, read for each candidate
// in phase 2 and the rescoring, with tf >= 255 read from the list; when the
// documents seen in phase 1 are >= 1/16 of the slots the candidates come from
// a scan of the accumulators, and a short list left for phase 2 is tested
// posting by posting. 512 documents:
//   "rare"   in d % 8 == 0 (df 64): the phase-1 term, seen in 64 >= 512/16 slots;
//            tf 4 where d % 24 == 0, so those long documents stay candidates;
//   "common" in d % 3 != 1 (df 341 >= 512/8: a dense row), tf 1, except
//            d 24 (tf 2) and d 48 (tf 300, past the row's 255);
//   "mid"    in d % 24 == 0 (df 22: no row) with 20 "pad", so its bound is low:
//            a short list left for phase 2, tested posting by posting;
//   one filler "f<d>" in every document.
// The expected scores are the formula of the header comment evaluated here,
// term by term in query order.
namespace {

struct SmallN {
  std::vector<Tokens> docs;
  std::vector<double> len;
  double avg = 0;
  SmallN() {
    for (int d = 0; d < 512; ++d) {
      Tokens t{"f" + std::to_string(d)};
      for (int i = 0; i < (d % 24 == 0 ? 4 : d % 8 == 0 ? 1 : 0); ++i) t.push_back("rare");
      const int c = d % 3 == 1 ? 0 : d == 24 ? 2 : d == 48 ? 300 : 1;
      for (int i = 0; i < c; ++i) t.push_back("common");
      if (d % 24 == 0) {
        t.push_back("mid");
        for (int i = 0; i < 20; ++i) t.push_back("pad");
      }
      docs.push_back(t);
      len.push_back(static_cast<double>(t.size()));
      avg += static_cast<double>(t.size());
    }
    avg /= 512;
  }
  // Lucene BM25 of `query` for document d, live documents `n`, df from the token lists.
  double score(const Tokens& query, int d, const std::vector<bool>& live) const {
    double n = 0, sum_len = 0;
    for (std::size_t i = 0; i < docs.size(); ++i)
      if (live[i]) n += 1, sum_len += len[i];
    const double avgdl = sum_len / n;
    double s = 0;
    for (const auto& term : query) {
      double df = 0, tf = 0;
      for (std::size_t i = 0; i < docs.size(); ++i) {
        const auto c = std::count(docs[i].begin(), docs[i].end(), term);
        if (live[i] && c) df += 1;
        if (static_cast<int>(i) == d) tf = static_cast<double>(c);
      }
      if (tf == 0) continue;
      const double idf = std::log(1.0 + (n - df + 0.5) / (df + 0.5));
      s += idf * tf * 2.5 / (tf + 1.5 * (0.25 + 0.75 * len[d] / avgdl));
    }
    return s;
  }
};

// top_k against the formula: the k best documents holding a query term, ties by lower id.
void check_against_formula(const Index& ix, const SmallN& c, const Tokens& q, std::size_t k,
                           const std::vector<bool>& live, int line) {
  std::vector<Hit> want;
  for (int d = 0; d < 512; ++d) {
    bool has = false;
    for (const auto& t : q) has = has || std::count(c.docs[d].begin(), c.docs[d].end(), t) > 0;
    if (has && live[d]) want.push_back(Hit{static_cast<std::uint32_t>(d), c.score(q, d, live)});
  }
  std::sort(want.begin(), want.end(),
            [](const Hit& a, const Hit& b) { return a.score > b.score || (a.score == b.score && a.doc < b.doc); });
  if (want.size() > k) want.resize(k);
  const auto got = ix.top_k(q, k, nullptr, 0);
  check_hits(got, want, line);
  const auto exact = ix.scores(q);  // and bit for bit those of scores()
  for (const auto& h : got)
    if (h.score != exact[h.doc]) momoka::check::fail(__FILE__, line, "top_k score differs from scores()");
}

}  // namespace

MOMOKA_TEST(small_n_dense_rows_and_scan) {
  const SmallN c;
  Index ix(lucene());
  for (const auto& t : c.docs) ix.add(t);
  std::vector<bool> live(512, true);
  // By hand for d 0 ("f0", rare x 4, "common", "mid", 20 pads: |d| 27): tokens 512
  // fillers + 130 rare (42 x 1 + 22 x 4) + 641 common (341 docs, +1 for d 24,
  // +299 for d 48) + 22 x 21 mid and pads = 1745, avgdl = 1745 / 512;
  // idf(rare) = ln(1 + 448.5 / 64.5), idf(common) = ln(1 + 171.5 / 341.5).
  CHECK_NEAR(c.avg, 1745.0 / 512, 1e-12);
  const double k0 = 1.5 * (0.25 + 0.75 * 27 / (1745.0 / 512));
  CHECK_NEAR(ix.scores({"rare", "common"})[0],
             std::log(1 + 448.5 / 64.5) * 4 * 2.5 / (4 + k0) + std::log(1 + 171.5 / 341.5) * 2.5 / (1 + k0), 1e-12);
  for (std::size_t k : {1u, 5u, 10u, 64u, 400u}) {
    check_against_formula(ix, c, {"rare", "common"}, k, live, __LINE__);
    check_against_formula(ix, c, {"rare", "mid", "common"}, k, live, __LINE__);
    check_against_formula(ix, c, {"common", "rare", "common"}, k, live, __LINE__);  // repeats count twice
    check_against_formula(ix, c, {"common"}, k, live, __LINE__);                   // the row alone (phase 1)
  }
  // d 48 (tf 300 > 255) and d 24 (tf 2) are scored from the list and the row.
  const auto e = ix.scores({"rare", "common"});
  CHECK_NEAR(e[48], c.score({"rare", "common"}, 48, live), 1e-12);
  CHECK_NEAR(e[24], c.score({"rare", "common"}, 24, live), 1e-12);
  check_hits(ix.top_k({"common"}, 1, nullptr, 0), {{48, c.score({"common"}, 48, live)}}, __LINE__);
  // A mask over the dense path: only odd multiples of 8 may come back.
  std::vector<std::uint8_t> mask(512, 0);
  for (int d = 8; d < 512; d += 16) mask[d] = 1;
  for (const auto& h : ix.top_k({"rare", "common"}, 10, mask.data(), mask.size())) CHECK_EQ(h.doc % 16, 8u);
  // Deletions rebuild the rows from the compacted lists: deleted slots read tf 0.
  for (int d = 0; d < 512; d += 5) {
    ix.remove(static_cast<std::uint32_t>(d));
    live[d] = false;
  }
  for (std::size_t k : {1u, 10u, 64u}) {
    check_against_formula(ix, c, {"rare", "common"}, k, live, __LINE__);
    check_against_formula(ix, c, {"rare", "mid", "common"}, k, live, __LINE__);
  }
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
