// GGUF K-quant matrices on the native decoder (llama_kquant.hpp): the re-laid superblocks hold the GGUF's
// values (against a decoder of the GGUF block layout written here from ggml's dequantize_row_q4_K / _q6_K),
// and every kernel set's product with 8-bit activations equals a double-precision product of those values
// with the dequantised activations (quantised here as ggml's quantize_row_q8_K does).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "check.hpp"
#include "momoka/llama_decode.hpp"

namespace {

using momoka::llm::Codes;
using momoka::llm::Matrix;
namespace kq = momoka::llm::kq;

void put_half(std::uint8_t* p, float v) {  // a float32 with at most 11 significant bits, as IEEE half
  std::uint32_t b;
  std::memcpy(&b, &v, 4);
  const std::uint32_t sign = (b >> 16) & 0x8000;
  const int exp = static_cast<int>((b >> 23) & 0xFF) - 127 + 15;
  const std::uint16_t h = static_cast<std::uint16_t>(sign | (exp << 10) | ((b >> 13) & 0x3FF));
  std::memcpy(p, &h, 2);
}

// One superblock of 256 values from its GGUF bytes, written from ggml's dequantize_row_q4_K / _q6_K.
void gguf_values(Codes codes, const std::uint8_t* b, float* y) {
  if (codes == Codes::Q4K) {
    const float d = kq::half_to_float(static_cast<std::uint16_t>(b[0] | (b[1] << 8)));
    const float dmin = kq::half_to_float(static_cast<std::uint16_t>(b[2] | (b[3] << 8)));
    const std::uint8_t* sc = b + 4;
    const std::uint8_t* q = b + 16;
    auto get = [&](int j, std::uint8_t& s, std::uint8_t& m) {
      if (j < 4) {
        s = sc[j] & 63;
        m = sc[j + 4] & 63;
      } else {
        s = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
        m = (sc[j + 4] >> 4) | ((sc[j - 0] >> 6) << 4);
      }
    };
    int is = 0;
    for (int j = 0; j < 256; j += 64) {
      std::uint8_t s, m;
      get(is + 0, s, m);
      const float d1 = d * s, m1 = dmin * m;
      get(is + 1, s, m);
      const float d2 = d * s, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
      q += 32;
      is += 2;
    }
  } else {
    const float d = kq::half_to_float(static_cast<std::uint16_t>(b[208] | (b[209] << 8)));
    const std::uint8_t* ql = b;
    const std::uint8_t* qh = b + 128;
    const std::int8_t* sc = reinterpret_cast<const std::int8_t*>(b + 192);
    for (int n = 0; n < 256; n += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = static_cast<std::int8_t>((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = static_cast<std::int8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = static_cast<std::int8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = static_cast<std::int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

void check_kquant(Codes codes) {
  std::mt19937 rng(codes == Codes::Q4K ? 11 : 12);
  const int rows = 11, cols = 768, nsb = cols / 256;
  const int bytes = codes == Codes::Q4K ? 144 : 210;
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<std::uint8_t> raw(static_cast<std::size_t>(rows) * nsb * bytes);
  for (auto& v : raw) v = static_cast<std::uint8_t>(byte(rng));
  std::uniform_real_distribution<float> scale(0.5f, 1.0f);
  for (int b = 0; b < rows * nsb; ++b) {  // normal half scales
    std::uint8_t* p = raw.data() + static_cast<std::size_t>(b) * bytes;
    if (codes == Codes::Q4K) {
      put_half(p, std::ldexp(std::round(scale(rng) * 1024) / 1024, -10));
      put_half(p + 2, std::ldexp(std::round(scale(rng) * 1024) / 1024, -9));
    } else {
      put_half(p + 208, std::ldexp(std::round(scale(rng) * 1024) / 1024, -12));
    }
  }
  const Matrix w = Matrix::from_gguf(codes, raw.data(), rows, cols);
  w.check("kquant", rows, cols);
  std::vector<float> ref(static_cast<std::size_t>(rows) * cols);
  for (int b = 0; b < rows * nsb; ++b) gguf_values(codes, raw.data() + static_cast<std::size_t>(b) * bytes, ref.data() + b * 256);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) CHECK_EQ(w.at(r, c), ref[static_cast<std::size_t>(r) * cols + c]);

  std::normal_distribution<float> normal;
  for (const int n : {1, 2, 4, 5, 67}) {
    std::vector<float> x(static_cast<std::size_t>(n) * cols), xd(x.size());
    for (auto& v : x) v = normal(rng);
    for (int t = 0; t < n; ++t)  // ggml's quantize_row_q8_K, dequantised
      for (int b = 0; b < nsb; ++b) {
        const float* xb = x.data() + static_cast<std::size_t>(t) * cols + b * 256;
        float amax = 0, mx = 0;
        for (int j = 0; j < 256; ++j)
          if (std::fabs(xb[j]) > amax) amax = std::fabs(xb[j]), mx = xb[j];
        const float iscale = -127.0f / mx;
        for (int j = 0; j < 256; ++j)
          xd[static_cast<std::size_t>(t) * cols + b * 256 + j] =
              std::min(127.0f, std::nearbyint(iscale * xb[j])) * (1.0f / iscale);
      }
    for (int level = 0; level <= kq::best_level(); ++level) {
      kq::Acts A;
      A.resize(n, cols);
      kq::quantize(level, x.data(), n, cols, cols, A, 0, n);
      std::vector<float> y(static_cast<std::size_t>(n) * rows, -1.0f);
      kq::matmul(level, w.view(), nullptr, A, y.data(), rows, 0, rows);
      for (int t = 0; t < n; ++t)
        for (int r = 0; r < rows; ++r) {
          double want = 0.0, mag = 0.0;
          for (int c = 0; c < cols; ++c) {
            const double p = static_cast<double>(ref[static_cast<std::size_t>(r) * cols + c]) * xd[static_cast<std::size_t>(t) * cols + c];
            want += p;
            mag += std::fabs(p);
          }
          CHECK_NEAR(y[static_cast<std::size_t>(t) * rows + r], want, 2e-6 * mag + 1e-6);
        }
    }
  }
}

}  // namespace

MOMOKA_TEST(q4k_relay_and_kernels) { check_kquant(Codes::Q4K); }
MOMOKA_TEST(q6k_relay_and_kernels) { check_kquant(Codes::Q6K); }
