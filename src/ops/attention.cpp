// ops::attention_chunk (ops/ops.h): one query row's causal attention over one chunk of its keys, Highway SIMD with
// runtime dispatch; attention_row and attention_combine (ops.cpp) put a row's chunks together. The plain loop it must
// agree with is ref::attention_chunk (ops.cpp); tests/unit/engine/ops_test.cpp holds them together.
//
// Per query head, in three passes over the chunk's keys [first, last]:
// - scores, L keys at a time (L = float lanes): key t's products with the query, which stays in registers, sum into
//   its own vector, and the L vectors are reduced at once into one vector whose lane t is key t's dot product;
// - the exponentials against the chunk's largest score with a vector exp (Highway's, 1 ulp), and their sum;
// - the output as a sum of the value rows weighted by the exponentials, held in registers over all keys (two sets
//   of accumulators, even and odd keys, so that the chains of fused multiply-adds overlap).
// Every sum runs in one fixed order that depends only on the chunk's own keys, so a row's result is the same alone
// or in a batch and on any thread count. Head dims whose vector count is not 1, 2, 4, 8 or 16, and targets without
// fixed-width vectors, run the plain loop.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/attention.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
// clang-format off
#include <hwy/contrib/math/math-inl.h>
// clang-format on

#include <hwy/aligned_allocator.h>

#include <algorithm>
#include <cmath>

#include "ops/ops.h"

HWY_BEFORE_NAMESPACE();
namespace seedling::ops::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR && !HWY_HAVE_SCALABLE
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
constexpr size_t kL = hn::MaxLanes(DF());

// A thread's aligned scratch, grown on demand and kept.
struct Scratch {
  hwy::AlignedFreeUniquePtr<float[]> data;
  size_t capacity = 0;
  float* get(size_t n) {
    if (capacity < n) data = hwy::AllocateAligned<float>(capacity = n);
    return data.get();
  }
};

// a[0..kL) -> one vector whose lane t is the sum of a[t]'s lanes (pairs of lanes added, log2(kL) rounds; the order
// of the vectors is kept at every round, so lane t ends with a[t]).
HWY_INLINE VF SumsOfLanes(DF df, VF* a) {
  for (size_t width = kL; width > 1; width /= 2) {
    for (size_t i = 0; i < width / 2; ++i) {
      a[i] = hn::Add(hn::ConcatEven(df, a[2 * i + 1], a[2 * i]), hn::ConcatOdd(df, a[2 * i + 1], a[2 * i]));
    }
  }
  return a[0];
}

