// The fast kernels of ops/matmul.h: Highway SIMD with runtime dispatch to the best target of this CPU.
//
// Each output y[i][n] has its own accumulator vector: lanes accumulate x[i][k..] * W[n][k..] with fused
// multiply-adds over k in steps of the vector width, then the lanes are summed, then the k tail (cols not a
// multiple of the width) is added one term at a time. Tiles of up to 4 x 4 outputs share loads but never
// share accumulators, so the tile shape, the batch size m and the thread split leave every result's bits alone.
// A row of W is read front to back by a row reader: StoredRow (LoadWeights below) or, for ggml's quant blocks,
// GgmlRow (ops/ggml_decode-inl.h); either way each weight is codec_value's, bit for bit.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/matmul_fast.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "ops/ggml_decode-inl.h"
#include "ops/ggml_int8.h"
#include "ops/matmul.h"
#include "ops/seed_matmul.h"

HWY_BEFORE_NAMESPACE();
namespace seedling::ops::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// L weights of a stored row from element k; an affine codec's L never straddles a group or a nibble half
// (MatmulRange checks L divides G/2), and each weight is d * q + m as codec_value computes it.
template <Codec T>
HWY_INLINE VF LoadWeights(DF df, const void* row, int64_t k) {
  if constexpr (T == Codec::F32) {
    return hn::LoadU(df, static_cast<const float*>(row) + k);
  } else if constexpr (T == Codec::BF16) {
    const hn::Rebind<uint16_t, DF> du16;
    const hn::Rebind<uint32_t, DF> du32;
    const auto wide = hn::PromoteTo(du32, hn::LoadU(du16, static_cast<const uint16_t*>(row) + k));
    return hn::BitCast(df, hn::ShiftLeft<16>(wide));
  } else if constexpr (T == Codec::F16) {
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(df, hn::LoadU(dh, static_cast<const hwy::float16_t*>(row) + k));
  } else if constexpr (T == Codec::FP8_G32) {
    // An e4m3 code c is the float16 ((c & 0x80) << 8) | ((c & 0x7F) << 7) times 2^8 exactly (the exponent bias 7
    // against 15; subnormals map to subnormals), so e4m3(c) * d is that float16 widened, times 256, times d: the
    // same two float32 multiplies (the first exact) as kE4m3Values[c] * d. L divides 32 (MatmulRange checks).
    const uint8_t* block = static_cast<const uint8_t*>(row) + size_t(k / 32) * sizeof(BlockFp8G32);
    float d;
    std::memcpy(&d, block, 4);
    const hn::Rebind<uint8_t, DF> du8;
    const hn::Rebind<uint16_t, DF> du16;
    const hn::Rebind<hwy::float16_t, DF> dh;
    const auto c = hn::PromoteTo(du16, hn::LoadU(du8, block + 4 + k % 32));
    const auto h =
        hn::Or(hn::ShiftLeft<8>(hn::And(c, hn::Set(du16, 0x80))), hn::ShiftLeft<7>(hn::And(c, hn::Set(du16, 0x7F))));
    const VF v = hn::Mul(hn::PromoteTo(df, hn::BitCast(dh, h)), hn::Set(df, 256.0f));
    return hn::Mul(v, hn::Set(df, d));
  } else {
    constexpr int64_t G = T == Codec::Q8_G32 || T == Codec::Q4_G32 ? 32 : 64;
    constexpr bool kQ4 = T == Codec::Q4_G32 || T == Codec::Q4_G64;
    constexpr size_t kBlock = kQ4 ? 4 + G / 2 : 4 + G;
    const uint8_t* block = static_cast<const uint8_t*>(row) + size_t(k / G) * kBlock;
    const int64_t j = k % G;
    uint16_t dh, mh;
    std::memcpy(&dh, block, 2);
    std::memcpy(&mh, block + 2, 2);
    const hn::Rebind<uint8_t, DF> du8;
    const hn::Rebind<int32_t, DF> di32;
    VF qf;
    if constexpr (kQ4) {
      const bool high = j >= G / 2;
      const auto bytes = hn::PromoteTo(di32, hn::LoadU(du8, block + 4 + (high ? j - G / 2 : j)));
      const auto nib = high ? hn::ShiftRight<4>(bytes) : hn::And(bytes, hn::Set(di32, 0x0F));
      qf = hn::ConvertTo(df, nib);
    } else {
      qf = hn::ConvertTo(df, hn::PromoteTo(di32, hn::LoadU(du8, block + 4 + j)));
    }
    return hn::Add(hn::Mul(hn::Set(df, f16_to_f32(dh)), qf), hn::Set(df, f16_to_f32(mh)));
  }
}

template <Codec T>
HWY_INLINE float LoadWeight(const void* row, int64_t k) {
  return codec_value(T, static_cast<const uint8_t*>(row), k);
}

