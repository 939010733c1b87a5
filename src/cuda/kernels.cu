// cuda/kernels.cu - the kernels declared in cuda/kernels.h, in one translation unit (CI compiles one file).
//
// Matrix products give each output element to one warp: lane l takes the codec's units (a block of G weights,
// or 4/8 floats) l, l + 32, ..., widens a unit into registers, multiplies it into every row it serves, and the 32
// partial sums meet in a fixed shuffle tree. That order depends only on the matrix, never on the row count.
#include <cuda_fp16.h>

#include <cfloat>

#include "cuda/kernels.h"

// No fmt here: nvcc cannot evaluate fmt's compile-time format checks, so errors go through check() (runtime.cpp).
namespace seedling::cuda {

using namespace codec_ids;  // the codec numbers (codec_ids.h mirrors codec/codec.h)
using Id = CodecId;

namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 8;

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

__device__ __forceinline__ float f16_bits(uint16_t h) {
  return __half2float(__ushort_as_half(h));
}
__device__ __forceinline__ float bf16_bits(uint16_t h) {
  return __uint_as_float(uint32_t(h) << 16);
}

// A codec's unit: G consecutive elements of a row that one lane widens at once.
template <CodecId C>
struct Unit;
template <>
struct Unit<Id::F32> {
  static constexpr int G = 4, bytes = 16;
};
template <>
struct Unit<Id::F16> {
  static constexpr int G = 8, bytes = 16;
};
template <>
struct Unit<Id::BF16> {
  static constexpr int G = 8, bytes = 16;
};
template <>
struct Unit<Id::Q8_G32> {
  static constexpr int G = 32, bytes = kQ8G32Bytes;
};
template <>
struct Unit<Id::Q8_G64> {
  static constexpr int G = 64, bytes = kQ8G64Bytes;
};
template <>
struct Unit<Id::Q4_G32> {
  static constexpr int G = 32, bytes = kQ4G32Bytes;
};
template <>
struct Unit<Id::Q4_G64> {
  static constexpr int G = 64, bytes = kQ4G64Bytes;
};

// Widens unit u of a row into w[G], exactly as codec_value (codec.h): affine values are d * q then + m, in float,
// unfused (__fmul_rn/__fadd_rn keep nvcc from contracting them). Float units may run past the row's end: only
// elements below `valid` are read.
template <CodecId C>
__device__ __forceinline__ void load_unit(const uint8_t* row, int64_t u, int valid, float* w) {
  constexpr int G = Unit<C>::G;
  if constexpr (C == Id::F32) {
    const float* p = reinterpret_cast<const float*>(row) + u * G;
#pragma unroll
    for (int j = 0; j < G; ++j) w[j] = j < valid ? p[j] : 0.0f;
  } else if constexpr (C == Id::F16 || C == Id::BF16) {
    const uint16_t* p = reinterpret_cast<const uint16_t*>(row) + u * G;
#pragma unroll
    for (int j = 0; j < G; ++j) {
      const uint16_t h = j < valid ? p[j] : uint16_t(0);
      w[j] = C == Id::BF16 ? bf16_bits(h) : f16_bits(h);
    }
  } else {
    // Blocks are 36, 68, 20 or 36 bytes: every block starts 4-byte aligned, so it is read as 32-bit words.
    const uint32_t* p = reinterpret_cast<const uint32_t*>(row + u * Unit<C>::bytes);
    const uint32_t dm = p[0];
    const float d = f16_bits(uint16_t(dm & 0xffffu)), m = f16_bits(uint16_t(dm >> 16));
    if constexpr (C == Id::Q8_G32 || C == Id::Q8_G64) {
#pragma unroll
      for (int wd = 0; wd < G / 4; ++wd) {
        const uint32_t q = p[1 + wd];
#pragma unroll
        for (int b = 0; b < 4; ++b) w[wd * 4 + b] = __fadd_rn(__fmul_rn(d, float((q >> (8 * b)) & 0xffu)), m);
      }
    } else {
#pragma unroll
      for (int wd = 0; wd < G / 8; ++wd) {
        const uint32_t q = p[1 + wd];
#pragma unroll
        for (int b = 0; b < 4; ++b) {
          const uint32_t byte = (q >> (8 * b)) & 0xffu;
          w[wd * 4 + b] = __fadd_rn(__fmul_rn(d, float(byte & 0x0fu)), m);
          w[G / 2 + wd * 4 + b] = __fadd_rn(__fmul_rn(d, float(byte >> 4)), m);
        }
      }
    }
  }
}

template <CodecId C>
__host__ __device__ __forceinline__ size_t row_bytes_of(int64_t cols) {
  constexpr int G = Unit<C>::G;
  if constexpr (C == Id::F32) return size_t(cols) * 4;
  if constexpr (C == Id::F16 || C == Id::BF16) return size_t(cols) * 2;
  return size_t((cols + G - 1) / G) * Unit<C>::bytes;
}

// The raw 32-bit words of one full unit. Lanes load the words of several units before widening any, so several
// loads are in flight per lane (memory-level parallelism is what a matrix-vector product lives on).
template <CodecId C>
struct Raw {
  uint32_t w[Unit<C>::bytes / 4];
};

__host__ __device__ constexpr bool is_affine(CodecId c) {
  return c == Id::Q8_G32 || c == Id::Q8_G64 || c == Id::Q4_G32 || c == Id::Q4_G64;
}

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

// Affine codecs: 8 lanes share one block, each widening G / 8 of its codes, so a group's reads of x are contiguous
// (a lane's elements sit 4 floats from its neighbours', not a whole block apart) and each lane holds few registers.
// The warp's 4 groups take blocks grp, grp + 4, ...; which lane adds which element depends only on the matrix.
template <CodecId C, int R>
__device__ __forceinline__ void affine_group_dot(const uint8_t* wrow, int64_t cols, const float* x, int64_t ldx,
                                                 int rows, float* acc) {
  constexpr int G = Unit<C>::G, kPer = G / 8;
  const int lane = threadIdx.x % kWarp, grp = lane / 8, t = lane % 8;
  const int64_t units = (cols + G - 1) / G;
#pragma unroll 2
  for (int64_t u = grp; u < units; u += 4) {
    const uint8_t* blk = wrow + u * Unit<C>::bytes;
    const uint32_t* words = reinterpret_cast<const uint32_t*>(blk);
    const uint32_t dm = words[0];
    const float d = f16_bits(uint16_t(dm & 0xffffu)), m = f16_bits(uint16_t(dm >> 16));
    float w[kPer];
    int idx[kPer];                    // element of the block each value belongs to
    if constexpr (C == Id::Q4_G64) {  // byte i: element i (low nibble), i + 32 (high)
      const uint32_t q = words[1 + t];
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const uint32_t byte = (q >> (8 * b)) & 0xffu;
        w[b] = __fadd_rn(__fmul_rn(d, float(byte & 0x0fu)), m);
        w[4 + b] = __fadd_rn(__fmul_rn(d, float(byte >> 4)), m);
        idx[b] = 4 * t + b;
        idx[4 + b] = 32 + 4 * t + b;
      }
    } else if constexpr (C == Id::Q4_G32) {  // byte i: element i (low nibble), i + 16 (high)
      const uint32_t q = reinterpret_cast<const uint16_t*>(blk + 4)[t];
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        const uint32_t byte = (q >> (8 * b)) & 0xffu;
        w[b] = __fadd_rn(__fmul_rn(d, float(byte & 0x0fu)), m);
        w[2 + b] = __fadd_rn(__fmul_rn(d, float(byte >> 4)), m);
        idx[b] = 2 * t + b;
        idx[2 + b] = 16 + 2 * t + b;
      }
    } else {  // q8: byte i is element i
#pragma unroll
      for (int b = 0; b < kPer; ++b) {
        const uint32_t q = words[1 + (kPer * t + b) / 4];
        w[b] = __fadd_rn(__fmul_rn(d, float((q >> (8 * ((kPer * t + b) % 4))) & 0xffu)), m);
        idx[b] = kPer * t + b;
      }
    }
    const int64_t k0 = u * G;
    const bool full = k0 + G <= cols;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r >= rows) break;
      const float* xr = x + r * ldx + k0;
      float a = acc[r];
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        if (full || k0 + idx[j] < cols) a = fmaf(w[j], xr[idx[j]], a);
      }
      acc[r] = a;
    }
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

