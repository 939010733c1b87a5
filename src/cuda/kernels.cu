// cuda/kernels.cu - the kernels declared in cuda/kernels.h, in one translation unit (CI compiles one file).
//
// Matrix products give each output element to one warp: lane l takes the codec's units (4/8 floats, or for the
// affine codecs G / 8 codes of a block shared by 8 lanes) in a fixed pattern, multiplies them into every row it
// serves, and the 32 partial sums meet in a fixed shuffle tree. That order depends only on the matrix, never on the
// row count or on whether the weights were first staged in shared memory. Seed matrices (p3, p4, s3) go through
// the same kernels: lane l decodes blocks l, l + 32, ... of a row in registers (seed_group_dot) and adds each
// decoded weight times x in element order; they are never staged (their rows are not contiguous bytes).
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <utility>

#include "cuda/codec_device.cuh"
#include "cuda/kernels.h"

// No fmt here: nvcc cannot evaluate fmt's compile-time format checks, so errors go through check() (runtime.cpp).
namespace seedling::cuda {

using namespace codec_ids;  // the codec numbers (codec_ids.h mirrors codec/codec.h)
using Id = CodecId;

namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 8;
// Dynamic shared memory a launch may stage into: what a launch gets without raising its limit. With the kernel's
// static shared memory that can pass the default limit (48 KB in all); launch_pdl raises the limit then.
constexpr size_t kStageSharedBytes = 48 * 1024;
// Resident blocks per SM the decode products are compiled for (registers capped to fit: 64 for the products, 85 for
// gate/up, 64 for down + combine): a Qwen3-30B-A3B q/k/v product at two rows a warp is 320 blocks, one wave on an
// H200's 132 SMs at 4 an SM. At 5 an SM (48 registers, 8 bytes spilled in the staged q4 product) device-only decode
// was 1.4% slower at 48 layers (docs/results/2026-11-30-cuda-decode-session6.md). Gate/up (384 blocks of two outputs
// a warp) and down + combine (512 blocks) are one wave at their caps.
constexpr int kMatvecBlocksPerSm = 4, kGateUpBlocksPerSm = 3, kDownBlocksPerSm = 4;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ int64_t min_i64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

// The raw 32-bit words of one full unit. Lanes load the words of several units before widening any, so several
// loads are in flight per lane (memory-level parallelism is what a matrix-vector product lives on).
template <CodecId C>
struct Raw {
  uint32_t w[Unit<C>::bytes / 4];
};

// Float units are read as one 16-byte load when the caller knows every row starts 16-byte aligned (V).
template <CodecId C, bool V>
constexpr bool kRawLoads = !is_affine(C) && V;

template <CodecId C, bool V>
__device__ __forceinline__ void load_raw(const uint8_t* row, int64_t u, Raw<C>& r) {
  const uint4 v = *reinterpret_cast<const uint4*>(row + u * Unit<C>::bytes);
  r.w[0] = v.x;
  r.w[1] = v.y;
  r.w[2] = v.z;
  r.w[3] = v.w;
}

// Widens a full float unit's words into w[G] (bf16/f16 halves in element order).
template <CodecId C>
__device__ __forceinline__ void widen(const Raw<C>& r, float* w) {
  constexpr int G = Unit<C>::G;
  if constexpr (C == Id::F32) {
#pragma unroll
    for (int j = 0; j < G; ++j) w[j] = __uint_as_float(r.w[j]);
  } else {
#pragma unroll
    for (int i = 0; i < G / 2; ++i) {
      const uint16_t lo = uint16_t(r.w[i] & 0xffffu), hi = uint16_t(r.w[i] >> 16);
      w[2 * i] = C == Id::BF16 ? bf16_bits(lo) : f16_bits(lo);
      w[2 * i + 1] = C == Id::BF16 ? bf16_bits(hi) : f16_bits(hi);
    }
  }
}

// A code (below 2^23) as a float, exactly: 2^23 + q has q in its low mantissa bits, and subtracting 2^23 is exact.
// One logic op and one add instead of an integer-to-float conversion, which runs at an eighth of the float rate.
__device__ __forceinline__ float code_float(uint32_t q) {
  return __fsub_rn(__uint_as_float(0x4B000000u | q), 8388608.0f);
}

// Byte b of w (below 2^8) as a float, exactly as code_float: the byte permute builds 0x4B0000'byte' in one step.
__device__ __forceinline__ float code_float_byte(uint32_t w, int b) {
  return __fsub_rn(__uint_as_float(__byte_perm(w, 0x4B000000u, 0x7650u | unsigned(b))), 8388608.0f);
}

// Asynchronous 16-byte copies from global to shared memory (cp.async, sm_80 and later): a warp stages whole weight
// rows with every copy in flight at once, then widens them from shared memory.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
// 4- and 8-byte forms (.ca: through L1), for a table's pointers and a row's routing weights.
template <int N>
__device__ __forceinline__ void cp_async_small(void* smem, const void* gmem) {
  static_assert(N == 4 || N == 8, "cp.async.ca copies 4, 8 or 16 bytes");
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(s), "l"(gmem), "n"(N) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}
// Groups: the copies a thread issued since its last commit form a group; wait_group<N> returns once at most N of its
// groups are still in flight.
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
// Programmatic dependent launch (sm_90 and later; launch_pdl below). A decode launch lets the next one start once
// each of its blocks is past its main loop (pdl_trigger), and waits for the previous launch to finish, its writes
// visible (pdl_wait), only before it touches activations, the cache or counters: weights never change, so a
// matrix-vector product copies its weight rows (and its norm's weights) in while the launch before it still runs.
// Expert tables are written only by copies queued on the stream between launches (never by a kernel), and a launch
// after a copy starts only once the copy is done, so the expert kernels copy their table in before the wait too.
// Every kernel launched by launch_pdl calls pdl_wait before any other memory access but those reads. Elsewhere (older
// GPUs, or SEEDLING_NO_PDL=1) both are no-ops and the launches run one after another as usual. Measured on the H200
// (docs/results/2026-11-30-cuda-decode-pdl.md): triggering after the main loop 1.04x decode, triggering first thing
// in the kernel 0.96x.
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Stage clock, a measuring build (cmake -DSEEDLING_STAGE_CLOCK=ON; `seedling bench` prints stage_clock_report):
// thread 0 of each block of a decode launch notes the SM cycles from the block's start to each of its marks, and
// a block that reaches done() adds them to its launch kind's sums. Marks: 0 past the wait for the launch before,
// 1 operands ready (products: the normed row; gate/up: the expert's blob; down + combine: the down products;
// attention: the split's keys), 2 the main loop done, 3 the block's end. In other builds BlockClock is empty.
enum ClockKind : int { kClkQkv, kClkO, kClkRouter, kClkHead, kClkAttention, kClkGateUp, kClkDown, kClkKinds };
#ifdef SEEDLING_STAGE_CLOCK
constexpr int kClkMarks = 4;
__device__ unsigned long long g_clock_sum[kClkKinds][kClkMarks];
__device__ unsigned long long g_clock_blocks[kClkKinds];
__device__ __forceinline__ long long sm_clock() {
#ifdef __CUDA_ARCH__
  return clock64();
#else
  return 0;
#endif
}
struct BlockClock {
  long long t0;
  long long at[kClkMarks] = {};
  __device__ BlockClock() : t0(sm_clock()) {}
  __device__ void mark(int m) {
    if (threadIdx.x == 0) at[m] = sm_clock() - t0;
  }
  __device__ void done(int kind) {
    if (threadIdx.x != 0) return;
    at[kClkMarks - 1] = sm_clock() - t0;
    for (int m = 0; m < kClkMarks; ++m) atomicAdd(&g_clock_sum[kind][m], static_cast<unsigned long long>(at[m]));
    atomicAdd(&g_clock_blocks[kind], 1ull);
  }
};
#else
struct BlockClock {
  __device__ void mark(int) {}
  __device__ void done(int) {}
};
#endif

// An expert table (e pointers) into shared memory, by the whole block, before pdl_wait (see above): an expert's
// blob is then one shared read after its id instead of a second global round trip. Tables of more than
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

// The warp's lanes copy `bytes` (a multiple of 16; both addresses 16-byte aligned) from src to dst.
__device__ __forceinline__ void warp_stage(uint8_t* dst, const uint8_t* src, size_t bytes) {
  for (size_t c = size_t(threadIdx.x % 32) * 16; c < bytes; c += 32 * 16) cp_async16(dst + c, src + c);
}

// Affine codecs: 8 lanes share one block, each widening G / 8 of its codes, so a group's reads of x are contiguous
// (a lane's elements sit 4 floats from its neighbours', not a whole block apart) and each lane holds few registers.
// The warp's 4 groups take blocks grp, grp + 4, ...; which lane adds which element depends only on the matrix.
//
// Lane t of a group reads the block's scale/minimum word and its own codes: q4_g64 and q8_g32 one word, q8_g64 two,
// q4_g32 half of one.
template <CodecId C>
__device__ __forceinline__ void load_affine(const uint8_t* blk, int t, uint32_t& dm, uint32_t& c0, uint32_t& c1) {
  const uint32_t* words = reinterpret_cast<const uint32_t*>(blk);
  dm = words[0];
  c1 = 0;
  if constexpr (C == Id::Q4_G64 || C == Id::Q8_G32) {
    c0 = words[1 + t];
  } else if constexpr (C == Id::Q4_G32) {
    c0 = reinterpret_cast<const uint16_t*>(blk + 4)[t];
  } else {  // q8_g64
    c0 = words[1 + 2 * t];
    c1 = words[2 + 2 * t];
  }
}

// The G / 8 codes lane t holds of a block, as exact floats, and the element of the block each belongs to.
template <CodecId C>
__device__ __forceinline__ void affine_codes(uint32_t c0, uint32_t c1, int t, float* q, int* idx) {
  if constexpr (C == Id::Q4_G64) {  // byte i: element i (low nibble), i + 32 (high)
    // The 4 low and the 4 high nibbles each masked into bytes with one operation, then each byte placed under the
    // exponent of 2^23 with one byte permute (code_float's bits, in fewer instructions).
    const uint32_t lo = c0 & 0x0f0f0f0fu, hi = (c0 >> 4) & 0x0f0f0f0fu;
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      q[b] = code_float_byte(lo, b);
      q[4 + b] = code_float_byte(hi, b);
      idx[b] = 4 * t + b;
      idx[4 + b] = 32 + 4 * t + b;
    }
  } else if constexpr (C == Id::Q4_G32) {  // byte i: element i (low nibble), i + 16 (high)
#pragma unroll
    for (int b = 0; b < 2; ++b) {
      q[b] = code_float((c0 >> (8 * b)) & 0x0fu);
      q[2 + b] = code_float((c0 >> (8 * b + 4)) & 0x0fu);
      idx[b] = 2 * t + b;
      idx[2 + b] = 16 + 2 * t + b;
    }
  } else if constexpr (C == Id::Q8_G32) {  // byte i is element i
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      q[b] = code_float((c0 >> (8 * b)) & 0xffu);
      idx[b] = 4 * t + b;
    }
  } else {  // q8_g64
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      q[b] = code_float((c0 >> (8 * b)) & 0xffu);
      q[4 + b] = code_float((c1 >> (8 * b)) & 0xffu);
      idx[b] = 8 * t + b;
      idx[4 + b] = 8 * t + 4 + b;
    }
  }
}

