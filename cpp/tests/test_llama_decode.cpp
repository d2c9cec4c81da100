// The native decoder's matrix kernels (llama_decode.hpp) against a double-precision product of the
// matrix's own element values (Matrix::at: d * code + m, read one element at a time), for every kernel
// set this CPU has, on codes and scales from a fixed generator, at token counts that hit every tile and
// remainder; attention against a double-precision softmax; and the exp used by softmax and SwiGLU against
// std::exp.
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "check.hpp"
#include "momoka/llama_decode.hpp"

namespace {

using momoka::llm::Codes;
using momoka::llm::Matrix;
using momoka::llm::Simd;

Matrix random_matrix(Codes codes, bool offsets, int rows, int cols, std::mt19937& rng) {
  Matrix w;
  w.rows = rows;
  w.cols = cols;
  w.codes = codes;
  const int nb = rows * (cols / 32);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  std::uniform_int_distribution<int> byte(0, 255);
  w.q.resize(static_cast<std::size_t>(nb) * (codes == Codes::U4 ? 16 : 32));
  for (auto& b : w.q) b = static_cast<std::uint8_t>(byte(rng));
  for (int i = 0; i < nb; ++i) w.d.push_back(scale(rng));
  if (offsets)
    for (int i = 0; i < nb; ++i) w.m.push_back(4 * scale(rng));
  return w;
}

void check_kernels(Codes codes, bool offsets) {
  std::mt19937 rng(7);
  const int rows = 13, cols = 96;
  const Matrix w = random_matrix(codes, offsets, rows, cols, rng);
  w.check("random", rows, cols);
  std::normal_distribution<float> normal;
  for (const int n : {1, 2, 8, 9, 17, 131}) {
    std::vector<float> x(static_cast<std::size_t>(n) * cols);
    for (auto& v : x) v = normal(rng);
    for (int level = 0; level <= static_cast<int>(momoka::llm::best_simd()); ++level) {
      std::vector<float> y(static_cast<std::size_t>(n) * rows, -1.0f);
      momoka::llm::matmul(static_cast<Simd>(level), w, x.data(), n, cols, y.data(), rows, 0, rows);
      for (int t = 0; t < n; ++t)
        for (int r = 0; r < rows; ++r) {
          double ref = 0.0;
          for (int c = 0; c < cols; ++c) ref += static_cast<double>(w.at(r, c)) * x[static_cast<std::size_t>(t) * cols + c];
          CHECK_NEAR(y[static_cast<std::size_t>(t) * rows + r], ref, 1e-4 + 1e-5 * std::fabs(ref));
        }
    }
  }
}

// One query row's unnormalised attention (out: D floats, ms: highest score and sum of exponentials) against a
// double-precision softmax over cache rows 0 .. n-1 (`stride` floats apart).
void check_row(const float* q, const float* K, const float* V, int stride, int n, int D, const float* out,
               const float* ms) {
  std::vector<double> s(n);
  double mx = -INFINITY;
  for (int j = 0; j < n; ++j) {
    double dot = 0.0;
    for (int i = 0; i < D; ++i) dot += static_cast<double>(q[i]) * K[static_cast<std::size_t>(j) * stride + i];
    s[j] = dot;
    mx = std::max(mx, dot);
  }
  double sum = 0.0;
  for (int j = 0; j < n; ++j) sum += std::exp(s[j] - mx);
  CHECK_NEAR(ms[0], mx, 1e-4 * (1.0 + std::fabs(mx)));
  CHECK_NEAR(ms[1], sum, 1e-4 * sum);
  for (int i = 0; i < D; ++i) {
    double o = 0.0;
    for (int j = 0; j < n; ++j) o += std::exp(s[j] - mx) * V[static_cast<std::size_t>(j) * stride + i];
    CHECK_NEAR(out[i], o, 1e-4 * (1.0 + std::fabs(o)));
  }
}

// Attention of G heads over one key/value head against a double-precision softmax, for every kernel set:
// head sizes with vector kernels (64, 128) and one without (40), position counts around the 8- and 16-lane
// widths, a part starting past the cache's first row.
void check_attention(int D, int G, int n) {
  std::mt19937 rng(static_cast<unsigned>(D * 1000 + G * 100 + n));
  std::normal_distribution<float> normal;
  const int j0 = 3, stride = D + 16, rows = j0 + n;
  std::vector<float> q(static_cast<std::size_t>(G) * D), K(static_cast<std::size_t>(rows) * stride),
      V(static_cast<std::size_t>(rows) * stride);
  for (auto& v : q) v = 0.3f * normal(rng);
  for (auto& v : K) v = normal(rng);
  for (auto& v : V) v = normal(rng);
  for (int level = 0; level <= static_cast<int>(momoka::llm::best_simd()); ++level) {
    std::vector<float> scores(static_cast<std::size_t>(G) * n), out(static_cast<std::size_t>(G) * D), ms(2 * G);
    momoka::llm::attend_part(static_cast<Simd>(level), q.data(), G, K.data(), V.data(), j0, j0 + n, stride, D,
                             scores.data(), out.data(), ms.data());
    for (int g = 0; g < G; ++g)
      check_row(q.data() + static_cast<std::size_t>(g) * D, K.data() + static_cast<std::size_t>(j0) * stride,
                V.data() + static_cast<std::size_t>(j0) * stride, stride, n, D, out.data() + static_cast<std::size_t>(g) * D,
                ms.data() + 2 * g);
  }
}

// A prompt's attention in blocks of rows (attend_rows, where the kernels have it) against the same double
// softmax: R rows of causal lengths len0 + row / G over one key/value head, every kernel set that has it.
void check_attention_rows(int D, int G, int B, int len0) {
  std::mt19937 rng(static_cast<unsigned>(D * 7 + G * 11 + B * 13 + len0));
  std::normal_distribution<float> normal;
  const int R = B * G, L = len0 + B;
  std::vector<float> q(static_cast<std::size_t>(R) * D), K(static_cast<std::size_t>(L) * D), V(K.size());
  for (auto& v : q) v = 0.3f * normal(rng);
  for (auto& v : K) v = normal(rng);
  for (auto& v : V) v = normal(rng);
  const std::size_t lds = (static_cast<std::size_t>(L) + 15) / 16 * 16;
  for (int level = 0; level <= static_cast<int>(momoka::llm::best_simd()); ++level) {
    std::vector<float> S(R * lds, 123.0f), kt(16 * static_cast<std::size_t>(D)), out(static_cast<std::size_t>(R) * D),
        ms(2 * static_cast<std::size_t>(R));
    std::vector<const float*> qs(R);
    std::vector<float*> outs(R), mss(R);
    std::vector<int> lens(R);
    for (int r = 0; r < R; ++r) {
      qs[r] = q.data() + static_cast<std::size_t>(r) * D;
      outs[r] = out.data() + static_cast<std::size_t>(r) * D;
      mss[r] = ms.data() + 2 * r;
      lens[r] = len0 + r / G + 1;
    }
    if (!momoka::llm::attend_rows(static_cast<Simd>(level), qs.data(), lens.data(), R, K.data(), V.data(), D, S.data(),
                                  lds, kt.data(), outs.data(), mss.data()))
      continue;
    for (int r = 0; r < R; ++r)
      check_row(qs[r], K.data(), V.data(), D, lens[r], D, outs[r], mss[r]);
  }
}

}  // namespace