// A stored row of a float, affine or FP8 codec, L weights at a time.
template <Codec T>
struct StoredRow {
  static constexpr Codec kCodec = T;
  const uint8_t* row = nullptr;
  HWY_INLINE VF Load(DF df, int64_t k) const { return LoadWeights<T>(df, row, k); }
};

// y[i][n0 + j] for i < TM, j < TN; R reads the rows of W.
template <class R, int TM, int TN>
HWY_INLINE void Tile(const float* x, int64_t K, const uint8_t* w, size_t w_row_bytes, float* y, int64_t ldy) {
  const DF df;
  const int64_t L = int64_t(hn::Lanes(df));
  VF acc[TM][TN];
  for (int i = 0; i < TM; ++i)
    for (int j = 0; j < TN; ++j) acc[i][j] = hn::Zero(df);
  R rows[TN];
  for (int j = 0; j < TN; ++j) rows[j].row = w + size_t(j) * w_row_bytes;
  const int64_t k_vec = K - K % L;
  // The next TN rows (consecutive in memory), at the bytes this step's weights sit at: the same stream one tile
  // ahead, every fourth step (a line holds 4 to 16 steps' weights).
  const uint8_t* next = w + size_t(TN) * w_row_bytes;
  for (int64_t k = 0; k < k_vec; k += L) {
    if ((k / L) % 4 == 0) {
      const size_t at = size_t(k) * w_row_bytes / size_t(K);
      for (int j = 0; j < TN; ++j) __builtin_prefetch(next + size_t(j) * w_row_bytes + at);
    }
    VF wv[TN];
    for (int j = 0; j < TN; ++j) wv[j] = rows[j].Load(df, k);
    for (int i = 0; i < TM; ++i) {
      const VF xv = hn::LoadU(df, x + i * K + k);
      for (int j = 0; j < TN; ++j) acc[i][j] = hn::MulAdd(xv, wv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < TM; ++i) {
    for (int j = 0; j < TN; ++j) {
      float s = hn::GetLane(hn::SumOfLanes(df, acc[i][j]));
      const void* wrow = w + size_t(j) * w_row_bytes;
      for (int64_t k = k_vec; k < K; ++k) {
        const float p = x[i * K + k] * LoadWeight<R::kCodec>(wrow, k);
        s = s + p;
      }
      y[i * ldy + j] = s;
    }
  }
}

template <class R, int TN>
HWY_INLINE void Columns(const float* x, int64_t m, const uint8_t* w, size_t w_row_bytes, int64_t K, float* y,
                        int64_t ldy) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) Tile<R, 4, TN>(x + i * K, K, w, w_row_bytes, y + i * ldy, ldy);
  for (; i < m; ++i) Tile<R, 1, TN>(x + i * K, K, w, w_row_bytes, y + i * ldy, ldy);
}

template <class R>
void MatmulRangeT(const float* x, int64_t m, const Matrix& w, float* y, int64_t n0, int64_t n1) {
  const size_t row_bytes = codec_row_bytes(R::kCodec, w.cols);
  const auto* base = static_cast<const uint8_t*>(w.data);
  // Blocks of rows keep a slice of x in cache while the weights stream past it.
  constexpr int64_t kRowBlock = 32;
  for (int64_t i0 = 0; i0 < m; i0 += kRowBlock) {
    const int64_t mb = std::min(kRowBlock, m - i0);
    const float* xb = x + i0 * w.cols;
    float* yb = y + i0 * w.rows;
    int64_t n = n0;
    for (; n + 4 <= n1; n += 4) Columns<R, 4>(xb, mb, base + size_t(n) * row_bytes, row_bytes, w.cols, yb + n, w.rows);
    for (; n < n1; ++n) Columns<R, 1>(xb, mb, base + size_t(n) * row_bytes, row_bytes, w.cols, yb + n, w.rows);
  }
}

// A ggml codec's rows are whole blocks (as a GGUF stores them) and a chunk of L weights stays in one sub-block.
void CheckGgml(const char* what, Codec c, int64_t cols) {
  const int64_t L = int64_t(hn::Lanes(DF()));
  if (L > 16 || 16 % L != 0) fail("{}: {} needs a vector width dividing 16 floats, not {}", what, codec_name(c), L);
  if (cols % codec_group(c) != 0) {
    fail("{}: a {} row holds whole blocks of {} elements, not {}", what, codec_name(c), codec_group(c), cols);
  }
}

template <Codec T>
using GgmlSimd = GgmlRow<T, false>;
template <Codec T>
using GgmlPlain = GgmlRow<T, true>;