// The lane's G / 8 inputs of a full block (elements idx of x), with 16-byte loads where they are contiguous and the
// caller says x is 16-byte aligned (A); q4_g32's pairs are read as two floats each way.
template <CodecId C, bool A>
__device__ __forceinline__ void lane_inputs(const float* x, int t, float* xv) {
  constexpr int kPer = Unit<C>::G / 8;
  if constexpr (A && C == Id::Q4_G64) {
    const float4 lo = *reinterpret_cast<const float4*>(x + 4 * t),
                 hi = *reinterpret_cast<const float4*>(x + 32 + 4 * t);
    xv[0] = lo.x, xv[1] = lo.y, xv[2] = lo.z, xv[3] = lo.w, xv[4] = hi.x, xv[5] = hi.y, xv[6] = hi.z, xv[7] = hi.w;
  } else if constexpr (A && C == Id::Q8_G64) {
    const float4 lo = *reinterpret_cast<const float4*>(x + 8 * t), hi = *reinterpret_cast<const float4*>(x + 8 * t + 4);
    xv[0] = lo.x, xv[1] = lo.y, xv[2] = lo.z, xv[3] = lo.w, xv[4] = hi.x, xv[5] = hi.y, xv[6] = hi.z, xv[7] = hi.w;
  } else if constexpr (A && C == Id::Q8_G32) {
    const float4 v = *reinterpret_cast<const float4*>(x + 4 * t);
    xv[0] = v.x, xv[1] = v.y, xv[2] = v.z, xv[3] = v.w;
  } else {
    float q[kPer];
    int idx[kPer];
    affine_codes<C>(0, 0, t, q, idx);
#pragma unroll
    for (int j = 0; j < kPer; ++j) xv[j] = x[idx[j]];
  }
}

// NW weight rows, row v against R rows of its own x (row r at xs[v] + r * ldx), into acc[v][r]. Each group loads
// the words of kBatch blocks of every weight row before widening any, so a lane has 2 * NW * kBatch loads in flight.
//
// The arithmetic is factored: a block's values are d * q + m, so the lane adds d * (sum of q * x) + m * (sum of x)
// over its G / 8 elements (fmaf, in this order) instead of widening every weight: about half the instructions of
// widening, and matrix-vector products here are bound by instructions, not bytes. Every kernel that reads an affine
// matrix sums this way, in one order per output element that depends only on the matrix (not on NW, R, `rows` or
// where the weights sit), so a row's result is the same alone, batched, staged or not. Against the CPU (which
// widens each weight), the error is bounded by the sum of (|d q| + |m|) |x| instead of |w x| (tests/unit/cuda).
// SameX: every weight row reads the same x (xs[v] == xs[0]): each block's inputs and their sum are read and added
// once for all NW rows, in the same order, so the same bits.
//
// kWhole: the caller knows every block is full and x 16-byte aligned, so the loop leaves out the partial block's
// and the unaligned loads' code, the operations and their order unchanged. (ncu counted 8.5 instructions a weight in
// the head's product, against 3.3 for its float operations: docs/results/2026-12-01-cuda-session11-decode-ceiling.md.)
template <CodecId C, int R, int NW, bool SameX, bool kWhole>
__device__ __forceinline__ void affine_group_dot_shaped(const uint8_t* const (&wrows)[NW], int64_t cols,
                                                        const float* const (&xs)[NW], int64_t ldx, int rows,
                                                        bool aligned, float (&acc)[NW][R]) {
  constexpr int G = Unit<C>::G, kPer = G / 8, kBatch = NW == 1 ? 8 : 4;
  const int lane = threadIdx.x % kWarp, grp = lane / 8, t = lane % 8;
  const int64_t units = (cols + G - 1) / G;
  // The lane's inputs of block k0 of row xr: 16-byte loads, element loads, or (a partial block) zeros past cols.
  const auto inputs = [&](const float* xr, int64_t k0, const int(&idx)[kPer], float(&xv)[kPer]) {
    if (kWhole || (k0 + G <= cols && aligned)) {
      lane_inputs<C, true>(xr, t, xv);
    } else if (k0 + G <= cols) {
      lane_inputs<C, false>(xr, t, xv);
    } else {
#pragma unroll
      for (int j = 0; j < kPer; ++j) xv[j] = k0 + idx[j] < cols ? xr[idx[j]] : 0.0f;
    }
  };
  for (int64_t u0 = grp; u0 < units; u0 += 4 * kBatch) {
    uint32_t dm[NW][kBatch], c0[NW][kBatch], c1[NW][kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int64_t u = u0 + 4 * i;
#pragma unroll
      for (int v = 0; v < NW; ++v) {
        if (u < units) load_affine<C>(wrows[v] + u * Unit<C>::bytes, t, dm[v][i], c0[v][i], c1[v][i]);
      }
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int64_t u = u0 + 4 * i;
      if (u >= units) break;
      const int64_t k0 = u * G;
      if constexpr (SameX) {
        float xv[R][kPer], sx[R];
        int idx[kPer];
        {
          float q0[kPer];
          affine_codes<C>(0, 0, t, q0, idx);
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (r >= rows) break;
          inputs(xs[0] + r * ldx + k0, k0, idx, xv[r]);
          sx[r] = 0.0f;
#pragma unroll
          for (int j = 0; j < kPer; ++j) sx[r] = __fadd_rn(sx[r], xv[r][j]);
        }
#pragma unroll
        for (int v = 0; v < NW; ++v) {
          const float d = f16_bits(uint16_t(dm[v][i] & 0xffffu)), m = f16_bits(uint16_t(dm[v][i] >> 16));
          float q[kPer];
          affine_codes<C>(c0[v][i], c1[v][i], t, q, idx);
#pragma unroll
          for (int r = 0; r < R; ++r) {
            if (r >= rows) break;
            float sq = 0.0f;
#pragma unroll
            for (int j = 0; j < kPer; ++j) sq = fmaf(q[j], xv[r][j], sq);
            acc[v][r] = fmaf(m, sx[r], fmaf(d, sq, acc[v][r]));
          }
        }
      } else {
#pragma unroll
        for (int v = 0; v < NW; ++v) {
          const float d = f16_bits(uint16_t(dm[v][i] & 0xffffu)), m = f16_bits(uint16_t(dm[v][i] >> 16));
          float q[kPer];
          int idx[kPer];
          affine_codes<C>(c0[v][i], c1[v][i], t, q, idx);
#pragma unroll
          for (int r = 0; r < R; ++r) {
            if (r >= rows) break;
            float xv[kPer];
            inputs(xs[v] + r * ldx + k0, k0, idx, xv);
            float sq = 0.0f, sx = 0.0f;
#pragma unroll
            for (int j = 0; j < kPer; ++j) {
              sq = fmaf(q[j], xv[j], sq);
              sx = __fadd_rn(sx, xv[j]);
            }
            acc[v][r] = fmaf(m, sx, fmaf(d, sq, acc[v][r]));
          }
        }
      }
    }
  }
}

// affine_group_dot_shaped, kWhole when the shape allows it.
template <CodecId C, int R, int NW, bool SameX = false>
__device__ __forceinline__ void affine_group_dot(const uint8_t* const (&wrows)[NW], int64_t cols,
                                                 const float* const (&xs)[NW], int64_t ldx, int rows,
                                                 float (&acc)[NW][R]) {
  bool aligned = ldx % 4 == 0;
#pragma unroll
  for (int v = 0; v < NW; ++v) aligned = aligned && reinterpret_cast<uintptr_t>(xs[v]) % 16 == 0;
  if (aligned && cols % Unit<C>::G == 0) {
    affine_group_dot_shaped<C, R, NW, SameX, true>(wrows, cols, xs, ldx, rows, aligned, acc);
  } else {
    affine_group_dot_shaped<C, R, NW, SameX, false>(wrows, cols, xs, ldx, rows, aligned, acc);
  }
}

