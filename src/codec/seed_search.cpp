// codec/seed_search.cpp - the scalar reference search and the fast one: Highway SIMD with one seed per lane,
// threads over blocks, runtime dispatch to the best target of this CPU.
//
// The fast search builds, per distinct energy vector h of a column of blocks, a table over all seeds of U, float(S)
// and the Cholesky factor (the same scalar expressions as the reference, seed_search_detail.h), then scores chunks of
// seeds against small batches of blocks, up to 4 blocks at once sharing each load from the table (their arithmetic
// stays apart). Every lane computes the reference's float expressions in the reference's
// order (explicit Mul and Add, never fused), and keeps its first strict minimum, so the lane-wise winners reduce to
// the reference's (lowest seed, then first candidate). The winner's q and e are recomputed by the scalar code and
// checked against the lane's error. A candidate stops summing its error once every lane has reached the block's best
// so far (it cannot win; see ScoreSeeds). Two rewrites keep the bits: with every energy 1, (h * d) * d is computed as
// d * d, and bf16 rounding adds 0x8000 (no product of the format is a tie, tested).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "codec/seed_search.cpp"
#include "codec/seed_search.h"

#include <hwy/aligned_allocator.h>
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <vector>

#include "codec/seed_search_detail.h"
#include "core/error.h"
#include "core/thread_pool.h"

#ifndef SEEDLING_SEED_SEARCH_TABLE
#define SEEDLING_SEED_SEARCH_TABLE
namespace seedling::seed::detail {
// Per-seed data for one energy vector, structure of arrays: entry k of seed index i (seed i + 1) at [k * n + i].
struct SeedTable {
  int C = 0, P = 0;
  size_t n = 0;             // seeds padded to a multiple of 64
  std::vector<float> U;     // C*P entries
  std::vector<float> Sf;    // C*P entries
  std::vector<float> L;     // P(P+1)/2 entries; 1 for invalid seeds
  std::vector<int32_t> ok;  // -1 valid, 0 invalid (factor failed, seed beyond n_seeds, padding)
};
// Per block: the winning seed index i and candidate (id = i * 4 + cand), or -1 when no seed scored finite.
using FastSearchFn = void (*)(const SeedTable& tab, const float* const* xs, const float* h, int32_t lo, int32_t hi,
                              size_t nblocks, size_t nseed_vecs_limit, int32_t* ids);
}  // namespace seedling::seed::detail
#endif

HWY_BEFORE_NAMESPACE();
namespace seedling::seed::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;

HWY_INLINE VF Pow2(DF df, VI e) {
  return hn::BitCast(df, hn::ShiftLeft<23>(hn::Add(e, hn::Set(DI(), 127))));
}

// round_bf16 of a product float(isum) * scale(e) with |isum| <= 2^20 and e in the format's range: such a product
// is never a tie at bf16 (every isum checked in SeedKernel.ProductsNeverTieAtBf16), so adding 0x8000 to the bits
// then clearing the low 16 rounds exactly as the spec's ties-to-even does.
HWY_INLINE VF RoundBf16(DF df, VF w) {
  const hn::RebindToUnsigned<DF> du;
  const auto u = hn::BitCast(du, w);
  return hn::BitCast(df, hn::And(hn::Add(u, hn::Set(du, 0x8000u)), hn::Set(du, 0xFFFF0000u)));
}

HWY_INLINE VI ExponentField(DI di, VF f) {
  return hn::And(hn::ShiftRight<23>(hn::BitCast(di, f)), hn::Set(di, 0xFF));
}

