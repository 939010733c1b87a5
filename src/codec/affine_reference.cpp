// codec/affine_reference.cpp - see affine_reference.h.
#include "codec/affine_reference.h"

#include <algorithm>
#include <cmath>

#include "core/dtype.h"
#include "core/error.h"

namespace seedling::seed {

void affine_roundtrip(AffineSpec s, const float* x, int64_t rows, int64_t cols, float* out) {
  if (s.bits < 2 || s.bits > 8 || s.group < 1) fail("affine reference: bits {} group {} unsupported", s.bits, s.group);
  const int qmax = (1 << s.bits) - 1;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g0 = 0; g0 < cols; g0 += s.group) {
      const int64_t n = std::min<int64_t>(s.group, cols - g0);
      const float* xg = x + r * cols + g0;
      float* og = out + r * cols + g0;
      float lo = xg[0], hi = xg[0];
      for (int64_t j = 0; j < n; ++j) {
        if (!std::isfinite(xg[j])) fail("affine reference: value {} is not finite", xg[j]);
        lo = std::min(lo, xg[j]);
        hi = std::max(hi, xg[j]);
      }
      const float m = f16_to_f32(f32_to_f16(lo));
      uint16_t dh = f32_to_f16((hi - m) / float(qmax));
      float d = f16_to_f32(dh);
      if (d * float(qmax) + m < hi) d = f16_to_f32(uint16_t(dh + 1));
      for (int64_t j = 0; j < n; ++j) {
        const int v = std::clamp(d > 0 ? int(std::lround((xg[j] - m) / d)) : 0, 0, qmax);
        og[j] = d * float(v) + m;
      }
    }
  }
}

}  // namespace seedling::seed