// acc[r] += w . x[r][k0 .. k0 + valid) for the rows r < rows.
template <int G, int R>
__device__ __forceinline__ void fma_unit(const float* w, int valid, const float* x, int64_t ldx, int64_t k0, int rows,
                                         float* acc) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (r >= rows) break;
    const float* xr = x + r * ldx + k0;
    float a = acc[r];
    if (valid == G) {
#pragma unroll
      for (int j = 0; j < G; ++j) a = fmaf(w[j], xr[j], a);
    } else {  // the row's last unit: registers indexed by constants only, so w stays out of local memory
#pragma unroll
      for (int j = 0; j < G; ++j) {
        if (j < valid) a = fmaf(w[j], xr[j], a);
      }
    }
    acc[r] = a;
  }
}

// Seed codecs: lane l decodes blocks l, l + 32, ... of each of NW weight rows (seed_device.cuh, bit for bit the
// CPU's weights) and adds w_c * x_c over the block's elements in order (fma_unit), for R rows of that weight row's x.
// The fields of kBatch blocks a row are loaded before any is decoded, so several loads are in flight per lane. The
// order of additions depends only on the matrix, as for the other codecs.
template <CodecId C, int R, int NW>
__device__ __forceinline__ void seed_group_dot(const SeedRow (&wrows)[NW], int64_t cols, const float* const (&xs)[NW],
                                               int64_t ldx, int rows, float (&acc)[NW][R]) {
  constexpr seeddev::Geom g = seed_geom(C);
  constexpr int kBatch = NW == 1 ? 4 : 2;
  const int lane = threadIdx.x % kWarp;
  const int64_t per_row = (cols + g.C - 1) / g.C;
  const uint64_t* lo = kDeviceStreamTables.lo;
  const uint64_t* hi = kDeviceStreamTables.hi;
  int32_t bias[NW];
#pragma unroll
  for (int v = 0; v < NW; ++v) bias[v] = seeddev::blob_bias(wrows[v].blob);
  for (int64_t j0 = lane; j0 < per_row; j0 += kWarp * kBatch) {
    seeddev::Fields f[NW][kBatch] = {};
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int64_t j = j0 + i * kWarp;
#pragma unroll
      for (int v = 0; v < NW; ++v) {
        if (j < per_row) f[v][i] = seeddev::block_fields(g, wrows[v].blob, wrows[v].n_blocks, wrows[v].first + j);
      }
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int64_t j = j0 + i * kWarp;
      if (j >= per_row) break;
      const int64_t k0 = j * g.C;
      const int valid = int(min_i64(g.C, cols - k0));
#pragma unroll
      for (int v = 0; v < NW; ++v) {
        float w[g.C];
        seeddev::seed_decode_block<g.C, g.P>(g, seeddev::stream_of(f[v][i].seed, lo, hi), f[v][i].word,
                                             seed::seed_scale(bias[v] + f[v][i].code), w);
        fma_unit<g.C, R>(w, valid, xs[v], ldx, k0, rows, acc[v]);
      }
    }
  }
}

// Float codecs: lane l takes units l, l + 32, ... of each weight row (lane_dot's contract).
template <CodecId C, int R, bool V, int NW>
__device__ __forceinline__ void lane_dot_float(const uint8_t* const (&wrows)[NW], int64_t cols,
                                               const float* const (&xs)[NW], int64_t ldx, int rows,
                                               float (&acc)[NW][R]) {
  constexpr int G = Unit<C>::G;
  const int64_t units = (cols + G - 1) / G, full = cols / G;
  const int lane = threadIdx.x % kWarp;
#pragma unroll
  for (int v = 0; v < NW; ++v) {
    const uint8_t* wrow = wrows[v];
    const float* x = xs[v];
    float w[G];
    int64_t u = lane;
    if constexpr (kRawLoads<C, V>) {
      constexpr int kInFlight = Unit<C>::bytes <= 16 ? 4 : 2;  // units loaded before the first is used
      for (; u + (kInFlight - 1) * kWarp < full; u += kInFlight * kWarp) {
        Raw<C> raw[kInFlight];
#pragma unroll
        for (int i = 0; i < kInFlight; ++i) load_raw<C, V>(wrow, u + i * kWarp, raw[i]);
#pragma unroll
        for (int i = 0; i < kInFlight; ++i) {
          widen<C>(raw[i], w);
          fma_unit<G, R>(w, G, x, ldx, (u + i * kWarp) * G, rows, acc[v]);
        }
      }
    }
    for (; u < units; u += kWarp) {
      const int64_t k0 = u * G;
      const int valid = int(min_i64(G, cols - k0));
      load_unit<C>(wrow, u, valid, w);
      fma_unit<G, R>(w, valid, x, ldx, k0, rows, acc[v]);
    }
  }
}

// Sum over this lane's share of each of NW weight rows (float codecs: units lane, lane + 32, ...; affine:
// affine_group_dot; seed: seed_group_dot) of w . x for R rows of that weight row's x (row r at xs[v] + r * ldx)
// into acc[v][r]. The units and their order depend only on the matrix, so a row's sum does not depend on NW, R or
// `rows`. SameX (every xs[v] the same): affine codecs read and sum each block's inputs once for all NW rows.
template <CodecId C, int R, bool V, int NW = 1, bool SameX = false>
__device__ __forceinline__ void lane_dot(const WRow<C> (&wrows)[NW], int64_t cols, const float* const (&xs)[NW],
                                         int64_t ldx, int rows, float (&acc)[NW][R]) {
  if constexpr (is_seed(C)) {
    seed_group_dot<C, R, NW>(wrows, cols, xs, ldx, rows, acc);
  } else if constexpr (is_affine(C)) {
    affine_group_dot<C, R, NW, SameX>(wrows, cols, xs, ldx, rows, acc);
  } else {
    lane_dot_float<C, R, V, NW>(wrows, cols, xs, ldx, rows, acc);
  }
}

constexpr int kMatmulRows = 4;  // rows of x one warp serves per pass over a weight row

template <CodecId C, int R, bool V>
__global__ void matmul_kernel(const float* x, int64_t m, const uint8_t* w, int64_t n_out, int64_t cols, float* y,
                              bool accumulate) {
  const int64_t n = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  const int64_t r0 = int64_t(blockIdx.y) * R;
  if (n >= n_out) return;
  const int rows = int(min_i64(R, m - r0));
  float acc[1][R] = {};
  const WRow<C> wr[1] = {row_at<C>(w, n_out, cols, n)};
  const float* xr[1] = {x + r0 * cols};
  lane_dot<C, R, V>(wr, cols, xr, cols, rows, acc);
  for (int r = 0; r < rows; ++r) {
    const float s = warp_sum(acc[0][r]);
    if (threadIdx.x % kWarp == 0) {
      float* out = y + (r0 + r) * n_out + n;
      *out = accumulate ? *out + s : s;
    }
  }
}

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

// Decode products of one row of x against up to three matrices of one codec and width, stacked: warp n of the
// launch computes output row n of the first matrix, then of the second, and so on. With `norm`, x is first
// RMS-normed into shared memory exactly as rms_norm_kernel does (block 0 also writes it to xn_out).
struct MatvecTargets {
  const uint8_t* w[3] = {};
  float* y[3] = {};
  int64_t rows[3] = {};
  int count = 0;
  // With a counter: the router's softmax and top-k of y[0] (e = rows[0]) by the last block to finish.
  int* topk_counter = nullptr;
  int topk_k = 0;
  bool topk_norm = false;
  int* topk_ids = nullptr;
  float* topk_weights = nullptr;
  // With rope_counters (one per head of q, k and v, stacked in that order as y[0..2]): the last block to finish a
  // head's rows puts it through norm_rope_head (q, k) and writes it into the cache (k, v), as qk_rope_kv does for
  // row 0. Every block then lies inside one head: heads are whole blocks of rows (the launcher checks).
  int* rope_counters = nullptr;
  QkRope rope;
};

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

// Where kv head `h`'s key (and value) row sits at the row's position in layer `layer` of its cache.
__device__ __forceinline__ float* cache_key_row(const KvRow& r, int layer, int kv_dim, int h, int hd) {
  return r.cache + (int64_t(layer) * 2) * r.cap * kv_dim + int64_t(r.pos) * kv_dim + int64_t(h) * hd;
}

// The fused q/k/v epilogue (MatvecTargets::rope_counters): after a fence that publishes this block's outputs, the
// block counts itself in its head's counter; the last of the head's hd / kWarpsPerBlock blocks resets the counter
// and finishes the head with one warp.
__device__ __forceinline__ void rope_epilogue(const MatvecTargets& t, int block_rows) {
  __shared__ int last_of_head;
  const QkRope& r = t.rope;
  int64_t n = int64_t(blockIdx.x) * block_rows;  // the block's first output row, in the stacked q, k, v
  int mi = 0;
  while (mi < t.count && n >= t.rows[mi]) n -= t.rows[mi++];
  if (mi >= t.count) return;
  const int head = int(n / r.head_dim);
  const int counter = mi == 0 ? head : mi == 1 ? r.n_heads + head : r.n_heads + r.n_kv_heads + head;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    last_of_head = atomicAdd(t.rope_counters + counter, 1) == r.head_dim / block_rows - 1;
    if (last_of_head) t.rope_counters[counter] = 0;  // for the next launch
  }
  __syncthreads();
  if (!last_of_head || threadIdx.x >= kWarp) return;
  __threadfence();
  float* vh = t.y[mi] + int64_t(head) * r.head_dim;
  if (mi < 2) {
    norm_rope_head(vh, mi == 0 ? r.q_norm : r.k_norm, r.eps, r.head_dim, r.pos[0], r.inv_freq, r.rotary_dim / 2,
                   r.scaling);
  }
  if (mi == 0) return;
  const KvRow kv = r.rows[0];
  const int kv_dim = r.n_kv_heads * r.head_dim;
  float* dst = cache_key_row(kv, r.layer, kv_dim, head, r.head_dim) + (mi == 2 ? int64_t(kv.cap) * kv_dim : 0);
  for (int i = threadIdx.x; i < r.head_dim; i += kWarp) dst[i] = vh[i];
}