// Scores the seeds i0 .. i0 + N - 1 on MB blocks at once (they share every load from the table; their
// arithmetic stays apart, each lane in the reference's order). kUnit: every energy is 1, so (h * d) * d is d * d,
// the same bits.
template <int C, int P, int MB, bool kUnit>
HWY_INLINE void ScoreSeeds(const detail::SeedTable& tab, size_t i0, const float* const* x, const float (*hx)[C],
                           const float* h, VI vlo, VI vhi, VF* be, VI* bi) {
  const DF df;
  const DI di;
  const size_t n = tab.n;
  const VI one = hn::Set(di, 1);
  const VF kr32 = hn::Set(df, kR32), m8 = hn::Set(df, -8.0f), p7 = hn::Set(df, 7.0f);
  VF t[MB][P];
  {
    VF bv[MB][P], y[MB][P];
    for (int p = 0; p < P; ++p) {
      for (int m = 0; m < MB; ++m) bv[m][p] = hn::Zero(df);
      for (int c = 0; c < C; ++c) {
        const VF u = hn::LoadU(df, tab.U.data() + size_t(c * P + p) * n + i0);
        for (int m = 0; m < MB; ++m) bv[m][p] = hn::Add(bv[m][p], hn::Mul(u, hn::Set(df, hx[m][c])));
      }
    }
    auto Lk = [&](int i, int j) { return hn::LoadU(df, tab.L.data() + size_t(detail::tri(i, j)) * n + i0); };
    for (int i = 0; i < P; ++i) {
      VF s[MB];
      for (int m = 0; m < MB; ++m) s[m] = bv[m][i];
      for (int k = 0; k < i; ++k) {
        const VF l = Lk(i, k);
        for (int m = 0; m < MB; ++m) s[m] = hn::Sub(s[m], hn::Mul(l, y[m][k]));
      }
      const VF d = Lk(i, i);
      for (int m = 0; m < MB; ++m) y[m][i] = hn::Div(s[m], d);
    }
    for (int i = P - 1; i >= 0; --i) {
      VF s[MB];
      for (int m = 0; m < MB; ++m) s[m] = y[m][i];
      for (int k = i + 1; k < P; ++k) {
        const VF l = Lk(k, i);
        for (int m = 0; m < MB; ++m) s[m] = hn::Sub(s[m], hn::Mul(l, t[m][k]));
      }
      const VF d = Lk(i, i);
      for (int m = 0; m < MB; ++m) t[m][i] = hn::Div(s[m], d);
    }
  }
  const auto ok = hn::Ne(hn::LoadU(di, tab.ok.data() + i0), hn::Zero(di));
  const VI id0 = hn::ShiftLeft<2>(hn::Iota(di, int32_t(i0)));
  for (int m = 0; m < MB; ++m) {
    // The block's best error over the seeds of earlier calls (all lower than these): a candidate whose running
    // error reaches it in every valid lane cannot win (terms are >= 0 and adding them never lowers a float sum;
    // ties go to the lower seed), so the rest of its sum is skipped. The winner itself is never skipped.
    const VF gb = hn::MinOfLanes(df, be[m]);
    auto valid = ok;
    VF mx = hn::Zero(df);
    for (int p = 0; p < P; ++p) {
      valid = hn::And(valid, hn::Ne(ExponentField(di, t[m][p]), hn::Set(di, 255)));
      mx = hn::Max(mx, hn::Abs(t[m][p]));
    }
    const VI field = ExponentField(di, mx);
    VI e0 = hn::IfThenElse(hn::Eq(field, hn::Zero(di)), vlo, hn::Sub(field, hn::Set(di, 129)));
    e0 = hn::Min(hn::Max(e0, vlo), vhi);
    const VI cands[3] = {e0, hn::Max(hn::Sub(e0, one), vlo), hn::Min(hn::Add(e0, one), vhi)};
    for (int ci = 0; ci < 3; ++ci) {
      const VF inv = Pow2(df, hn::Neg(cands[ci]));
      const VF scale = hn::Mul(kr32, Pow2(df, cands[ci]));
      VF q[P];
      for (int p = 0; p < P; ++p) q[p] = hn::Min(hn::Max(hn::Round(hn::Mul(t[m][p], inv)), m8), p7);
      VF err = hn::Zero(df);
      bool beaten = false;
      for (int c = 0; c < C; ++c) {
        VF isum = hn::Zero(df);
        for (int p = 0; p < P; ++p)
          isum = hn::Add(isum, hn::Mul(hn::LoadU(df, tab.Sf.data() + size_t(c * P + p) * n + i0), q[p]));
        const VF d = hn::Sub(hn::Set(df, x[m][c]), RoundBf16(df, hn::Mul(isum, scale)));
        err = hn::Add(err, kUnit ? hn::Mul(d, d) : hn::Mul(hn::Mul(hn::Set(df, h[c]), d), d));
        if (c % 2 == 1 && c + 1 < C && hn::AllFalse(df, hn::And(hn::Lt(err, gb), hn::RebindMask(df, valid)))) {
          beaten = true;
          break;
        }
      }
      if (beaten) continue;
      // Invalid lanes never win; the reference skips them.
      err = hn::IfThenElse(hn::RebindMask(df, valid), err, hn::Set(df, INFINITY));
      const auto lt = hn::Lt(err, be[m]);
      be[m] = hn::IfThenElse(lt, err, be[m]);
      bi[m] = hn::IfThenElse(hn::RebindMask(di, lt), hn::Add(id0, hn::Set(di, ci)), bi[m]);
    }
  }
}

