// codec/seed_matmul.cpp - matvec and matmul on seed slices (codec/seed_matmul.h).
#include "codec/seed_matmul.h"

#include <vector>

#include "codec/lfsr.h"
#include "core/thread_pool.h"
#include "ops/matmul.h"

namespace seedling::seed {

namespace {

template <int C, int P, bool kApart>
void decode_row_t(const SeedMatrix& w, const SeedSliceLayout& L, int64_t r, float* out) {
  const uint8_t* blob = w.blob;
  const int32_t bias = seed_blob_bias(blob);
  const int64_t i0 = r * L.blocks_per_row;
  const uint8_t* seeds = blob + L.seeds_offset;
  const uint8_t* words = blob + L.words_offset;
  const uint8_t* codes = blob + L.codes_offset;
  constexpr int kShift0 = kApart ? 0 : 4;
  for (int64_t j = 0; j < L.blocks_per_row; ++j) {
    const int64_t i = i0 + j;
    uint16_t seed, word;
    std::memcpy(&seed, seeds + 2 * i, 2);
    std::memcpy(&word, words + 2 * i, 2);
    const int code = kApart ? (codes[i / 2] >> (4 * (i & 1))) & 0xF : word & 0xF;
    const float scale = seed_scale(bias + code);
    int32_t q[P];
    for (int p = 0; p < P; ++p) {
      const int nib = (word >> (kShift0 + 4 * p)) & 0xF;
      q[p] = nib >= 8 ? nib - 16 : nib;
    }
    const uint64_t stream = lfsr_stream(seed);
    float wb[C];
    for (int c = 0; c < C; ++c) {
      int32_t isum = 0;
      for (int p = 0; p < P; ++p) isum += (int32_t(uint16_t(stream >> (c * P + p + 1))) - 32768) * q[p];
      wb[c] = round_bf16(float(isum) * scale);
    }
    const int64_t k0 = j * C;
    if (k0 + C <= w.cols) {
      std::memcpy(out + k0, wb, sizeof(wb));
    } else {
      for (int64_t c = 0; k0 + c < w.cols; ++c) out[k0 + c] = wb[c];
    }
  }
}

}  // namespace

void decode_seed_row(const SeedMatrix& w, int64_t r, float* out) {
  const SeedSliceLayout L = seed_slice_layout(w.tier, w.rows, w.cols);
  switch (w.tier) {
    case SeedTier::P3:
      return decode_row_t<8, 3, false>(w, L, r, out);
    case SeedTier::P4:
      return decode_row_t<8, 4, true>(w, L, r, out);
    case SeedTier::S3:
      return decode_row_t<12, 4, true>(w, L, r, out);
  }
}

void seed_matmul(const float* x, int64_t m, const SeedMatrix& w, float* y) {
  const SeedSliceLayout L = seed_slice_layout(w.tier, w.rows, w.cols);
  ThreadPool::global().parallel_for(size_t(w.rows), 16, [&](size_t r0, size_t r1) {
    std::vector<float> row(size_t(L.blocks_per_row) * kMaxBlock);
    for (size_t r = r0; r < r1; ++r) {
      decode_seed_row(w, int64_t(r), row.data());
      for (int64_t i = 0; i < m; ++i) y[i * w.rows + int64_t(r)] = ops::dot(x + i * w.cols, row.data(), w.cols);
    }
  });
}

namespace ref {
void seed_matmul(const float* x, int64_t m, const SeedMatrix& w, float* y) {
  std::vector<float> W(size_t(w.rows * w.cols));
  decode_seed_matrix(w, W.data());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t r = 0; r < w.rows; ++r) {
      float s = 0.0f;
      for (int64_t k = 0; k < w.cols; ++k) s += x[i * w.cols + k] * W[size_t(r * w.cols + k)];
      y[i * w.rows + r] = s;
    }
  }
}
}  // namespace ref

}  // namespace seedling::seed
