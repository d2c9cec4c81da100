// A Llama-architecture decoder for one sequence on the CPU, over block-quantised
// weights kept as they come (4-bit or 8-bit codes with one scale and offset per
// block of 32): what generation needs, a prompt run once (`forward` over many
// tokens, its logits after the last) and then one token at a time, with a
// key/value cache that grows in place (no copy of the cache per token).
//
// Arithmetic: every weight is its exact value d * q + m in float32 and every
// activation stays float32 (no 8-bit activations), so the logits are those of
// the quantised model up to float32 summation order. Matrix products run
// rows-parallel over `threads` threads with hand-written AVX-512 and AVX2
// kernels chosen at run time (`Simd`), else plain loops; the model is a
// pre-norm Llama: RMSNorm, rotary embeddings in rotate-half order (queries and
// keys as Hugging Face lays them out), grouped-query attention, SwiGLU.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include "momoka/kernel_parallel.hpp"
#include "momoka/llama_kquant.hpp"

#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#define MOMOKA_LLM_X86 1
#include <immintrin.h>
#else
#define MOMOKA_LLM_X86 0
#endif

namespace momoka::llm {

constexpr int kBlock = 32;  // values per quantisation block

// How a matrix's codes are stored: U4 packs 32 codes of 0..15 into 16 bytes
// (byte j: code j in its low nibble, code j + 16 in its high one, as GGUF's
// Q4_0/Q4_1 do); I8 keeps one signed byte per code; I8H too, with a scale per
// half block of 16 (GGUF's Q6_K: d * sc per sub-block of 16, exact in float32);
// F32 holds plain values. Q4K and Q6K keep GGUF K-quant superblocks of 256 values (llama_kquant.hpp),
// multiplied with 8-bit activations.
enum class Codes { U4, I8, F32, I8H, Q4K, Q6K };

// Kernels available on this CPU, best first.
enum class Simd { Scalar = 0, Avx2 = 1, Avx512 = 2 };

inline Simd best_simd() {
#if MOMOKA_LLM_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    return Simd::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
    return Simd::Avx2;
#endif
  return Simd::Scalar;
}

inline const char* simd_name(Simd s) {
  return s == Simd::Avx512 ? "avx512" : s == Simd::Avx2 ? "avx2" : "scalar";
}

// A rows x cols matrix (cols a multiple of kBlock): value(r, c) =
// d[r * nb + c / 32] * code(r, c) + m[r * nb + c / 32] (m empty: 0), or f[r * cols + c] for F32;
// for I8H the scale is d[2 * (r * nb + c / 32) + (c % 32) / 16].
struct Matrix {
  int rows = 0, cols = 0;
  Codes codes = Codes::F32;
  std::vector<std::uint8_t> q;
  std::vector<float> d, m, f;
  std::vector<float> bias;  // rows values, or empty
  std::vector<std::uint8_t> s;  // Q4K: sc[8], m[8] per superblock; Q6K: 16 int8 scales

  int blocks() const { return cols / kBlock; }
  bool kquant() const { return codes == Codes::Q4K || codes == Codes::Q6K; }
  int superblocks() const { return cols / kq::kSuper; }
  kq::View view() const {
    return {codes == Codes::Q4K ? kq::Kind::Q4K : kq::Kind::Q6K, q.data(), d.data(), s.data(), superblocks()};
  }

  // A matrix of GGUF Q4_K or Q6_K rows as the file stores them (rows x cols / 256 superblocks), re-laid.
  static Matrix from_gguf(Codes codes, const std::uint8_t* raw, int rows, int cols, int threads = 2) {
    if (codes != Codes::Q4K && codes != Codes::Q6K) throw std::invalid_argument("from_gguf reads Q4_K or Q6_K");
    if (rows <= 0 || cols <= 0 || cols % kq::kSuper)
      throw std::invalid_argument("K-quant rows must be whole superblocks of 256 values");
    Matrix w;
    w.rows = rows;
    w.cols = cols;
    w.codes = codes;
    const bool q4 = codes == Codes::Q4K;
    const std::size_t nsb = static_cast<std::size_t>(rows) * (cols / kq::kSuper);
    const std::size_t src = q4 ? kq::kGgufQ4Bytes : kq::kGgufQ6Bytes, dst = q4 ? kq::kQ4Bytes : kq::kQ6Bytes;
    const std::size_t nd = q4 ? 2 : 1;
    w.q.resize(nsb * dst);
    w.d.resize(nsb * nd);
    w.s.resize(nsb * 16);
    const kq::Kind kind = q4 ? kq::Kind::Q4K : kq::Kind::Q6K;
    momoka::parallel_for(nsb, static_cast<std::size_t>(std::max(1, threads)), [&](std::size_t lo, std::size_t hi) {
      for (std::size_t b = lo; b < hi; ++b)
        kq::relay_superblock(kind, raw + b * src, w.q.data() + b * dst, w.d.data() + b * nd, w.s.data() + b * 16);
    });
    return w;
  }

  void check(const char* name, int want_rows, int want_cols) const {
    const std::string n(name);
    if (rows != want_rows || cols != want_cols)
      throw std::invalid_argument(n + ": shape " + std::to_string(rows) + "x" + std::to_string(cols) + ", expected " +
                                  std::to_string(want_rows) + "x" + std::to_string(want_cols));
    if (cols % kBlock) throw std::invalid_argument(n + ": columns not a multiple of 32");
    const std::size_t nb = static_cast<std::size_t>(rows) * blocks();
    if (kquant()) {
      if (cols % kq::kSuper) throw std::invalid_argument(n + ": columns not a multiple of 256");
      const std::size_t nsb = static_cast<std::size_t>(rows) * superblocks();
      const bool q4 = codes == Codes::Q4K;
      if (q.size() != nsb * (q4 ? kq::kQ4Bytes : kq::kQ6Bytes) || d.size() != nsb * (q4 ? 2 : 1) ||
          s.size() != nsb * 16)
        throw std::invalid_argument(n + ": wrong code or scale count");
    } else if (codes == Codes::F32) {
      if (f.size() != static_cast<std::size_t>(rows) * cols) throw std::invalid_argument(n + ": wrong value count");
    } else {
      const std::size_t per = codes == Codes::U4 ? 16 : 32;
      const std::size_t scales = codes == Codes::I8H ? 2 * nb : nb;
      if (q.size() != nb * per || d.size() != scales || (!m.empty() && m.size() != nb))
        throw std::invalid_argument(n + ": wrong code or scale count");
    }
    if (!bias.empty() && bias.size() != static_cast<std::size_t>(rows))
      throw std::invalid_argument(n + ": wrong bias length");
  }

  // The float32 value of row r, column c (the reference the kernels are tested against).
  float at(int r, int c) const {
    if (codes == Codes::F32) return f[static_cast<std::size_t>(r) * cols + c];
    if (kquant()) {
      const std::size_t b0 = static_cast<std::size_t>(r) * superblocks();
      return kq::value_at(codes == Codes::Q4K ? kq::Kind::Q4K : kq::Kind::Q6K,
                          q.data() + b0 * (codes == Codes::Q4K ? kq::kQ4Bytes : kq::kQ6Bytes),
                          d.data() + b0 * (codes == Codes::Q4K ? 2 : 1), s.data() + b0 * 16, c);
    }
    const std::size_t b = static_cast<std::size_t>(r) * blocks() + c / kBlock;
    const int j = c % kBlock;
    int code;
    if (codes == Codes::U4) {
      const std::uint8_t byte = q[b * 16 + (j & 15)];
      code = j < 16 ? (byte & 15) : (byte >> 4);
    } else {
      code = static_cast<std::int8_t>(q[b * 32 + j]);
    }
    const float scale = codes == Codes::I8H ? d[2 * b + j / 16] : d[b];
    return scale * static_cast<float>(code) + (m.empty() ? 0.0f : m[b]);
  }
};

struct Shape {
  int n_layers = 0, hidden = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0;
  float eps = 1e-5f, rope_theta = 10000.0f, rope_scale = 1.0f;  // positions are divided by rope_scale
};

struct Layer {
  std::vector<float> attn_norm, ffn_norm;
  Matrix q, k, v, o, gate, up, down;
};

// ---------------------------------------------------------------------------
// Kernels: Y[t * ldy + r] = sum_c W(r, c) X[t * ldx + c] (+ bias) for rows [r0, r1), tokens [0, n).

namespace detail {

inline void matmul_scalar(const Matrix& W, const float* X, int n, int ldx, float* Y, int ldy, int r0, int r1) {
  std::vector<float> w(W.cols);
  for (int r = r0; r < r1; ++r) {
    for (int c = 0; c < W.cols; ++c) w[c] = W.at(r, c);
    for (int t = 0; t < n; ++t) {
      const float* x = X + static_cast<std::size_t>(t) * ldx;
      float s = 0.0f;
      for (int c = 0; c < W.cols; ++c) s += w[c] * x[c];
      Y[static_cast<std::size_t>(t) * ldy + r] = s + (W.bias.empty() ? 0.0f : W.bias[r]);
    }
  }
}

#if MOMOKA_LLM_X86
// GCC 12 reports its own reduce intrinsics' _mm512_undefined values as uninitialised.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Horizontal sums of 8 vectors at once: lane k of the result is the sum of v[k]'s 16 lanes (a transposing
// add tree; 16 separate reductions cost about three times the instructions).
__attribute__((target("avx512f,avx512bw,avx512vl,fma"))) inline __m256 sum8_512(const __m512* v) {
  __m256 a[8];
  for (int k = 0; k < 8; ++k)
    a[k] = _mm256_add_ps(_mm512_castps512_ps256(v[k]),
                         _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v[k]), 1)));
  const __m256 h01 = _mm256_hadd_ps(a[0], a[1]), h23 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 h45 = _mm256_hadd_ps(a[4], a[5]), h67 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 h0123 = _mm256_hadd_ps(h01, h23), h4567 = _mm256_hadd_ps(h45, h67);
  return _mm256_add_ps(_mm256_permute2f128_ps(h0123, h4567, 0x20), _mm256_permute2f128_ps(h0123, h4567, 0x31));
}