template <int C, int P, bool kUnit>
void SearchBlocksT(const detail::SeedTable& tab, const float* const* xs, const float* h, int32_t lo, int32_t hi,
                   size_t nblocks, size_t nvecs, int32_t* ids) {
  const DF df;
  const DI di;
  const size_t N = hn::Lanes(df);
  constexpr int kBatch = 8;
  const size_t chunk_vecs = std::max<size_t>(1, 512 / N);
  float hx[kBatch][C];
  auto best_err = hwy::AllocateAligned<float>(kBatch * N);
  auto best_id = hwy::AllocateAligned<int32_t>(kBatch * N);
  const VI vlo = hn::Set(di, lo), vhi = hn::Set(di, hi);
  for (size_t b0 = 0; b0 < nblocks; b0 += kBatch) {
    const size_t nb = std::min<size_t>(kBatch, nblocks - b0);
    for (size_t b = 0; b < nb; ++b) {
      for (int c = 0; c < C; ++c) hx[b][c] = h[c] * xs[b0 + b][c];
      hn::Store(hn::Set(df, INFINITY), df, best_err.get() + b * N);
      hn::Store(hn::Set(di, -1), di, best_id.get() + b * N);
    }
    for (size_t v0 = 0; v0 < nvecs; v0 += chunk_vecs) {
      const size_t v1 = std::min(nvecs, v0 + chunk_vecs);
      size_t b = 0;
      for (; b + 4 <= nb; b += 4) {
        VF be[4];
        VI bi[4];
        for (int m = 0; m < 4; ++m) {
          be[m] = hn::Load(df, best_err.get() + (b + size_t(m)) * N);
          bi[m] = hn::Load(di, best_id.get() + (b + size_t(m)) * N);
        }
        for (size_t v = v0; v < v1; ++v)
          ScoreSeeds<C, P, 4, kUnit>(tab, v * N, xs + b0 + b, hx + b, h, vlo, vhi, be, bi);
        for (int m = 0; m < 4; ++m) {
          hn::Store(be[m], df, best_err.get() + (b + size_t(m)) * N);
          hn::Store(bi[m], di, best_id.get() + (b + size_t(m)) * N);
        }
      }
      for (; b + 2 <= nb; b += 2) {
        VF be[2] = {hn::Load(df, best_err.get() + b * N), hn::Load(df, best_err.get() + (b + 1) * N)};
        VI bi[2] = {hn::Load(di, best_id.get() + b * N), hn::Load(di, best_id.get() + (b + 1) * N)};
        for (size_t v = v0; v < v1; ++v)
          ScoreSeeds<C, P, 2, kUnit>(tab, v * N, xs + b0 + b, hx + b, h, vlo, vhi, be, bi);
        for (int m = 0; m < 2; ++m) {
          hn::Store(be[m], df, best_err.get() + (b + size_t(m)) * N);
          hn::Store(bi[m], di, best_id.get() + (b + size_t(m)) * N);
        }
      }
      for (; b < nb; ++b) {
        VF be = hn::Load(df, best_err.get() + b * N);
        VI bi = hn::Load(di, best_id.get() + b * N);
        for (size_t v = v0; v < v1; ++v)
          ScoreSeeds<C, P, 1, kUnit>(tab, v * N, xs + b0 + b, hx + b, h, vlo, vhi, &be, &bi);
        hn::Store(be, df, best_err.get() + b * N);
        hn::Store(bi, di, best_id.get() + b * N);
      }
    }
    for (size_t b = 0; b < nb; ++b) {
      float e = INFINITY;
      int32_t id = -1;
      for (size_t l = 0; l < N; ++l) {
        const float le = best_err[b * N + l];
        const int32_t li = best_id[b * N + l];
        if (li < 0) continue;
        if (id < 0 || le < e || (le == e && li < id)) {
          e = le;
          id = li;
        }
      }
      ids[b0 + b] = id;
    }
  }
}

