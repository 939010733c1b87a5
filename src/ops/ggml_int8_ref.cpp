// The scalar definitions of ops/ggml_int8.h: the loops every SIMD kernel of matmul_ggml_int8.cpp is held to.
#include "codec/ggml_quants.h"
#include "core/error.h"
#include "ops/ggml_int8.h"

namespace seedling::ops {

int64_t ggml_int8_group(Codec c) {
  return codec_is_ggml(c) ? codec_group(c) : 0;
}

namespace ref {

void quantize_ggml_int8_rows(const float* x, int64_t m, int64_t cols, int64_t group, Int8Rows& out) {
  SEEDLING_CHECK((group == 32 || group == 256) && cols % group == 0,
                 "quantize_ggml_int8_rows: {} columns in blocks of {}", cols, group);
  ref::quantize_int8_rows(x, m, cols, group, out);  // the scalar definition takes any group
  out.bsum.assign(group == 256 ? size_t(m * cols / 16) : 0, 0);
  for (size_t g = 0; g < out.bsum.size(); ++g)
    for (size_t k = 0; k < 16; ++k) out.bsum[g] += out.q[g * 16 + k];
}

void ggml_matmul_int8(const float* x, int64_t m, const Matrix& w, float* y) {
  const int64_t group = ggml_int8_group(w.codec);
  SEEDLING_CHECK(group > 0, "ggml_matmul_int8: {} is not a ggml codec", codec_name(w.codec));
  Int8Rows xq;
  ref::quantize_ggml_int8_rows(x, m, w.cols, group, xq);
  const Int8Rows& r = xq;
  const size_t block_bytes = codec_block_bytes(w.codec);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t n = 0; n < w.rows; ++n) {
      const auto* row = static_cast<const uint8_t*>(w.data) + size_t(n) * w.row_bytes();
      float acc = 0.0f;
      for (int64_t b = 0; b < r.blocks; ++b) {
        const uint8_t* block = row + size_t(b) * block_bytes;
        const int8_t* q = r.q.data() + (i * r.blocks + b) * group;
        ggml::IntScales s;
        ggml::ggml_int_scales(w.codec, block, s);
        int32_t isum = 0, msum = 0;
        for (int g = 0; g < int(group / 16); ++g) {
          int32_t dot = 0, sum = 0;
          for (int k = 16 * g; k < 16 * g + 16; ++k) {
            dot += ggml::ggml_code(w.codec, block, k) * q[k];
            sum += q[k];
          }
          isum += s.scale[g] * dot;
          msum += s.min[g] * sum;
        }
        const float t = s.has_min ? s.d * float(isum) - s.dmin * float(msum) : s.d * float(isum);
        acc = acc + r.scale[size_t(i * r.blocks + b)] * t;
      }
      y[i * w.rows + n] = acc;
    }
  }
}

}  // namespace ref
}  // namespace seedling::ops