// S (staged): each warp first copies its weight rows into its part of shared memory with cp.async (stage_bytes
// per warp; every copy in flight before any arithmetic, the norm included), then widens them from there. The
// arithmetic is the same either way.
__device__ void topk_row(const float* x, int e, int k, bool norm_topk, int* ids, float* weights, float* p);

// RW: output rows a warp takes at once (rows g .. g + RW - 1 of one matrix: the launcher picks RW = 2 only when every
// matrix's rows are even), their loads in flight together and, for the affine codecs, each block's x read once for
// both. A row's sum is lane_dot's whatever RW is.
template <CodecId C, bool V, bool S, int RW>
__global__ void __launch_bounds__(kWarp* kWarpsPerBlock, kMatvecBlocksPerSm)
    matvec_kernel(const float* x, int64_t cols, const float* norm, float eps, float* xn_out, MatvecTargets t,
                  bool accumulate, size_t stage_bytes, int buffers) {
  extern __shared__ __align__(16) uint8_t smem_bytes[];
  float* xs = reinterpret_cast<float*>(smem_bytes);  // cols floats, with norm
  const size_t xs_bytes = norm != nullptr ? (size_t(cols) * 4 + 15) / 16 * 16 : 0;
  const int64_t total = t.rows[0] + t.rows[1] + t.rows[2];
  const int64_t stride = int64_t(gridDim.x) * kWarpsPerBlock * RW;
  // Output row g of the stacked matrices: matrix mi, its row n.
  auto locate = [&](int64_t g, int& mi, int64_t& n) {
    n = g;
    mi = 0;
    while (mi < t.count && n >= t.rows[mi]) n -= t.rows[mi++];
  };
  [[maybe_unused]] uint8_t* stage = smem_bytes + xs_bytes + size_t(threadIdx.x / kWarp) * buffers * RW * stage_bytes;
  [[maybe_unused]] const size_t rb = row_bytes_of<C>(cols);
  // S: the warp's next RW rows into buffer b (an empty group past the last row), so a wait leaves them in flight.
  [[maybe_unused]] auto stage_rows = [&](int64_t g, int b) {
    if constexpr (S) {
      if (g < total) {
        int mi;
        int64_t n;
        locate(g, mi, n);
#pragma unroll
        for (int r = 0; r < RW; ++r) {
          warp_stage(stage + size_t(b * RW + r) * stage_bytes, row_at<C>(t.w[mi], t.rows[mi], cols, n + r), rb);
        }
      }
      cp_async_commit();
    }
  };
  int64_t g = (int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp) * RW;
  BlockClock clk;
  const int kind = t.rope_counters != nullptr  ? kClkQkv
                   : t.topk_counter != nullptr ? kClkRouter
                   : accumulate                ? kClkO
                                               : kClkHead;
  if constexpr (S) stage_rows(g, 0);  // never for the seed codecs
  // A row the block holds in one batch (kNormBatch values a thread): the norm's weights are read before the wait
  // like the weight rows, and x once, kept in registers for both passes (the same operations as block_rms_inv).
  const bool one_batch = norm != nullptr && cols <= kNormBatch * int64_t(blockDim.x);
  float nv[kNormBatch];
  if (one_batch) {
#pragma unroll
    for (int u = 0; u < kNormBatch; ++u) {
      const int64_t i = threadIdx.x + u * int64_t(blockDim.x);
      nv[u] = i < cols ? norm[i] : 0.0f;
    }
  }
  pdl_wait();  // the weight rows are on their way; x and the outputs belong to the launches before
  clk.mark(0);
  const float* xin = x;
  if (one_batch) {
    float xv[kNormBatch], ss = 0.0f;
#pragma unroll
    for (int u = 0; u < kNormBatch; ++u) {
      const int64_t i = threadIdx.x + u * int64_t(blockDim.x);
      xv[u] = i < cols ? x[i] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kNormBatch; ++u) {
      if (threadIdx.x + u * int64_t(blockDim.x) < cols) ss = fmaf(xv[u], xv[u], ss);
    }
    const float inv = block_rms_finish(ss, cols, eps);
    float* const xn = blockIdx.x == 0 ? xn_out : nullptr;
#pragma unroll
    for (int u = 0; u < kNormBatch; ++u) {
      const int64_t i = threadIdx.x + u * int64_t(blockDim.x);
      if (i >= cols) break;
      xs[i] = nv[u] * (xv[u] * inv);
      if (xn != nullptr) xn[i] = xs[i];
    }
    __syncthreads();
    xin = xs;
  } else if (norm != nullptr) {
    const float inv = block_rms_inv(x, cols, eps);
    float* const xn = blockIdx.x == 0 ? xn_out : nullptr;
    for (int64_t i0 = threadIdx.x; i0 < cols; i0 += kNormBatch * int64_t(blockDim.x)) {  // loads first, as above
      float xv[kNormBatch], nv[kNormBatch];
#pragma unroll
      for (int u = 0; u < kNormBatch; ++u) {
        const int64_t i = i0 + u * int64_t(blockDim.x);
        xv[u] = i < cols ? x[i] : 0.0f;
        nv[u] = i < cols ? norm[i] : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kNormBatch; ++u) {
        const int64_t i = i0 + u * int64_t(blockDim.x);
        if (i >= cols) break;
        xs[i] = nv[u] * (xv[u] * inv);
        if (xn != nullptr) xn[i] = xs[i];
      }
    }
    __syncthreads();
    xin = xs;
  }
  clk.mark(1);
  // A warp's rows g, g + stride, ...: once unless the grid is smaller than the rows (then, staged, two buffers: the
  // next rows are copied in while these are multiplied).
  for (int it = 0; g < total; g += stride, ++it) {
    int mi;
    int64_t n;
    locate(g, mi, n);
    WRow<C> wr[RW];
#pragma unroll
    for (int r = 0; r < RW; ++r) wr[r] = row_at<C>(t.w[mi], t.rows[mi], cols, n + r);
    if constexpr (S) {
      if (buffers == 2) {
        stage_rows(g + stride, (it + 1) % 2);
        cp_async_wait_group<1>();
      } else {
        if (it > 0) stage_rows(g, 0);
        cp_async_wait_group<0>();
      }
      __syncwarp();
#pragma unroll
      for (int r = 0; r < RW; ++r) wr[r] = stage + size_t((buffers == 2 ? it % 2 : 0) * RW + r) * stage_bytes;
    }
    float acc[RW][1] = {};
    const float* xr[RW];
#pragma unroll
    for (int r = 0; r < RW; ++r) xr[r] = xin;
    lane_dot<C, 1, V, RW, true>(wr, cols, xr, 0, 1, acc);
    if (g + stride >= total) pdl_trigger();
#pragma unroll
    for (int r = 0; r < RW; ++r) {
      const float sum = warp_sum(acc[r][0]);
      if (threadIdx.x % kWarp == 0) {
        float* out = t.y[mi] + n + r;
        *out = accumulate ? *out + sum : sum;
      }
    }
    if constexpr (S) __syncwarp();  // every lane is done with the buffers before they are staged into again
  }
  clk.mark(2);
  if (t.rope_counters != nullptr) rope_epilogue(t, kWarpsPerBlock * RW);
  if (t.topk_counter == nullptr) {
    clk.done(kind);
    return;
  }
  __shared__ int last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(t.topk_counter, 1) == int(gridDim.x) - 1;
    if (last) *t.topk_counter = 0;  // for the next launch
  }
  __syncthreads();
  if (!last) {
    clk.done(kind);
    return;
  }
  __threadfence();
  if (threadIdx.x < kWarp) {
    topk_row(t.y[0], int(t.rows[0]), t.topk_k, t.topk_norm, t.topk_ids, t.topk_weights,
             reinterpret_cast<float*>(smem_bytes));
  }
  clk.done(kind);
}

// Gate and up rows of a pair's expert for kGateUpOutputs consecutive outputs n in one pass (the loads of all four
// rows in flight together), then silu(gate) * up. Each row sums as lane_dot sums it alone, so the outputs do not
// depend on how many a warp takes.
constexpr int kGateUpOutputs = 2;

template <CodecId C, bool V, bool S, int NO>
__device__ __forceinline__ void gate_up_outputs(const float* xr, const uint8_t* blob, const ExpertLayout& l, int64_t n,
                                                uint8_t* stage, float* act_row, bool x_shared) {
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
    if (threadIdx.x % kWarp == 0) act_row[n + o] = (g / (1.0f + expf(-g))) * u;
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
                          float* act, GateUpShared sh, bool x_shared) {
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
    gate_up_outputs<C, V, S, kGateUpOutputs>(xr, blob, l, n, stage, act_row, x_shared);
  } else {
    for (int64_t o = n; o < l.intermediate; ++o) gate_up_outputs<C, V, S, 1>(xr, blob, l, o, stage, act_row, false);
  }
  clk.mark(2);
  clk.done(kClkGateUp);
}

// One output element of one expert's down product: warp_sum of its lane_dot (the same bits in both kernels below).
template <CodecId C, bool V>
__global__ void expert_down_kernel(const float* act, const int* ids, const uint8_t* const* table, ExpertLayout l,
                                   float* out) {
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
  if (threadIdx.x % kWarp == 0) out[j * l.hidden + h] = s;
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

template <CodecId C, bool V, int NW>
__device__ __forceinline__ void down_slots(const float* act, const uint8_t* const* blobs, const ExpertLayout& l,
                                           int64_t h, int64_t j0, int s0, float* e) {
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
    if (threadIdx.x % kWarp == 0) e[v] = sum;
  }
}