// The same for 16 vectors: lane k is the sum of v[k].
__attribute__((target("avx512f,avx512bw,avx512vl,fma"))) inline __m512 sum16_512(const __m512* v) {
  const __m256 lo = sum8_512(v), hi = sum8_512(v + 8);
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
}

// AVX-512: one block is two vectors of 16, dequantised once and used by every token of a tile.
// The codes, scales and offsets of a matrix as raw pointers, its code layout and offsets fixed at compile time.
struct Raw {
  const std::uint8_t* q;
  const float* d;
  const float* m;
  int nb;
};
inline Raw raw_of(const Matrix& W) { return {W.q.data(), W.d.data(), W.m.empty() ? nullptr : W.m.data(), W.blocks()}; }

template <bool U4, bool HasM, bool Half>
__attribute__((target("avx512f,avx512bw,avx512vl,fma"))) inline void block512(const Raw& W, std::size_t blk,
                                                                               __m512& lo, __m512& hi) {
  if (U4) {
    const __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(W.q + blk * 16)));
    lo = _mm512_cvtepi32_ps(_mm512_and_si512(c, _mm512_set1_epi32(15)));
    hi = _mm512_cvtepi32_ps(_mm512_srli_epi32(c, 4));
  } else {
    const std::uint8_t* p = W.q + blk * 32;
    lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
    hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16))));
  }
  const __m512 d = _mm512_set1_ps(Half ? W.d[2 * blk] : W.d[blk]);
  const __m512 d1 = Half ? _mm512_set1_ps(W.d[2 * blk + 1]) : d;
  if (HasM) {
    const __m512 m = _mm512_set1_ps(W.m[blk]);
    lo = _mm512_fmadd_ps(lo, d, m);
    hi = _mm512_fmadd_ps(hi, d1, m);
  } else {
    lo = _mm512_mul_ps(lo, d);
    hi = _mm512_mul_ps(hi, d1);
  }
}

// One row by one token (the decode step's shape), with two independent accumulators: one row at a time
// was measured faster than two or four rows sharing the activation loads.
template <bool U4, bool HasM, bool Half>
__attribute__((target("avx512f,avx512bw,avx512vl,fma"))) inline float row512(const Raw& W, int r, const float* x) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  for (int b = 0; b < W.nb; ++b) {
    __m512 lo, hi;
    block512<U4, HasM, Half>(W, static_cast<std::size_t>(r) * W.nb + b, lo, hi);
    a0 = _mm512_fmadd_ps(lo, _mm512_loadu_ps(x + b * kBlock), a0);
    a1 = _mm512_fmadd_ps(hi, _mm512_loadu_ps(x + b * kBlock + 16), a1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

// NR rows by NT tokens (a prompt's shape): each activation load feeds NR products.
template <int NR, int NT, bool U4, bool HasM, bool Half>
__attribute__((target("avx512f,avx512bw,avx512vl,fma"))) inline void tile512(const Raw& W, int r, const float* X,
                                                                               int ldx, float* out, int ldo) {
  const int nb = W.nb;
  __m512 acc[NR][NT];
  for (int i = 0; i < NR; ++i)
    for (int t = 0; t < NT; ++t) acc[i][t] = _mm512_setzero_ps();
  for (int b = 0; b < nb; ++b) {
    __m512 lo[NR], hi[NR];
    for (int i = 0; i < NR; ++i) block512<U4, HasM, Half>(W, static_cast<std::size_t>(r + i) * nb + b, lo[i], hi[i]);
    for (int t = 0; t < NT; ++t) {
      const float* x = X + static_cast<std::size_t>(t) * ldx + b * kBlock;
      const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
      for (int i = 0; i < NR; ++i) {
        acc[i][t] = _mm512_fmadd_ps(lo[i], x0, acc[i][t]);
        acc[i][t] = _mm512_fmadd_ps(hi[i], x1, acc[i][t]);
      }
    }
  }
  if (NT == 8 && NR == 2 && ldo == 8) {  // the full tile: all 16 sums in one add tree
    _mm512_storeu_ps(out, sum16_512(&acc[0][0]));
  } else if (NT == 8) {
    for (int i = 0; i < NR; ++i) _mm256_storeu_ps(out + i * ldo, sum8_512(acc[i]));
  } else {
    for (int i = 0; i < NR; ++i)
      for (int t = 0; t < NT; ++t) out[i * ldo + t] = _mm512_reduce_add_ps(acc[i][t]);
  }
}

// Tokens in blocks of kTokenBlock (their activations stay in the L2 cache while every row passes).
constexpr int kTokenBlock = 128;
// Tokens per register tile of a prompt (2 rows x 8 tokens: 16 accumulators, measured fastest; 12 spills).
constexpr int kTile = 8;

template <bool U4, bool HasM, bool Half>
__attribute__((target("avx512f,avx512bw,avx512vl,fma"))) inline void matmul512(const Matrix& M, const float* X, int n,
                                                                                int ldx, float* Y, int ldy, int r0,
                                                                                int r1) {
  const Raw W = raw_of(M);
  float out[2 * kTile];
  auto bias = [&](int r) { return M.bias.empty() ? 0.0f : M.bias[r]; };
  if (n == 1) {
    for (int r = r0; r < r1; ++r) Y[r] = row512<U4, HasM, Half>(W, r, X) + bias(r);
    return;
  }
  for (int t0 = 0; t0 < n; t0 += kTokenBlock) {
    const int t1 = std::min(n, t0 + kTokenBlock);
    for (int r = r0; r < r1;) {
      const int nr = r + 2 <= r1 ? 2 : 1;
      for (int t = t0; t < t1;) {
        const float* x = X + static_cast<std::size_t>(t) * ldx;
        int nt;
        if (t + kTile <= t1) {
          nt = kTile;
          if (nr == 2) tile512<2, kTile, U4, HasM, Half>(W, r, x, ldx, out, kTile);
          else tile512<1, kTile, U4, HasM, Half>(W, r, x, ldx, out, kTile);
        } else {
          nt = 1;
          if (nr == 2) tile512<2, 1, U4, HasM, Half>(W, r, x, ldx, out, kTile);
          else tile512<1, 1, U4, HasM, Half>(W, r, x, ldx, out, kTile);
        }
        for (int i = 0; i < nr; ++i)
          for (int j = 0; j < nt; ++j) Y[static_cast<std::size_t>(t + j) * ldy + r + i] = out[i * kTile + j] + bias(r + i);
        t += nt;
      }
      r += nr;
    }
  }
}

__attribute__((target("avx512f,avx512bw,avx512vl,fma"))) inline void matmul_avx512(const Matrix& W, const float* X,
                                                                                    int n, int ldx, float* Y, int ldy,
                                                                                    int r0, int r1) {
  const bool u4 = W.codes == Codes::U4, has_m = !W.m.empty();
  if (W.codes == Codes::I8H) {
    if (has_m) return matmul512<false, true, true>(W, X, n, ldx, Y, ldy, r0, r1);
    return matmul512<false, false, true>(W, X, n, ldx, Y, ldy, r0, r1);
  }
  if (u4 && has_m) return matmul512<true, true, false>(W, X, n, ldx, Y, ldy, r0, r1);
  if (u4) return matmul512<true, false, false>(W, X, n, ldx, Y, ldy, r0, r1);
  if (has_m) return matmul512<false, true, false>(W, X, n, ldx, Y, ldy, r0, r1);
  return matmul512<false, false, false>(W, X, n, ldx, Y, ldy, r0, r1);
}

__attribute__((target("avx2,fma"))) inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// AVX2: one block is four vectors of 8, dequantised once and used by every token of a tile.
__attribute__((target("avx2,fma"))) inline void block256(const Matrix& W, std::size_t blk, __m256* w) {
  if (W.codes == Codes::U4) {
    const std::uint8_t* p = W.q.data() + blk * 16;
    const __m256i low4 = _mm256_set1_epi32(15);
    const __m256i c0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    const __m256i c1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8)));
    w[0] = _mm256_cvtepi32_ps(_mm256_and_si256(c0, low4));
    w[1] = _mm256_cvtepi32_ps(_mm256_and_si256(c1, low4));
    w[2] = _mm256_cvtepi32_ps(_mm256_srli_epi32(c0, 4));
    w[3] = _mm256_cvtepi32_ps(_mm256_srli_epi32(c1, 4));
  } else {
    const std::uint8_t* p = W.q.data() + blk * 32;
    for (int i = 0; i < 4; ++i)
      w[i] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * i))));
  }
  const bool half = W.codes == Codes::I8H;  // w[0..1] are values 0..15, w[2..3] values 16..31
  const __m256 d0 = _mm256_set1_ps(half ? W.d[2 * blk] : W.d[blk]);
  const __m256 d1 = half ? _mm256_set1_ps(W.d[2 * blk + 1]) : d0;
  if (!W.m.empty()) {
    const __m256 m = _mm256_set1_ps(W.m[blk]);
    for (int i = 0; i < 4; ++i) w[i] = _mm256_fmadd_ps(w[i], i < 2 ? d0 : d1, m);
  } else {
    for (int i = 0; i < 4; ++i) w[i] = _mm256_mul_ps(w[i], i < 2 ? d0 : d1);
  }
}

