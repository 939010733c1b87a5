// cuda/experts.cu - the routed experts' kernels (declared in cuda/kernels.h): gate/up with SiLU for each (row,
// expert) pair, the down products, the weighted combine into x, and down + combine fused for decode. A pair's expert
// is found through a table of blob pointers (ExpertLayout), so where an expert sits never changes a bit.
#include <cstdint>

#include "cuda/codec_device.cuh"
#include "cuda/kernels.h"
#include "cuda/lane_dot.cuh"
#include "cuda/launch.cuh"
#include "cuda/norm_rope_topk.cuh"
#include "cuda/stage_clock.cuh"
#include "cuda/warp_primitives.cuh"

namespace seedling::cuda {

namespace {

// An expert table (e pointers) into shared memory, by the whole block, before pdl_wait (warp_primitives.cuh): an
// expert's blob is then one shared read after its id instead of a second global round trip. Tables of more than
// kSharedTable experts stay in global memory (table_entry). Ends with the block's barrier, the copies landed.
constexpr int kSharedTable = 512;
__device__ __forceinline__ void stage_table(const uint8_t** tab, const uint8_t* const* table, int e) {
  if (e <= kSharedTable) {
    for (int q = int(threadIdx.x); q < e; q += int(blockDim.x)) cp_async_small<8>(tab + q, table + q);
  }
  cp_async_commit();
  cp_async_wait_all();
  __syncthreads();
}
__device__ __forceinline__ const uint8_t* table_entry(const uint8_t* const* tab, const uint8_t* const* table, int e,
                                                      int id) {
  return e <= kSharedTable ? tab[id] : table[id];
}

// Gate and up rows of a pair's expert for kGateUpOutputs consecutive outputs n in one pass (the loads of all four
// rows in flight together), then silu(gate) * up. Each row sums as lane_dot sums it alone, so the outputs do not
// depend on how many a warp takes.
constexpr int kGateUpOutputs = 2;

template <CodecId C, bool V, bool S, int NO>
__device__ __forceinline__ void gate_up_outputs(const float* xr, const uint8_t* blob, const ExpertLayout& l, int64_t n,
                                                uint8_t* stage, float* act_row, bool x_shared, const ExpertMath& math,
                                                int expert) {
  constexpr int NW = 2 * NO;
  WRow<C> wr[NW];
#pragma unroll
  for (int o = 0; o < NO; ++o) {
    wr[2 * o] = row_at<C>(blob, l.intermediate, l.hidden, n + o);
    wr[2 * o + 1] = row_at<C>(blob + l.up_offset, l.intermediate, l.hidden, n + o);
  }
  if constexpr (S) {  // never for the seed codecs
    const size_t rb = row_bytes_of<C>(l.hidden);
#pragma unroll
    for (int v = 0; v < NW; ++v) {
      warp_stage(stage + v * rb, wr[v], rb);
      wr[v] = stage + v * rb;
    }
    cp_async_wait_all();
    if (x_shared) {
      __syncthreads();  // x, staged by the whole block, has landed
    } else {
      __syncwarp();
    }
  }
  float acc[NW][1] = {};
  const float* xs[NW];
#pragma unroll
  for (int v = 0; v < NW; ++v) xs[v] = xr;
  lane_dot<C, 1, V, NW, true>(wr, l.hidden, xs, 0, 1, acc);  // gate and up rows read the same x
  pdl_trigger();
#pragma unroll
  for (int o = 0; o < NO; ++o) {
    const float g = warp_sum(acc[2 * o][0]), u = warp_sum(acc[2 * o + 1][0]);
    if (threadIdx.x % kWarp == 0) act_row[n + o] = expert_act(g, u, math, expert, l.intermediate, n + o);
  }
}

// Dynamic shared memory of expert_gate_up_kernel, in this order: with S, each warp's two buffers of kGateUpOutputs
// gate and up rows; with x_shared, the pair's x (hidden floats); then the expert table when it is shared.
struct GateUpShared {
  size_t stage = 0, x = 0, table = 0;
  size_t total() const { return stage + x + table; }
};

// x_shared (with S only; the launcher sets it when every warp of the grid takes kGateUpOutputs outputs): the block
// copies the pair's x into shared memory with the same cp.async wait as the weight rows, so the two round trips
// overlap instead of x's following the weights'.
template <CodecId C, bool V, bool S>
__global__ void __launch_bounds__(kWarp* kWarpsPerBlock, kGateUpBlocksPerSm)
    expert_gate_up_kernel(const float* x, int k, int e, const int* ids, const uint8_t* const* table, ExpertLayout l,
                          float* act, GateUpShared sh, bool x_shared, ExpertMath math) {
  BlockClock clk;
  extern __shared__ __align__(16) uint8_t smem_bytes[];
  const uint8_t** tab = reinterpret_cast<const uint8_t**>(smem_bytes + sh.stage + sh.x);
  stage_table(tab, table, e);
  pdl_wait();  // the router's ids and normed x
  clk.mark(0);
  const int64_t n = (int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp) * kGateUpOutputs;
  const int64_t j = blockIdx.y;
  const uint8_t* blob = table_entry(tab, table, e, ids[j]);
  if (blob == nullptr) return;  // the whole block's pair
  clk.mark(1);
  const float* xr = x + (j / k) * l.hidden;
  if constexpr (S) {
    if (x_shared) {
      float* xs = reinterpret_cast<float*>(smem_bytes + sh.stage);
      for (int64_t c = int64_t(threadIdx.x) * 4; c < l.hidden; c += int64_t(blockDim.x) * 4) cp_async16(xs + c, xr + c);
      xr = xs;
    }
  }
  if (n >= l.intermediate) return;
  uint8_t* stage = smem_bytes + size_t(threadIdx.x / kWarp) * 2 * kGateUpOutputs * row_bytes_of<C>(l.hidden);
  float* act_row = act + j * l.intermediate;
  if (n + kGateUpOutputs <= l.intermediate) {
    gate_up_outputs<C, V, S, kGateUpOutputs>(xr, blob, l, n, stage, act_row, x_shared, math, ids[j]);
  } else {
    for (int64_t o = n; o < l.intermediate; ++o) {
      gate_up_outputs<C, V, S, 1>(xr, blob, l, o, stage, act_row, false, math, ids[j]);
    }
  }
  clk.mark(2);
  clk.done(kClkGateUp);
}

// One output element of one expert's down product: warp_sum of its lane_dot (the same bits in both kernels below).
template <CodecId C, bool V, bool Bias>
__global__ void expert_down_kernel(const float* act, const int* ids, const uint8_t* const* table, ExpertLayout l,
                                   float* out, const float* down_bias) {
  const int64_t h = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  const int64_t j = blockIdx.y;
  if (h >= l.hidden) return;
  const uint8_t* blob = table[ids[j]];
  if (blob == nullptr) return;
  float acc[1][1] = {};
  const WRow<C> wr[1] = {row_at<C>(blob + l.down_offset, l.hidden, l.intermediate, h)};
  const float* xs[1] = {act + j * l.intermediate};
  lane_dot<C, 1, V>(wr, l.intermediate, xs, 0, 1, acc);
  const float s = warp_sum(acc[0][0]);
  if constexpr (Bias) {
    if (threadIdx.x % kWarp == 0) out[j * l.hidden + h] = s + down_bias[ids[j] * l.hidden + h];
  } else {
    if (threadIdx.x % kWarp == 0) out[j * l.hidden + h] = s;
  }
}

// expert_down then moe_combine in one kernel, every expert present. The kDownWarps warps of an output element h of
// row i split its k slots into runs (warp w: slots [w * per, (w + 1) * per)), a run's down products kDownAtOnce
// experts at a time (their loads in flight together; each summed exactly as expert_down_kernel sums it, since a row's
// lane_dot does not depend on the rows beside it); then one lane adds them in slot order exactly as
// moe_combine_kernel does. A Qwen3-30B-A3B layer (2,048 outputs, top-8) is 512 blocks: one wave at 4 an SM. (Two
// experts a warp over four warps an output took four waves; eight a warp over one, 128 registers, spilled: ncu.
// Four at once spilled 220 bytes at the 64-register cap; two at once do not, and decode ran 1.08x: 48 layers, H200,
// docs/results/2026-11-30-cuda-decode-session7.md.)
constexpr int kMaxDownSlots = 32, kDownAtOnce = 2, kDownWarps = 2;

// Bias: the plan's per-expert down bias (gpt_oss) is added; without it the code is the plain sum as before the plan
// parts existed (a branch on a null pointer here cost qwen3_moe's 48-layer decode 2.3%, H200).
template <CodecId C, bool V, int NW, bool Bias>
__device__ __forceinline__ void down_slots(const float* act, const uint8_t* const* blobs, const ExpertLayout& l,
                                           int64_t h, int64_t j0, int s0, float* e, const float* down_bias,
                                           const int* ids) {
  WRow<C> wr[NW];
  const float* xs[NW];
#pragma unroll
  for (int v = 0; v < NW; ++v) {
    wr[v] = row_at<C>(blobs[s0 + v] + l.down_offset, l.hidden, l.intermediate, h);
    xs[v] = act + (j0 + v) * l.intermediate;
  }
  float acc[NW][1] = {};
  lane_dot<C, 1, V, NW>(wr, l.intermediate, xs, 0, 1, acc);
#pragma unroll
  for (int v = 0; v < NW; ++v) {
    const float sum = warp_sum(acc[v][0]);
    if constexpr (Bias) {
      if (threadIdx.x % kWarp == 0) e[v] = sum + down_bias[ids[j0 + v] * l.hidden + h];
    } else {
      if (threadIdx.x % kWarp == 0) e[v] = sum;
    }
  }
}

// Before its main loop the block resolves the row's k blobs once (ids, then the shared table) and queues the row's
// routing weights; the lane that adds an output element into x reads the old value then too, so neither read waits
// at the end.
template <CodecId C, bool V, bool Bias>
__global__ void __launch_bounds__(kWarp* kWarpsPerBlock, kDownBlocksPerSm)
    expert_down_combine_kernel(const float* act, int k, int e, const int* ids, const float* weights,
                               const uint8_t* const* table, ExpertLayout l, float* x, const float* down_bias) {
  BlockClock clk;
  __shared__ const uint8_t* tab[kSharedTable];
  stage_table(tab, table, e);
  pdl_wait();
  clk.mark(0);
  constexpr int kOutputs = kWarpsPerBlock / kDownWarps;
  __shared__ float e_out[kOutputs][kMaxDownSlots];
  __shared__ float slot_w[kMaxDownSlots];
  __shared__ const uint8_t* blobs[kMaxDownSlots];
  const int warp = int(threadIdx.x) / kWarp, lane = int(threadIdx.x) % kWarp;
  const int hsel = warp / kDownWarps, w = warp % kDownWarps;
  const int64_t h = int64_t(blockIdx.x) * kOutputs + hsel;
  const int64_t i = blockIdx.y;
  const bool valid = h < l.hidden;
  const bool adds = valid && w == 0 && lane == 0;
  const float x_old = adds ? x[i * l.hidden + h] : 0.0f;
  if (int(threadIdx.x) < k) {
    cp_async_small<4>(slot_w + threadIdx.x, weights + i * k + threadIdx.x);
    blobs[threadIdx.x] = table_entry(tab, table, e, ids[i * k + threadIdx.x]);
  }
  cp_async_commit();
  __syncthreads();
  if (valid) {
    const int per = (k + kDownWarps - 1) / kDownWarps, end = min(k, (w + 1) * per);
    int s = w * per;
    for (; s + kDownAtOnce <= end; s += kDownAtOnce) {
      down_slots<C, V, kDownAtOnce, Bias>(act, blobs, l, h, i * k + s, s, e_out[hsel] + s, down_bias, ids);
    }
    for (; s < end; ++s) down_slots<C, V, 1, Bias>(act, blobs, l, h, i * k + s, s, e_out[hsel] + s, down_bias, ids);
  }
  clk.mark(1);
  pdl_trigger();
  cp_async_wait_all();
  __syncthreads();
  clk.mark(2);
  if (adds) {
    float o = 0.0f;
    for (int s = 0; s < k; ++s) o = __fadd_rn(o, __fmul_rn(slot_w[s], e_out[hsel][s]));
    x[i * l.hidden + h] = __fadd_rn(x_old, o);
  }
  clk.done(kClkDown);
}

__global__ void moe_combine_kernel(const float* eo, const float* weights, int k, int64_t h, float* x) {
  const int64_t row = blockIdx.x;
  for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
    float o = 0.0f;
    // Unfused, in slot order: the very float operations of decoder.cpp's combine (built with -ffp-contract=off).
    for (int s = 0; s < k; ++s) o = __fadd_rn(o, __fmul_rn(weights[row * k + s], eo[(row * k + s) * h + c]));
    x[row * h + c] = __fadd_rn(x[row * h + c], o);
  }
}

// The same for every matrix of every expert blob (blobs and their parts are placed 16-byte aligned by the caller).
bool experts_aligned16(const ExpertLayout& l) {
  return l.up_offset % 16 == 0 && l.down_offset % 16 == 0 && l.bytes % 16 == 0 &&
         row_bytes(l.gate_up, l.hidden) % 16 == 0 && row_bytes(l.down, l.intermediate) % 16 == 0;
}

}  // namespace

