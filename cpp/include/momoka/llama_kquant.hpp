// GGUF K-quant weights (Q4_K, Q6_K) times 8-bit activations, for the native decoder (llama_decode.hpp).
//
// A K-quant row is cut into superblocks of 256 values. The weights keep the GGUF's bits (Q4_K: 4-bit codes
// with a 6-bit scale and min per 32 values and two float scales per superblock; Q6_K: 6-bit codes with an
// 8-bit scale per 16 values and one float scale), re-laid once at load so that one 512-bit integer
// dot-product step (VNNI `vpdpbusd`: 4 unsigned codes times 4 signed activations into each of 16 int32
// lanes) keeps every lane inside one group of 16 values that shares a scale: lane L of a superblock holds
// values 16 L .. 16 L + 15, step k (0..3) its values 16 L + 4 k .. 16 L + 4 k + 3.
//
// The activations of a product are quantised once per token, per superblock of 256 values, as llama.cpp's
// Q8_K does: the value of largest magnitude `mx` (signed) sets `iscale = -127 / mx`, each code is
// round-to-nearest-even(iscale * x) (at most 127), the scale is 1 / iscale. They are stored in the same lane
// order, with each lane's code sum (for Q4_K's mins and Q6_K's offset of 32).
//
// So a superblock's product is exact integer sums per lane, combined in float32:
//   Q4_K: sum_L (d sc[L/2] dx) isum_L - (dmin m[L/2]) (dx lsum_L)
//   Q6_K: sum_L (d sc[L] dx) (isum_L - 32 lsum_L)
// with isum_L = sum of code * activation code over the lane's 16 values and lsum_L their activation codes'
// sum. Kernels: AVX-512 with VNNI, AVX2 (the same steps as two halves of 8 lanes, `vpmaddubsw` +
// `vpmaddwd`), and plain loops; they differ only in the order of the float32 additions.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define MOMOKA_KQ_X86 1
#else
#define MOMOKA_KQ_X86 0
#endif