// R<T> for the ggml codec c.
template <template <Codec> class R, class F>
HWY_INLINE void WithGgmlRow(Codec c, F&& f) {
  switch (c) {
    case Codec::Q8_0:
      return f(R<Codec::Q8_0>());
    case Codec::Q4_0:
      return f(R<Codec::Q4_0>());
    case Codec::Q5_0:
      return f(R<Codec::Q5_0>());
    case Codec::Q5_1:
      return f(R<Codec::Q5_1>());
    case Codec::Q2_K:
      return f(R<Codec::Q2_K>());
    case Codec::Q3_K:
      return f(R<Codec::Q3_K>());
    case Codec::Q4_K:
      return f(R<Codec::Q4_K>());
    case Codec::Q5_K:
      return f(R<Codec::Q5_K>());
    case Codec::Q6_K:
      return f(R<Codec::Q6_K>());
    case Codec::IQ4_NL:
      return f(R<Codec::IQ4_NL>());
    case Codec::IQ4_XS:
      return f(R<Codec::IQ4_XS>());
    case Codec::MXFP4_GGML:
      return f(R<Codec::MXFP4_GGML>());
    default:
      fail("{} is not a ggml codec", codec_name(c));
  }
}

void GgmlMatmulRange(const float* x, int64_t m, const Matrix& w, float* y, int64_t n0, int64_t n1) {
  CheckGgml("matmul", w.codec, w.cols);
  const auto run = [&](auto reader) { MatmulRangeT<decltype(reader)>(x, m, w, y, n0, n1); };
  if (ggml_decode() == GgmlDecode::Plain) return WithGgmlRow<GgmlPlain>(w.codec, run);
  WithGgmlRow<GgmlSimd>(w.codec, run);
}

void GgmlDecodeRow(Codec c, const uint8_t* row, int64_t cols, float* out) {
  CheckGgml("ggml_decode_row", c, cols);
  WithGgmlRow<GgmlSimd>(c, [&](auto reader) {
    const DF df;
    reader.row = row;
    for (int64_t k = 0; k < cols; k += int64_t(hn::Lanes(df))) hn::StoreU(reader.Load(df, k), df, out + k);
  });
}

void MatmulRange(const float* x, int64_t m, const Matrix& w, float* y, int64_t n0, int64_t n1) {
  if (codec_is_affine(w.codec) && (codec_group(w.codec) / 2) % int64_t(hn::Lanes(DF())) != 0) {
    fail("matmul: {} needs a vector width dividing {} floats", codec_name(w.codec), codec_group(w.codec) / 2);
  }
  if (w.codec == Codec::FP8_G32 && 32 % int64_t(hn::Lanes(DF())) != 0) {
    fail("matmul: fp8_g32 needs a vector width dividing 32 floats");
  }
  switch (w.codec) {
    case Codec::F32:
      return MatmulRangeT<StoredRow<Codec::F32>>(x, m, w, y, n0, n1);
    case Codec::BF16:
      return MatmulRangeT<StoredRow<Codec::BF16>>(x, m, w, y, n0, n1);
    case Codec::F16:
      return MatmulRangeT<StoredRow<Codec::F16>>(x, m, w, y, n0, n1);
    case Codec::Q8_G32:
      return MatmulRangeT<StoredRow<Codec::Q8_G32>>(x, m, w, y, n0, n1);
    case Codec::Q8_G64:
      return MatmulRangeT<StoredRow<Codec::Q8_G64>>(x, m, w, y, n0, n1);
    case Codec::Q4_G32:
      return MatmulRangeT<StoredRow<Codec::Q4_G32>>(x, m, w, y, n0, n1);
    case Codec::Q4_G64:
      return MatmulRangeT<StoredRow<Codec::Q4_G64>>(x, m, w, y, n0, n1);
    case Codec::P3:
    case Codec::P4:
    case Codec::S3:
    case Codec::FP8_G32:
      return MatmulRangeT<StoredRow<Codec::FP8_G32>>(x, m, w, y, n0, n1);
    case Codec::MXFP4:
      break;  // matmul() hands seed and MXFP4 matrices to their own kernels before any range is cut
    case Codec::Q8_0:
    case Codec::Q4_0:
    case Codec::Q5_0:
    case Codec::Q5_1:
    case Codec::Q2_K:
    case Codec::Q3_K:
    case Codec::Q4_K:
    case Codec::Q5_K:
    case Codec::Q6_K:
    case Codec::IQ4_NL:
    case Codec::IQ4_XS:
    case Codec::MXFP4_GGML:
      return GgmlMatmulRange(x, m, w, y, n0, n1);
  }
  fail("matmul: unsupported weight codec {}", int(w.codec));
}

float Dot(const float* a, const float* b, int64_t n) {
  const DF df;
  const int64_t L = int64_t(hn::Lanes(df));
  VF acc = hn::Zero(df);
  const int64_t n_vec = n - n % L;
  for (int64_t k = 0; k < n_vec; k += L) acc = hn::MulAdd(hn::LoadU(df, a + k), hn::LoadU(df, b + k), acc);
  float s = hn::GetLane(hn::SumOfLanes(df, acc));
  for (int64_t k = n_vec; k < n; ++k) {
    const float p = a[k] * b[k];
    s = s + p;
  }
  return s;
}