void SearchBlocks(const detail::SeedTable& tab, const float* const* xs, const float* h, int32_t lo, int32_t hi,
                  size_t nblocks, size_t nvecs_limit, int32_t* ids) {
  const size_t N = hn::Lanes(DF());
  const size_t nvecs = std::min(tab.n / N, nvecs_limit == 0 ? tab.n / N : (nvecs_limit + N - 1) / N);
  const bool unit = std::all_of(h, h + tab.C, [](float v) { return v == 1.0f; });
  if (tab.C == 8 && tab.P == 3)
    return unit ? SearchBlocksT<8, 3, true>(tab, xs, h, lo, hi, nblocks, nvecs, ids)
                : SearchBlocksT<8, 3, false>(tab, xs, h, lo, hi, nblocks, nvecs, ids);
  if (tab.C == 8 && tab.P == 4)
    return unit ? SearchBlocksT<8, 4, true>(tab, xs, h, lo, hi, nblocks, nvecs, ids)
                : SearchBlocksT<8, 4, false>(tab, xs, h, lo, hi, nblocks, nvecs, ids);
  if (tab.C == 12 && tab.P == 4)
    return unit ? SearchBlocksT<12, 4, true>(tab, xs, h, lo, hi, nblocks, nvecs, ids)
                : SearchBlocksT<12, 4, false>(tab, xs, h, lo, hi, nblocks, nvecs, ids);
  SEEDLING_CHECK(false, "no fast search for C = {}, P = {}", tab.C, tab.P);
}

}  // namespace seedling::seed::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace seedling::seed {
HWY_EXPORT(SearchBlocks);

int32_t choose_exp_bias(SeedTier t, const float* w, int64_t rows, int64_t cols) {
  int E = INT32_MIN;
  for (int64_t i = 0; i < rows * cols; ++i) {
    if (!std::isfinite(w[i])) fail("seed search: weight {} (row {}, col {}) is not finite", i, i / cols, i % cols);
    const int field = detail::float_exponent_field(w[i]);
    if (field != 0) E = std::max(E, field - 127);
  }
  (void)t;  // the same rule for every tier: |t| up to 8 * 2^E fits the top code
  if (E == INT32_MIN) return -15;
  return std::min(std::max(E - 15, kMinExponent), kMaxExponent - 15);
}

SeedBlock search_block_ref(SeedTier t, const float* x, const float* h, int32_t exp_bias, uint32_t n_seeds) {
  const SeedTierSpec sp = seed_tier_spec(t);
  const int C = sp.block, P = sp.coefs;
  float hx[kMaxBlock];
  for (int c = 0; c < C; ++c) hx[c] = h[c] * x[c];
  const int lo = exp_bias, hi = exp_bias + 15;
  int32_t S[kMaxStates];
  float U[kMaxStates], Sf[kMaxStates], L[10];
  SeedBlock best;
  best.code = 0;
  float best_err = INFINITY;
  for (uint32_t s = 1; s <= n_seeds; ++s) {
    expand_seed(t, uint16_t(s), S);
    for (int k = 0; k < C * P; ++k) {
      Sf[k] = float(S[k]);
      U[k] = Sf[k] * kR32;
    }
    if (!detail::gram_cholesky(C, P, U, h, L)) continue;
    const detail::SeedScore sc = detail::score_seed(C, P, U, Sf, L, x, h, hx, lo, hi);
    if (sc.err < best_err) {
      best_err = sc.err;
      best.seed = uint16_t(s);
      for (int p = 0; p < P; ++p) best.q[p] = sc.q[p];
      best.code = uint8_t(sc.e - lo);
    }
  }
  return best;
}

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void build_table(SeedTier t, const float* h, uint32_t n_seeds, detail::SeedTable* tab) {
  const SeedTierSpec sp = seed_tier_spec(t);
  const int C = sp.block, P = sp.coefs, KL = P * (P + 1) / 2;
  tab->C = C;
  tab->P = P;
  tab->n = 65536;
  tab->U.assign(size_t(C * P) * tab->n, 0.0f);
  tab->Sf.assign(size_t(C * P) * tab->n, 0.0f);
  tab->L.assign(size_t(KL) * tab->n, 1.0f);
  tab->ok.assign(tab->n, 0);
  ThreadPool::global().parallel_for(tab->n, 1024, [&](size_t i0, size_t i1) {
    int32_t S[kMaxStates];
    float U[kMaxStates], Sf[kMaxStates], L[10];
    for (size_t i = i0; i < i1; ++i) {
      const uint32_t seed = uint32_t(i) + 1;
      if (seed > 65535 || seed > n_seeds) continue;
      expand_seed_fast(t, uint16_t(seed), S);
      for (int k = 0; k < C * P; ++k) {
        Sf[k] = float(S[k]);
        U[k] = Sf[k] * kR32;
        tab->U[size_t(k) * tab->n + i] = U[k];
        tab->Sf[size_t(k) * tab->n + i] = Sf[k];
      }
      if (!detail::gram_cholesky(C, P, U, h, L)) continue;
      for (int k = 0; k < KL; ++k) tab->L[size_t(k) * tab->n + i] = L[k];
      tab->ok[i] = -1;
    }
  });
}

}  // namespace