void expert_gate_up(const float* x, int64_t m, int k, const int* ids, const uint8_t* const* table, int e,
                    const ExpertLayout& l, float* act, cudaStream_t stream, const ExpertMath& math) {
  if (m == 0) return;
  const dim3 grid(blocks_for(l.intermediate, kWarpsPerBlock * kGateUpOutputs), unsigned(m * k));
  const unsigned threads = kWarp * kWarpsPerBlock;
  const bool v = experts_aligned16(l);
  GateUpShared sh;
  sh.table = e <= kSharedTable ? size_t(e) * sizeof(void*) : 0;
  const size_t stage = size_t(kWarpsPerBlock) * 2 * kGateUpOutputs * row_bytes(l.gate_up, l.hidden);
  const size_t x_bytes = size_t(l.hidden) * sizeof(float);
  const bool staged = v && stage + sh.table <= kStageSharedBytes;
  // x through shared memory: every warp full, each row of x 16-byte aligned, and room left.
  const bool x_shared = staged && l.intermediate % (kWarpsPerBlock * kGateUpOutputs) == 0 && l.hidden % 4 == 0 &&
                        reinterpret_cast<uintptr_t>(x) % 16 == 0 && stage + x_bytes + sh.table <= kStageSharedBytes;
  if (staged) sh.stage = stage;
  if (x_shared) sh.x = x_bytes;
  dispatch_codec<true, true>(l.gate_up, [&]<CodecId C>() {
    auto* kernel = staged ? expert_gate_up_kernel<C, kBytes<C>, kBytes<C>>
                   : v    ? expert_gate_up_kernel<C, kBytes<C>, false>
                          : expert_gate_up_kernel<C, false, false>;
    launch_pdl("expert_gate_up", kernel, grid, threads, sh.total(), stream, x, k, e, ids, table, l, act, sh, x_shared,
               math);
  });
  launched("expert_gate_up");
}

