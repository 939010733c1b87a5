// codec/quantize.cpp - the encoders of codec/quantize.h.
#include "codec/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace seedling {

namespace {

void encode_group(Codec c, const float* x, int64_t n, uint8_t* block) {
  const int64_t g = codec_group(c);
  const int qmax = (1 << codec_bits(c)) - 1;
  float lo = x[0], hi = x[0];
  for (int64_t j = 0; j < n; ++j) {
    if (!std::isfinite(x[j])) fail("quantize: value {} is not finite", x[j]);
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
  const uint16_t mh = f32_to_f16(lo);
  const float m = f16_to_f32(mh);
  uint16_t dh = f32_to_f16((hi - m) / float(qmax));
  float d = f16_to_f32(dh);
  // The float16 rounding of d may leave the maximum one step past qmax; round d up once instead of clamping.
  if (d * float(qmax) + m < hi) {
    dh = uint16_t(dh + 1);  // the next float16 up (d >= 0)
    d = f16_to_f32(dh);
  }
  if (!std::isfinite(d) || !std::isfinite(m)) fail("quantize: group range [{}, {}] does not fit float16", lo, hi);
  std::memcpy(block, &dh, 2);
  std::memcpy(block + 2, &mh, 2);
  uint8_t* q = block + 4;
  std::memset(q, 0, codec_block_bytes(c) - 4);
  for (int64_t j = 0; j < n; ++j) {
    int v = d > 0 ? int(std::lround((x[j] - m) / d)) : 0;
    v = std::clamp(v, 0, qmax);
    if (codec_bits(c) == 8) {
      q[j] = uint8_t(v);
    } else if (j < g / 2) {
      q[j] = uint8_t(q[j] | v);
    } else {
      q[j - g / 2] = uint8_t(q[j - g / 2] | (v << 4));
    }
  }
}

// MXFP4 as gpt-oss's release rounds (tools/make_model_goldens.py does the same): the scale 2^e with
// e = ceil(log2(max|x| / 6)), each x / 2^e to the nearest e2m1 magnitude (ties to the smaller), its sign kept.
void encode_mxfp4_group(const float* x, int64_t n, uint8_t* block) {
  double amax = 1e-30;
  for (int64_t j = 0; j < n; ++j) {
    if (!std::isfinite(x[j])) fail("quantize: value {} is not finite", x[j]);
    amax = std::max(amax, std::fabs(double(x[j])));
  }
  const int e = int(std::clamp(std::ceil(std::log2(amax / 6.0)), -127.0, 127.0));
  block[0] = uint8_t(e + 127);
  uint8_t* q = block + 1;
  std::memset(q, 0, 16);
  for (int64_t j = 0; j < n; ++j) {
    const double v = std::ldexp(double(x[j]), -e);
    int code = 0;
    for (int c = 1; c < 8; ++c) {
      if (std::fabs(std::fabs(v) - double(kFp4Values[c])) < std::fabs(std::fabs(v) - double(kFp4Values[code])))
        code = c;
    }
    if (v < 0 && code > 0) code += 8;
    q[j / 2] = uint8_t(q[j / 2] | (j % 2 == 0 ? code : code << 4));
  }
}

// FP8_G32 as DeepSeek's release rounds a block: d = max|x| / 448 (e4m3's largest finite value), each x / d to the
// nearest e4m3 value, ties to the even code (round to nearest even, as torch's float -> float8_e4m3fn cast).
void encode_fp8_group(const float* x, int64_t n, uint8_t* block) {
  float amax = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    if (!std::isfinite(x[j])) fail("quantize: value {} is not finite", x[j]);
    amax = std::max(amax, std::fabs(x[j]));
  }
  const float d = amax / 448.0f;
  std::memcpy(block, &d, 4);
  uint8_t* q = block + 4;
  std::memset(q, 0, 32);
  if (d == 0.0f) return;
  for (int64_t j = 0; j < n; ++j) {
    const float v = std::fabs(x[j] / d);
    int lo = 0, hi = 0x7E;  // the codes 0..0x7E are the finite non-negative values, increasing
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      (kE4m3Values.v[mid] <= v ? lo : hi) = mid;
    }
    const float dl = v - kE4m3Values.v[lo], dh = kE4m3Values.v[hi] - v;
    int code = v >= kE4m3Values.v[hi] ? hi : dl < dh ? lo : dh < dl ? hi : (lo % 2 == 0 ? lo : hi);
    if (x[j] < 0 && code > 0) code |= 0x80;
    q[j] = uint8_t(code);
  }
}

}  // namespace

bool codec_has_encoder(Codec c) {
  return !codec_is_ggml(c);
}

std::string encoder_codec_names() {
  std::string s;
  for (Codec c : kAllCodecs) {
    if (!codec_has_encoder(c)) continue;
    if (!s.empty()) s += ", ";
    s += codec_name(c);
  }
  return s;
}

void encode_row(Codec c, const float* x, int64_t cols, uint8_t* out) {
  if (codec_is_ggml(c)) {
    fail("encode: {} has no encoder (ggml's types are read as a GGUF file stores them; encoders: {})", codec_name(c),
         encoder_codec_names());
  }
  switch (c) {
    case Codec::F32:
      std::memcpy(out, x, size_t(cols) * 4);
      return;
    case Codec::F16:
    case Codec::BF16:
      for (int64_t k = 0; k < cols; ++k) {
        const uint16_t h = c == Codec::BF16 ? f32_to_bf16(x[k]) : f32_to_f16(x[k]);
        std::memcpy(out + size_t(k) * 2, &h, 2);
      }
      return;
    default:
      break;
  }
  const int64_t g = codec_group(c);
  for (int64_t k0 = 0, b = 0; k0 < cols; k0 += g, ++b) {
    uint8_t* block = out + size_t(b) * codec_block_bytes(c);
    if (c == Codec::MXFP4) {
      encode_mxfp4_group(x + k0, std::min(g, cols - k0), block);
    } else if (c == Codec::FP8_G32) {
      encode_fp8_group(x + k0, std::min(g, cols - k0), block);
    } else {
      encode_group(c, x + k0, std::min(g, cols - k0), block);
    }
  }
}

void encode_matrix(Codec c, DType src_dtype, const void* src, int64_t rows, int64_t cols, uint8_t* out) {
  const std::optional<Codec> same = codec_of_dtype(src_dtype);
  if (!same) fail("encode: source dtype {} is not f32, f16 or bf16", dtype_name(src_dtype));
  if (*same == c) {
    std::memcpy(out, src, codec_matrix_bytes(c, rows, cols));
    return;
  }
  const size_t src_row = size_t(cols) * dtype_size(src_dtype), dst_row = codec_row_bytes(c, cols);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    const auto* s = static_cast<const uint8_t*>(src) + size_t(r) * src_row;
    for (int64_t k = 0; k < cols; ++k) row[size_t(k)] = codec_value(*same, s, k);
    encode_row(c, row.data(), cols, out + size_t(r) * dst_row);
  }
}

}  // namespace seedling