// Sum over this lane's share of the row (float codecs: units lane, lane + 32, ...; affine: affine_group_dot) of w . x
// for R rows of x (row r at x + r * ldx) into acc[r]. The units and their order depend only on the matrix, so a row's
// sum does not depend on R or `rows`.
template <CodecId C, int R, bool V>
__device__ __forceinline__ void lane_dot(const uint8_t* wrow, int64_t cols, const float* x, int64_t ldx, int rows,
                                         float* acc) {
  if constexpr (is_affine(C)) {
    affine_group_dot<C, R>(wrow, cols, x, ldx, rows, acc);
    return;
  }
  constexpr int G = Unit<C>::G;
  const int64_t units = (cols + G - 1) / G, full = cols / G;
  const int lane = threadIdx.x % kWarp;
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
        fma_unit<G, R>(w, G, x, ldx, (u + i * kWarp) * G, rows, acc);
      }
    }
  }
  for (; u < units; u += kWarp) {
    const int64_t k0 = u * G;
    const int valid = int(min_i64(G, cols - k0));
    load_unit<C>(wrow, u, valid, w);
    fma_unit<G, R>(w, valid, x, ldx, k0, rows, acc);
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
  float acc[R] = {};
  lane_dot<C, R, V>(w + size_t(n) * row_bytes_of<C>(cols), cols, x + r0 * cols, cols, rows, acc);
  for (int r = 0; r < rows; ++r) {
    const float s = warp_sum(acc[r]);
    if (threadIdx.x % kWarp == 0) {
      float* out = y + (r0 + r) * n_out + n;
      *out = accumulate ? *out + s : s;
    }
  }
}

