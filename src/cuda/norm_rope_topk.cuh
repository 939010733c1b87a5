// cuda/norm_rope_topk.cuh - the row arithmetic that a fused decode launch (products.cu's matvec_kernel) shares with
// the plain launch it replaces (row_ops.cu): a block's RMS of a row, one head's qk-norm + RoPE, where a key row sits
// in the cache, the router's softmax + top-k and its other policies (route_row); and the experts' activation
// (experts.cu, gemm.cu). One copy of each, so the fused and the plain launch give the same bits.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "cuda/kernels.h"
#include "cuda/warp_primitives.cuh"

namespace seedling::cuda {

// x = w * x / sqrt(mean(x^2) + eps) over one row of n, by a whole block of kWarp * kWarpsPerBlock threads: the
// sum of squares in one fixed order (strided per thread, then each warp, then the warps in turn), so every kernel
// that normalises a row gets the same bits.
// Loads go out kNormBatch at a time before any is used: one after another, each waiting for the last (8 loads a
// thread at 2,048 wide, twice: here and in the normalising pass), the router launch took 14.3 us, batched 11.7 (ncu).
constexpr int kNormBatch = 8;

// 1 / rms from each thread's partial sum of squares (the fixed order above: each warp, then the warps in turn).
__device__ __forceinline__ float block_rms_finish(float ss, int64_t n, float eps) {
  __shared__ float part[kWarpsPerBlock];
  ss = warp_sum(ss);
  if (threadIdx.x % kWarp == 0) part[threadIdx.x / kWarp] = ss;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < int(blockDim.x) / kWarp; ++w) total += part[w];
  return 1.0f / sqrtf(total / float(n) + eps);
}

__device__ __forceinline__ float block_rms_inv(const float* xr, int64_t n, float eps) {
  float ss = 0.0f;
  for (int64_t i0 = threadIdx.x; i0 < n; i0 += kNormBatch * int64_t(blockDim.x)) {
    float v[kNormBatch];
#pragma unroll
    for (int u = 0; u < kNormBatch; ++u) {
      const int64_t i = i0 + u * int64_t(blockDim.x);
      v[u] = i < n ? xr[i] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kNormBatch; ++u) {
      if (i0 + u * int64_t(blockDim.x) < n) ss = fmaf(v[u], v[u], ss);
    }
  }
  return block_rms_finish(ss, n, eps);
}

// One head (a warp's vh[0 .. hd)): RMS-normed over hd with weights nw when given, then rotate-half RoPE of its
// first 2 * half dims at position p. The one copy of this arithmetic: qk_rope_kv_kernel and the q/k/v product's
// fused epilogue both call it, so they give the same bits.
__device__ __forceinline__ void norm_rope_head(float* vh, const float* nw, float eps, int hd, int p,
                                               const float* inv_freq, int half, float scaling) {
  const int lane = threadIdx.x % kWarp;
  if (nw != nullptr) {
    float ss = 0.0f;
    for (int i = lane; i < hd; i += kWarp) ss = fmaf(vh[i], vh[i], ss);
    const float inv = 1.0f / sqrtf(warp_sum(ss) / float(hd) + eps);
    for (int i = lane; i < hd; i += kWarp) vh[i] = nw[i] * (vh[i] * inv);
    __syncwarp();
  }
  for (int i = lane; i < half; i += kWarp) {
    const float angle = float(p) * inv_freq[i];
    const float c = cosf(angle) * scaling, sn = sinf(angle) * scaling;
    const float x0 = vh[i], x1 = vh[i + half];
    vh[i] = x0 * c - x1 * sn;
    vh[i + half] = x1 * c + x0 * sn;
  }
  __syncwarp();
}

// Where kv head `h`'s key row sits at the row's position in the layer at `base` of its cache (its value row cap rows
// later).
__device__ __forceinline__ float* cache_key_row(const KvRow& r, int64_t base, int kv_dim, int h, int hd) {
  return r.layer(base) + int64_t(r.pos) * kv_dim + int64_t(h) * hd;
}