namespace momoka::llm::kq {

constexpr int kSuper = 256;       // values per superblock
constexpr int kQ4Bytes = 128;     // Q4_K code bytes per superblock (re-laid)
constexpr int kQ6Bytes = 192;     // Q6_K code bytes per superblock: 128 low nibbles, 64 bytes of high bits
constexpr int kGgufQ4Bytes = 144; // GGUF block_q4_K
constexpr int kGgufQ6Bytes = 210; // GGUF block_q6_K

enum class Kind { Q4K, Q6K };

inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000) << 16;
  std::uint32_t exp = (h >> 10) & 0x1F, man = h & 0x3FF, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while (!(man & 0x400)) {
        man <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((man & 0x3FF) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7F800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// The lane-order position (step k, byte 4 L + i) of value v of a superblock.
inline int lane_pos(int v) {
  const int L = v / 16, k = (v % 16) / 4, i = v % 4;
  return k * 64 + 4 * L + i;
}

// Re-lay GGUF superblocks. Q4_K: q gets 128 bytes per superblock (byte p of chunk c: step 2c's code in the
// low nibble, step 2c + 1's in the high one), d gets (d, dmin), s gets (sc[8], m[8]). Q6_K: q gets 128 bytes
// of low nibbles laid the same way then 64 bytes whose bits 2k, 2k + 1 of byte p are step k's high bits,
// d gets d, s gets the 16 int8 scales.
inline void relay_superblock(Kind kind, const std::uint8_t* src, std::uint8_t* q, float* d, std::uint8_t* s) {
  std::uint8_t code[kSuper];
  if (kind == Kind::Q4K) {
    std::uint16_t h0, h1;
    std::memcpy(&h0, src, 2);
    std::memcpy(&h1, src + 2, 2);
    d[0] = half_to_float(h0);
    d[1] = half_to_float(h1);
    const std::uint8_t* sc = src + 4;
    for (int j = 0; j < 8; ++j) {
      if (j < 4) {
        s[j] = sc[j] & 63;
        s[8 + j] = sc[j + 4] & 63;
      } else {
        s[j] = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
        s[8 + j] = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
      }
    }
    const std::uint8_t* qs = src + 16;
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l) {
        code[64 * c + l] = qs[32 * c + l] & 0xF;
        code[64 * c + 32 + l] = qs[32 * c + l] >> 4;
      }
  } else {
    const std::uint8_t* ql = src;
    const std::uint8_t* qh = src + 128;
    std::memcpy(s, src + 192, 16);
    std::uint16_t h;
    std::memcpy(&h, src + 208, 2);
    d[0] = half_to_float(h);
    for (int half = 0; half < 2; ++half)
      for (int l = 0; l < 32; ++l) {
        const std::uint8_t* a = ql + 64 * half;
        const std::uint8_t hb = qh[32 * half + l];
        const int v = 128 * half + l;
        code[v] = (a[l] & 0xF) | ((hb & 3) << 4);
        code[v + 32] = (a[l + 32] & 0xF) | (((hb >> 2) & 3) << 4);
        code[v + 64] = (a[l] >> 4) | (((hb >> 4) & 3) << 4);
        code[v + 96] = (a[l + 32] >> 4) | (((hb >> 6) & 3) << 4);
      }
  }
  std::uint8_t lane[kSuper];
  for (int v = 0; v < kSuper; ++v) lane[lane_pos(v)] = code[v];
  for (int c = 0; c < 2; ++c)
    for (int p = 0; p < 64; ++p) q[64 * c + p] = (lane[128 * c + p] & 0xF) | ((lane[128 * c + 64 + p] & 0xF) << 4);
  if (kind == Kind::Q6K) {
    std::uint8_t* hi = q + 128;
    for (int p = 0; p < 64; ++p) {
      std::uint8_t b = 0;
      for (int k = 0; k < 4; ++k) b |= ((lane[64 * k + p] >> 4) & 3) << (2 * k);
      hi[p] = b;
    }
  }
}

// The float32 value of column c of a re-laid row (superblock records q, d, s of that row).
inline float value_at(Kind kind, const std::uint8_t* q, const float* d, const std::uint8_t* s, int c) {
  const int b = c / kSuper, v = c % kSuper, pos = lane_pos(v), k = pos / 64, p = pos % 64;
  if (kind == Kind::Q4K) {
    const std::uint8_t* qb = q + static_cast<std::size_t>(b) * kQ4Bytes;
    const std::uint8_t byte = qb[64 * (k / 2) + p];
    const int code = (k % 2) ? byte >> 4 : byte & 0xF;
    const float* db = d + 2 * b;
    const std::uint8_t* sb = s + 16 * b;
    return db[0] * static_cast<float>(sb[v / 32]) * static_cast<float>(code) -
           db[1] * static_cast<float>(sb[8 + v / 32]);
  }
  const std::uint8_t* qb = q + static_cast<std::size_t>(b) * kQ6Bytes;
  const std::uint8_t byte = qb[64 * (k / 2) + p];
  const int code = (((k % 2) ? byte >> 4 : byte & 0xF) | (((qb[128 + p] >> (2 * k)) & 3) << 4)) - 32;
  return d[b] * static_cast<float>(static_cast<std::int8_t>(s[16 * b + v / 16])) * static_cast<float>(code);
}

// 8-bit activations of n tokens (see the header): per token and superblock, 256 codes in lane order, the
// scale, and per lane the code sum as float times the scale (bf) and as int32 times -32 (s32).
struct Acts {
  int n = 0, nsb = 0;
  std::vector<std::int8_t> q;
  std::vector<float> d, bf;
  std::vector<std::int32_t> s32;

  void resize(int tokens, int cols) {
    n = tokens;
    nsb = cols / kSuper;
    const std::size_t blocks = static_cast<std::size_t>(n) * nsb;
    if (q.size() < blocks * kSuper) q.resize(blocks * kSuper);
    if (d.size() < blocks) d.resize(blocks);
    if (bf.size() < blocks * 16) bf.resize(blocks * 16);
    if (s32.size() < blocks * 16) s32.resize(blocks * 16);
  }
  const std::int8_t* qb(int t, int b) const { return q.data() + (static_cast<std::size_t>(t) * nsb + b) * kSuper; }
  float db(int t, int b) const { return d[static_cast<std::size_t>(t) * nsb + b]; }
  const float* bfb(int t, int b) const { return bf.data() + (static_cast<std::size_t>(t) * nsb + b) * 16; }
  const std::int32_t* s32b(int t, int b) const { return s32.data() + (static_cast<std::size_t>(t) * nsb + b) * 16; }
};

// Quantise token t's row x (cols values, a multiple of 256) into A.
inline void quantize_row(const float* x, int cols, Acts& A, int t) {
  const int nsb = cols / kSuper;
  for (int b = 0; b < nsb; ++b) {
    const float* xb = x + static_cast<std::size_t>(b) * kSuper;
    float amax = 0.0f, mx = 0.0f;
    for (int v = 0; v < kSuper; ++v) {
      const float a = std::fabs(xb[v]);
      if (a > amax) {
        amax = a;
        mx = xb[v];
      }
    }
    const std::size_t blk = static_cast<std::size_t>(t) * nsb + b;
    std::int8_t* q = A.q.data() + blk * kSuper;
    float* bf = A.bf.data() + blk * 16;
    std::int32_t* s32 = A.s32.data() + blk * 16;
    if (amax == 0.0f) {
      std::memset(q, 0, kSuper);
      A.d[blk] = 0.0f;
      for (int L = 0; L < 16; ++L) bf[L] = 0.0f, s32[L] = 0;
      continue;
    }
    const float iscale = -127.0f / mx;
    int lsum[16] = {0};
    for (int v = 0; v < kSuper; ++v) {
      const int c = std::min(127, static_cast<int>(std::nearbyint(iscale * xb[v])));
      q[lane_pos(v)] = static_cast<std::int8_t>(c);
      lsum[v / 16] += c;
    }
    const float dx = 1.0f / iscale;
    A.d[blk] = dx;
    for (int L = 0; L < 16; ++L) {
      bf[L] = dx * static_cast<float>(lsum[L]);
      s32[L] = -32 * lsum[L];
    }
  }
}

// A re-laid K-quant matrix as raw pointers.
struct View {
  Kind kind;
  const std::uint8_t* q;
  const float* d;
  const std::uint8_t* s;
  int nsb;
  std::size_t qbytes() const { return kind == Kind::Q4K ? kQ4Bytes : kQ6Bytes; }
};

// ---------------------------------------------------------------------------------------------------------
// Plain loops: the lanes' partial sums in the kernels' order (lane-wise over superblocks, then the 16 lanes).

inline float dot_scalar(const View& W, int r, const Acts& A, int t) {
  float acc[16] = {0};
  for (int b = 0; b < W.nsb; ++b) {
    const std::size_t blk = static_cast<std::size_t>(r) * W.nsb + b;
    const std::uint8_t* q = W.q + blk * W.qbytes();
    const std::uint8_t* s = W.s + blk * 16;
    const std::int8_t* x = A.qb(t, b);
    const float dx = A.db(t, b);
    std::int32_t isum[16];
    for (int L = 0; L < 16; ++L) isum[L] = W.kind == Kind::Q6K ? A.s32b(t, b)[L] : 0;
    for (int k = 0; k < 4; ++k)
      for (int p = 0; p < 64; ++p) {
        const std::uint8_t byte = q[64 * (k / 2) + p];
        int code = (k % 2) ? byte >> 4 : byte & 0xF;
        if (W.kind == Kind::Q6K) code |= ((q[128 + p] >> (2 * k)) & 3) << 4;
        isum[p / 4] += code * x[64 * k + p];
      }
    if (W.kind == Kind::Q4K) {
      const float d = W.d[2 * blk], dmin = W.d[2 * blk + 1];
      const float* bf = A.bfb(t, b);
      for (int L = 0; L < 16; ++L) {
        acc[L] = std::fma(static_cast<float>(isum[L]), d * static_cast<float>(s[L / 2]) * dx, acc[L]);
        acc[L] = std::fma(-(dmin * static_cast<float>(s[8 + L / 2])), bf[L], acc[L]);
      }
    } else {
      const float d = W.d[blk];
      for (int L = 0; L < 16; ++L)
        acc[L] = std::fma(static_cast<float>(isum[L]),
                          d * static_cast<float>(static_cast<std::int8_t>(s[L])) * dx, acc[L]);
    }
  }
  float sum = 0.0f;
  for (int L = 0; L < 16; ++L) sum += acc[L];
  return sum;
}

inline void matmul_scalar(const View& W, const float* bias, const Acts& A, float* Y, int ldy, int r0, int r1) {
  for (int r = r0; r < r1; ++r)
    for (int t = 0; t < A.n; ++t)
      Y[static_cast<std::size_t>(t) * ldy + r] = dot_scalar(W, r, A, t) + (bias ? bias[r] : 0.0f);
}

#if MOMOKA_KQ_X86
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define MOMOKA_KQ_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,fma")))
#define MOMOKA_KQ_AVX2 __attribute__((target("avx2,fma")))

// Quantise a row with AVX-512 (the same codes as quantize_row: the same float32 products and rounding).
MOMOKA_KQ_VNNI inline void quantize_row512(const float* x, int cols, Acts& A, int t) {
  const int nsb = cols / kSuper;
  for (int b = 0; b < nsb; ++b) {
    const float* xb = x + static_cast<std::size_t>(b) * kSuper;
    __m512 m = _mm512_setzero_ps();
    for (int v = 0; v < kSuper; v += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(xb + v)));
    const float amax = _mm512_reduce_max_ps(m);
    const std::size_t blk = static_cast<std::size_t>(t) * nsb + b;
    std::int8_t* q = A.q.data() + blk * kSuper;
    float* bf = A.bf.data() + blk * 16;
    std::int32_t* s32 = A.s32.data() + blk * 16;
    if (amax == 0.0f) {
      std::memset(q, 0, kSuper);
      A.d[blk] = 0.0f;
      for (int L = 0; L < 16; ++L) bf[L] = 0.0f, s32[L] = 0;
      continue;
    }
    float mx = 0.0f;  // the first value of largest magnitude, as the plain loop picks it
    for (int v = 0; v < kSuper; ++v)
      if (std::fabs(xb[v]) == amax) {
        mx = xb[v];
        break;
      }
    const float iscale = -127.0f / mx;
    const __m512 is = _mm512_set1_ps(iscale);
    // codes in value order (lane L's 16 values are contiguous), then their 4-byte groups moved to lane order
    alignas(64) std::uint32_t words[64];
    int ls[16];
    for (int L = 0; L < 16; ++L) {
      __m512i c = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + 16 * L), is));
      c = _mm512_min_epi32(c, _mm512_set1_epi32(127));
      ls[L] = _mm512_reduce_add_epi32(c);
      _mm_store_si128(reinterpret_cast<__m128i*>(words + 4 * L), _mm512_cvtepi32_epi8(c));
    }
    for (int k = 0; k < 4; ++k)
      for (int L = 0; L < 16; ++L) std::memcpy(q + 64 * k + 4 * L, words + 4 * L + k, 4);
    const float dx = 1.0f / iscale;
    A.d[blk] = dx;
    for (int L = 0; L < 16; ++L) {
      bf[L] = dx * static_cast<float>(ls[L]);
      s32[L] = -32 * ls[L];
    }
  }
}