MOMOKA_TEST(attention_rows_against_double_softmax) {
  for (const int D : {40, 64, 128})
    for (const int G : {1, 3})
      for (const int B : {1, 5, 8})
        for (const int len0 : {0, 9, 16, 37}) check_attention_rows(D, G, B, len0);
}

MOMOKA_TEST(attention_against_double_softmax) {
  for (const int D : {40, 64, 128})
    for (const int G : {1, 3, 5})
      for (const int n : {1, 7, 8, 17, 33}) check_attention(D, G, n);
}

MOMOKA_TEST(four_bit_codes_with_offsets) { check_kernels(Codes::U4, true); }
MOMOKA_TEST(four_bit_codes_without_offsets) { check_kernels(Codes::U4, false); }
MOMOKA_TEST(eight_bit_codes) { check_kernels(Codes::I8, false); }
MOMOKA_TEST(eight_bit_codes_with_offsets) { check_kernels(Codes::I8, true); }

MOMOKA_TEST(element_values_by_hand) {
  Matrix w;
  w.rows = 1;
  w.cols = 32;
  w.codes = Codes::U4;
  w.q.assign(16, 0);
  w.q[0] = 0x3A;  // code 0 is 10, code 16 is 3
  w.d = {0.5f};
  w.m = {-1.0f};
  CHECK_NEAR(w.at(0, 0), 4.0, 0.0);
  CHECK_NEAR(w.at(0, 16), 0.5, 0.0);
  CHECK_NEAR(w.at(0, 1), -1.0, 0.0);
}

MOMOKA_TEST(exp_against_std) {
  for (float x = -80.0f; x < 80.0f; x += 0.37f)
    CHECK_NEAR(momoka::llm::detail::exp_f32(x) / std::exp(static_cast<double>(x)), 1.0, 1e-6);
}

MOMOKA_TEST(bad_shapes_are_refused) {
  Matrix w;
  w.rows = 2;
  w.cols = 40;
  CHECK_THROWS(w.check("m", 2, 40), std::invalid_argument, "not a multiple of 32");
  w.cols = 32;
  w.codes = Codes::U4;
  w.q.assign(16, 0);
  w.d = {1.0f};
  CHECK_THROWS(w.check("m", 2, 32), std::invalid_argument, "wrong code or scale count");
  CHECK_THROWS(w.check("m", 3, 32), std::invalid_argument, "expected 3x32");
}