template <CodecId C, bool V>
__global__ void expert_gate_up_kernel(const float* x, int k, const int* ids, const uint8_t* const* table,
                                      ExpertLayout l, float* act) {
  const int64_t n = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  const int64_t j = blockIdx.y;
  if (n >= l.intermediate) return;
  const uint8_t* blob = table[ids[j]];
  if (blob == nullptr) return;
  const size_t rb = row_bytes_of<C>(l.hidden);
  const float* xr = x + (j / k) * l.hidden;
  float g = 0.0f, u = 0.0f;
  lane_dot<C, 1, V>(blob + size_t(n) * rb, l.hidden, xr, 0, 1, &g);
  lane_dot<C, 1, V>(blob + l.up_offset + size_t(n) * rb, l.hidden, xr, 0, 1, &u);
  g = warp_sum(g);
  u = warp_sum(u);
  if (threadIdx.x % kWarp == 0) act[j * l.intermediate + n] = (g / (1.0f + expf(-g))) * u;
}

template <CodecId C, bool V>
__global__ void expert_down_kernel(const float* act, const int* ids, const uint8_t* const* table, ExpertLayout l,
                                   float* out) {
  const int64_t h = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  const int64_t j = blockIdx.y;
  if (h >= l.hidden) return;
  const uint8_t* blob = table[ids[j]];
  if (blob == nullptr) return;
  float s = 0.0f;
  lane_dot<C, 1, V>(blob + l.down_offset + size_t(h) * row_bytes_of<C>(l.intermediate), l.intermediate,
                    act + j * l.intermediate, 0, 1, &s);
  s = warp_sum(s);
  if (threadIdx.x % kWarp == 0) out[j * l.hidden + h] = s;
}