// One superblock of a row in registers: the 4 steps' codes, the per-lane float scales (times d) and, for
// Q4_K, the per-lane mins (times dmin).
struct Wb512 {
  __m512i w[4];
  __m512 vs, vm;
};

template <Kind K>
MOMOKA_KQ_VNNI inline void load512(const View& W, std::size_t blk, Wb512& o) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const std::uint8_t* q = W.q + blk * (K == Kind::Q4K ? kQ4Bytes : kQ6Bytes);
  const __m512i a = _mm512_loadu_si512(q), c = _mm512_loadu_si512(q + 64);
  o.w[0] = _mm512_and_si512(a, low4);
  o.w[1] = _mm512_and_si512(_mm512_srli_epi16(a, 4), low4);
  o.w[2] = _mm512_and_si512(c, low4);
  o.w[3] = _mm512_and_si512(_mm512_srli_epi16(c, 4), low4);
  const std::uint8_t* s = W.s + blk * 16;
  if (K == Kind::Q4K) {
    const __m128i sm = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));  // sc[8], m[8]
    const __m128i sc2 = _mm_unpacklo_epi8(sm, sm), m2 = _mm_unpackhi_epi8(sm, sm);
    o.vs = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(sc2)), _mm512_set1_ps(W.d[2 * blk]));
    o.vm = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(m2)), _mm512_set1_ps(W.d[2 * blk + 1]));
  } else {
    const __m512i h = _mm512_loadu_si512(q + 128), hi2 = _mm512_set1_epi8(0x30);
    o.w[0] = _mm512_or_si512(o.w[0], _mm512_and_si512(_mm512_slli_epi16(h, 4), hi2));
    o.w[1] = _mm512_or_si512(o.w[1], _mm512_and_si512(_mm512_slli_epi16(h, 2), hi2));
    o.w[2] = _mm512_or_si512(o.w[2], _mm512_and_si512(h, hi2));
    o.w[3] = _mm512_or_si512(o.w[3], _mm512_and_si512(_mm512_srli_epi16(h, 2), hi2));
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    o.vs = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc)), _mm512_set1_ps(W.d[blk]));
  }
}