// One row by one token (the decode step's shape): four independent accumulators, one per vector of a block,
// so the products do not wait on each other.
__attribute__((target("avx2,fma"))) inline float row256(const Matrix& W, int r, const float* x) {
  const int nb = W.blocks();
  const std::size_t base = static_cast<std::size_t>(r) * nb;
  __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int b = 0; b < nb; ++b) {
    __m256 w[4];
    block256(W, base + b, w);
    for (int i = 0; i < 4; ++i) a[i] = _mm256_fmadd_ps(w[i], _mm256_loadu_ps(x + b * kBlock + 8 * i), a[i]);
  }
  return hsum256(_mm256_add_ps(_mm256_add_ps(a[0], a[1]), _mm256_add_ps(a[2], a[3])));
}

// One row by NT tokens (a prompt's shape): each dequantised block feeds NT tokens' products.
template <int NT>
__attribute__((target("avx2,fma"))) inline void tile256(const Matrix& W, int r, const float* X, int ldx, float* out) {
  const int nb = W.blocks();
  const std::size_t base = static_cast<std::size_t>(r) * nb;
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int b = 0; b < nb; ++b) {
    __m256 w[4];
    block256(W, base + b, w);
    for (int t = 0; t < NT; ++t) {
      const float* x = X + static_cast<std::size_t>(t) * ldx + b * kBlock;
      for (int i = 0; i < 4; ++i) acc[t] = _mm256_fmadd_ps(w[i], _mm256_loadu_ps(x + 8 * i), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = hsum256(acc[t]);
}

// Tokens per AVX2 tile: 8 accumulators, 4 weight vectors and an activation fill 13 of the 16 registers.
constexpr int kTile256 = 8;

__attribute__((target("avx2,fma"))) inline void matmul_avx2(const Matrix& W, const float* X, int n, int ldx,
                                                             float* Y, int ldy, int r0, int r1) {
  auto bias = [&](int r) { return W.bias.empty() ? 0.0f : W.bias[r]; };
  if (n == 1) {
    for (int r = r0; r < r1; ++r) Y[r] = row256(W, r, X) + bias(r);
    return;
  }
  float out[kTile256];
  for (int t0 = 0; t0 < n; t0 += kTokenBlock) {  // the block's activations stay in the L2 cache for every row
    const int t1 = std::min(n, t0 + kTokenBlock);
    for (int r = r0; r < r1; ++r) {
      const float br = bias(r);
      int t = t0;
      for (; t + kTile256 <= t1; t += kTile256) {
        tile256<kTile256>(W, r, X + static_cast<std::size_t>(t) * ldx, ldx, out);
        for (int j = 0; j < kTile256; ++j) Y[static_cast<std::size_t>(t + j) * ldy + r] = out[j] + br;
      }
      for (; t < t1; ++t) Y[static_cast<std::size_t>(t) * ldy + r] = row256(W, r, X + static_cast<std::size_t>(t) * ldx) + br;
    }
  }
}
#endif

// exp(x) in float32 by range reduction and a degree-6 polynomial (relative error
// about 2e-7 over the float range), inlined so that the loops calling it vectorise.
#define MOMOKA_LLM_INLINE inline __attribute__((always_inline))
#if !(defined(__GNUC__) || defined(__clang__))
#undef MOMOKA_LLM_INLINE
#define MOMOKA_LLM_INLINE inline
#endif

MOMOKA_LLM_INLINE float exp_f32(float x) {
  x = std::min(88.3762626647949f, std::max(-87.3365478515625f, x));
  const float k = std::floor(x * 1.44269504088896341f + 0.5f);
  const float r = (x - k * 0.693359375f) + k * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  std::int32_t bits = (static_cast<std::int32_t>(k) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// Attention of G query rows (heads sharing one key/value head; rows `D` floats apart, already
// scaled) over cache positions [j0, j1) (rows `stride` floats apart), unnormalised: ms[2g] the
// highest score of head g, ms[2g + 1] the sum of exp(score - highest), out[g * D ...] the values
// weighted by those exponentials. Chunks of positions combine exactly (combine_parts).
MOMOKA_LLM_INLINE void attend_part_generic(const float* q, int G, const float* K, const float* V, int j0, int j1, int stride,
                                int D, float* scores, float* out, float* ms) {
  const int n = j1 - j0;
  for (int g = 0; g < G; ++g) {
    const float* qg = q + static_cast<std::size_t>(g) * D;
    float mx = -INFINITY;
    for (int j = 0; j < n; ++j) {
      const float* k = K + static_cast<std::size_t>(j0 + j) * stride;
      float s = 0.0f;
      for (int i = 0; i < D; ++i) s += qg[i] * k[i];
      scores[j] = s;
      mx = std::max(mx, s);
    }
    float sum = 0.0f;
    for (int j = 0; j < n; ++j) {
      scores[j] = exp_f32(scores[j] - mx);
      sum += scores[j];
    }
    float* o = out + static_cast<std::size_t>(g) * D;
    for (int i = 0; i < D; ++i) o[i] = 0.0f;
    for (int j = 0; j < n; ++j) {
      const float* v = V + static_cast<std::size_t>(j0 + j) * stride;
      for (int i = 0; i < D; ++i) o[i] += scores[j] * v[i];
    }
    ms[2 * g] = mx;
    ms[2 * g + 1] = sum;
  }
}

// The normalised attention output of one head from C partial results (parts D floats apart,
// their (max, sum) pairs 2 floats apart at ms with stride ms_stride).
inline void combine_parts(const float* parts, int part_stride, const float* ms, int ms_stride, int C, int D,
                          float* out) {
  float m = -INFINITY;
  for (int c = 0; c < C; ++c)
    if (ms[c * ms_stride + 1] > 0.0f) m = std::max(m, ms[c * ms_stride]);
  float total = 0.0f;
  for (int i = 0; i < D; ++i) out[i] = 0.0f;
  for (int c = 0; c < C; ++c) {
    const float sum = ms[c * ms_stride + 1];
    if (!(sum > 0.0f)) continue;
    const float w = std::exp(ms[c * ms_stride] - m);
    total += w * sum;
    const float* p = parts + static_cast<std::size_t>(c) * part_stride;
    for (int i = 0; i < D; ++i) out[i] += w * p[i];
  }
  const float inv = 1.0f / total;
  for (int i = 0; i < D; ++i) out[i] *= inv;
}

#if MOMOKA_LLM_X86
#define MOMOKA_LLM_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,fma")))
#define MOMOKA_LLM_AVX2 __attribute__((target("avx2,fma")))

// exp_f32 on 16 lanes (the same reduction and polynomial).
MOMOKA_LLM_AVX512 inline __m512 exp512(__m512 x) {
  x = _mm512_min_ps(_mm512_set1_ps(88.3762626647949f), _mm512_max_ps(_mm512_set1_ps(-87.3365478515625f), x));
  const __m512 k = _mm512_roundscale_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(0.5f)),
                                        _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fmadd_ps(k, _mm512_set1_ps(2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, k);
}


// attend_part on 16 lanes: NV vectors per row (D = 16 NV), G heads in one pass over the cache, every
// accumulator in a register.
template <int NV, int G>
MOMOKA_LLM_AVX512 inline void attend_part512(const float* q, const float* K, const float* V, int j0, int j1,
                                             int stride, float* scores, float* out, float* ms) {
  const int n = j1 - j0;
  __m512 qv[G][NV];
  for (int g = 0; g < G; ++g)
    for (int i = 0; i < NV; ++i) qv[g][i] = _mm512_loadu_ps(q + g * 16 * NV + 16 * i);
  __m512 mx[G];
  for (int g = 0; g < G; ++g) mx[g] = _mm512_set1_ps(-INFINITY);
  int j = 0;
  for (; j + 16 <= n; j += 16) {
    alignas(64) float tmp[G][16];
    for (int u = 0; u < 16; ++u) {
      const float* k = K + static_cast<std::size_t>(j0 + j + u) * stride;
      __m512 kv[NV];
      for (int i = 0; i < NV; ++i) kv[i] = _mm512_loadu_ps(k + 16 * i);
      for (int g = 0; g < G; ++g) {
        __m512 acc = _mm512_mul_ps(qv[g][0], kv[0]);
        for (int i = 1; i < NV; ++i) acc = _mm512_fmadd_ps(qv[g][i], kv[i], acc);
        tmp[g][u] = _mm512_reduce_add_ps(acc);
      }
    }
    for (int g = 0; g < G; ++g) {
      const __m512 v = _mm512_load_ps(tmp[g]);
      _mm512_storeu_ps(scores + g * n + j, v);
      mx[g] = _mm512_max_ps(mx[g], v);
    }
  }
  float m[G];
  for (int g = 0; g < G; ++g) m[g] = _mm512_reduce_max_ps(mx[g]);
  for (; j < n; ++j) {
    const float* k = K + static_cast<std::size_t>(j0 + j) * stride;
    for (int g = 0; g < G; ++g) {
      __m512 acc = _mm512_mul_ps(qv[g][0], _mm512_loadu_ps(k));
      for (int i = 1; i < NV; ++i) acc = _mm512_fmadd_ps(qv[g][i], _mm512_loadu_ps(k + 16 * i), acc);
      scores[g * n + j] = _mm512_reduce_add_ps(acc);
      m[g] = std::max(m[g], scores[g * n + j]);
    }
  }
  for (int g = 0; g < G; ++g) {
    float* sc = scores + g * n;
    const __m512 mv = _mm512_set1_ps(m[g]);
    __m512 sum = _mm512_setzero_ps();
    for (j = 0; j < n; j += 16) {
      const __mmask16 mask = n - j >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - j)) - 1);
      const __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, sc + j), mv));
      _mm512_mask_storeu_ps(sc + j, mask, e);
      sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(mask, e));
    }
    ms[2 * g] = m[g];
    ms[2 * g + 1] = _mm512_reduce_add_ps(sum);
  }
  __m512 acc[G][NV];
  for (int g = 0; g < G; ++g)
    for (int i = 0; i < NV; ++i) acc[g][i] = _mm512_setzero_ps();
  for (j = 0; j < n; ++j) {
    const float* v = V + static_cast<std::size_t>(j0 + j) * stride;
    __m512 vv[NV];
    for (int i = 0; i < NV; ++i) vv[i] = _mm512_loadu_ps(v + 16 * i);
    for (int g = 0; g < G; ++g) {
      const __m512 p = _mm512_set1_ps(scores[g * n + j]);
      for (int i = 0; i < NV; ++i) acc[g][i] = _mm512_fmadd_ps(p, vv[i], acc[g][i]);
    }
  }
  for (int g = 0; g < G; ++g)
    for (int i = 0; i < NV; ++i) _mm512_storeu_ps(out + g * 16 * NV + 16 * i, acc[g][i]);
}