// The query heads [0, G) that share one KV head, NV vectors a head: q holds them one after another, out likewise;
// k and v point at the span's first position of that KV head, stride floats from one position to the next.
// Consecutive positions of one KV head lie a whole cache row apart (often 4 KB: the same cache sets), so each tile
// of kL positions is first copied into one contiguous block that the G heads then read from L1.
template <size_t NV>
void AttentionGroup(const float* q, int64_t G, const float* k, const float* v, int64_t stride, int64_t n, float scale,
                    float* out, float* ml) {
  const DF df;
  constexpr int64_t D = int64_t(NV * kL), T = int64_t(kL);
  const int64_t padded = (n + T - 1) / T * T;
  thread_local Scratch tile_buf, score_buf;
  float* HWY_RESTRICT tile = tile_buf.get(size_t(T * D));
  float* HWY_RESTRICT scores = score_buf.get(size_t(G * padded));
  // The lines of positions [t0, t1) asked for ahead of their tile's copy (a position's D floats are one short run of
  // lines and the next position's lie a cache row further on). The next tile's positions are asked for while this
  // tile is computed, a share with each head, so that the reads overlap the arithmetic.
  const auto ask = [&](const float* rows, int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < std::min(t1, n); ++t) {
      for (int64_t c = 0; c < D; c += 64 / int64_t(sizeof(float))) {
        __builtin_prefetch(rows + t * stride + c, 0, 2);
      }
    }
  };
  const int64_t share = (T + G - 1) / G;
  const auto ask_share = [&](const float* rows, int64_t j0, int64_t g) {
    ask(rows, j0 + std::min(T, g * share), j0 + std::min(T, (g + 1) * share));
  };
  const auto pack = [&](const float* rows, int64_t j0, int64_t count) {
    for (int64_t t = 0; t < count; ++t) {
      for (size_t c = 0; c < NV; ++c) {
        hn::Store(hn::LoadU(df, rows + (j0 + t) * stride + int64_t(c * kL)), df, tile + t * D + int64_t(c * kL));
      }
    }
  };
  ask(k, 0, 2 * T);
  // Scores, kL keys at a time: key t's products with the query (in registers) sum into its own vector, and the kL
  // vectors are reduced at once.
  const VF vscale = hn::Set(df, scale);
  for (int64_t j0 = 0; j0 < n; j0 += T) {
    const int64_t count = std::min(T, n - j0);
    pack(k, j0, count);
    for (int64_t g = 0; g < G; ++g) {
      ask_share(k, j0 + 2 * T, g);
      VF qv[NV];
      for (size_t c = 0; c < NV; ++c) qv[c] = hn::LoadU(df, q + g * D + int64_t(c * kL));
      VF acc[kL];
      for (size_t t = 0; t < kL; ++t) {
        acc[t] = hn::Zero(df);
        if (int64_t(t) >= count) continue;
        for (size_t c = 0; c < NV; ++c) {
          acc[t] = hn::MulAdd(qv[c], hn::Load(df, tile + int64_t(t) * D + int64_t(c * kL)), acc[t]);
        }
      }
      hn::Store(hn::Mul(SumsOfLanes(df, acc), vscale), df, scores + g * padded + j0);
    }
  }
  // Each head's exponentials against its largest score, and their sum (the softmax's normalisation and the sink
  // wait for attention_combine); the lanes past n stay 0.
  ask(v, 0, 2 * T);
  for (int64_t g = 0; g < G; ++g) {
    float* p = scores + g * padded;
    VF vmax = hn::Set(df, -INFINITY);
    for (int64_t j = 0; j < padded; j += T) {
      const VF x = hn::Load(df, p + j);
      vmax = hn::Max(vmax, j + T <= n ? x : hn::IfThenElse(hn::FirstN(df, size_t(n - j)), x, hn::Set(df, -INFINITY)));
    }
    const float m = hn::GetLane(hn::MaxOfLanes(df, vmax));
    const VF mx = hn::Set(df, m);
    VF vsum = hn::Zero(df);
    for (int64_t j = 0; j < padded; j += T) {
      VF e = hn::Exp(df, hn::Sub(hn::Load(df, p + j), mx));
      if (j + T > n) e = hn::IfThenElseZero(hn::FirstN(df, size_t(n - j)), e);
      vsum = hn::Add(vsum, e);
      hn::Store(e, df, p + j);
    }
    ml[2 * g] = m;
    ml[2 * g + 1] = hn::GetLane(hn::SumOfLanes(df, vsum));
  }
  // The value rows weighted by the exponentials: per head two sets of accumulators (even and odd keys, so that
  // the chains of multiply-adds overlap), kept in out between tiles; the lanes past n weigh 0 and are skipped.
  for (int64_t g = 0; g < G; ++g) {
    for (size_t c = 0; c < 2 * NV; ++c) hn::StoreU(hn::Zero(df), df, out + g * 2 * D + int64_t(c * kL));
  }
  for (int64_t j0 = 0; j0 < n; j0 += T) {
    const int64_t count = std::min(T, n - j0);
    pack(v, j0, count);
    for (int64_t g = 0; g < G; ++g) {
      ask_share(v, j0 + 2 * T, g);
      const float* p = scores + g * padded + j0;
      float* o = out + g * 2 * D;
      VF even[NV], odd[NV];
      for (size_t c = 0; c < NV; ++c) {
        even[c] = hn::LoadU(df, o + c * kL);
        odd[c] = hn::LoadU(df, o + D + int64_t(c * kL));
      }
      int64_t t = 0;
      for (; t + 2 <= count; t += 2) {
        const VF p0 = hn::Set(df, p[t]), p1 = hn::Set(df, p[t + 1]);
        for (size_t c = 0; c < NV; ++c) {
          even[c] = hn::MulAdd(p0, hn::Load(df, tile + t * D + int64_t(c * kL)), even[c]);
          odd[c] = hn::MulAdd(p1, hn::Load(df, tile + (t + 1) * D + int64_t(c * kL)), odd[c]);
        }
      }
      if (t < count) {
        const VF p0 = hn::Set(df, p[t]);
        for (size_t c = 0; c < NV; ++c) even[c] = hn::MulAdd(p0, hn::Load(df, tile + t * D + int64_t(c * kL)), even[c]);
      }
      for (size_t c = 0; c < NV; ++c) {
        hn::StoreU(even[c], df, o + c * kL);
        hn::StoreU(odd[c], df, o + D + int64_t(c * kL));
      }
    }
  }
}