// acc += one superblock of row (o) times token t's activations.
template <Kind K>
MOMOKA_KQ_VNNI inline __m512 step512(const Wb512& o, const Acts& A, int t, int b, __m512 acc) {
  const std::int8_t* x = A.qb(t, b);
  __m512i i = K == Kind::Q6K ? _mm512_loadu_si512(A.s32b(t, b)) : _mm512_setzero_si512();
  i = _mm512_dpbusd_epi32(i, o.w[0], _mm512_loadu_si512(x));
  i = _mm512_dpbusd_epi32(i, o.w[1], _mm512_loadu_si512(x + 64));
  i = _mm512_dpbusd_epi32(i, o.w[2], _mm512_loadu_si512(x + 128));
  i = _mm512_dpbusd_epi32(i, o.w[3], _mm512_loadu_si512(x + 192));
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i), _mm512_mul_ps(o.vs, _mm512_set1_ps(A.db(t, b))), acc);
  if (K == Kind::Q4K) acc = _mm512_fnmadd_ps(o.vm, _mm512_loadu_ps(A.bfb(t, b)), acc);
  return acc;
}

// Horizontal sums of 8 vectors: lane k of the result is the sum of v[k].
MOMOKA_KQ_VNNI inline __m256 sum8(const __m512* v) {
  __m256 a[8];
  for (int k = 0; k < 8; ++k)
    a[k] = _mm256_add_ps(_mm512_castps512_ps256(v[k]), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v[k]), 1)));
  const __m256 h01 = _mm256_hadd_ps(a[0], a[1]), h23 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 h45 = _mm256_hadd_ps(a[4], a[5]), h67 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 h0123 = _mm256_hadd_ps(h01, h23), h4567 = _mm256_hadd_ps(h45, h67);
  return _mm256_add_ps(_mm256_permute2f128_ps(h0123, h4567, 0x20), _mm256_permute2f128_ps(h0123, h4567, 0x31));
}