SeedSearchPlan plan_seed_search(SeedTier t, const float* w, int64_t rows, int64_t cols, const float* h,
                                uint32_t n_seeds) {
  const int C = seed_tier_spec(t).block;
  const SeedSliceLayout L = seed_slice_layout(t, rows, cols);
  if (n_seeds < 1 || n_seeds > 65535) fail("seed search: n_seeds {} is outside 1..65535", n_seeds);
  if (h) {
    for (int64_t c = 0; c < cols; ++c) {
      if (!std::isfinite(h[c]) || h[c] < 0)
        fail("seed search: activation energy h[{}] = {} is not finite >= 0", c, h[c]);
    }
  }
  SeedSearchPlan plan;
  plan.exp_bias = choose_exp_bias(t, w, rows, cols);
  const int64_t bpr = L.blocks_per_row;
  plan.xpad.assign(size_t(L.n_blocks) * C, 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < cols; ++k) plan.xpad[size_t(r * bpr + k / C) * C + size_t(k % C)] = w[r * cols + k];
  std::vector<float> hcol(size_t(bpr) * C, 0.0f);
  for (int64_t k = 0; k < cols; ++k) hcol[size_t(k / C) * C + size_t(k % C)] = h ? h[k] : 1.0f;
  // Columns of blocks with equal energy vectors share one table (unweighted: all full columns, plus a partial one).
  std::map<std::vector<float>, std::vector<int64_t>> groups;
  for (int64_t j = 0; j < bpr; ++j) {
    groups[std::vector<float>(hcol.begin() + j * C, hcol.begin() + (j + 1) * C)].push_back(j);
  }
  for (const auto& [hv, colsj] : groups) {
    SeedSearchPlan::Group g;
    g.h = hv;
    g.blocks.reserve(colsj.size() * size_t(rows));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j : colsj) g.blocks.push_back(r * bpr + j);
    plan.groups.push_back(std::move(g));
  }
  return plan;
}

SeedBlock recover_seed_block(SeedTier t, const float* x, const float* h, int32_t exp_bias, uint32_t i, int cand,
                             float* err) {
  const SeedTierSpec sp = seed_tier_spec(t);
  const int C = sp.block, P = sp.coefs;
  int32_t S[kMaxStates];
  float U[kMaxStates], Sf[kMaxStates], Lf[10], hx[kMaxBlock];
  expand_seed_fast(t, uint16_t(i + 1), S);
  for (int k = 0; k < C * P; ++k) {
    Sf[k] = float(S[k]);
    U[k] = Sf[k] * kR32;
  }
  SEEDLING_CHECK(detail::gram_cholesky(C, P, U, h, Lf), "seed search chose seed {}, whose Gram matrix has no factor",
                 i + 1);
  for (int c = 0; c < C; ++c) hx[c] = h[c] * x[c];
  const detail::SeedScore sc = detail::score_seed(C, P, U, Sf, Lf, x, h, hx, exp_bias, exp_bias + 15);
  SEEDLING_CHECK(sc.cand == cand, "fast seed search disagrees with the scalar score (seed {}, candidate {} vs {})",
                 i + 1, cand, sc.cand);
  SeedBlock out;
  out.seed = uint16_t(i + 1);
  for (int p = 0; p < P; ++p) out.q[p] = sc.q[p];
  out.code = uint8_t(sc.e - exp_bias);
  *err = sc.err;
  return out;
}