void expert_down(const float* act, int64_t pairs, const int* ids, const uint8_t* const* table, const ExpertLayout& l,
                 float* out, cudaStream_t stream, const ExpertMath& math) {
  if (pairs == 0) return;
  const dim3 grid(blocks_for(l.hidden, kWarpsPerBlock), unsigned(pairs));
  const bool v = experts_aligned16(l);
  dispatch_codec<true, true>(l.down, [&]<CodecId C>() {
    const bool bias = math.down_bias != nullptr;
    auto* kernel = v ? (bias ? expert_down_kernel<C, kBytes<C>, true> : expert_down_kernel<C, kBytes<C>, false>)
                     : (bias ? expert_down_kernel<C, false, true> : expert_down_kernel<C, false, false>);
    kernel<<<grid, kWarp * kWarpsPerBlock, 0, stream>>>(act, ids, table, l, out, math.down_bias);
  });
  launched("expert_down");
}

void expert_down_combine(const float* act, int64_t m, int k, const int* ids, const float* weights,
                         const uint8_t* const* table, int e, const ExpertLayout& l, float* x, float* scratch,
                         cudaStream_t stream, const ExpertMath& math) {
  if (m == 0) return;
  if (k > kMaxDownSlots) {  // more experts a row than the fused kernel holds: the two launches, the same bits
    expert_down(act, m * k, ids, table, l, scratch, stream, math);
    moe_combine(scratch, weights, m, k, l.hidden, x, stream);
    return;
  }
  const dim3 grid(blocks_for(l.hidden, kWarpsPerBlock / kDownWarps), unsigned(m));
  const unsigned threads = kWarp * kWarpsPerBlock;
  const bool v = experts_aligned16(l);
  dispatch_codec<true, true>(l.down, [&]<CodecId C>() {
    auto* kernel =
        math.down_bias != nullptr
            ? (v ? expert_down_combine_kernel<C, kBytes<C>, true> : expert_down_combine_kernel<C, false, true>)
            : (v ? expert_down_combine_kernel<C, kBytes<C>, false> : expert_down_combine_kernel<C, false, false>);
    launch_pdl("expert_down_combine", kernel, grid, threads, 0, stream, act, k, e, ids, weights, table, l, x,
               math.down_bias);
  });
  launched("expert_down_combine");
}

void moe_combine(const float* expert_out, const float* weights, int64_t m, int k, int64_t h, float* x,
                 cudaStream_t stream) {
  if (m == 0) return;
  moe_combine_kernel<<<unsigned(m), 256, 0, stream>>>(expert_out, weights, k, h, x);
  launched("moe_combine");
}

}  // namespace seedling::cuda