constexpr int kTokenBlock = 64;  // tokens whose activations stay in the L2 cache while every row passes

// NR rows by NT tokens from token t: out[i * NT + j].
template <Kind K, int NR, int NT>
MOMOKA_KQ_VNNI inline void tile512(const View& W, int r, const Acts& A, int t, float* out) {
  __m512 acc[NR * NT];
  for (int i = 0; i < NR * NT; ++i) acc[i] = _mm512_setzero_ps();
  for (int b = 0; b < W.nsb; ++b) {
    Wb512 o[NR];
    for (int i = 0; i < NR; ++i) load512<K>(W, static_cast<std::size_t>(r + i) * W.nsb + b, o[i]);
    for (int j = 0; j < NT; ++j)
      for (int i = 0; i < NR; ++i) acc[i * NT + j] = step512<K>(o[i], A, t + j, b, acc[i * NT + j]);
  }
  if (NR * NT == 8) {
    _mm256_storeu_ps(out, sum8(acc));
  } else {
    for (int i = 0; i < NR * NT; ++i) out[i] = _mm512_reduce_add_ps(acc[i]);
  }
}

template <Kind K, int NR = 2, int NT = 4>
MOMOKA_KQ_VNNI inline void matmul512(const View& W, const float* bias, const Acts& A, float* Y, int ldy, int r0,
                                     int r1) {
  auto put = [&](int t, int r, float v) { Y[static_cast<std::size_t>(t) * ldy + r] = v + (bias ? bias[r] : 0.0f); };
  if (A.n == 1) {  // one token: a row at a time, two superblocks in flight
    for (int r = r0; r < r1; ++r) {
      __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
      const std::size_t base = static_cast<std::size_t>(r) * W.nsb;
      int b = 0;
      for (; b + 2 <= W.nsb; b += 2) {
        Wb512 o0, o1;
        load512<K>(W, base + b, o0);
        load512<K>(W, base + b + 1, o1);
        a0 = step512<K>(o0, A, 0, b, a0);
        a1 = step512<K>(o1, A, 0, b + 1, a1);
      }
      for (; b < W.nsb; ++b) {
        Wb512 o;
        load512<K>(W, base + b, o);
        a0 = step512<K>(o, A, 0, b, a0);
      }
      put(0, r, _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)));
    }
    return;
  }
  float out[NR * NT];
  for (int t0 = 0; t0 < A.n; t0 += kTokenBlock) {
    const int t1 = std::min(A.n, t0 + kTokenBlock);
    for (int r = r0; r < r1;) {
      const int nr = r + NR <= r1 ? NR : 1;
      int t = t0;
      for (; t + NT <= t1; t += NT) {
        if (nr == NR) tile512<K, NR, NT>(W, r, A, t, out);
        else tile512<K, 1, NT>(W, r, A, t, out);
        for (int i = 0; i < nr; ++i)
          for (int j = 0; j < NT; ++j) put(t + j, r + i, out[i * NT + j]);
      }
      for (; t < t1; ++t) {
        if (nr == NR) tile512<K, NR, 1>(W, r, A, t, out);
        else tile512<K, 1, 1>(W, r, A, t, out);
        for (int i = 0; i < nr; ++i) put(t, r + i, out[i]);
      }
      r += nr;
    }
  }
}