SeedSearchResult seed_search_slice(SeedTier t, const float* w, int64_t rows, int64_t cols, const float* h,
                                   const SeedSearchOptions& opt) {
  const int C = seed_tier_spec(t).block;
  const SeedSliceLayout L = seed_slice_layout(t, rows, cols);
  SeedSearchPlan plan = plan_seed_search(t, w, rows, cols, h, opt.n_seeds);
  SeedSearchResult res;
  res.exp_bias = plan.exp_bias;
  res.blocks.assign(size_t(L.n_blocks), SeedBlock{});
  const int lo = res.exp_bias, hi = res.exp_bias + 15;

  const double t0 = now_s();
  std::atomic<int64_t> done{0};
  std::mutex progress_mu;
  double last_report = t0;
  auto report = [&](bool final) {
    if (!opt.progress) return;
    std::lock_guard<std::mutex> lock(progress_mu);
    const double now = now_s();
    if (!final && now - last_report < opt.progress_interval_s) return;
    last_report = now;
    SeedSearchProgress pr;
    pr.blocks_done = done.load();
    pr.blocks_total = L.n_blocks;
    pr.seconds = now - t0;
    pr.blocks_per_s = pr.seconds > 0 ? double(pr.blocks_done) / pr.seconds : 0;
    pr.eta_s = pr.blocks_per_s > 0 ? double(pr.blocks_total - pr.blocks_done) / pr.blocks_per_s : 0;
    opt.progress(pr);
  };

  const std::vector<float>& xpad = plan.xpad;
  if (opt.use_reference) {
    for (const SeedSearchPlan::Group& g : plan.groups) {
      for (const int64_t i : g.blocks) {
        res.blocks[size_t(i)] = search_block_ref(t, &xpad[size_t(i) * C], g.h.data(), res.exp_bias, opt.n_seeds);
        done.fetch_add(1);
        report(false);
      }
    }
    report(true);
    return res;
  }

  detail::SeedTable tab;
  for (const SeedSearchPlan::Group& g : plan.groups) {
    const std::vector<float>& hv = g.h;
    const std::vector<int64_t>& blocks = g.blocks;
    build_table(t, hv.data(), opt.n_seeds, &tab);
    ThreadPool::global().parallel_for(blocks.size(), 8, [&](size_t a, size_t b) {
      constexpr size_t kStep = 32;
      std::vector<const float*> xs(kStep);
      std::vector<int32_t> ids(kStep);
      for (size_t s0 = a; s0 < b; s0 += kStep) {
        const size_t nb = std::min(kStep, b - s0);
        for (size_t k = 0; k < nb; ++k) xs[k] = &xpad[size_t(blocks[s0 + k]) * C];
        HWY_DYNAMIC_DISPATCH(SearchBlocks)(tab, xs.data(), hv.data(), lo, hi, nb, opt.n_seeds, ids.data());
        for (size_t k = 0; k < nb; ++k) {
          if (ids[k] < 0) continue;  // no seed scored finite: the reference's default block
          float err;
          res.blocks[size_t(blocks[s0 + k])] =
              recover_seed_block(t, xs[k], hv.data(), res.exp_bias, uint32_t(ids[k] / 4), ids[k] % 4, &err);
        }
        done.fetch_add(int64_t(nb));
        report(false);
      }
    });
  }
  report(true);
  return res;
}

std::vector<uint8_t> encode_seed_slice(SeedTier t, const float* w, int64_t rows, int64_t cols, const float* h,
                                       const SeedSearchOptions& opt) {
  const SeedSearchResult r = seed_search_slice(t, w, rows, cols, h, opt);
  return write_seed_blob(t, rows, cols, r.exp_bias, r.blocks);
}

}  // namespace seedling::seed
#endif  // HWY_ONCE