// attend_part with 16-lane kernels where D is 64 or 128 (heads in groups of at most 4 per pass).
MOMOKA_LLM_AVX512 inline bool attend_part_avx512(const float* q, int G, const float* K, const float* V, int j0, int j1,
                                                 int stride, int D, float* scores, float* out, float* ms) {
  if (D != 64 && D != 128) return false;
  for (int g0 = 0; g0 < G;) {
    const int take = std::min(G - g0, D == 64 ? 4 : 2);
    const float* qg = q + static_cast<std::size_t>(g0) * D;
    float* og = out + static_cast<std::size_t>(g0) * D;
    float* mg = ms + 2 * g0;
    if (D == 64) {
      switch (take) {
        case 1: attend_part512<4, 1>(qg, K, V, j0, j1, stride, scores, og, mg); break;
        case 2: attend_part512<4, 2>(qg, K, V, j0, j1, stride, scores, og, mg); break;
        case 3: attend_part512<4, 3>(qg, K, V, j0, j1, stride, scores, og, mg); break;
        default: attend_part512<4, 4>(qg, K, V, j0, j1, stride, scores, og, mg); break;
      }
    } else if (take == 1) {
      attend_part512<8, 1>(qg, K, V, j0, j1, stride, scores, og, mg);
    } else {
      attend_part512<8, 2>(qg, K, V, j0, j1, stride, scores, og, mg);
    }
    g0 += take;
  }
  return true;
}

// A 16 x 16 block of floats transposed in registers: r[c] becomes column c of the rows r[0..15].
MOMOKA_LLM_AVX512 inline void transpose16(__m512* r) {
  __m512 t[16], u[16], v[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  // u[4i + k], 128-bit lane L: column 4L + k of rows 4i .. 4i + 3
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) {
      v[8 * i + k] = _mm512_shuffle_f32x4(u[8 * i + k], u[8 * i + 4 + k], 0x88);
      v[8 * i + 4 + k] = _mm512_shuffle_f32x4(u[8 * i + k], u[8 * i + 4 + k], 0xdd);
    }
  for (int k = 0; k < 8; ++k) {
    r[k] = _mm512_shuffle_f32x4(v[k], v[8 + k], 0x88);
    r[8 + k] = _mm512_shuffle_f32x4(v[k], v[8 + k], 0xdd);
  }
}