// One warp: the largest of v[0..n) and its index, ties to the lower index (ops::top_k's order). Values already taken
// must be marked below every other (-inf, or -2 among probabilities); n > 0.
__device__ inline int warp_argmax(const float* v, int n, float& best_out) {
  const int lane = threadIdx.x % kWarp;
  float best = -INFINITY;
  int best_i = n;
  for (int i = lane; i < n; i += kWarp) {
    if (v[i] > best) {  // lanes visit ascending i, so '>' keeps the lower index on a tie
      best = v[i];
      best_i = i;
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ob = __shfl_xor_sync(0xffffffffu, best, o);
    const int oi = __shfl_xor_sync(0xffffffffu, best_i, o);
    if (ob > best || (ob == best && oi < best_i)) {
      best = ob;
      best_i = oi;
    }
  }
  best_out = best;
  return best_i;
}

// One warp: softmax over the e logits of x (probabilities in p, e floats of shared memory), then the k largest
// (ties: lower index first) into ids / weights, divided by their sum with norm_topk.
__device__ inline void topk_row(const float* x, int e, int k, bool norm_topk, int* ids, float* weights, float* p) {
  const int lane = threadIdx.x % kWarp;
  float mx = -FLT_MAX;
  for (int i = lane; i < e; i += kWarp) mx = fmaxf(mx, x[i]);
  mx = warp_max(mx);
  float sum = 0.0f;
  for (int i = lane; i < e; i += kWarp) {
    p[i] = expf(x[i] - mx);
    sum += p[i];
  }
  sum = warp_sum(sum);
  const float inv = 1.0f / sum;
  for (int i = lane; i < e; i += kWarp) p[i] = p[i] * inv;
  __syncwarp();
  float chosen_sum = 0.0f;
  for (int s = 0; s < k; ++s) {
    float best;
    const int best_i = warp_argmax(p, e, best);  // taken ones hold -2, below every probability
    if (lane == 0) {
      ids[s] = best_i;
      weights[s] = best;
    }
    chosen_sum += best;
    __syncwarp();
    if (lane == 0) p[best_i] = -2.0f;  // taken
    __syncwarp();
  }
  if (norm_topk && lane == 0) {
    for (int s = 0; s < k; ++s) weights[s] = weights[s] / chosen_sum;
  }
}

// The k largest of choice (each taken one set to -inf) into ids, with weights[s] = value[id] (lane 0 writes).
__device__ inline void warp_take_k(float* choice, const float* value, int n, int k, int* ids, float* weights) {
  const int lane = threadIdx.x % kWarp;
  for (int s = 0; s < k; ++s) {
    float best;
    const int i = warp_argmax(choice, n, best);
    if (lane == 0) {
      ids[s] = i;
      weights[s] = value[i];
      choice[i] = -INFINITY;
    }
    __syncwarp();
  }
}

// router_route's policy on one row of e logits x by one warp (decoder.cpp's route): ids and weights its k choices
// (lane 0 writes); sm 3 * e floats of shared memory: z the biased logits (then the sigmoid scores), choice what the
// top-k ranks, group the group scores (kept groups: -inf once taken). The one copy: router_route's kernel and the
// router matvec's epilogue both call it.
__device__ inline void route_row(const float* x, int e, int k, const RouterPolicy& p, int* id, float* w, float* sm) {
  float *z = sm, *choice = sm + e, *group = sm + 2 * e;
  const int lane = threadIdx.x % kWarp;
  for (int i = lane; i < e; i += kWarp) z[i] = p.bias != nullptr ? x[i] + p.bias[i] : x[i];
  __syncwarp();
  if (p.gating == RouteGating::SoftmaxTopK) {
    topk_row(z, e, k, p.renormalize, id, w, choice);  // renormalised there, as router_topk
  } else if (p.gating == RouteGating::TopKSoftmax) {
    for (int i = lane; i < e; i += kWarp) choice[i] = z[i];
    __syncwarp();
    warp_take_k(choice, z, e, k, id, w);
    if (lane == 0) {  // ops::softmax over the k chosen logits (largest first: w[0] is their max)
      const float mx = w[0];
      float sum = 0.0f;
      for (int s = 0; s < k; ++s) {
        w[s] = expf(w[s] - mx);
        sum += w[s];
      }
      const float inv = 1.0f / sum;
      for (int s = 0; s < k; ++s) w[s] = w[s] * inv;
    }
  } else {  // SigmoidGroupTopK: ops::group_top_k over score + correction, weights the scores
    for (int i = lane; i < e; i += kWarp) {
      z[i] = 1.0f / (1.0f + expf(-z[i]));
      choice[i] = p.correction != nullptr ? z[i] + p.correction[i] : z[i];
    }
    __syncwarp();
    const int per = e / p.n_group;
    for (int g = lane; g < p.n_group; g += kWarp) {  // a group's score: its two largest choices, largest first
      float b1 = -INFINITY, b2 = -INFINITY;
      for (int j = 0; j < per; ++j) {
        const float v = choice[g * per + j];
        if (v > b1) {
          b2 = b1;
          b1 = v;
        } else if (v > b2) {
          b2 = v;
        }
      }
      group[g] = b1 + b2;
    }
    __syncwarp();
    for (int t = 0; t < p.topk_group; ++t) {
      float best;
      const int g = warp_argmax(group, p.n_group, best);
      if (lane == 0) group[g] = -INFINITY;  // kept
      __syncwarp();
    }
    for (int i = lane; i < e; i += kWarp) {
      if (group[i / per] != -INFINITY) choice[i] = p.masked;  // a group not kept: its choices masked, as on the CPU
    }
    __syncwarp();
    warp_take_k(choice, z, e, k, id, w);
    if (lane == 0 && p.renormalize) {
      float sum = 0.0f;
      for (int s = 0; s < k; ++s) sum = sum + w[s];
      sum = sum + 1e-20f;  // transformers' epsilon for sigmoid scores
      for (int s = 0; s < k; ++s) w[s] = w[s] / sum;
    }
  }
  if (lane == 0 && p.scale != 1.0f) {
    for (int s = 0; s < k; ++s) w[s] = w[s] * p.scale;
  }
}

// The activation of output n of expert `expert` from its gate and up sums (ExpertMath): silu(g) u as before the plan
// existed, or with the expert's biases and/or gpt_oss's clamped SwiGLU (ops::clamped_swiglu's operations). The one
// copy: experts.cu's gate/up kernel and gemm.cu's grouped epilogue both call it, so they apply the same operations.
__device__ __forceinline__ float expert_act(float g, float u, const ExpertMath& math, int expert, int64_t I,
                                            int64_t n) {
  if (math.plain()) return (g / (1.0f + expf(-g))) * u;
  if (math.gate_bias != nullptr) g = g + math.gate_bias[expert * I + n];
  if (math.up_bias != nullptr) u = u + math.up_bias[expert * I + n];
  if (!math.clamped) return (g / (1.0f + expf(-g))) * u;
  g = fminf(g, math.limit);
  u = fminf(fmaxf(u, -math.limit), math.limit);
  const float glu = g * (1.0f / (1.0f + expf(-(g * math.alpha))));
  return (u + 1.0f) * glu;
}

}  // namespace seedling::cuda