// AVX2: each 16-lane step as two halves of 8 lanes; 4 unsigned codes times 4 signed activations summed by
// vpmaddubsw (pairs, at most 2 * 63 * 127: no saturation) and vpmaddwd with ones.
MOMOKA_KQ_AVX2 inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <Kind K>
MOMOKA_KQ_AVX2 inline float dot256(const View& W, int r, const Acts& A, int t) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), hi2 = _mm256_set1_epi8(0x30), ones = _mm256_set1_epi16(1);
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int b = 0; b < W.nsb; ++b) {
    const std::size_t blk = static_cast<std::size_t>(r) * W.nsb + b;
    const std::uint8_t* q = W.q + blk * W.qbytes();
    const std::uint8_t* s = W.s + blk * 16;
    const std::int8_t* x = A.qb(t, b);
    const float dx = A.db(t, b);
    for (int h = 0; h < 2; ++h) {  // lanes 8 h .. 8 h + 7: bytes 32 h .. 32 h + 31 of each step
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * h));
      const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 + 32 * h));
      __m256i w[4] = {_mm256_and_si256(a, low4), _mm256_and_si256(_mm256_srli_epi16(a, 4), low4),
                      _mm256_and_si256(c, low4), _mm256_and_si256(_mm256_srli_epi16(c, 4), low4)};
      __m256i i;
      __m256 vs;
      if (K == Kind::Q6K) {
        const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 128 + 32 * h));
        w[0] = _mm256_or_si256(w[0], _mm256_and_si256(_mm256_slli_epi16(hb, 4), hi2));
        w[1] = _mm256_or_si256(w[1], _mm256_and_si256(_mm256_slli_epi16(hb, 2), hi2));
        w[2] = _mm256_or_si256(w[2], _mm256_and_si256(hb, hi2));
        w[3] = _mm256_or_si256(w[3], _mm256_and_si256(_mm256_srli_epi16(hb, 2), hi2));
        i = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(A.s32b(t, b) + 8 * h));
        const __m128i sc = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(s + 8 * h));
        vs = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)), _mm256_set1_ps(W.d[blk]));
      } else {
        i = _mm256_setzero_si256();
        std::uint8_t sc2[8];
        for (int L = 0; L < 8; ++L) sc2[L] = s[(8 * h + L) / 2];
        const __m128i scv = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc2));
        vs = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(scv)), _mm256_set1_ps(W.d[2 * blk]));
      }
      for (int k = 0; k < 4; ++k) {
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 64 * k + 32 * h));
        i = _mm256_add_epi32(i, _mm256_madd_epi16(_mm256_maddubs_epi16(w[k], xv), ones));
      }
      acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i), _mm256_mul_ps(vs, _mm256_set1_ps(dx)), acc[h]);
      if (K == Kind::Q4K) {
        std::uint8_t m2[8];
        for (int L = 0; L < 8; ++L) m2[L] = s[8 + (8 * h + L) / 2];
        const __m128i mv = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(m2));
        const __m256 vm = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mv)), _mm256_set1_ps(W.d[2 * blk + 1]));
        acc[h] = _mm256_fnmadd_ps(vm, _mm256_loadu_ps(A.bfb(t, b) + 8 * h), acc[h]);
      }
    }
  }
  return hsum256(_mm256_add_ps(acc[0], acc[1]));
}