// Attention of R query rows sharing one key/value head, row r over cache positions [0, len[r]) (a prompt's
// causal rows), unnormalised as attend_part leaves it (out[r], ms[r][0..1]). The keys are read once for all
// rows: 16 positions at a time, transposed in registers, so each score is a sum of broadcast products with
// no horizontal sum; the values once per group of rows. S holds R rows of lds >= max len rounded up to 16
// floats; kt 16 D floats.
template <int NV>
MOMOKA_LLM_AVX512 inline void attend_rows512(const float* const* q, const int* len, int R, const float* K,
                                             const float* V, float* S, std::size_t lds, float* kt, float* const* out,
                                             float* const* ms) {
  constexpr int D = 16 * NV;
  int L = 0;
  for (int r = 0; r < R; ++r) L = std::max(L, len[r]);
  for (int j0 = 0; j0 < L; j0 += 16) {
    const int m = std::min(16, L - j0);
    for (int c = 0; c < NV; ++c) {
      __m512 rows[16];
      for (int u = 0; u < 16; ++u)
        rows[u] = u < m ? _mm512_loadu_ps(K + static_cast<std::size_t>(j0 + u) * D + 16 * c) : _mm512_setzero_ps();
      transpose16(rows);
      for (int d = 0; d < 16; ++d) _mm512_storeu_ps(kt + static_cast<std::size_t>(16 * c + d) * 16, rows[d]);
    }
    for (int r0 = 0; r0 < R; r0 += 8) {  // 8 rows at once: 8 independent accumulators
      const float* qp[8];
      __m512 acc[8];
      for (int i = 0; i < 8; ++i) {
        qp[i] = q[std::min(r0 + i, R - 1)];
        acc[i] = _mm512_setzero_ps();
      }
      for (int d = 0; d < D; ++d) {
        const __m512 kd = _mm512_loadu_ps(kt + static_cast<std::size_t>(d) * 16);
        for (int i = 0; i < 8; ++i) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(qp[i][d]), kd, acc[i]);
      }
      for (int i = 0; i < 8 && r0 + i < R; ++i) _mm512_storeu_ps(S + static_cast<std::size_t>(r0 + i) * lds + j0, acc[i]);
    }
  }
  for (int r = 0; r < R; ++r) {  // each row's softmax over its own positions; zeros after them
    float* sc = S + static_cast<std::size_t>(r) * lds;
    const int n = len[r];
    __m512 mx = _mm512_set1_ps(-INFINITY);
    int j = 0;
    for (; j + 16 <= n; j += 16) mx = _mm512_max_ps(mx, _mm512_loadu_ps(sc + j));
    float mval = _mm512_reduce_max_ps(mx);
    for (; j < n; ++j) mval = std::max(mval, sc[j]);
    const __m512 mv = _mm512_set1_ps(mval);
    __m512 sum = _mm512_setzero_ps();
    for (j = 0; j < L; j += 16) {
      const int left = n - j;
      const __mmask16 mask = left >= 16 ? static_cast<__mmask16>(0xFFFF)
                                        : left > 0 ? static_cast<__mmask16>((1u << left) - 1) : static_cast<__mmask16>(0);
      const __m512 e = _mm512_maskz_mov_ps(mask, exp512(_mm512_sub_ps(_mm512_loadu_ps(sc + j), mv)));
      _mm512_storeu_ps(sc + j, e);
      sum = _mm512_add_ps(sum, e);
    }
    ms[r][0] = mval;
    ms[r][1] = _mm512_reduce_add_ps(sum);
  }
  constexpr int RG = NV == 4 ? 6 : 2;  // rows per pass over the values: RG x NV accumulators in registers
  for (int r0 = 0; r0 < R; r0 += RG) {
    int Lg = 0;
    const float* pr[RG];
    for (int i = 0; i < RG; ++i) {
      const int r = std::min(r0 + i, R - 1);
      pr[i] = S + static_cast<std::size_t>(r) * lds;
      Lg = std::max(Lg, len[r]);
    }
    __m512 acc[RG][NV];
    for (int i = 0; i < RG; ++i)
      for (int c = 0; c < NV; ++c) acc[i][c] = _mm512_setzero_ps();
    for (int j = 0; j < Lg; ++j) {
      const float* v = V + static_cast<std::size_t>(j) * D;
      __m512 vv[NV];
      for (int c = 0; c < NV; ++c) vv[c] = _mm512_loadu_ps(v + 16 * c);
      for (int i = 0; i < RG; ++i) {
        const __m512 pj = _mm512_set1_ps(pr[i][j]);
        for (int c = 0; c < NV; ++c) acc[i][c] = _mm512_fmadd_ps(pj, vv[c], acc[i][c]);
      }
    }
    for (int i = 0; i < RG && r0 + i < R; ++i)
      for (int c = 0; c < NV; ++c) _mm512_storeu_ps(out[r0 + i] + 16 * c, acc[i][c]);
  }
}

// exp_f32 on 8 lanes (the same reduction, polynomial and exponent bits).
MOMOKA_LLM_AVX2 inline __m256 exp256(__m256 x) {
  x = _mm256_min_ps(_mm256_set1_ps(88.3762626647949f), _mm256_max_ps(_mm256_set1_ps(-87.3365478515625f), x));
  const __m256 k = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
  __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fmadd_ps(k, _mm256_set1_ps(2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

// attend_part of one head on 8 lanes (D = 8 NV): the query in registers, each score a dot product with two
// accumulators, the exponentials 8 at a time, the weighted values in NV accumulators.
template <int NV>
MOMOKA_LLM_AVX2 inline void attend_head256(const float* q, const float* K, const float* V, int j0, int j1, int stride,
                                           float* scores, float* out, float* ms) {
  const int n = j1 - j0;
  __m256 qv[NV];
  for (int i = 0; i < NV; ++i) qv[i] = _mm256_loadu_ps(q + 8 * i);
  float mx = -INFINITY;
  for (int j = 0; j < n; ++j) {
    const float* k = K + static_cast<std::size_t>(j0 + j) * stride;
    __m256 a0 = _mm256_mul_ps(qv[0], _mm256_loadu_ps(k));
    __m256 a1 = NV > 1 ? _mm256_mul_ps(qv[1], _mm256_loadu_ps(k + 8)) : _mm256_setzero_ps();
    for (int i = 2; i + 1 < NV; i += 2) {
      a0 = _mm256_fmadd_ps(qv[i], _mm256_loadu_ps(k + 8 * i), a0);
      a1 = _mm256_fmadd_ps(qv[i + 1], _mm256_loadu_ps(k + 8 * i + 8), a1);
    }
    if (NV > 2 && NV % 2) a0 = _mm256_fmadd_ps(qv[NV - 1], _mm256_loadu_ps(k + 8 * (NV - 1)), a0);
    const float sc = hsum256(_mm256_add_ps(a0, a1));
    scores[j] = sc;
    mx = std::max(mx, sc);
  }
  const __m256 mv = _mm256_set1_ps(mx);
  __m256 sum = _mm256_setzero_ps();
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(scores + j), mv));
    _mm256_storeu_ps(scores + j, e);
    sum = _mm256_add_ps(sum, e);
  }
  float total = hsum256(sum);
  for (; j < n; ++j) {
    scores[j] = exp_f32(scores[j] - mx);
    total += scores[j];
  }
  __m256 acc[NV];
  for (int i = 0; i < NV; ++i) acc[i] = _mm256_setzero_ps();
  for (j = 0; j < n; ++j) {
    const float* v = V + static_cast<std::size_t>(j0 + j) * stride;
    const __m256 pj = _mm256_set1_ps(scores[j]);
    for (int i = 0; i < NV; ++i) acc[i] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 8 * i), acc[i]);
  }
  for (int i = 0; i < NV; ++i) _mm256_storeu_ps(out + 8 * i, acc[i]);
  ms[0] = mx;
  ms[1] = total;
}

// attend_part with 8-lane kernels where D is 64 or 128 (one head per pass: the key/value rows stay in the
// cache for the next head of the group); other head sizes take the plain loops.
MOMOKA_LLM_AVX2 inline void attend_part_avx2(const float* q, int G, const float* K, const float* V, int j0, int j1,
                                             int stride, int D, float* scores, float* out, float* ms) {
  if (D != 64 && D != 128) return attend_part_generic(q, G, K, V, j0, j1, stride, D, scores, out, ms);
  for (int g = 0; g < G; ++g) {  // one head at a time: the scores buffer is reused, as the plain loops do
    const float* qg = q + static_cast<std::size_t>(g) * D;
    float* og = out + static_cast<std::size_t>(g) * D;
    if (D == 64) attend_head256<8>(qg, K, V, j0, j1, stride, scores, og, ms + 2 * g);
    else attend_head256<16>(qg, K, V, j0, j1, stride, scores, og, ms + 2 * g);
  }
}

// SwiGLU of one row range: g = silu(g) * u.
__attribute__((target("avx512f,avx512bw,avx512vl,fma"))) inline void swiglu_avx512(float* g, const float* u, int n) {
  for (int i = 0; i < n; ++i) g[i] = g[i] / (1.0f + exp_f32(-g[i])) * u[i];
}
__attribute__((target("avx2,fma"))) inline void swiglu_avx2(float* g, const float* u, int n) {
  for (int i = 0; i < n; ++i) g[i] = g[i] / (1.0f + exp_f32(-g[i])) * u[i];
}
#pragma GCC diagnostic pop
#endif
inline void swiglu_generic(float* g, const float* u, int n) {
  for (int i = 0; i < n; ++i) g[i] = g[i] / (1.0f + exp_f32(-g[i])) * u[i];
}

