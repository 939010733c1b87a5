// codec/seed_search_detail.h - the per-seed float expressions of the search, shared by the scalar reference and the
// fast search's table build and winner recovery, and run as they are by the CUDA search (cuda/seed_search.cu, built
// with -fmad=false so nvcc fuses no multiply-add, as the host build's -ffp-contract=off). The SIMD search
// (seed_search.cpp) repeats exactly these operations in exactly this order, one seed per lane, so all give the same
// bits. Free of fmt (nvcc compiles this header).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "codec/lfsr.h"
#include "codec/seed_arith.h"

namespace seedling::seed::detail {

SEEDLING_HD int float_exponent_field(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return int((u >> 23) & 0xFF);
}

// Lower Cholesky factor of G = U^T diag(h) U, packed row-major (L00, L10, L11, L20, ...); false when a pivot is
// not positive. G[i][j] = sum_c U[c][i] * (h[c] * U[c][j]), c ascending.
SEEDLING_HD bool gram_cholesky(int C, int P, const float* U, const float* h, float* L) {
  float G[kMaxCoefs][kMaxCoefs];
  for (int i = 0; i < P; ++i) {
    for (int j = 0; j <= i; ++j) {
      float g = 0.0f;
      for (int c = 0; c < C; ++c) g = g + U[c * P + i] * (h[c] * U[c * P + j]);
      G[i][j] = g;
    }
  }
  float M[kMaxCoefs][kMaxCoefs];
  for (int i = 0; i < P; ++i) {
    for (int j = 0; j <= i; ++j) {
      float s = G[i][j];
      for (int k = 0; k < j; ++k) s = s - M[i][k] * M[j][k];
      if (i == j) {
        if (!(s > 0.0f) || float_exponent_field(s) == 255) return false;
        M[i][i] = std::sqrt(s);
      } else {
        M[i][j] = s / M[j][j];
      }
    }
  }
  int k = 0;
  for (int i = 0; i < P; ++i)
    for (int j = 0; j <= i; ++j) L[k++] = M[i][j];
  return true;
}

SEEDLING_HD int tri(int i, int j) {
  return i * (i + 1) / 2 + j;
}

struct SeedScore {
  float err;
  int cand;  // 0, 1, 2: e0, e0 - 1, e0 + 1
  int e;
  int8_t q[kMaxCoefs];
};

// Scores one seed (U, Sf = float(S), L its factor) on block x with hx = h * x; lo/hi the exponent window.
// err = +inf when t is not finite.
SEEDLING_HD SeedScore score_seed(int C, int P, const float* U, const float* Sf, const float* L, const float* x,
                                 const float* h, const float* hx, int lo, int hi) {
  float b[kMaxCoefs] = {}, y[kMaxCoefs] = {}, t[kMaxCoefs] = {};
  for (int p = 0; p < P; ++p) {
    float s = 0.0f;
    for (int c = 0; c < C; ++c) s = s + U[c * P + p] * hx[c];
    b[p] = s;
  }
  for (int i = 0; i < P; ++i) {
    float s = b[i];
    for (int k = 0; k < i; ++k) s = s - L[tri(i, k)] * y[k];
    y[i] = s / L[tri(i, i)];
  }
  for (int i = P - 1; i >= 0; --i) {
    float s = y[i];
    for (int k = i + 1; k < P; ++k) s = s - L[tri(k, i)] * t[k];
    t[i] = s / L[tri(i, i)];
  }
  SeedScore best{INFINITY, 0, lo, {0, 0, 0, 0}};
  float m = 0.0f;
  for (int p = 0; p < P; ++p) {
    if (float_exponent_field(t[p]) == 255) return best;
    m = std::max(m, std::fabs(t[p]));
  }
  const int field = float_exponent_field(m);
  int e0 = field == 0 ? lo : field - 127 - 2;
  e0 = std::min(std::max(e0, lo), hi);
  const int cands[3] = {e0, std::max(e0 - 1, lo), std::min(e0 + 1, hi)};
  for (int ci = 0; ci < 3; ++ci) {
    const int e = cands[ci];
    const float inv = pow2f(-e), scale = seed_scale(e);
    float q[kMaxCoefs];
    for (int p = 0; p < P; ++p) q[p] = std::min(std::max(std::nearbyint(t[p] * inv), -8.0f), 7.0f);
    float err = 0.0f;
    for (int c = 0; c < C; ++c) {
      float isum = 0.0f;
      for (int p = 0; p < P; ++p) isum = isum + Sf[c * P + p] * q[p];
      const float d = x[c] - round_bf16(isum * scale);
      err = err + (h[c] * d) * d;
    }
    if (err < best.err) {
      best.err = err;
      best.cand = ci;
      best.e = e;
      for (int p = 0; p < P; ++p) best.q[p] = int8_t(q[p]);
    }
  }
  return best;
}

}  // namespace seedling::seed::detail