template <Kind K>
MOMOKA_KQ_AVX2 inline void matmul256(const View& W, const float* bias, const Acts& A, float* Y, int ldy, int r0,
                                     int r1) {
  for (int t0 = 0; t0 < A.n; t0 += kTokenBlock) {
    const int t1 = std::min(A.n, t0 + kTokenBlock);
    for (int r = r0; r < r1; ++r)
      for (int t = t0; t < t1; ++t)
        Y[static_cast<std::size_t>(t) * ldy + r] = dot256<K>(W, r, A, t) + (bias ? bias[r] : 0.0f);
  }
}
#pragma GCC diagnostic pop
#endif

// Which K-quant kernels this CPU runs: 2 AVX-512 with VNNI, 1 AVX2, 0 plain loops.
inline int best_level() {
#if MOMOKA_KQ_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512vnni"))
    return 2;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 1;
#endif
  return 0;
}

// Quantise n rows of x (ldx apart, cols values each) into A with kernels of `level` (at most best_level()).
inline void quantize(int level, const float* x, int n, int ldx, int cols, Acts& A, int t0, int t1) {
  for (int t = t0; t < t1; ++t) {
#if MOMOKA_KQ_X86
    if (level >= 2) {
      quantize_row512(x + static_cast<std::size_t>(t) * ldx, cols, A, t);
      continue;
    }
#endif
    quantize_row(x + static_cast<std::size_t>(t) * ldx, cols, A, t);
  }
  (void)n;
}

// Y[t * ldy + r] = row r of W times token t's activations (+ bias) for rows [r0, r1), every token of A.
inline void matmul(int level, const View& W, const float* bias, const Acts& A, float* Y, int ldy, int r0, int r1) {
#if MOMOKA_KQ_X86
  if (level >= 2) {
    // tiles measured fastest (single thread, 2048 x 1536, 128 tokens): Q4_K 4 rows x 2 tokens (79 GMAC/s
    // against 70 for 2 x 4), Q6_K 2 rows x 4 tokens (71 against 61 for 4 x 2)
    if (W.kind == Kind::Q4K) return matmul512<Kind::Q4K, 4, 2>(W, bias, A, Y, ldy, r0, r1);
    return matmul512<Kind::Q6K, 2, 4>(W, bias, A, Y, ldy, r0, r1);
  }
  if (level == 1) {
    if (W.kind == Kind::Q4K) return matmul256<Kind::Q4K>(W, bias, A, Y, ldy, r0, r1);
    return matmul256<Kind::Q6K>(W, bias, A, Y, ldy, r0, r1);
  }
#endif
  matmul_scalar(W, bias, A, Y, ldy, r0, r1);
}

}  // namespace momoka::llm::kq