// A team of threads for one forward pass: run(f) calls f(thread, n_threads) on every thread and
// returns when all are done (spin waits: the phases are short and follow each other).
class Team {
 public:
  explicit Team(int threads) : n_(std::max(1, threads)) {
    for (int t = 1; t < n_; ++t) workers_.emplace_back([this, t] { loop(t); });
  }
  ~Team() {
    stop_.store(true, std::memory_order_release);
    gen_.fetch_add(1, std::memory_order_acq_rel);
    for (auto& w : workers_) w.join();
  }
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;

  int size() const { return n_; }

  template <class F>
  void run(F&& f) {
    using G = std::remove_reference_t<F>;
    if (n_ == 1) {
      f(0, 1);
      return;
    }
    fn_ = [](void* c, int t, int n) { (*static_cast<G*>(c))(t, n); };
    ctx_ = static_cast<void*>(&f);
    done_.store(0, std::memory_order_release);
    gen_.fetch_add(1, std::memory_order_acq_rel);
    call(0);
    while (done_.load(std::memory_order_acquire) < n_ - 1) pause();
    if (error_) {
      std::exception_ptr e = error_;
      error_ = nullptr;
      std::rethrow_exception(e);
    }
  }

 private:
  static void pause() {
#if MOMOKA_LLM_X86
    _mm_pause();
#else
    std::this_thread::yield();
#endif
  }
  void call(int t) {
    try {
      fn_(ctx_, t, n_);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
    }
  }
  void loop(int t) {
    unsigned seen = 0;
    for (;;) {
      unsigned g;
      while ((g = gen_.load(std::memory_order_acquire)) == seen) pause();
      seen = g;
      if (stop_.load(std::memory_order_acquire)) return;
      call(t);
      done_.fetch_add(1, std::memory_order_acq_rel);
    }
  }

  int n_;
  std::vector<std::thread> workers_;
  std::atomic<unsigned> gen_{0};
  std::atomic<int> done_{0};
  std::atomic<bool> stop_{false};
  void (*fn_)(void*, int, int) = nullptr;
  void* ctx_ = nullptr;
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

}  // namespace detail

// Y = X W^T for n tokens (rows of X, ldx apart) into Y (ldy apart), rows [r0, r1) of W, with the given kernels.
// The K-quant kernel level of a kernel set: 2 (AVX-512 with VNNI), 1 (AVX2), 0 (plain loops).
inline int kquant_level(Simd simd) {
  const int best = kq::best_level();
  return std::min(best, simd == Simd::Avx512 ? 2 : simd == Simd::Avx2 ? 1 : 0);
}

inline void matmul(Simd simd, const Matrix& W, const float* X, int n, int ldx, float* Y, int ldy, int r0, int r1) {
  if (W.kquant()) {  // quantise the activations here (the decoder quantises once per product instead)
    kq::Acts A;
    A.resize(n, W.cols);
    const int level = kquant_level(simd);
    kq::quantize(level, X, n, ldx, W.cols, A, 0, n);
    kq::matmul(level, W.view(), W.bias.empty() ? nullptr : W.bias.data(), A, Y, ldy, r0, r1);
    return;
  }
  if (W.codes == Codes::F32) {
    detail::matmul_scalar(W, X, n, ldx, Y, ldy, r0, r1);
    return;
  }
#if MOMOKA_LLM_X86
  if (simd == Simd::Avx512) return detail::matmul_avx512(W, X, n, ldx, Y, ldy, r0, r1);
  if (simd == Simd::Avx2) return detail::matmul_avx2(W, X, n, ldx, Y, ldy, r0, r1);
#endif
  detail::matmul_scalar(W, X, n, ldx, Y, ldy, r0, r1);
}

// Attention of G query heads (rows D floats apart, already scaled) sharing one key/value head over cache
// positions [j0, j1) (rows `stride` floats apart), unnormalised, with the given kernels: ms[2g] the highest
// score of head g, ms[2g + 1] the sum of exp(score - highest), out[g * D ...] the values weighted by those
// exponentials (combine_parts normalises and joins parts). `scores` holds at least min(G, 4) * (j1 - j0)
// floats.
inline void attend_part(Simd simd, const float* q, int G, const float* K, const float* V, int j0, int j1, int stride,
                        int D, float* scores, float* out, float* ms) {
#if MOMOKA_LLM_X86
  if (simd == Simd::Avx512 && detail::attend_part_avx512(q, G, K, V, j0, j1, stride, D, scores, out, ms)) return;
  if (simd == Simd::Avx2) return detail::attend_part_avx2(q, G, K, V, j0, j1, stride, D, scores, out, ms);
#endif
  detail::attend_part_generic(q, G, K, V, j0, j1, stride, D, scores, out, ms);
}

// Whether attend_rows has kernels for this kernel set and head size: the AVX-512 ones, for D of 64 or 128.
inline bool attend_rows_apply(Simd simd, int D) { return MOMOKA_LLM_X86 && simd == Simd::Avx512 && (D == 64 || D == 128); }

// Attention of R query rows (rows of D floats) sharing one key/value head (cache rows of D floats), row r over
// positions [0, len[r]), unnormalised as attend_part leaves it: out[r] the weighted values, ms[r][0..1] the
// highest score and the sum of exponentials. `S` holds R rows of `lds` floats (lds >= the longest len rounded
// up to 16), `kt` 16 D floats. Only where attend_rows_apply(simd, D); false (nothing done) elsewhere.
inline bool attend_rows(Simd simd, const float* const* q, const int* len, int R, const float* K, const float* V, int D,
                        float* S, std::size_t lds, float* kt, float* const* out, float* const* ms) {
  if (!attend_rows_apply(simd, D)) return false;
#if MOMOKA_LLM_X86
  if (D == 64) detail::attend_rows512<4>(q, len, R, K, V, S, lds, kt, out, ms);
  else detail::attend_rows512<8>(q, len, R, K, V, S, lds, kt, out, ms);
#endif
  return true;
}

// Prompt tokens whose queries share one pass over a key/value head's cache in a prompt's attention.
constexpr int kRowsBlock = 8;

class Decoder {
 public:
  // `embed`: the token embedding (vocab x hidden); `head`: the output head, or empty (rows 0) for
  // the embedding's transpose (tied weights). `n_ctx`: the most tokens a sequence holds.
  Decoder(Shape shape, std::vector<Layer> layers, Matrix embed, Matrix head, std::vector<float> out_norm, int n_ctx,
          int threads, Simd simd)
      : s_(shape), layers_(std::move(layers)), embed_(std::move(embed)), head_(std::move(head)),
        out_norm_(std::move(out_norm)), n_ctx_(n_ctx), threads_(std::max(1, threads)), simd_(simd) {
    if (s_.n_layers <= 0 || s_.hidden <= 0 || s_.n_heads <= 0 || s_.n_kv_heads <= 0 || s_.head_dim <= 0 ||
        s_.n_heads % s_.n_kv_heads || s_.head_dim * s_.n_heads != s_.hidden || s_.head_dim % 2 || s_.ffn <= 0 ||
        s_.vocab <= 0)
      throw std::invalid_argument("inconsistent model shape");
    if (static_cast<int>(layers_.size()) != s_.n_layers) throw std::invalid_argument("wrong number of layers");
    if (n_ctx_ <= 0) throw std::invalid_argument("n_ctx must be positive");
    if (simd_ > best_simd()) throw std::invalid_argument(std::string("this CPU has no ") + simd_name(simd_) + " kernels");
    const int H = s_.hidden, KV = s_.n_kv_heads * s_.head_dim;
    for (auto& L : layers_) {
      L.q.check("attn_q", H, H);
      L.k.check("attn_k", KV, H);
      L.v.check("attn_v", KV, H);
      L.o.check("attn_output", H, H);
      L.gate.check("ffn_gate", s_.ffn, H);
      L.up.check("ffn_up", s_.ffn, H);
      L.down.check("ffn_down", H, s_.ffn);
      if (static_cast<int>(L.attn_norm.size()) != H || static_cast<int>(L.ffn_norm.size()) != H)
        throw std::invalid_argument("norm weights of the wrong length");
    }
    embed_.check("token_embd", s_.vocab, H);
    if (head_.rows) head_.check("output", s_.vocab, H);
    if (static_cast<int>(out_norm_.size()) != H) throw std::invalid_argument("output norm of the wrong length");
    K_.resize(s_.n_layers);
    V_.resize(s_.n_layers);
    const int half = s_.head_dim / 2;
    inv_freq_.resize(half);
    for (int i = 0; i < half; ++i)
      inv_freq_[i] = static_cast<float>(1.0 / std::pow(static_cast<double>(s_.rope_theta), 2.0 * i / s_.head_dim) /
                                        s_.rope_scale);
  }

