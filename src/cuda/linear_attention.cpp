// cuda/linear_attention.cpp - the Gated DeltaNet mixer on CUDA (cuda/linear_attention.h): read it beside
// model/linear_attention.cpp.
#include "cuda/linear_attention.h"

#include <cmath>
#include <utility>

#include "core/error.h"

namespace seedling::cuda {

GatedDeltaNet::GatedDeltaNet(const ModelConfig& c, Product product)
    : c_(c), product_(std::move(product)), offset_(size_t(c.num_layers), 0) {
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerPlan& p = c.plan(l);
    if (p.mixer != Mixer::GatedDeltaNet) continue;
    const LinearAttentionPlan& g = p.linear;
    if (!gated_delta_chunked_fits(g.key_head_dim, g.value_head_dim)) {
      fail(
          "--device cuda: {} layer {} is a Gated DeltaNet layer with heads of {} x {}: its chunked prompt kernel needs "
          "{} bytes of shared memory a block, more than this GPU gives (use --device cpu)",
          c.model_type, l, g.key_head_dim, g.value_head_dim,
          gated_delta_chunked_smem_bytes(g.key_head_dim, g.value_head_dim));
    }
    offset_[size_t(l)] = state_floats_;
    state_floats_ += g.state_floats();
  }
}

void GatedDeltaNet::run(int layer, const std::array<DeviceMatrix, kRoleCount>& matrices,
                        const std::array<const float*, kRoleCount>& vectors, float* x, float* xn, const DeltaBatch& b,
                        cudaStream_t stream) {
  const LinearAttentionPlan& p = c_.plan(layer).linear;
  auto m = [&](Role r) -> const DeviceMatrix& { return matrices[size_t(r)]; };
  auto v = [&](Role r) { return vectors[size_t(r)]; };
  const int64_t M = b.m, H = c_.hidden_size;
  const int NK = p.key_heads, NV = p.value_heads, dk = p.key_head_dim, dv = p.value_head_dim;
  const int64_t KW = p.key_width(), VW = p.value_width(), C = p.conv_channels();
  const DeltaShape shape{.key_heads = NK,
                         .value_heads = NV,
                         .key_dim = dk,
                         .value_dim = dv,
                         .conv_kernel = p.conv_kernel,
                         .state_offset = offset_[size_t(layer)]};
  // The buffers, carved from one scratch in parts of 256 bytes: mixed, the conv's input ([q k v] per row); z, the
  // output gate; b and a per value head; the grouped projections' outputs; the conv's output; the gates; the rule's
  // output (then normed and gated in place).
  size_t floats = 0;
  auto part = [&](int64_t n) {
    const size_t at = floats;
    floats += (size_t(n) + 63) / 64 * 64;
    return at;
  };
  const size_t o_mixed = part(M * C), o_z = part(M * VW), o_b = part(M * NV), o_a = part(M * NV),
               o_qkvz = part(p.grouped ? M * (2 * KW + 2 * VW) : 0), o_ba = part(p.grouped ? M * 2 * NV : 0),
               o_conv = part(M * C), o_beta = part(M * NV), o_g = part(M * NV), o_core = part(M * VW);
  float* base = s_.get<float>(floats);
  float *mixed = base + o_mixed, *z = base + o_z, *beta_in = base + o_b, *a = base + o_a;
  const float* norm = v(Role::AttnNorm);
  if (p.grouped) {  // qwen3_next: [q k v z] and [b a] per key head, put in order on the device
    float *qkvz = base + o_qkvz, *ba = base + o_ba;
    const DeviceMatrix ws[2] = {m(Role::LinearQkvz), m(Role::LinearBa)};
    if (M == 1) {
      float* const ys[2] = {qkvz, ba};
      matvec(x, ws, ys, norm, c_.rms_norm_eps, xn, false, stream);
    } else {
      rms_norm(x, xn, M, H, norm, c_.rms_norm_eps, stream);
      product_(xn, M, ws[0], qkvz, false);
      product_(xn, M, ws[1], ba, false);
    }
    gated_delta_ungroup(qkvz, ba, M, shape, mixed, z, beta_in, a, stream);
  } else {  // qwen3_5_moe: in_proj_qkv, in_proj_z, in_proj_b, in_proj_a
    const DeviceMatrix ws[4] = {m(Role::LinearQkv), m(Role::LinearZ), m(Role::LinearB), m(Role::LinearA)};
    float* const ys[4] = {mixed, z, beta_in, a};
    if (M == 1) {  // the two wide products with the norm in their launch, then the two per-head ones on its output
      matvec(x, {ws, 2}, {ys, 2}, norm, c_.rms_norm_eps, xn, false, stream);
      matvec(xn, {ws + 2, 2}, {ys + 2, 2}, nullptr, 0.0f, nullptr, false, stream);
    } else {
      rms_norm(x, xn, M, H, norm, c_.rms_norm_eps, stream);
      for (int i = 0; i < 4; ++i) product_(xn, M, ws[i], ys[i], false);
    }
  }
  // The conv through each sequence's window, q and k L2-normalised per key head (q also scaled), the gates.
  float* conv = base + o_conv;
  causal_conv1d_silu(mixed, M, v(Role::LinearConv), b.rows, C, p.conv_kernel, shape.state_offset, conv, stream);
  const float q_scale = float(1.0 / std::sqrt(double(dk)));
  l2_normalize_heads(conv, M, C, 2 * NK, dk, NK, q_scale, 1e-6f, stream);
  float *beta = base + o_beta, *g = base + o_g;
  delta_gates(beta_in, a, v(Role::LinearALog), v(Role::LinearDtBias), M, NV, beta, g, stream);
  // The delta rule over each sequence's state: decode rows one step, prompt runs in chunks.
  float* core = base + o_core;
  gated_delta_decode(conv, g, beta, b.decode, b.decode_rows, b.rows, shape, core, stream);
  gated_delta_chunked(conv, g, beta, b.runs, b.runs_n, b.rows, shape, core, stream);
  // The gated RMSNorm per value head (w * norm(o), times silu(z)), then x += out_proj . that.
  rms_norm(core, core, M * NV, dv, v(Role::LinearNorm), c_.rms_norm_eps, stream);
  silu_mul(z, core, core, M * VW, stream);
  if (M == 1) {
    float* const ys[1] = {x};
    matvec(core, {&m(Role::LinearOut), 1}, ys, nullptr, 0.0f, nullptr, true, stream);
  } else {
    product_(core, M, m(Role::LinearOut), x, true);
  }
}

}  // namespace seedling::cuda
