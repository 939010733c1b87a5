// cuda/mla_forward.h - multi-head latent attention in the CUDA forward: model/mla.cpp's Model::mla_attention, step for
// step, from mla.cu's kernels and the products every block uses (cuda/forward_products.h). Every row, prompt or
// decode, runs absorbed as on the CPU (kv_b's key half folded into the query, its value half applied after the latent
// sum), through one attention kernel over the latent cache, so a position's attention has the same bits whether it came
// in a prompt or decoded alone. The latent cache lives in the sequence's device cache (cuda_forward.cpp's CudaKv: per
// MLA layer [cap][kv_lora_rank + qk_rope_head_dim] float32 from its base, kv/kv_layout.h; what the host cache's shape
// says and `seedling info` prints).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/forward_products.h"
#include "cuda/kernels.h"
#include "model/config.h"

namespace seedling::cuda {

// One MLA layer's device copies, uploaded by role (model/family.h: MlaQA ... MlaKvB, Q, O and the norms).
struct MlaWeights {
  DeviceMatrix q_a, q_b;  // with q_lora_rank: q_a_proj, q_b_proj
  DeviceMatrix q;         // without: q_proj
  DeviceMatrix kv_a, kv_b, o;
  const float* attn_norm = nullptr;
  const float* q_a_norm = nullptr;  // with q_lora_rank
  const float* kv_a_norm = nullptr;
};

// What an MLA layer reads of the forward's batch (device memory) and of the model's RoPE and norms.
struct MlaRows {
  int64_t m = 0;
  const int* pos = nullptr;     // each row's position
  const KvRow* rows = nullptr;  // each row's cache
  const float* inv_freq = nullptr;
  float rope_scaling = 1.0f;
  float eps = 0.0f;
};

// The kernels' shape of a layer's plan.
MlaShape mla_shape(const MlaPlan& p, int heads);

// Refuses, naming the layer and the cause, an MLA layer the kernels cannot run: kv_b in a codec they do not read down
// its columns (mla_absorb_query: the float, affine and FP8 codecs), or RoPE over other dims than the rope part.
void check_mla_layer(const MlaPlan& p, const MlaWeights& w, int rotary_dim, int layer);

// The scratch of the MLA layers (sized by a forward's rows, shared by its layers) and their launches.
class MlaAttention {
 public:
  // x += o_proj(MLA(RMSNorm(x))) of the layer at `base` of the rows' caches (KvRow::layer) for the rows (q_lora_rank
  // 0: q_proj); xn gets RMSNorm(x).
  void run(int64_t base, const MlaPlan& p, int heads, const MlaWeights& w, const MlaRows& b, float* x, float* xn,
           cudaStream_t stream, DeviceScratch& f16_scratch);
  // The two buffers every launch of run() names (cuda_forward.cpp captures its decode graph with them).
  const void* buffer() const { return arena_.ptr(); }
  const void* counters() const { return counters_.ptr(); }

 private:
  DeviceScratch arena_;     // q, the latent and rope key, q_a, the absorbed queries, the latent sums, their values, and
                            // the attention's partial sums, one after another
  DeviceScratch counters_;  // mla_attention's (kept at zero)
};

}  // namespace seedling::cuda