// Calls f with the codec as a compile-time constant.
template <typename F>
void dispatch_codec(Codec c, F&& f) {
  switch (Id(uint8_t(c))) {
    case Id::F32:
      return f.template operator()<Id::F32>();
    case Id::F16:
      return f.template operator()<Id::F16>();
    case Id::BF16:
      return f.template operator()<Id::BF16>();
    case Id::Q8_G32:
      return f.template operator()<Id::Q8_G32>();
    case Id::Q8_G64:
      return f.template operator()<Id::Q8_G64>();
    case Id::Q4_G32:
      return f.template operator()<Id::Q4_G32>();
    case Id::Q4_G64:
      return f.template operator()<Id::Q4_G64>();
    default:
      break;
  }
  check(cudaErrorInvalidValue, "a kernel for this codec (the seed codecs have none yet)");
}

__global__ void rms_norm_kernel(const float* x, float* out, int64_t n, const float* weight, float eps) {
  const float* xr = x + blockIdx.x * n;
  float* o = out + blockIdx.x * n;
  __shared__ float part[kWarpsPerBlock];
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) ss = fmaf(xr[i], xr[i], ss);
  ss = warp_sum(ss);
  if (threadIdx.x % kWarp == 0) part[threadIdx.x / kWarp] = ss;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < int(blockDim.x) / kWarp; ++w) total += part[w];
  const float inv = 1.0f / sqrtf(total / float(n) + eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) o[i] = weight[i] * (xr[i] * inv);
}