void Axpy(float s, const float* x, float* y, int64_t n) {
  const DF df;
  const int64_t L = int64_t(hn::Lanes(df));
  const VF sv = hn::Set(df, s);
  const int64_t n_vec = n - n % L;
  for (int64_t k = 0; k < n_vec; k += L)
    hn::StoreU(hn::MulAdd(sv, hn::LoadU(df, x + k), hn::LoadU(df, y + k)), df, y + k);
  for (int64_t k = n_vec; k < n; ++k) y[k] = std::fma(s, x[k], y[k]);
}

float StreamSum(const float* x, int64_t n) {
  const DF df;
  const int64_t L = int64_t(hn::Lanes(df));
  VF a0 = hn::Zero(df), a1 = a0, a2 = a0, a3 = a0;
  int64_t k = 0;
  for (; k + 4 * L <= n; k += 4 * L) {
    a0 = hn::Add(a0, hn::LoadU(df, x + k));
    a1 = hn::Add(a1, hn::LoadU(df, x + k + L));
    a2 = hn::Add(a2, hn::LoadU(df, x + k + 2 * L));
    a3 = hn::Add(a3, hn::LoadU(df, x + k + 3 * L));
  }
  float s = hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
  for (; k < n; ++k) s += x[k];
  return s;
}

}  // namespace seedling::ops::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace seedling::ops {
HWY_EXPORT(MatmulRange);
HWY_EXPORT(GgmlDecodeRow);
HWY_EXPORT(Dot);
HWY_EXPORT(Axpy);
HWY_EXPORT(StreamSum);

void matmul_range(const float* x, int64_t m, const Matrix& w, float* y, int64_t n0, int64_t n1) {
  HWY_DYNAMIC_DISPATCH(MatmulRange)(x, m, w, y, n0, n1);
}

namespace {
std::atomic<GgmlDecode> g_ggml_decode{GgmlDecode::Simd};
}
GgmlDecode ggml_decode() {
  return g_ggml_decode.load(std::memory_order_relaxed);
}
void set_ggml_decode(GgmlDecode mode) {
  g_ggml_decode.store(mode, std::memory_order_relaxed);
}

void ggml_decode_row(Codec c, const uint8_t* row, int64_t cols, float* out) {
  HWY_DYNAMIC_DISPATCH(GgmlDecodeRow)(c, row, cols, out);
}

void matmul(const float* x, int64_t m, const Matrix& w, float* y) {
  if (m <= 0 || w.rows <= 0) return;
  // Seed slices: computed on seeds (ops/seed_matmul.h), its own threads over the rows of W.
  if (codec_is_seed(w.codec)) return seed::seed_matmul(x, m, w.seed_matrix(), y);
  if (w.codec == Codec::MXFP4) return mxfp4_matmul(x, m, w, y);
  if (int8_products(w.codec)) {
    return codec_is_affine(w.codec) ? matmul_int8(x, m, w, y) : ggml_matmul_int8(x, m, w, y);
  }
  // Split output columns across threads in multiples of 4 (whole tiles); at least 8 columns per chunk, so that a
  // router's 128 rows reach 16 threads (at 16 a chunk, 16-thread decode's router region kept 35% of them busy); at
  // decode several chunks a thread, as the int8 products (product_chunks_per_thread).
  const int64_t groups = (w.rows + 3) / 4;
  ThreadPool& pool = ThreadPool::global();
  pool.parallel_for(
      size_t(groups), 2,
      [&](size_t g0, size_t g1) {
        const int64_t n0 = int64_t(g0) * 4, n1 = std::min<int64_t>(int64_t(g1) * 4, w.rows);
        matmul_range(x, m, w, y, n0, n1);
      },
      product_chunks_per_thread(m, w.nbytes(), pool.size()));
}

float dot(const float* a, const float* b, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(Dot)(a, b, n);
}

float stream_read(const float* x, int64_t n) {
  ThreadPool& pool = ThreadPool::global();
  std::vector<float> partial(size_t(pool.size()) + 1, 0.0f);
  std::atomic<int> slot{0};
  pool.parallel_for(size_t(n), size_t(1) << 16, [&](size_t b, size_t e) {
    partial[size_t(slot++)] = HWY_DYNAMIC_DISPATCH(StreamSum)(x + b, int64_t(e - b));
  });
  float s = 0;
  for (float p : partial) s += p;
  return s;
}
void axpy(float s, const float* x, float* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(Axpy)(s, x, y, n);
}

}  // namespace seedling::ops
#endif