bool AttentionChunk(const float* q, const float* k_cache, const float* v_cache, int first, int last,
                    const AttentionShape& s, int h_begin, int h_end, float* o, float* ml) {
  const int64_t D = s.head_dim, L = int64_t(kL);
  if (D % L != 0) return false;
  const int64_t NV = D / L;
  if (NV != 1 && NV != 2 && NV != 4 && NV != 8 && NV != 16) return false;
  const int group = s.n_heads / s.n_kv_heads;
  const int64_t stride = int64_t(s.n_kv_heads) * D, n = int64_t(last) - first + 1;
  // Accumulators of up to a whole group (two vectors of D per head); their sums land in o at the end.
  thread_local Scratch acc_buf;
  for (int h0 = h_begin; h0 < h_end;) {
    const int kvh = h0 / group, h1 = std::min(h_end, (kvh + 1) * group), G = h1 - h0;
    const int64_t at = int64_t(first) * stride + int64_t(kvh) * D;
    float* acc = acc_buf.get(size_t(2 * G * D));
    const auto group_fn = NV == 1   ? &AttentionGroup<1>
                          : NV == 2 ? &AttentionGroup<2>
                          : NV == 4 ? &AttentionGroup<4>
                          : NV == 8 ? &AttentionGroup<8>
                                    : &AttentionGroup<16>;
    group_fn(q + int64_t(h0) * D, G, k_cache + at, v_cache + at, stride, n, s.scale, acc,
             ml + 2 * int64_t(h0 - h_begin));
    const DF df;
    for (int g = 0; g < G; ++g) {
      const float* a = acc + int64_t(g) * 2 * D;
      float* out = o + int64_t(h0 - h_begin + g) * D;
      for (int64_t c = 0; c < D; c += L) hn::StoreU(hn::Add(hn::Load(df, a + c), hn::Load(df, a + D + c)), df, out + c);
    }
    h0 = h1;
  }
  return true;
}
#else
bool AttentionChunk(const float*, const float*, const float*, int, int, const AttentionShape&, int, int, float*,
                    float*) {
  return false;
}
#endif

}  // namespace seedling::ops::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace seedling::ops {
HWY_EXPORT(AttentionChunk);

void attention_chunk(const float* q, const float* k_cache, const float* v_cache, int first, int last,
                     const AttentionShape& s, int h_begin, int h_end, float* o, float* ml) {
  if (!HWY_DYNAMIC_DISPATCH(AttentionChunk)(q, k_cache, v_cache, first, last, s, h_begin, h_end, o, ml))
    ref::attention_chunk(q, k_cache, v_cache, first, last, s, h_begin, h_end, o, ml);
}
}  // namespace seedling::ops
#endif