__global__ void rope_kernel(float* heads, int n_heads, int head_dim, const int* pos, const float* inv_freq, int half,
                            float scaling) {
  const int64_t row = blockIdx.x;
  float* base = heads + row * int64_t(n_heads) * head_dim;
  for (int t = threadIdx.x; t < n_heads * half; t += blockDim.x) {
    const int h = t / half, i = t % half;
    const float angle = float(pos[row]) * inv_freq[i];
    const float c = cosf(angle) * scaling, s = sinf(angle) * scaling;
    float* v = base + h * head_dim;
    const float a = v[i], b = v[i + half];
    v[i] = a * c - b * s;
    v[i + half] = b * c + a * s;
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

// One warp per row; probabilities in shared memory (e floats per warp).
__global__ void router_topk_kernel(const float* logits, int e, int k, bool norm_topk, int* ids, float* weights) {
  extern __shared__ float p[];
  const int64_t row = blockIdx.x;
  const float* x = logits + row * e;
  const int lane = threadIdx.x;
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
      ids[row * k + s] = best_i;
      weights[row * k + s] = best;
    }
    chosen_sum += best;
    __syncwarp();
    if (lane == 0) p[best_i] = -2.0f;  // taken
    __syncwarp();
  }
  if (norm_topk && lane == 0) {
    for (int s = 0; s < k; ++s) weights[row * k + s] = weights[row * k + s] / chosen_sum;
  }
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

__global__ void kv_write_kernel(const float* k, const float* v, const KvRow* rows, int layer, int kv_dim) {
  const KvRow r = rows[blockIdx.x];
  float* kc = r.cache + (int64_t(layer) * 2) * r.cap * kv_dim + int64_t(r.pos) * kv_dim;
  float* vc = kc + int64_t(r.cap) * kv_dim;
  for (int i = threadIdx.x; i < kv_dim; i += blockDim.x) {
    kc[i] = k[int64_t(blockIdx.x) * kv_dim + i];
    vc[i] = v[int64_t(blockIdx.x) * kv_dim + i];
  }
}

constexpr int kAttnThreads = 128;

// Block (split, head, listed row): scores of its keys in shared memory, then a partial softmax (max, sum) and the
// unnormalised weighted sum of values, written to scratch as [max, sum, out[head_dim]].
__global__ void attention_decode_split_kernel(const float* q, const int* row_ids, const KvRow* rows, int layer,
                                              AttentionShape s, int split_keys, int splits, float* scratch) {
  extern __shared__ float sm[];
  float* qs = sm;                  // head_dim
  float* score = sm + s.head_dim;  // split_keys
  __shared__ float red[kAttnThreads / kWarp];
  const int split = blockIdx.x, h = blockIdx.y, li = blockIdx.z;
  const int row = row_ids[li];
  const KvRow r = rows[row];
  const int kv_dim = s.n_kv_heads * s.head_dim;
  const int kvh = h / (s.n_heads / s.n_kv_heads);
  const float* kc = r.cache + (int64_t(layer) * 2) * r.cap * kv_dim + kvh * s.head_dim;
  const float* vc = kc + int64_t(r.cap) * kv_dim;
  const int j0 = r.first + split * split_keys;
  const int j1 = min(r.pos + 1, j0 + split_keys);  // keys [j0, j1)
  float* outp = scratch + ((int64_t(li) * s.n_heads + h) * splits + split) * (s.head_dim + 2);
  const int tid = threadIdx.x;
  if (j0 >= j1) {
    if (tid == 0) {
      outp[0] = -INFINITY;
      outp[1] = 0.0f;
    }
    for (int d = tid; d < s.head_dim; d += blockDim.x) outp[2 + d] = 0.0f;
    return;
  }
  for (int d = tid; d < s.head_dim; d += blockDim.x)
    qs[d] = q[int64_t(row) * s.n_heads * s.head_dim + h * s.head_dim + d];
  __syncthreads();
  float mx = -INFINITY;
  for (int j = j0 + tid; j < j1; j += blockDim.x) {
    const float* kr = kc + int64_t(j) * kv_dim;
    float a = 0.0f;
    for (int d = 0; d < s.head_dim; ++d) a = fmaf(qs[d], kr[d], a);
    a = a * s.scale;
    score[j - j0] = a;
    mx = fmaxf(mx, a);
  }
  mx = warp_max(mx);
  if (tid % kWarp == 0) red[tid / kWarp] = mx;
  __syncthreads();
  mx = red[0];
  for (int w = 1; w < kAttnThreads / kWarp; ++w) mx = fmaxf(mx, red[w]);
  __syncthreads();
  float sum = 0.0f;
  for (int j = j0 + tid; j < j1; j += blockDim.x) {
    const float e = expf(score[j - j0] - mx);
    score[j - j0] = e;
    sum += e;
  }
  sum = warp_sum(sum);
  if (tid % kWarp == 0) red[tid / kWarp] = sum;
  __syncthreads();
  if (tid == 0) {
    float t = 0.0f;
    for (int w = 0; w < kAttnThreads / kWarp; ++w) t += red[w];
    outp[0] = mx;
    outp[1] = t;
  }
  for (int d = tid; d < s.head_dim; d += blockDim.x) {
    float o = 0.0f;
    for (int j = j0; j < j1; ++j) o = fmaf(score[j - j0], vc[int64_t(j) * kv_dim + d], o);
    outp[2 + d] = o;
  }
}

__global__ void attention_decode_merge_kernel(const int* row_ids, AttentionShape s, int splits, const float* scratch,
                                              float* out) {
  const int h = blockIdx.y, li = blockIdx.x;
  const float* part = scratch + (int64_t(li) * s.n_heads + h) * splits * (s.head_dim + 2);
  float mx = -INFINITY;
  for (int p = 0; p < splits; ++p) mx = fmaxf(mx, part[p * (s.head_dim + 2)]);
  float total = 0.0f;
  for (int p = 0; p < splits; ++p) {
    const float m = part[p * (s.head_dim + 2)];
    if (m != -INFINITY) total += expf(m - mx) * part[p * (s.head_dim + 2) + 1];
  }
  float* o = out + int64_t(row_ids[li]) * s.n_heads * s.head_dim + h * s.head_dim;
  for (int d = threadIdx.x; d < s.head_dim; d += blockDim.x) {
    float a = 0.0f;
    for (int p = 0; p < splits; ++p) {
      const float m = part[p * (s.head_dim + 2)];
      if (m != -INFINITY) a += expf(m - mx) * part[p * (s.head_dim + 2) + 2 + d];
    }
    o[d] = a / total;
  }
}

constexpr int kTileQ = 16, kTileK = 16;

// Block (query tile, head). Shared memory: Q tile, K and V tiles, the O accumulators, the score tile, and per
// query row the running max, sum and rescale factor.
__global__ void attention_prompt_kernel(const float* q, int64_t n, int p0, const float* kc, const float* vc, int window,
                                        AttentionShape s, float* out) {
  extern __shared__ float sm[];
  const int hd = s.head_dim;
  float* qs = sm;                    // kTileQ x hd
  float* ks = qs + kTileQ * hd;      // kTileK x hd
  float* vs = ks + kTileK * hd;      // kTileK x hd
  float* os = vs + kTileK * hd;      // kTileQ x hd
  float* sc = os + kTileQ * hd;      // kTileQ x kTileK
  float* rm = sc + kTileQ * kTileK;  // running max
  float* rl = rm + kTileQ;           // running sum
  float* ra = rl + kTileQ;           // rescale of this tile
  const int h = blockIdx.y;
  const int64_t i0 = int64_t(blockIdx.x) * kTileQ;
  const int rows = int(min_i64(kTileQ, n - i0));
  const int kv_dim = s.n_kv_heads * hd;
  const int kvh = h / (s.n_heads / s.n_kv_heads);
  const int qstride = s.n_heads * hd;
  const int tid = threadIdx.x;
  for (int t = tid; t < kTileQ * hd; t += blockDim.x) {
    const int r = t / hd, d = t % hd;
    qs[t] = r < rows ? q[(i0 + r) * qstride + h * hd + d] : 0.0f;
    os[t] = 0.0f;
  }
  if (tid < kTileQ) {
    rm[tid] = -INFINITY;
    rl[tid] = 0.0f;
  }
  const int p_first = int(p0 + i0), p_last = p_first + rows - 1;
  const int key_begin = window > 0 ? max(0, p_first - window + 1) : 0;
  __syncthreads();
  for (int j0 = key_begin; j0 <= p_last; j0 += kTileK) {
    for (int t = tid; t < kTileK * hd; t += blockDim.x) {
      const int c = t / hd, d = t % hd;
      const int j = j0 + c;
      ks[t] = j <= p_last ? kc[int64_t(j) * kv_dim + kvh * hd + d] : 0.0f;
      vs[t] = j <= p_last ? vc[int64_t(j) * kv_dim + kvh * hd + d] : 0.0f;
    }
    __syncthreads();
    for (int t = tid; t < kTileQ * kTileK; t += blockDim.x) {
      const int r = t / kTileK, c = t % kTileK;
      const int p = p_first + r, j = j0 + c;
      const int first = window > 0 ? max(0, p - window + 1) : 0;
      float a = -INFINITY;
      if (r < rows && j <= p && j >= first) {
        a = 0.0f;
        for (int d = 0; d < hd; ++d) a = fmaf(qs[r * hd + d], ks[c * hd + d], a);
        a = a * s.scale;
      }
      sc[t] = a;
    }
    __syncthreads();
    if (tid < kTileQ) {
      const int r = tid;
      float mx = rm[r];
      for (int c = 0; c < kTileK; ++c) mx = fmaxf(mx, sc[r * kTileK + c]);
      float alpha = 1.0f, sum = 0.0f;
      if (mx == -INFINITY) {  // nothing seen yet for this row
        for (int c = 0; c < kTileK; ++c) sc[r * kTileK + c] = 0.0f;
      } else {
        alpha = rm[r] == -INFINITY ? 0.0f : expf(rm[r] - mx);
        for (int c = 0; c < kTileK; ++c) {
          const float e = sc[r * kTileK + c] == -INFINITY ? 0.0f : expf(sc[r * kTileK + c] - mx);
          sc[r * kTileK + c] = e;
          sum += e;
        }
      }
      rm[r] = mx;
      rl[r] = rl[r] * alpha + sum;
      ra[r] = alpha;
    }
    __syncthreads();
    for (int t = tid; t < kTileQ * hd; t += blockDim.x) {
      const int r = t / hd, d = t % hd;
      float o = os[t] * ra[r];
      for (int c = 0; c < kTileK; ++c) o = fmaf(sc[r * kTileK + c], vs[c * hd + d], o);
      os[t] = o;
    }
    __syncthreads();
  }
  for (int t = tid; t < rows * hd; t += blockDim.x) {
    const int r = t / hd, d = t % hd;
    out[(i0 + r) * qstride + h * hd + d] = os[t] / rl[r];
  }
}

size_t row_bytes(Codec c, int64_t cols) {
  size_t b = 0;
  dispatch_codec(c, [&]<CodecId C>() { b = row_bytes_of<C>(cols); });
  return b;
}

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

}  // namespace