// Before its main loop the block resolves the row's k blobs once (ids, then the shared table) and queues the row's
// routing weights; the lane that adds an output element into x reads the old value then too, so neither read waits
// at the end.
template <CodecId C, bool V>
__global__ void __launch_bounds__(kWarp* kWarpsPerBlock, kDownBlocksPerSm)
    expert_down_combine_kernel(const float* act, int k, int e, const int* ids, const float* weights,
                               const uint8_t* const* table, ExpertLayout l, float* x) {
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
      down_slots<C, V, kDownAtOnce>(act, blobs, l, h, i * k + s, s, e_out[hsel] + s);
    }
    for (; s < end; ++s) down_slots<C, V, 1>(act, blobs, l, h, i * k + s, s, e_out[hsel] + s);
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

__global__ void rms_norm_kernel(const float* x, float* out, int64_t n, const float* weight, float eps) {
  const float* xr = x + blockIdx.x * n;
  float* o = out + blockIdx.x * n;
  const float inv = block_rms_inv(xr, n, eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) o[i] = weight[i] * (xr[i] * inv);
}

// Block (row, group of 8 heads), a warp per head: q's heads then k's, each RMS-normed over head_dim when its norm
// weights are given (in place), then rotated (rotate-half RoPE of the first rotary_dim dims at the row's position);
// the warp of k head h then writes k head h and v head h at that position of the row's cache.
// Block (row, group of 8 heads), a warp per head: q's heads then k's, each through norm_rope_head in place; the
// warp of k head h then writes k head h and v head h at that position of the row's cache.
__global__ void qk_rope_kv_kernel(float* q, float* k, const float* v, int n_heads, int n_kv, int hd,
                                  const float* q_norm, const float* k_norm, float eps, const int* pos,
                                  const float* inv_freq, int half, float scaling, const KvRow* rows, int layer) {
  pdl_wait();
  const int64_t row = blockIdx.x;
  const int lane = threadIdx.x % kWarp;
  const int h = int(blockIdx.y) * kWarpsPerBlock + int(threadIdx.x) / kWarp;
  if (h >= n_heads + n_kv) return;
  const int kv_dim = n_kv * hd;
  const bool is_q = h < n_heads;
  float* vh = is_q ? q + (row * n_heads + h) * hd : k + row * kv_dim + int64_t(h - n_heads) * hd;
  norm_rope_head(vh, is_q ? q_norm : k_norm, eps, hd, pos[row], inv_freq, half, scaling);
  if (is_q) return;
  float* kc = cache_key_row(rows[row], layer, kv_dim, h - n_heads, hd);
  float* vc = kc + int64_t(rows[row].cap) * kv_dim;
  const float* vr = v + row * kv_dim + int64_t(h - n_heads) * hd;
  for (int i = lane; i < hd; i += kWarp) {
    kc[i] = vh[i];
    vc[i] = vr[i];
  }
}

__global__ void silu_mul_kernel(const float* g, const float* u, float* out, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = (g[i] / (1.0f + expf(-g[i]))) * u[i];
}

__global__ void add_bias_kernel(float* x, const float* b, int64_t total, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < total) x[i] = x[i] + b[i % n];
}

template <CodecId C>
__global__ void embed_kernel(const int* tokens, const uint8_t* emb, int64_t cols, float* x) {
  constexpr int G = Unit<C>::G;
  const uint8_t* row = emb + size_t(tokens[blockIdx.x]) * row_bytes_of<C>(cols);
  float* out = x + int64_t(blockIdx.x) * cols;
  float w[G];
  for (int64_t u = threadIdx.x; u * G < cols; u += blockDim.x) {
    const int valid = int(min_i64(G, cols - u * G));
    load_unit<C>(row, u, valid, w);
#pragma unroll
    for (int j = 0; j < G; ++j) {
      if (j < valid) out[u * G + j] = w[j];
    }
  }
}

__global__ void gather_rows_kernel(const float* src, const int* idx, int64_t n, float* dst) {
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) dst[blockIdx.x * n + i] = src[idx[blockIdx.x] * n + i];
}

