// cuda/mla_forward.cpp - model/mla.cpp's Model::mla_attention on the device (cuda/mla_forward.h).
#include "cuda/mla_forward.h"

#include <algorithm>

#include "codec/codec.h"
#include "core/error.h"

namespace seedling::cuda {

namespace {

// The attention's partial sums of one launch (mla_attention_scratch_floats) stay under this: a prompt's rows go in
// launches of as many rows as fit (DeepSeek-V3's 128 heads of rank 512: 4.2 MB a row, 63 rows a launch).
constexpr int64_t kAttentionScratchBytes = int64_t(256) << 20;

}  // namespace

MlaShape mla_shape(const MlaPlan& p, int heads) {
  MlaShape s;
  s.heads = heads;
  s.rank = p.kv_lora_rank;
  s.nope = p.qk_nope_head_dim;
  s.rope = p.qk_rope_head_dim;
  s.v = p.v_head_dim;
  s.interleave = p.rope_interleave;
  s.scale = p.softmax_scale;
  return s;
}

void check_mla_layer(const MlaPlan& p, const MlaWeights& w, int rotary_dim, int layer) {
  const Codec c = w.kv_b.codec;
  // load_element and lane_dot read all of these; mxfp4 and the seed codecs are expert codecs, never kv_b's.
  const bool ggml = codec_is_ggml(c) && c != Codec::MXFP4_GGML;
  if (!codec_is_float(c) && !codec_is_affine(c) && c != Codec::FP8_G32 && !ggml) {
    fail(
        "--device cuda: layer {}'s kv_b_proj is stored as {}, which the MLA kernels do not read (they read f32, f16, "
        "bf16, the affine codecs, fp8_g32 and the ggml block codecs but mxfp4)",
        layer, codec_name(c));
  }
  if (rotary_dim != p.qk_rope_head_dim) {
    fail("--device cuda: layer {} rotates {} dims, the MLA kernels rotate the rope part, qk_rope_head_dim {}", layer,
         rotary_dim, p.qk_rope_head_dim);
  }
}

void MlaAttention::run(int64_t base, const MlaPlan& p, int heads, const MlaWeights& w, const MlaRows& b, float* x,
                       float* xn, cudaStream_t stream, DeviceScratch& f16_scratch) {
  const MlaShape s = mla_shape(p, heads);
  const int64_t M = b.m, H = w.kv_a.cols, Q = int64_t(heads) * s.q_head(), W = s.width();
  const int qr = p.q_lora_rank;
  const int64_t per_row = mla_attention_scratch_floats(1, s);
  const int64_t rows_per_launch = std::clamp<int64_t>(kAttentionScratchBytes / 4 / per_row, 1, M);
  // The arena's buffers, each 16-byte aligned: q (M, Q), kv (M, W), qa (M, q_lora_rank), q_abs (M, heads, W), lat (M,
  // heads, rank), att (M, heads * v), the partial sums.
  const int64_t sizes[7] = {M * Q,
                            M * W,
                            M * qr,
                            M * heads * W,
                            M * heads * s.rank,
                            M * heads * s.v,
                            mla_attention_scratch_floats(rows_per_launch, s)};
  int64_t total = 0;
  for (const int64_t n : sizes) total += (n + 3) / 4 * 4;
  float* buf[7];
  float* at = arena_.get<float>(size_t(total));
  for (int i = 0; i < 7; ++i) {
    buf[i] = at;
    at += (sizes[i] + 3) / 4 * 4;
  }
  float *q = buf[0], *kv = buf[1], *qa = buf[2], *q_abs = buf[3], *lat = buf[4], *att = buf[5], *part = buf[6];
  // q_a (or q_proj) and kv_a of norm(x): one launch for a decode row, with the norm inside (xn gets it).
  const DeviceMatrix ws[2] = {qr > 0 ? w.q_a : w.q, w.kv_a};
  float* const ys[2] = {qr > 0 ? qa : q, kv};
  if (M == 1) {
    matvec(x, ws, ys, w.attn_norm, b.eps, xn, false, stream);
  } else {
    rms_norm(x, xn, M, H, w.attn_norm, b.eps, stream);
    products(xn, M, ws, ys, 2, stream, f16_scratch);  // (M, q_lora_rank or Q), (M, W)
  }
  if (qr > 0) {  // q_a_layernorm, then q_b_proj
    rms_norm(qa, qa, M, qr, w.q_a_norm, b.eps, stream);
    product(qa, M, w.q_b, q, false, stream, f16_scratch);  // (M, Q)
  }
  mla_rope_cache(q, kv, M, s, w.kv_a_norm, b.eps, b.pos, b.inv_freq, b.rope_scaling, b.rows, base, stream);
  mla_absorb_query(q, M, w.kv_b, s, q_abs, stream);
  int* counters = counters_.get_zeroed<int>(size_t(mla_attention_counters(rows_per_launch, s)), stream);
  mla_attention(q_abs, M, b.rows, base, s, lat, part, counters, rows_per_launch, stream);
  mla_value(lat, M, w.kv_b, s, att, stream);  // (M, heads * v)
  if (M == 1) {
    float* const out[1] = {x};
    matvec(att, {&w.o, 1}, out, nullptr, 0.0f, nullptr, true, stream);  // x += o . att
  } else {
    product(att, M, w.o, x, true, stream, f16_scratch);  // x += (M, H)
  }
}

}  // namespace seedling::cuda