bool has_kernel(Codec c) {
  switch (Id(uint8_t(c))) {
    case Id::F32:
    case Id::F16:
    case Id::BF16:
    case Id::Q8_G32:
    case Id::Q8_G64:
    case Id::Q4_G32:
    case Id::Q4_G64:
      return true;
    default:
      return false;
  }
}

void matmul(const float* x, int64_t m, const DeviceMatrix& w, float* y, bool accumulate, cudaStream_t stream) {
  if (m == 0 || w.rows == 0) return;
  const bool v = aligned16(w.data, row_bytes(w.codec, w.cols));
  const auto* wd = static_cast<const uint8_t*>(w.data);
  const unsigned threads = kWarp * kWarpsPerBlock;
  dispatch_codec(w.codec, [&]<CodecId C>() {
    if (m == 1) {  // decode: one row, no accumulators to spare
      const dim3 grid(blocks_for(w.rows, kWarpsPerBlock), 1);
      if (v) {
        matmul_kernel<C, 1, true><<<grid, threads, 0, stream>>>(x, m, wd, w.rows, w.cols, y, accumulate);
      } else {
        matmul_kernel<C, 1, false><<<grid, threads, 0, stream>>>(x, m, wd, w.rows, w.cols, y, accumulate);
      }
    } else {
      const dim3 grid(blocks_for(w.rows, kWarpsPerBlock), blocks_for(m, kMatmulRows));
      if (v) {
        matmul_kernel<C, kMatmulRows, true><<<grid, threads, 0, stream>>>(x, m, wd, w.rows, w.cols, y, accumulate);
      } else {
        matmul_kernel<C, kMatmulRows, false><<<grid, threads, 0, stream>>>(x, m, wd, w.rows, w.cols, y, accumulate);
      }
    }
  });
  launched("matmul");
}