// One warp: softmax over the e logits of x (probabilities in p, e floats of shared memory), then the k largest
// (ties: lower index first) into ids / weights, divided by their sum with norm_topk.
__device__ void topk_row(const float* x, int e, int k, bool norm_topk, int* ids, float* weights, float* p) {
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
    float best = -1.0f;
    int best_i = e;
    for (int i = lane; i < e; i += kWarp) {
      if (p[i] > best) {  // lanes visit ascending i, so '>' keeps the lower index on a tie
        best = p[i];
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

// One warp per row.
__global__ void router_topk_kernel(const float* logits, int e, int k, bool norm_topk, int* ids, float* weights) {
  extern __shared__ float p[];
  const int64_t row = blockIdx.x;
  topk_row(logits + row * e, e, k, norm_topk, ids + row * k, weights + row * k, p);
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

// Decode attention's block: 8 warps (scores: a warp per key; softmax and merge: a warp per head); in the value sums
// thread t takes dims t % kDimThreads (+ kDimThreads) of half t / kDimThreads of the group's heads.
constexpr int kAttnThreads = 256, kDimThreads = 128, kHeadHalves = kAttnThreads / kDimThreads;
constexpr int kMaxSplits = 64;  // splits of one row's keys in decode attention (kDecodeSplits)

// The last split block of a (listed row, head group) to finish merges the group's partial softmax sums (each block
// counts itself in `counters`, after a fence that publishes its partials; the last one resets the counter to 0 for
// the next launch). Only the first `used` splits hold keys (those past the row's position are empty), so only they
// are read. A warp per head: the max and the sum over splits, each split's weight exp(max_p - max) once into shared
// memory, then each output dim as the sum over splits of weight_p * out_p, in split order (D: dims per lane).
constexpr int kMergeBatch = 8;  // splits whose partials a merging lane loads at once

template <int D>
__device__ __forceinline__ void merge_if_last(const int* row_ids, const AttentionShape& s, int splits, int used,
                                              const float* scratch, int* counters, float* out, int li, int h0, int nh) {
  __shared__ int last;
  __shared__ float weight[kAttnThreads / kWarp][kMaxSplits];
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    int* c = counters + int64_t(li) * gridDim.y + blockIdx.y;
    last = atomicAdd(c, 1) == splits - 1;
    if (last) *c = 0;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  const int hd = s.head_dim, lane = threadIdx.x % kWarp;
  for (int hh = int(threadIdx.x) / kWarp; hh < nh; hh += int(blockDim.x) / kWarp) {
    const float* part = scratch + (int64_t(li) * s.n_heads + h0 + hh) * splits * (hd + 2);
    float* w = weight[threadIdx.x / kWarp];
    float mx = -INFINITY;
    for (int p = lane; p < used; p += kWarp) mx = fmaxf(mx, part[p * (hd + 2)]);
    mx = warp_max(mx);
    float total = 0.0f;
    for (int p = lane; p < used; p += kWarp) {
      w[p] = expf(part[p * (hd + 2)] - mx);
      total += w[p] * part[p * (hd + 2) + 1];
    }
    total = warp_sum(total);
    __syncwarp();  // every lane's weights written before any lane reads them
    float* o = out + int64_t(row_ids[li]) * s.n_heads * hd + int64_t(h0 + hh) * hd;
    // Each lane's D dims summed over the splits in split order; the partials of kMergeBatch splits are loaded
    // before any is added (one load after another, each waiting for the last, the launch took 28.8 us at 9 splits;
    // batched, with the scores' warp sums interleaved, 19.1: ncu).
    float a[D] = {};
    for (int p0 = 0; p0 < used; p0 += kMergeBatch) {
      float v[kMergeBatch][D];
#pragma unroll
      for (int u = 0; u < kMergeBatch; ++u) {
#pragma unroll
        for (int i = 0; i < D; ++i) {
          const int d = lane + i * kWarp;
          v[u][i] = p0 + u < used && d < hd ? part[(p0 + u) * (hd + 2) + 2 + d] : 0.0f;
        }
      }
#pragma unroll
      for (int u = 0; u < kMergeBatch; ++u) {
        if (p0 + u >= used) break;
#pragma unroll
        for (int i = 0; i < D; ++i) a[i] += w[p0 + u] * v[u][i];
      }
    }
#pragma unroll
    for (int i = 0; i < D; ++i) {
      const int d = lane + i * kWarp;
      if (d < hd) o[d] = a[i] / total;
    }
    __syncwarp();  // the next head's weights overwrite these
  }
}

// Flash decoding. Block (split, head group, listed row): a group is up to kGroupHeads query heads sharing one KV
// head, so each key and value row is read once for all of them. A row's cache of `cap` positions is cut into at
// most kDecodeSplits splits of decode_split_keys(cap) keys (whole tiles of kTileKeys), so the split boundaries of
// a row depend only on its own cache: the same bits alone or batched, eager or in a graph. A split walks its keys
// tile by tile: (S) the tile's key and value rows staged in shared memory with cp.async; scores by warps over keys
// (a key's dims spread over the lanes, summed by warp_sum); an online softmax per head (running max and sum, the
// accumulators rescaled); then each thread adds the tile's weighted values for its dims and heads. The split's [max,
// sum, out[head_dim]] go to scratch (an empty split writes nothing); the last block of the group merges the splits that
// hold keys. D: dims per lane of a key, head_dim <= 32 * D. Splits of one tile (32 keys) or more, more keys a split
// once 64 splits would not cover the cache: with the merge's loads batched and 8 warps a block, 32 splits of 32 keys
// beat 16 of 64 at a 1024-position cache (48-layer decode 275.9 vs 270.4 tok/s;
// docs/results/2026-11-30-cuda-decode-attention-threads.md); before that, 16 of 64 had won (166 vs 151), and 64 splits
// of 64 beat 16 of 256 at 4096 (133 vs 118): 2026-11-30-cuda-decode-fused.md.
constexpr int kGroupHeads = 8, kTileKeys = 32, kDecodeSplits = kMaxSplits, kMinSplitTiles = 1;
static_assert(kGroupHeads % kHeadHalves == 0, "the value sums split a group's heads in halves");

__host__ __device__ __forceinline__ int decode_split_keys(int cap) {
  const int per = (cap + kDecodeSplits - 1) / kDecodeSplits;
  const int tiles = (per + kTileKeys - 1) / kTileKeys;
  return (tiles > kMinSplitTiles ? tiles : kMinSplitTiles) * kTileKeys;
}

template <int D, bool S>
__global__ void __launch_bounds__(kAttnThreads, 2)
    attention_decode_split_kernel(const float* q, const int* row_ids, const KvRow* rows, int layer, AttentionShape s,
                                  float* scratch, int* counters, float* out) {
  BlockClock clk;
  pdl_wait();
  clk.mark(0);
  extern __shared__ __align__(16) float att_sm[];
  __shared__ float run_max[kGroupHeads], run_sum[kGroupHeads], rescale[kGroupHeads];
  constexpr int kDims = 2;  // dims per thread of the value sums: head_dim <= kDims * kDimThreads
  constexpr int kHalf = kGroupHeads / kHeadHalves;  // heads per thread of the value sums
  float* score = att_sm;                            // kGroupHeads x kTileKeys
  float* ks = score + kGroupHeads * kTileKeys;      // kTileKeys x head_dim (S)
  float* vs = ks + kTileKeys * s.head_dim;          // kTileKeys x head_dim (S)
  const int split = blockIdx.x, li = blockIdx.z;
  const int per_kv = s.n_heads / s.n_kv_heads, groups_per_kv = (per_kv + kGroupHeads - 1) / kGroupHeads;
  const int kvh = int(blockIdx.y) / groups_per_kv;
  const int h0 = kvh * per_kv + (int(blockIdx.y) % groups_per_kv) * kGroupHeads;
  const int nh = min(kGroupHeads, kvh * per_kv + per_kv - h0);
  const int row = row_ids[li];
  const KvRow r = rows[row];
  const int hd = s.head_dim, kv_dim = s.n_kv_heads * hd;
  const float* kc = r.cache + (int64_t(layer) * 2) * r.cap * kv_dim + kvh * hd;
  const float* vc = kc + int64_t(r.cap) * kv_dim;
  const int split_keys = decode_split_keys(r.cap);
  const int j0 = r.first + split * split_keys;
  const int j_end = min(r.pos + 1, j0 + split_keys);  // keys [j0, j_end)
  auto part = [&](int hh) {
    return scratch + ((int64_t(li) * s.n_heads + h0 + hh) * kDecodeSplits + split) * (hd + 2);
  };
  const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp, warps = int(blockDim.x) / kWarp;
  const int used = min(kDecodeSplits, (r.pos + 1 - r.first + split_keys - 1) / split_keys);  // splits with keys
  if (j0 >= j_end) {  // no keys: nothing to write, only to count in
    merge_if_last<D>(row_ids, s, kDecodeSplits, used, scratch, counters, out, li, h0, nh);
    clk.done(kClkAttention);
    return;
  }
  clk.mark(1);
  float qr[kGroupHeads][D];
  const float* qrow = q + int64_t(row) * s.n_heads * hd;
#pragma unroll
  for (int hh = 0; hh < kGroupHeads; ++hh) {
#pragma unroll
    for (int i = 0; i < D; ++i) {
      const int d = lane + i * kWarp;
      qr[hh][i] = hh < nh && d < hd ? qrow[(h0 + hh) * hd + d] : 0.0f;
    }
  }
  if (tid < kGroupHeads) {
    run_max[tid] = -INFINITY;
    run_sum[tid] = 0.0f;
    rescale[tid] = 0.0f;
  }
  const int dt = tid % kDimThreads, hh0 = (tid / kDimThreads) * kHalf;  // value sums: dims dt + .., heads hh0 + ..
  float o[kDims][kHalf] = {};
  for (int t0 = j0; t0 < j_end; t0 += kTileKeys) {
    const int nk = min(kTileKeys, j_end - t0);
    if constexpr (S) {
      const int chunks = hd / 4;
      for (int t = tid; t < nk * chunks; t += blockDim.x) {
        const int j = t / chunks, c = 4 * (t % chunks);
        cp_async16(ks + j * hd + c, kc + int64_t(t0 + j) * kv_dim + c);
        cp_async16(vs + j * hd + c, vc + int64_t(t0 + j) * kv_dim + c);
      }
      cp_async_wait_all();
    }
    __syncthreads();
    for (int j = warp; j < nk; j += warps) {
      const float* kr = S ? ks + j * hd : kc + int64_t(t0 + j) * kv_dim;
      float kv[D];
#pragma unroll
      for (int i = 0; i < D; ++i) {
        const int d = lane + i * kWarp;
        kv[i] = d < hd ? kr[d] : 0.0f;
      }
      // Every head of the group, those past nh too (their q is zero, their score unused): with no early exit
      // the eight warp sums interleave instead of running one after another.
#pragma unroll
      for (int hh = 0; hh < kGroupHeads; ++hh) {
        float a = 0.0f;
#pragma unroll
        for (int i = 0; i < D; ++i) a = fmaf(qr[hh][i], kv[i], a);
        a = warp_sum(a) * s.scale;
        if (lane == 0 && hh < nh) score[hh * kTileKeys + j] = a;
      }
    }
    __syncthreads();
    for (int hh = warp; hh < nh; hh += warps) {  // lane j: key j of the tile (kTileKeys == kWarp)
      const float sc = lane < nk ? score[hh * kTileKeys + lane] : -INFINITY;
      const float m_old = run_max[hh];
      const float m_new = fmaxf(m_old, warp_max(sc));
      const float p = lane < nk ? expf(sc - m_new) : 0.0f;
      score[hh * kTileKeys + lane] = p;
      const float sum = warp_sum(p);
      if (lane == 0) {
        const float a = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);
        run_sum[hh] = run_sum[hh] * a + sum;
        run_max[hh] = m_new;
        rescale[hh] = a;
      }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kDims; ++i) {
      const int d = dt + i * kDimThreads;
      if (d >= hd) break;
#pragma unroll
      for (int e = 0; e < kHalf; ++e) o[i][e] = o[i][e] * rescale[hh0 + e];
      for (int j = 0; j < nk; ++j) {
        const float vv = S ? vs[j * hd + d] : vc[int64_t(t0 + j) * kv_dim + d];
#pragma unroll
        for (int e = 0; e < kHalf; ++e) o[i][e] = fmaf(score[(hh0 + e) * kTileKeys + j], vv, o[i][e]);
      }
    }
    __syncthreads();  // the next tile overwrites the staged rows and the scores
  }
  if (tid < nh) {
    part(tid)[0] = run_max[tid];
    part(tid)[1] = run_sum[tid];
  }
#pragma unroll
  for (int i = 0; i < kDims; ++i) {
    const int d = dt + i * kDimThreads;
    if (d >= hd) break;
#pragma unroll
    for (int e = 0; e < kHalf; ++e) {
      if (hh0 + e < nh) part(hh0 + e)[2 + d] = o[i][e];
    }
  }
  pdl_trigger();
  clk.mark(2);
  merge_if_last<D>(row_ids, s, kDecodeSplits, used, scratch, counters, out, li, h0, nh);
  clk.done(kClkAttention);
}

size_t row_bytes(Codec c, int64_t cols) {
  size_t b = 0;
  dispatch_codec<true>(c, [&]<CodecId C>() { b = row_bytes_of<C>(cols); });
  return b;
}

// Whether a codec's rows are contiguous bytes, which 16-byte loads (V) and staging (S) need: not the seed codecs.
// Their launches pass kBytes<C> where the others pass true, so a seed kernel is instantiated once, V and S off.
template <CodecId C>
constexpr bool kBytes = !is_seed(C);

// Every row of the matrix starts 16-byte aligned: float units may be read as one 16-byte load.
bool aligned16(const void* data, size_t row_bytes) {
  return reinterpret_cast<uintptr_t>(data) % 16 == 0 && row_bytes % 16 == 0;
}
// The same for every matrix of every expert blob (blobs and their parts are placed 16-byte aligned by the caller).
bool experts_aligned16(const ExpertLayout& l) {
  return l.up_offset % 16 == 0 && l.down_offset % 16 == 0 && l.bytes % 16 == 0 &&
         row_bytes(l.gate_up, l.hidden) % 16 == 0 && row_bytes(l.down, l.intermediate) % 16 == 0;
}

void launched(const char* what) {
  check(cudaGetLastError(), what);
}

int blocks_for(int64_t n, int per) {
  return int((n + per - 1) / per);
}

// Whether the environment variable `name` is set to something other than empty or "0" (the A/B switches).
bool env_flag(const char* name) {
  const char* e = std::getenv(name);
  return e != nullptr && e[0] != '\0' && e[0] != '0';
}

// Whether launches on the current device may overlap by programmatic dependent launch: compute capability 9.0 or
// later, and not switched off by SEEDLING_NO_PDL=1 (for A/B measurements). Asked once per device.
bool pdl_enabled() {
  static const bool off = env_flag("SEEDLING_NO_PDL");
  if (off) return false;
  constexpr int kMaxDevices = 64;
  static std::atomic<int> major[kMaxDevices] = {};  // 0: not asked yet
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  if (dev < 0 || dev >= kMaxDevices) return false;
  int m = major[dev].load(std::memory_order_relaxed);
  if (m == 0) {
    check(cudaDeviceGetAttribute(&m, cudaDevAttrComputeCapabilityMajor, dev), "reading the compute capability");
    major[dev].store(m, std::memory_order_relaxed);
  }
  return m >= 9;
}

// A launch of `kernel` with `dynamic` bytes of dynamic shared memory is refused (invalid argument) when they and the
// kernel's static shared memory pass the default 48 KB: a matvec staging exactly kStageSharedBytes (q4_g32 rows of
// 2,048) did. So such a kernel's limit is raised first. Each host thread keeps the (device, kernel, size)s it has
// seen in a small table, so a launch that needs nothing new costs a scan of it (raising a limit again is harmless);
// launches of at most kSmemUnchecked bytes skip even that, since no kernel here has 16 KB of static shared memory.
constexpr size_t kSmemUnchecked = 32 * 1024;

void allow_dynamic_smem(const void* kernel, size_t dynamic) {
  struct Seen {
    int dev = -1;
    const void* kernel = nullptr;
    size_t bytes = 0;
  };
  constexpr int kSeen = 32;
  thread_local Seen seen[kSeen];
  thread_local int next = 0;
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  for (const Seen& e : seen) {
    if (e.kernel == kernel && e.dev == dev && dynamic <= e.bytes) return;
  }
  cudaFuncAttributes a{};
  check(cudaFuncGetAttributes(&a, kernel), "reading a kernel's shared memory");
  if (a.sharedSizeBytes + dynamic > kStageSharedBytes) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(dynamic)),
          "raising a kernel's shared memory limit");
  }
  seen[next] = {dev, kernel, dynamic};
  next = (next + 1) % kSeen;
}