  const Shape& shape() const { return s_; }
  int n_past() const { return n_past_; }
  int n_ctx() const { return n_ctx_; }
  Simd simd() const { return simd_; }
  int threads() const { return threads_; }

  // Forget the sequence (the cache's memory is kept).
  void reset() {
    std::lock_guard<std::mutex> lock(mutex_);
    n_past_ = 0;
  }

  // Keep only the sequence's first n tokens (n >= the tokens held: nothing changes): the cache of a
  // prefix stays valid when what followed it is dropped, so many continuations can run after one prefix.
  void truncate(int n) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (n < 0) throw std::invalid_argument("cannot keep a negative number of tokens");
    n_past_ = std::min(n_past_, n);
  }

  // Append `n` tokens and write the logits after each of the last `n_out` of them into `logits` (n_out
  // rows of vocab floats; n_out in [1, n]). Calls from several threads run one after another (the cache is
  // the one sequence's).
  void forward(const std::int32_t* ids, int n, float* logits, int n_out = 1) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (n <= 0) throw std::invalid_argument("no tokens to run");
    if (n_out < 1 || n_out > n) throw std::invalid_argument("n_out must lie in [1, n]");
    if (n_past_ + n > n_ctx_)
      throw std::length_error("the sequence would hold " + std::to_string(n_past_ + n) + " tokens, more than n_ctx " +
                              std::to_string(n_ctx_));
    for (int t = 0; t < n; ++t)
      if (ids[t] < 0 || ids[t] >= s_.vocab)
        throw std::out_of_range("token id " + std::to_string(ids[t]) + " outside the vocabulary");
    const int H = s_.hidden, F = s_.ffn, D = s_.head_dim, KV = s_.n_kv_heads * D;
    const int total = n_past_ + n;
    grow(total);
    const std::size_t nn = static_cast<std::size_t>(n);
    x_.assign(nn * H, 0.0f);
    h_.resize(nn * H);
    q_.resize(nn * H);
    kv_.resize(nn * 2 * KV);
    att_.resize(nn * H);
    ff_.resize(nn * 2 * F);
    for (int t = 0; t < n; ++t)
      for (int c = 0; c < H; ++c) x_[static_cast<std::size_t>(t) * H + c] = embed_.at(ids[t], c);
    rope_table(n_past_, n);
    detail::Team team(threads_);
    const int T = team.size();
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    const int G = s_.n_heads / s_.n_kv_heads;
    const int C = n == 1 ? T : 1;  // chunks of positions per (token, key/value head)
    const int units = n * s_.n_kv_heads * C;
    scores_.resize(static_cast<std::size_t>(T) * G * total);
    part_.resize(static_cast<std::size_t>(units) * G * D);
    ms_.resize(static_cast<std::size_t>(units) * G * 2);
    // a prompt's attention in blocks of tokens whose queries share each pass over a key/value head, where
    // the kernels have it
    const bool by_rows = n > 1 && attend_rows_apply(simd_, D);
    const int rows_max = kRowsBlock * G;
    const std::size_t lds = (static_cast<std::size_t>(total) + 15) / 16 * 16;
    const std::size_t per_thread = static_cast<std::size_t>(rows_max) * lds + 16 * static_cast<std::size_t>(D);
    if (by_rows) rows_.resize(static_cast<std::size_t>(T) * per_thread);
    for (int l = 0; l < s_.n_layers; ++l) {
      Layer& L = layers_[l];
      rmsnorm(x_.data(), L.attn_norm.data(), h_.data(), n);
      // queries, keys, values: one row range over the three matrices
      const kq::Acts* qa = quant(team, h_.data(), n, H, H, {&L.q, &L.k, &L.v});
      chunks(team, H + 2 * KV, [&](int a, int b) {
        span(L.q, 0, H, a, b, h_.data(), qa, n, H, q_.data(), H);
        span(L.k, H, H + KV, a, b, h_.data(), qa, n, H, kv_.data(), 2 * KV);
        span(L.v, H + KV, H + 2 * KV, a, b, h_.data(), qa, n, H, kv_.data() + KV, 2 * KV);
      });
      for (int t = 0; t < n; ++t) {
        const int pos = n_past_ + t;
        float* q = q_.data() + static_cast<std::size_t>(t) * H;
        const float* k = kv_.data() + static_cast<std::size_t>(t) * 2 * KV;
        for (int hh = 0; hh < s_.n_heads; ++hh) rope(q + hh * D, t);
        for (int i = 0; i < H; ++i) q[i] *= scale;
        for (int hh = 0; hh < s_.n_kv_heads; ++hh) {  // the cache is head-major: one head's positions in a row
          float* kc = K_[l].data() + (static_cast<std::size_t>(hh) * cap_ + pos) * D;
          float* vc = V_[l].data() + (static_cast<std::size_t>(hh) * cap_ + pos) * D;
          std::memcpy(kc, k + hh * D, sizeof(float) * D);
          std::memcpy(vc, k + KV + hh * D, sizeof(float) * D);
          rope(kc, t);
        }
      }
      // attention: units of (token, key/value head, chunk of positions), each head group in one pass over
      // the cache; one token's positions are split into a chunk per thread, combined after. A prompt's units
      // are (block of kRowsBlock tokens, key/value head) where attend_rows applies.
      if (by_rows) {
        team.run([&](int t, int nt) {
          float* S = rows_.data() + static_cast<std::size_t>(t) * per_thread;
          float* kt = S + static_cast<std::size_t>(rows_max) * lds;
          std::vector<const float*> qs(rows_max);
          std::vector<float*> outs(rows_max), mss(rows_max);
          std::vector<int> lens(rows_max);
          const int blocks = (n + kRowsBlock - 1) / kRowsBlock;
          for (int u = t; u < blocks * s_.n_kv_heads; u += nt) {
            const int t0 = (u / s_.n_kv_heads) * kRowsBlock, kvh = u % s_.n_kv_heads;
            int R = 0;
            for (int tok = t0; tok < std::min(n, t0 + kRowsBlock); ++tok)
              for (int g = 0; g < G; ++g, ++R) {
                const std::size_t unit = static_cast<std::size_t>(tok) * s_.n_kv_heads + kvh;  // one chunk each
                qs[R] = q_.data() + static_cast<std::size_t>(tok) * H + (kvh * G + g) * D;
                lens[R] = n_past_ + tok + 1;
                outs[R] = part_.data() + unit * G * D + g * D;
                mss[R] = ms_.data() + unit * G * 2 + 2 * g;
              }
            attend_rows(simd_, qs.data(), lens.data(), R, K_[l].data() + static_cast<std::size_t>(kvh) * cap_ * D,
                        V_[l].data() + static_cast<std::size_t>(kvh) * cap_ * D, D, S, lds, kt, outs.data(), mss.data());
          }
        });
      } else team.run([&](int t, int nt) {
        float* sc = scores_.data() + static_cast<std::size_t>(t) * G * total;
        for (int u = t; u < units; u += nt) {
          const int tok = u / (s_.n_kv_heads * C), kvh = (u / C) % s_.n_kv_heads, c = u % C;
          const int len = n_past_ + tok + 1;
          attend_part(q_.data() + static_cast<std::size_t>(tok) * H + kvh * G * D, G, K_[l].data() + static_cast<std::size_t>(kvh) * cap_ * D,
                      V_[l].data() + static_cast<std::size_t>(kvh) * cap_ * D, len * c / C, len * (c + 1) / C, D, sc,
                      part_.data() + static_cast<std::size_t>(u) * G * D, ms_.data() + static_cast<std::size_t>(u) * G * 2);
        }
      });
      for (int tok = 0; tok < n; ++tok)
        for (int kvh = 0; kvh < s_.n_kv_heads; ++kvh)
          for (int g = 0; g < G; ++g) {
            const std::size_t u0 = (static_cast<std::size_t>(tok) * s_.n_kv_heads + kvh) * C;
            detail::combine_parts(part_.data() + u0 * G * D + g * D, G * D, ms_.data() + u0 * G * 2 + 2 * g, G * 2, C,
                                  D, att_.data() + static_cast<std::size_t>(tok) * H + (kvh * G + g) * D);
          }
      qa = quant(team, att_.data(), n, H, H, {&L.o});
      chunks(team, H, [&](int a, int b) { mm(L.o, att_.data(), qa, n, H, h_.data(), H, a, b); });
      for (std::size_t i = 0; i < nn * H; ++i) x_[i] += h_[i];
      rmsnorm(x_.data(), L.ffn_norm.data(), h_.data(), n);
      // gate and up for the same rows on one thread, then SwiGLU in place
      qa = quant(team, h_.data(), n, H, H, {&L.gate, &L.up});
      chunks(team, F, [&](int a, int b) {
        mm(L.gate, h_.data(), qa, n, H, ff_.data(), 2 * F, a, b);
        mm(L.up, h_.data(), qa, n, H, ff_.data() + F, 2 * F, a, b);
        for (int tok = 0; tok < n; ++tok) {
          float* g = ff_.data() + static_cast<std::size_t>(tok) * 2 * F;
          const float* u = g + F;
          swiglu(g + a, u + a, b - a);
        }
      });
      qa = quant(team, ff_.data(), n, 2 * F, F, {&L.down});
      chunks(team, H, [&](int a, int b) { mm(L.down, ff_.data(), qa, n, 2 * F, h_.data(), H, a, b); });
      for (std::size_t i = 0; i < nn * H; ++i) x_[i] += h_[i];
    }
    n_past_ = total;
    // the output head, for the last n_out tokens only
    rmsnorm(x_.data() + (nn - n_out) * H, out_norm_.data(), h_.data(), n_out);
    const Matrix& W = head_.rows ? head_ : embed_;
    const kq::Acts* qa = quant(team, h_.data(), n_out, H, H, {&W});
    chunks(team, s_.vocab, [&](int a, int b) { mm(W, h_.data(), qa, n_out, H, logits, s_.vocab, a, b); });
  }

 private:
  // f(a, b) over row ranges of [0, rows) handed out one at a time to the team's threads (a thread that the
  // machine's other work slows takes fewer): about 8 ranges per thread, each a multiple of 16 rows.
  template <class F>
  static void chunks(detail::Team& team, int rows, F&& f) {
    const int T = team.size();
    const int step = std::max(16, (rows / (8 * T) + 15) / 16 * 16);
    const int n = (rows + step - 1) / step;
    std::atomic<int> next{0};
    team.run([&](int, int) {
      for (int c; (c = next.fetch_add(1, std::memory_order_relaxed)) < n;) f(c * step, std::min(rows, (c + 1) * step));
    });
  }

  void grow(int total) {
    const int KV = s_.n_kv_heads * s_.head_dim;
    if (total <= cap_) return;
    int cap = std::max(cap_ * 2, 256);
    cap = std::min(std::max(cap, total), n_ctx_);
    const int D = s_.head_dim;
    for (int l = 0; l < s_.n_layers; ++l)
      for (auto* cache : {&K_[l], &V_[l]}) {
        std::vector<float> next(static_cast<std::size_t>(cap) * KV);
        for (int h = 0; h < s_.n_kv_heads && n_past_ > 0; ++h)
          std::memcpy(next.data() + static_cast<std::size_t>(h) * cap * D,
                      cache->data() + static_cast<std::size_t>(h) * cap_ * D, sizeof(float) * n_past_ * D);
        cache->swap(next);
      }
    cap_ = cap;
  }

  // rows [lo, hi) of a stacked row space that W occupies as [w0, w1): the overlap, written at W's row index.
  void span(const Matrix& W, int w0, int w1, int lo, int hi, const float* X, const kq::Acts* A, int n, int ldx,
            float* Y, int ldy) const {
    const int a = std::max(lo, w0), b = std::min(hi, w1);
    if (a < b) mm(W, X, A, n, ldx, Y, ldy, a - w0, b - w0);
  }

  // Y = X W^T for rows [r0, r1): K-quant matrices from the 8-bit activations A, the others from X.
  void mm(const Matrix& W, const float* X, const kq::Acts* A, int n, int ldx, float* Y, int ldy, int r0, int r1) const {
    if (W.kquant()) kq::matmul(kq_level_, W.view(), W.bias.empty() ? nullptr : W.bias.data(), *A, Y, ldy, r0, r1);
    else matmul(simd_, W, X, n, ldx, Y, ldy, r0, r1);
  }

  // The 8-bit activations of n rows of X (cols values, ldx apart) when one of `ws` is a K-quant matrix (else
  // nullptr), quantised once for all of them, the tokens split over the team.
  const kq::Acts* quant(detail::Team& team, const float* X, int n, int ldx, int cols,
                        std::initializer_list<const Matrix*> ws) {
    bool any = false;
    for (const Matrix* w : ws) any = any || w->kquant();
    if (!any) return nullptr;
    acts_.resize(n, cols);
    if (n == 1 || team.size() == 1) {
      kq::quantize(kq_level_, X, n, ldx, cols, acts_, 0, n);
    } else {
      team.run([&](int t, int nt) { kq::quantize(kq_level_, X, n, ldx, cols, acts_, n * t / nt, n * (t + 1) / nt); });
    }
    return &acts_;
  }

  void rmsnorm(const float* x, const float* w, float* out, int n) const {
    const int H = s_.hidden;
    for (int t = 0; t < n; ++t) {
      const float* xi = x + static_cast<std::size_t>(t) * H;
      float* o = out + static_cast<std::size_t>(t) * H;
      float ss = 0.0f;
      for (int c = 0; c < H; ++c) ss += xi[c] * xi[c];
      const float inv = 1.0f / std::sqrt(ss / H + s_.eps);
      for (int c = 0; c < H; ++c) o[c] = xi[c] * inv * w[c];
    }
  }

  // the cosines and sines of positions [pos0, pos0 + n) (rope_ rows of head_dim: half cosines, half sines)
  void rope_table(int pos0, int n) {
    const int half = s_.head_dim / 2;
    rope_.resize(static_cast<std::size_t>(n) * s_.head_dim);
    for (int t = 0; t < n; ++t)
      for (int i = 0; i < half; ++i) {
        const float a = static_cast<float>(pos0 + t) * inv_freq_[i];
        rope_[static_cast<std::size_t>(t) * s_.head_dim + i] = std::cos(a);
        rope_[static_cast<std::size_t>(t) * s_.head_dim + half + i] = std::sin(a);
      }
  }

  // rotate-half rotary embedding of one head of the batch's token t (in place)
  void rope(float* v, int t) const {
    const int half = s_.head_dim / 2;
    const float* cs = rope_.data() + static_cast<std::size_t>(t) * s_.head_dim;
    for (int i = 0; i < half; ++i) {
      const float c = cs[i], s = cs[half + i];
      const float x1 = v[i], x2 = v[i + half];
      v[i] = x1 * c - x2 * s;
      v[i + half] = x2 * c + x1 * s;
    }
  }

  void attend_part(const float* q, int G, const float* K, const float* V, int j0, int j1, int stride, float* scores,
                   float* out, float* ms) const {
    momoka::llm::attend_part(simd_, q, G, K, V, j0, j1, stride, s_.head_dim, scores, out, ms);
  }

  void swiglu(float* g, const float* u, int n) const {
#if MOMOKA_LLM_X86
    if (simd_ == Simd::Avx512) return detail::swiglu_avx512(g, u, n);
    if (simd_ == Simd::Avx2) return detail::swiglu_avx2(g, u, n);
#endif
    detail::swiglu_generic(g, u, n);
  }

  Shape s_;
  std::vector<Layer> layers_;
  Matrix embed_, head_;
  std::vector<float> out_norm_;
  int n_ctx_, threads_;
  Simd simd_;
  int kq_level_ = kquant_level(simd_);
  kq::Acts acts_;
  int n_past_ = 0, cap_ = 0;
  std::mutex mutex_;
  std::vector<std::vector<float>> K_, V_;  // per layer: kv heads x capacity x head_dim
  std::vector<float> inv_freq_, rope_, part_, ms_, x_, h_, q_, kv_, att_, ff_, scores_, rows_;
};

}  // namespace momoka::llm