void rms_norm(const float* x, float* out, int64_t rows, int64_t n, const float* weight, float eps,
              cudaStream_t stream) {
  if (rows == 0) return;
  rms_norm_kernel<<<unsigned(rows), kWarp * kWarpsPerBlock, 0, stream>>>(x, out, n, weight, eps);
  launched("rms_norm");
}

void rope(float* heads, int64_t rows, int n_heads, int head_dim, const int* pos, const float* inv_freq, int rotary_dim,
          float scaling, cudaStream_t stream) {
  if (rows == 0 || rotary_dim == 0) return;
  rope_kernel<<<unsigned(rows), 128, 0, stream>>>(heads, n_heads, head_dim, pos, inv_freq, rotary_dim / 2, scaling);
  launched("rope");
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

void expert_gate_up(const float* x, int64_t m, int k, const int* ids, const uint8_t* const* table,
                    const ExpertLayout& l, float* act, cudaStream_t stream) {
  if (m == 0) return;
  const dim3 grid(blocks_for(l.intermediate, kWarpsPerBlock), unsigned(m * k));
  const bool v = experts_aligned16(l);
  dispatch_codec(l.gate_up, [&]<CodecId C>() {
    if (v) {
      expert_gate_up_kernel<C, true><<<grid, kWarp * kWarpsPerBlock, 0, stream>>>(x, k, ids, table, l, act);
    } else {
      expert_gate_up_kernel<C, false><<<grid, kWarp * kWarpsPerBlock, 0, stream>>>(x, k, ids, table, l, act);
    }
  });
  launched("expert_gate_up");
}

void expert_down(const float* act, int64_t pairs, const int* ids, const uint8_t* const* table, const ExpertLayout& l,
                 float* out, cudaStream_t stream) {
  if (pairs == 0) return;
  const dim3 grid(blocks_for(l.hidden, kWarpsPerBlock), unsigned(pairs));
  const bool v = experts_aligned16(l);
  dispatch_codec(l.down, [&]<CodecId C>() {
    if (v) {
      expert_down_kernel<C, true><<<grid, kWarp * kWarpsPerBlock, 0, stream>>>(act, ids, table, l, out);
    } else {
      expert_down_kernel<C, false><<<grid, kWarp * kWarpsPerBlock, 0, stream>>>(act, ids, table, l, out);
    }
  });
  launched("expert_down");
}

void moe_combine(const float* expert_out, const float* weights, int64_t m, int k, int64_t h, float* x,
                 cudaStream_t stream) {
  if (m == 0) return;
  moe_combine_kernel<<<unsigned(m), 256, 0, stream>>>(expert_out, weights, k, h, x);
  launched("moe_combine");
}

void kv_write(const float* k, const float* v, int64_t m, const KvRow* rows, int layer, int kv_dim,
              cudaStream_t stream) {
  if (m == 0) return;
  kv_write_kernel<<<unsigned(m), 128, 0, stream>>>(k, v, rows, layer, kv_dim);
  launched("kv_write");
}

int64_t decode_attention_scratch_floats(int64_t n_rows, const AttentionShape& s, int max_keys, int split_keys) {
  const int64_t splits = (max_keys + split_keys - 1) / split_keys;
  return n_rows * s.n_heads * splits * (s.head_dim + 2);
}

void attention_decode(const float* q, const int* row_ids, int64_t n_rows, const KvRow* rows, int layer,
                      const AttentionShape& s, int max_keys, int split_keys, float* out, float* scratch,
                      cudaStream_t stream) {
  if (n_rows == 0) return;
  const int splits = (max_keys + split_keys - 1) / split_keys;
  const size_t smem = size_t(s.head_dim + split_keys) * sizeof(float);
  attention_decode_split_kernel<<<dim3(unsigned(splits), unsigned(s.n_heads), unsigned(n_rows)), kAttnThreads, smem,
                                  stream>>>(q, row_ids, rows, layer, s, split_keys, splits, scratch);
  launched("attention_decode (splits)");
  attention_decode_merge_kernel<<<dim3(unsigned(n_rows), unsigned(s.n_heads)), 128, 0, stream>>>(row_ids, s, splits,
                                                                                                 scratch, out);
  launched("attention_decode (merge)");
}

void attention_prompt(const float* q, int64_t n, int p0, const float* k_cache, const float* v_cache, int window,
                      const AttentionShape& s, float* out, cudaStream_t stream) {
  if (n == 0) return;
  const size_t smem =
      size_t(2 * kTileQ * s.head_dim + 2 * kTileK * s.head_dim + kTileQ * kTileK + 3 * kTileQ) * sizeof(float);
  static size_t raised = 48 * 1024;
  if (smem > raised) {
    check(cudaFuncSetAttribute(attention_prompt_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
          "raising attention_prompt's shared memory");
    raised = smem;
  }
  attention_prompt_kernel<<<dim3(unsigned(blocks_for(n, kTileQ)), unsigned(s.n_heads)), kAttnThreads, smem, stream>>>(
      q, n, p0, k_cache, v_cache, window, s, out);
  launched("attention_prompt");
}

}  // namespace seedling::cuda
