// model/linear_attention.cpp - the Gated DeltaNet mixer (Mixer::GatedDeltaNet, LinearAttentionPlan), as transformers'
// Qwen3NextGatedDeltaNet / Qwen3_5MoeGatedDeltaNet compute it:
//   q, k, v, z, b, a from the input projections (qwen3_next's rows grouped per key head, put back in order here);
//   q, k, v through the causal depthwise conv1d + SiLU (its window in the sequence's state);
//   q and k L2-normalised per key head (q also scaled by 1/sqrt(key_head_dim)), each key head serving
//   value_heads / key_heads value heads; beta = sigmoid(b), g = -exp(A_log) * softplus(a + dt_bias);
//   the gated delta rule per value head (ops/gated_delta.h), its state the sequence's; the gated RMSNorm
//   norm(o) * w * silu(z) per value head; out_proj.
// A sequence's state layout (KvCache::state): the conv window ([kernel - 1][channels]), then each value head's
// (key_head_dim x value_head_dim) state. A sequence with one row in a forward takes the recurrent form, one with
// more the chunked form (chunks of 64 from its first row): every row's result depends on its own sequence only.
#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "ops/gated_delta.h"
#include "ops/matmul.h"
#include "ops/ops.h"

namespace seedling {

void Model::gated_delta_net(int layer, std::span<const BatchRow> rows, const float* xn, float* out) {
  const ModelConfig& c = config_;
  const LayerWeights& lw = w_.layers[size_t(layer)];
  const LinearAttentionPlan& p = c.plan(layer).linear;
  const int64_t M = int64_t(rows.size());
  const int NK = p.key_heads, NV = p.value_heads, dk = p.key_head_dim, dv = p.value_head_dim;
  const int KW = p.key_width(), VW = p.value_width(), C = p.conv_channels(), rep = NV / NK;
  // mixed: the conv's input, [q k v] per row; z the output gate; b and a per value head.
  std::vector<float> mixed(size_t(M * C)), z(size_t(M * VW)), b(size_t(M * NV)), a(size_t(M * NV));
  if (p.grouped) {
    const int group = 2 * dk + 2 * rep * dv;  // [q k v z] of one key head
    std::vector<float> qkvz(size_t(M * NK * group)), ba(size_t(M * 2 * NV));
    ops::matmul_batch({{xn, M, lw.lin_qkvz, qkvz.data()}, {xn, M, lw.lin_ba, ba.data()}});
    ops::ungroup_qkvz_ba(qkvz.data(), ba.data(), M, NK, NV, dk, dv, mixed.data(), z.data(), b.data(), a.data());
  } else {
    ops::matmul_batch({{xn, M, lw.lin_qkv, mixed.data()},
                       {xn, M, lw.lin_z, z.data()},
                       {xn, M, lw.lin_b, b.data()},
                       {xn, M, lw.lin_a, a.data()}});
  }
  // The conv, row by row in order (a sequence's rows come in position order), each through its own window; the
  // channels apart over the threads (each channel's window is its own: the bits of one pass over all).
  std::vector<float> conv(size_t(M * C));
  ThreadPool::global().parallel_for(size_t(C), 512, [&](size_t c0, size_t c1) {
    for (int64_t i = 0; i < M; ++i) {
      ops::causal_conv1d_silu_step(mixed.data() + i * C, rows[size_t(i)].kv->state(layer), lw.lin_conv.data(), C,
                                   p.conv_kernel, conv.data() + i * C, int(c0), int(c1));
    }
  });
  const float q_scale = float(1.0 / std::sqrt(double(dk)));
  for (int64_t i = 0; i < M; ++i) {
    float* row = conv.data() + i * C;
    for (int h = 0; h < NK; ++h) {
      ops::l2_normalize(row + h * dk, dk, 1e-6f, q_scale);
      ops::l2_normalize(row + KW + h * dk, dk, 1e-6f, 1.0f);
    }
  }
  std::vector<float> g(size_t(M * NV)), beta(size_t(M * NV));
  ops::delta_gates(b.data(), a.data(), lw.lin_a_log.data(), lw.lin_dt_bias.data(), M, NV, beta.data(), g.data());
  // Each sequence's rows, in order; one work item per (sequence, value head).
  std::vector<KvCache*> seqs;
  std::map<KvCache*, std::vector<int64_t>> rows_of;
  for (int64_t i = 0; i < M; ++i) {
    KvCache* kv = rows[size_t(i)].kv;
    auto [it, fresh] = rows_of.try_emplace(kv);
    if (fresh) seqs.push_back(kv);
    it->second.push_back(i);
  }
  std::vector<float> core(size_t(M * VW));
  const size_t conv_floats = p.conv_state_floats(), head_floats = size_t(dk) * size_t(dv);
  ThreadPool::global().parallel_for(seqs.size() * size_t(NV), 1, [&](size_t begin, size_t end) {
    std::vector<float> qs, ks, vs, gs, bs, os;
    for (size_t it = begin; it < end; ++it) {
      KvCache* kv = seqs[it / size_t(NV)];
      const int h = int(it % size_t(NV)), kh = h / rep;
      const std::vector<int64_t>& idx = rows_of.at(kv);
      const int n = int(idx.size());
      qs.resize(size_t(n * dk));
      ks.resize(size_t(n * dk));
      vs.resize(size_t(n * dv));
      gs.resize(size_t(n));
      bs.resize(size_t(n));
      os.resize(size_t(n * dv));
      for (int t = 0; t < n; ++t) {
        const float* row = conv.data() + idx[size_t(t)] * C;
        std::copy_n(row + kh * dk, dk, qs.data() + t * dk);
        std::copy_n(row + KW + kh * dk, dk, ks.data() + t * dk);
        std::copy_n(row + 2 * KW + h * dv, dv, vs.data() + t * dv);
        gs[size_t(t)] = g[size_t(idx[size_t(t)] * NV + h)];
        bs[size_t(t)] = beta[size_t(idx[size_t(t)] * NV + h)];
      }
      ops::DeltaRun run;
      run.q = qs.data();
      run.k = ks.data();
      run.v = vs.data();
      run.g = gs.data();
      run.beta = bs.data();
      run.out = os.data();
      run.q_stride = run.k_stride = dk;
      run.v_stride = run.out_stride = dv;
      run.n = n;
      float* state = kv->state(layer) + conv_floats + size_t(h) * head_floats;
      if (n == 1) {
        ops::gated_delta_recurrent(run, dk, dv, state);
      } else {
        ops::gated_delta_chunked(run, dk, dv, state);
      }
      for (int t = 0; t < n; ++t) std::copy_n(os.data() + t * dv, dv, core.data() + idx[size_t(t)] * VW + h * dv);
    }
  });
  // The gated RMSNorm per value head: w * norm(o), times silu(z).
  std::vector<float> normed(size_t(M * VW));
  ops::rms_norm_to(core.data(), normed.data(), M * NV, dv, lw.lin_norm.data(), c.rms_norm_eps);
  ops::silu_mul(z.data(), normed.data(), normed.data(), M * VW);
  ops::matmul(normed.data(), M, lw.lin_out, out);  // (M, H)
}

}  // namespace seedling