// kernel<<<grid, block, smem, stream>>>(args...), as a programmatic dependent launch where pdl_enabled(): the kernel
// must call pdl_wait before reading what earlier launches wrote (see pdl_trigger).
template <typename... P, typename... A>
void launch_pdl(const char* what, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                A&&... args) {
  if (smem > kSmemUnchecked) allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem);
  cudaLaunchAttribute attr[1] = {};
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = pdl_enabled() ? 1 : 0;
  check(cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...), what);
}

}  // namespace

void stage_clock_reset(cudaStream_t stream) {
#ifdef SEEDLING_STAGE_CLOCK
  unsigned long long zero[kClkKinds * kClkMarks] = {};
  check(cudaMemcpyToSymbolAsync(g_clock_sum, zero, sizeof(zero), 0, cudaMemcpyHostToDevice, stream), "stage clock");
  check(cudaMemcpyToSymbolAsync(g_clock_blocks, zero, kClkKinds * sizeof(unsigned long long), 0, cudaMemcpyHostToDevice,
                                stream),
        "stage clock");
  check(cudaStreamSynchronize(stream), "stage clock");
#else
  (void)stream;
#endif
}

std::string stage_clock_report() {
#ifdef SEEDLING_STAGE_CLOCK
  unsigned long long sum[kClkKinds][kClkMarks] = {}, blocks[kClkKinds] = {};
  check(cudaMemcpyFromSymbol(sum, g_clock_sum, sizeof(sum)), "stage clock");
  check(cudaMemcpyFromSymbol(blocks, g_clock_blocks, sizeof(blocks)), "stage clock");
  int dev = 0, khz = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev), "reading the SM clock");
  static const char* const kNames[kClkKinds] = {"q/k/v", "o", "router", "head", "attention", "gate/up", "down"};
  std::string out = "stage clock, us a block from its start at " + std::to_string(khz / 1000) +
                    " MHz (marks: waited, operands, main loop, end):\n";
  for (int k = 0; k < kClkKinds; ++k) {
    if (blocks[k] == 0) continue;
    char line[256];
    const double us = 1e3 / double(khz) / double(blocks[k]);
    std::snprintf(line, sizeof(line), "  %-9s %10llu blocks: %7.2f %7.2f %7.2f %7.2f\n", kNames[k], blocks[k],
                  double(sum[k][0]) * us, double(sum[k][1]) * us, double(sum[k][2]) * us, double(sum[k][3]) * us);
    out += line;
  }
  return out;
#else
  return "";
#endif
}

bool has_kernel(Codec c) {
  switch (Id(uint8_t(c))) {
    case Id::F32:
    case Id::F16:
    case Id::BF16:
    case Id::Q8_G32:
    case Id::Q8_G64:
    case Id::Q4_G32:
    case Id::Q4_G64:
    case Id::P3:
    case Id::P4:
    case Id::S3:
      return true;
    default:
      return false;
  }
}

void matmul(const float* x, int64_t m, const DeviceMatrix& w, float* y, bool accumulate, cudaStream_t stream) {
  if (m == 0 || w.rows == 0) return;
  check_seed_blob(w.codec, w.data);
  const bool v = aligned16(w.data, row_bytes(w.codec, w.cols));
  const auto* wd = static_cast<const uint8_t*>(w.data);
  const unsigned threads = kWarp * kWarpsPerBlock;
  dispatch_codec<true>(w.codec, [&]<CodecId C>() {
    if (m == 1) {  // decode: one row, no accumulators to spare
      const dim3 grid(blocks_for(w.rows, kWarpsPerBlock), 1);
      if (v) {
        matmul_kernel<C, 1, kBytes<C>><<<grid, threads, 0, stream>>>(x, m, wd, w.rows, w.cols, y, accumulate);
      } else {
        matmul_kernel<C, 1, false><<<grid, threads, 0, stream>>>(x, m, wd, w.rows, w.cols, y, accumulate);
      }
    } else {
      const dim3 grid(blocks_for(w.rows, kWarpsPerBlock), blocks_for(m, kMatmulRows));
      if (v) {
        matmul_kernel<C, kMatmulRows, kBytes<C>><<<grid, threads, 0, stream>>>(x, m, wd, w.rows, w.cols, y, accumulate);
      } else {
        matmul_kernel<C, kMatmulRows, false><<<grid, threads, 0, stream>>>(x, m, wd, w.rows, w.cols, y, accumulate);
      }
    }
  });
  launched("matmul");
}

namespace {
// matvec, and with `topk` (its counter set) the router's top-k in the same launch when the fused path is taken.
void matvec_launch(const float* x, std::span<const DeviceMatrix> ws, std::span<float* const> ys, const float* norm,
                   float eps, float* xn_out, bool accumulate, const MatvecTargets& topk, cudaStream_t stream) {
  if (ws.empty()) return;
  const int64_t cols = ws[0].cols;
  bool same = ws.size() <= 3 && ws.size() == ys.size();
  bool v = true;
  for (const DeviceMatrix& w : ws) {
    same = same && w.codec == ws[0].codec && w.cols == cols;
    check_seed_blob(w.codec, w.data);
    v = v && aligned16(w.data, row_bytes(w.codec, w.cols));
  }
  if (norm != nullptr && (!same || cols > kMatvecSharedCols)) {  // normalise once, then the plain products
    check(xn_out != nullptr ? cudaSuccess : cudaErrorInvalidValue, "matvec: a fused norm without xn_out");
    rms_norm(x, xn_out, 1, cols, norm, eps, stream);
    matvec_launch(xn_out, ws, ys, nullptr, eps, nullptr, accumulate, topk, stream);
    return;
  }
  if (!same) {
    for (size_t i = 0; i < ws.size(); ++i) matmul(x, 1, ws[i], ys[i], accumulate, stream);
    if (topk.topk_counter != nullptr) {
      router_topk(ys[0], 1, int(ws[0].rows), topk.topk_k, topk.topk_norm, topk.topk_ids, topk.topk_weights, stream);
    }
    return;
  }
  MatvecTargets t = topk;
  int64_t total = 0;
  for (size_t i = 0; i < ws.size(); ++i) {
    t.w[i] = static_cast<const uint8_t*>(ws[i].data);
    t.y[i] = ys[i];
    t.rows[i] = ws[i].rows;
    total += ws[i].rows;
  }
  t.count = int(ws.size());
  if (total == 0) return;
  const size_t xs_bytes = norm != nullptr ? (size_t(cols) * sizeof(float) + 15) / 16 * 16 : 0;
  const size_t rb = row_bytes(ws[0].codec, cols);
  // A warp RW rows (two where every matrix's rows are even and that still leaves two blocks an SM, as for the
  // q/k/v product and the head), in one wave at most: a larger product (the head) loops over its rows, each warp
  // staging its next rows while it multiplies these. The epilogues (top-k, RoPE) count blocks, so their launches
  // cover every row.
  const int64_t sms = sm_count();
  bool even = true;
  for (int i = 0; i < t.count; ++i) even = even && t.rows[i] % 2 == 0;
  const bool heads_whole = t.rope_counters == nullptr || t.rope.head_dim % (2 * kWarpsPerBlock) == 0;
  const int rw = even && heads_whole && blocks_for(total, 2 * kWarpsPerBlock) >= 2 * sms ? 2 : 1;
  const int64_t needed = blocks_for(total, int64_t(kWarpsPerBlock) * rw);
  const bool epilogue = t.topk_counter != nullptr || t.rope_counters != nullptr;
  const int64_t grid64 = epilogue ? needed : std::min<int64_t>(needed, int64_t(kMatvecBlocksPerSm) * sms);
  const int buffers = grid64 < needed ? 2 : 1;
  const size_t stage_all = size_t(buffers) * kWarpsPerBlock * size_t(rw) * rb;
  const bool staged = v && xs_bytes + stage_all <= kStageSharedBytes;
  size_t smem = xs_bytes + (staged ? stage_all : 0);
  if (t.topk_counter != nullptr) smem = std::max(smem, size_t(ws[0].rows) * sizeof(float));  // the softmax
  const unsigned grid = unsigned(grid64);
  const unsigned threads = kWarp * kWarpsPerBlock;
  dispatch_codec<true>(ws[0].codec, [&]<CodecId C>() {
    auto pick = [&]<int RW>() {
      return staged ? matvec_kernel<C, kBytes<C>, kBytes<C>, RW>
             : v    ? matvec_kernel<C, kBytes<C>, false, RW>
                    : matvec_kernel<C, false, false, RW>;
    };
    auto* kernel = rw == 2 ? pick.template operator()<2>() : pick.template operator()<1>();
    launch_pdl("matvec", kernel, grid, threads, smem, stream, x, cols, norm, eps, xn_out, t, accumulate,
               staged ? rb : size_t(0), buffers);
  });
  launched("matvec");
}
}  // namespace

