// ops::silu_mul (ops/ops.h) with Highway's vector exp (1 ulp), beside ref::silu_mul (ops.cpp), the scalar loop with
// std::exp; tests/unit/engine/ops_test.cpp holds them together. Elementwise, so any split of the elements gives the
// same bits.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/activation.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
// clang-format off
#include <hwy/contrib/math/math-inl.h>
// clang-format on

#include <algorithm>

#include "ops/ops.h"

HWY_BEFORE_NAMESPACE();
namespace seedling::ops::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// out = gate / (1 + exp(-gate)) * up, as the scalar loop writes it.
void SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  const hn::ScalableTag<float> df;
  const int64_t L = int64_t(hn::Lanes(df));
  const auto one = hn::Set(df, 1.0f);
  // Highway's Exp is defined up to +104 (beyond, its exponent bits wrap: garbage, not inf). exp(-g) overflows to
  // inf from -g = 88.7 on, where the scalar loop's silu is -0; 104 keeps that and never leaves the defined range.
  const auto limit = hn::Set(df, 104.0f);
  const auto step = [&](hn::Vec<decltype(df)> g, hn::Vec<decltype(df)> u) {
    return hn::Mul(hn::Div(g, hn::Add(one, hn::Exp(df, hn::Min(hn::Neg(g), limit)))), u);
  };
  int64_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(step(hn::LoadU(df, gate + i), hn::LoadU(df, up + i)), df, out + i);
  if (i < n) {  // the tail through a full vector too, so an element's bits never depend on where it lies
    HWY_ALIGN float g[hn::MaxLanes(df)] = {}, u[hn::MaxLanes(df)] = {}, o[hn::MaxLanes(df)];
    std::copy(gate + i, gate + n, g);
    std::copy(up + i, up + n, u);
    hn::Store(step(hn::Load(df, g), hn::Load(df, u)), df, o);
    std::copy(o, o + (n - i), out + i);
  }
}

}  // namespace seedling::ops::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace seedling::ops {
HWY_EXPORT(SiluMul);

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(SiluMul)(gate, up, out, n);
}
}  // namespace seedling::ops
#endif