void matvec(const float* x, std::span<const DeviceMatrix> ws, std::span<float* const> ys, const float* norm, float eps,
            float* xn_out, bool accumulate, cudaStream_t stream) {
  matvec_launch(x, ws, ys, norm, eps, xn_out, accumulate, MatvecTargets{}, stream);
}

void router_matvec_topk(const float* x, const DeviceMatrix& router, const float* norm, float eps, float* xn_out,
                        float* logits, int k, bool norm_topk, int* ids, float* weights, int* counter,
                        cudaStream_t stream) {
  MatvecTargets topk;
  topk.topk_counter = counter;
  topk.topk_k = k;
  topk.topk_norm = norm_topk;
  topk.topk_ids = ids;
  topk.topk_weights = weights;
  float* const ys[1] = {logits};
  matvec_launch(x, {&router, 1}, ys, norm, eps, xn_out, false, topk, stream);
}

bool matvec_qkv_rope(const float* x, const DeviceMatrix (&w)[3], float* q, float* k, float* v, const float* norm,
                     float eps, float* xn_out, const QkRope& r, int* head_counters, cudaStream_t stream) {
  static const bool off = env_flag("SEEDLING_NO_FUSED_ROPE");
  float* const ys[3] = {q, k, v};
  const int64_t hd = r.head_dim;
  bool fused = !off && norm != nullptr && w[0].cols <= kMatvecSharedCols && hd % kWarpsPerBlock == 0 &&
               w[0].rows == r.n_heads * hd && w[1].rows == r.n_kv_heads * hd && w[2].rows == r.n_kv_heads * hd;
  for (const DeviceMatrix& m : w) fused = fused && m.codec == w[0].codec && m.cols == w[0].cols;
  if (!fused) {
    matvec(x, w, ys, norm, eps, xn_out, false, stream);
    qk_rope_kv(q, k, v, 1, r.n_heads, r.n_kv_heads, r.head_dim, r.q_norm, r.k_norm, r.eps, r.pos, r.inv_freq,
               r.rotary_dim, r.scaling, r.rows, r.layer, stream);
    return false;
  }
  MatvecTargets t;
  t.rope_counters = head_counters;
  t.rope = r;
  matvec_launch(x, w, ys, norm, eps, xn_out, false, t, stream);
  return true;
}

void rms_norm(const float* x, float* out, int64_t rows, int64_t n, const float* weight, float eps,
              cudaStream_t stream) {
  if (rows == 0) return;
  rms_norm_kernel<<<unsigned(rows), kWarp * kWarpsPerBlock, 0, stream>>>(x, out, n, weight, eps);
  launched("rms_norm");
}

void qk_rope_kv(float* q, float* k, const float* v, int64_t m, int n_heads, int n_kv_heads, int head_dim,
                const float* q_norm, const float* k_norm, float eps, const int* pos, const float* inv_freq,
                int rotary_dim, float scaling, const KvRow* rows, int layer, cudaStream_t stream) {
  if (m == 0) return;
  const dim3 grid{unsigned(m), unsigned(blocks_for(n_heads + n_kv_heads, kWarpsPerBlock))};
  launch_pdl("qk_rope_kv", qk_rope_kv_kernel, grid, kWarp * kWarpsPerBlock, 0, stream, q, k, v, n_heads, n_kv_heads,
             head_dim, q_norm, k_norm, eps, pos, inv_freq, rotary_dim / 2, scaling, rows, layer);
  launched("qk_rope_kv");
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  silu_mul_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(gate, up, out, n);
  launched("silu_mul");
}

void add_bias(float* x, const float* b, int64_t rows, int64_t n, cudaStream_t stream) {
  if (rows * n == 0) return;
  add_bias_kernel<<<blocks_for(rows * n, 256), 256, 0, stream>>>(x, b, rows * n, n);
  launched("add_bias");
}

void embed(const int* tokens, int64_t m, const DeviceMatrix& emb, float* x, cudaStream_t stream) {
  if (m == 0) return;
  dispatch_codec(emb.codec, [&]<CodecId C>() {
    embed_kernel<C><<<unsigned(m), 128, 0, stream>>>(tokens, static_cast<const uint8_t*>(emb.data), emb.cols, x);
  });
  launched("embed");
}

void gather_rows(const float* src, const int* idx, int64_t m, int64_t n, float* dst, cudaStream_t stream) {
  if (m == 0) return;
  gather_rows_kernel<<<unsigned(m), 256, 0, stream>>>(src, idx, n, dst);
  launched("gather_rows");
}

void router_topk(const float* logits, int64_t m, int e, int k, bool norm_topk, int* ids, float* weights,
                 cudaStream_t stream) {
  if (m == 0) return;
  router_topk_kernel<<<unsigned(m), kWarp, size_t(e) * sizeof(float), stream>>>(logits, e, k, norm_topk, ids, weights);
  launched("router_topk");
}

void expert_gate_up(const float* x, int64_t m, int k, const int* ids, const uint8_t* const* table, int e,
                    const ExpertLayout& l, float* act, cudaStream_t stream) {
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
  dispatch_codec<true>(l.gate_up, [&]<CodecId C>() {
    auto* kernel = staged ? expert_gate_up_kernel<C, kBytes<C>, kBytes<C>>
                   : v    ? expert_gate_up_kernel<C, kBytes<C>, false>
                          : expert_gate_up_kernel<C, false, false>;
    launch_pdl("expert_gate_up", kernel, grid, threads, sh.total(), stream, x, k, e, ids, table, l, act, sh, x_shared);
  });
  launched("expert_gate_up");
}

void expert_down(const float* act, int64_t pairs, const int* ids, const uint8_t* const* table, const ExpertLayout& l,
                 float* out, cudaStream_t stream) {
  if (pairs == 0) return;
  const dim3 grid(blocks_for(l.hidden, kWarpsPerBlock), unsigned(pairs));
  const bool v = experts_aligned16(l);
  dispatch_codec<true>(l.down, [&]<CodecId C>() {
    if (v) {
      expert_down_kernel<C, kBytes<C>><<<grid, kWarp * kWarpsPerBlock, 0, stream>>>(act, ids, table, l, out);
    } else {
      expert_down_kernel<C, false><<<grid, kWarp * kWarpsPerBlock, 0, stream>>>(act, ids, table, l, out);
    }
  });
  launched("expert_down");
}

void expert_down_combine(const float* act, int64_t m, int k, const int* ids, const float* weights,
                         const uint8_t* const* table, int e, const ExpertLayout& l, float* x, float* scratch,
                         cudaStream_t stream) {
  if (m == 0) return;
  if (k > kMaxDownSlots) {  // more experts a row than the fused kernel holds: the two launches, the same bits
    expert_down(act, m * k, ids, table, l, scratch, stream);
    moe_combine(scratch, weights, m, k, l.hidden, x, stream);
    return;
  }
  const dim3 grid(blocks_for(l.hidden, kWarpsPerBlock / kDownWarps), unsigned(m));
  const unsigned threads = kWarp * kWarpsPerBlock;
  const bool v = experts_aligned16(l);
  dispatch_codec<true>(l.down, [&]<CodecId C>() {
    launch_pdl("expert_down_combine",
               v ? expert_down_combine_kernel<C, kBytes<C>> : expert_down_combine_kernel<C, false>, grid, threads, 0,
               stream, act, k, e, ids, weights, table, l, x);
  });
  launched("expert_down_combine");
}

void moe_combine(const float* expert_out, const float* weights, int64_t m, int k, int64_t h, float* x,
                 cudaStream_t stream) {
  if (m == 0) return;
  moe_combine_kernel<<<unsigned(m), 256, 0, stream>>>(expert_out, weights, k, h, x);
  launched("moe_combine");
}

int64_t decode_attention_scratch_floats(int64_t n_rows, const AttentionShape& s) {
  return n_rows * s.n_heads * kDecodeSplits * (s.head_dim + 2);
}

void attention_decode(const float* q, const int* row_ids, int64_t n_rows, const KvRow* rows, int layer,
                      const AttentionShape& s, float* out, float* scratch, int* counters, cudaStream_t stream) {
  if (n_rows == 0) return;
  check(s.head_dim <= 256 ? cudaSuccess : cudaErrorInvalidValue, "attention_decode: head_dim above 256");
  // Staged when every key row starts 16-byte aligned (head_dim and the cache's width multiples of 4 floats).
  // (and the tile fits the shared memory a launch gets without raising its limit: head_dim <= 176).
  const size_t staged_smem = size_t(kTileKeys) * (kGroupHeads + 2 * size_t(s.head_dim)) * sizeof(float);
  const bool staged = s.head_dim % 4 == 0 && staged_smem <= kStageSharedBytes;
  const size_t smem = staged ? staged_smem : size_t(kTileKeys) * kGroupHeads * sizeof(float);
  const int per_kv = s.n_heads / s.n_kv_heads, groups = s.n_kv_heads * ((per_kv + kGroupHeads - 1) / kGroupHeads);
  const dim3 grid{unsigned(kDecodeSplits), unsigned(groups), unsigned(n_rows)};
  auto go = [&]<int D>() {
    launch_pdl("attention_decode",
               staged ? attention_decode_split_kernel<D, true> : attention_decode_split_kernel<D, false>, grid,
               kAttnThreads, smem, stream, q, row_ids, rows, layer, s, scratch, counters, out);
  };
  if (s.head_dim <= 32) {
    go.template operator()<1>();
  } else if (s.head_dim <= 64) {
    go.template operator()<2>();
  } else if (s.head_dim <= 128) {
    go.template operator()<4>();
  } else {
    go.template operator()<8>();
  }
  launched("attention_decode");
}

}  // namespace seedling::cuda
