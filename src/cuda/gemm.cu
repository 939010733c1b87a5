// cuda/gemm.cu - the tensor-core products declared in cuda/gemm.h.
//
// One kernel serves the three products. A block owns a tile of 128 rows (of x, or of one expert's bucket of pairs)
// by 128 output columns (gate_up: 64 gate and the same 64 up columns). For each 64-wide slice of k, in order, the
// rows of x and the weight rows are widened, rounded to TF32 and stored in shared memory; 8 warps, each 64 x 32 of
// the tile, multiply them with WMMA m16n16k8. The accumulators go through shared memory to the epilogue (bounds,
// accumulate, SiLU product). The k-slices and the MMA steps inside them depend only on k, so an output element's
// sum never depends on m or on the other rows of its tile.
#include <mma.h>

#include "cuda/codec_device.cuh"
#include "cuda/gemm.h"

// No fmt here (see kernels.cu): errors go through check() (runtime.cpp).
namespace seedling::cuda {

namespace {

namespace wmma = nvcuda::wmma;

constexpr int kBM = 128, kBN = 128, kBK = 64;  // tile: rows x output columns x k
constexpr int kThreads = 256;                  // 8 warps: 2 (rows) x 4 (columns), each 64 x 32
constexpr int kLd = kBK + 4;                   // shared row stride of the x and weight tiles (floats)
constexpr int kLdc = kBN + 4;                  // shared row stride of the accumulator tile
constexpr int kSmemFloats = 2 * kBM * kLd > kBM* kLdc ? 2 * kBM* kLd : kBM* kLdc;
constexpr size_t kSmemBytes = size_t(kSmemFloats) * sizeof(float);
static_assert(kBM == kBN, "the x and weight tiles share one layout");

enum class Mode { Plain, GateUp, Down };

struct GemmArgs {
  const float* x = nullptr;  // rows of `cols` floats
  bool x_vec = false;        // rows start 16-byte aligned and cols % 4 == 0: read x as float4
  int64_t m = 0;             // Plain: rows of x and y
  int64_t n_out = 0;         // outputs per row (one matrix's rows)
  int64_t cols = 0;          // k
  float* y = nullptr;        // rows of n_out floats
  bool accumulate = false;
  const uint8_t* w = nullptr;  // Plain: the matrix
  // Grouped: the bucketing's tiles (expert, first sorted pair, rows), their count and the sorted pairs.
  const int* tiles = nullptr;
  const int* n_tiles = nullptr;
  const int* order = nullptr;
  int k = 1;  // GateUp: pair j reads row j / k of x
  const uint8_t* const* table = nullptr;
  size_t off_a = 0, off_b = 0;  // GateUp: gate and up in the blob; Down: down in off_a
};

__device__ __forceinline__ float tf32(float v) {
  return wmma::__float_to_tf32(v);
}

__device__ __forceinline__ void store4(float* dst, float a, float b, float c, float d) {
  *reinterpret_cast<float4*>(dst) = make_float4(tf32(a), tf32(b), tf32(c), tf32(d));
}

template <CodecId C, Mode M>
__global__ void __launch_bounds__(kThreads, 2) gemm_kernel(GemmArgs a) {
  extern __shared__ __align__(128) float sm[];
  float* xs = sm;               // kBM x kLd: x rows, TF32
  float* ws = sm + kBM * kLd;   // kBN x kLd: weight rows, TF32
  float* cs = sm;               // kBM x kLdc: the accumulators, after the last k-slice
  __shared__ int64_t src[kBM];  // the x row of each tile row
  __shared__ int64_t dst[kBM];  // the output row of each tile row
  const int tid = threadIdx.x;

  int rows = 0;
  const uint8_t* wa = nullptr;  // Plain, Down: the matrix; GateUp: gate
  const uint8_t* wb = nullptr;  // GateUp: up
  if constexpr (M == Mode::Plain) {
    const int64_t r0 = int64_t(blockIdx.x) * kBM;
    rows = int(a.m - r0 < kBM ? a.m - r0 : kBM);
    wa = a.w;
    for (int r = tid; r < kBM; r += kThreads) src[r] = dst[r] = r0 + r;
  } else {
    const int t = int(blockIdx.x);
    if (t >= *a.n_tiles) return;  // the grid covers the most tiles any routing can make
    const int e = a.tiles[3 * t], start = a.tiles[3 * t + 1];
    rows = a.tiles[3 * t + 2];
    const uint8_t* blob = a.table[e];
    wa = blob + a.off_a;
    wb = blob + a.off_b;
    for (int r = tid; r < kBM; r += kThreads) {
      const int64_t p = r < rows ? a.order[start + r] : 0;
      src[r] = M == Mode::GateUp ? p / a.k : p;
      dst[r] = p;
    }
  }
  constexpr int kOutCols = M == Mode::GateUp ? kBN / 2 : kBN;
  const int64_t n0 = int64_t(blockIdx.y) * kOutCols;
  const size_t rb = row_bytes_of<C>(a.cols);

  const int warp = tid / 32, wm = warp / 4, wn = warp % 4;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[4][2];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
  }
  __syncthreads();

  constexpr int G = Unit<C>::G, kUnitsPerRow = kBK / G;
  static_assert(kBK % G == 0 && G % 4 == 0, "a k-slice holds whole units of whole float4s");
  for (int64_t k0 = 0; k0 < a.cols; k0 += kBK) {
    // x: kBM x kBK, zeros past the tile's rows and past k.
    for (int i = tid; i < kBM * (kBK / 4); i += kThreads) {
      const int r = i / (kBK / 4), c = (i % (kBK / 4)) * 4;
      const int64_t kk = k0 + c;
      float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if (r < rows) {
        const float* xr = a.x + src[r] * a.cols + kk;
        if (a.x_vec && kk + 4 <= a.cols) {
          const float4 q = *reinterpret_cast<const float4*>(xr);
          v[0] = q.x;
          v[1] = q.y;
          v[2] = q.z;
          v[3] = q.w;
        } else {
#pragma unroll
          for (int j = 0; j < 4; ++j) v[j] = kk + j < a.cols ? xr[j] : 0.0f;
        }
      }
      store4(xs + r * kLd + c, v[0], v[1], v[2], v[3]);
    }
    // Weights: kBN rows of kBK, widened unit by unit; zeros past n_out and past k.
    for (int i = tid; i < kBN * kUnitsPerRow; i += kThreads) {
      const int nr = i / kUnitsPerRow, ui = i % kUnitsPerRow;
      const uint8_t* base = wa;
      int64_t n = n0 + nr;
      if constexpr (M == Mode::GateUp) {
        if (nr >= kOutCols) {
          base = wb;
          n = n0 + nr - kOutCols;
        }
      }
      const int64_t u = k0 / G + ui;
      const int64_t left = a.cols - u * G;
      const int valid = int(left < G ? left : G);
      float w[G];
      if (n < a.n_out && valid > 0) {
        load_unit<C>(base + size_t(n) * rb, u, valid, w);
#pragma unroll
        for (int j = 0; j < G; ++j) w[j] = j < valid ? w[j] : 0.0f;  // an affine block's padding
      } else {
#pragma unroll
        for (int j = 0; j < G; ++j) w[j] = 0.0f;
      }
#pragma unroll
      for (int j = 0; j < G; j += 4) store4(ws + nr * kLd + ui * G + j, w[j], w[j + 1], w[j + 2], w[j + 3]);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 8) {
      wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa[4];
      wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> fb[2];
#pragma unroll
      for (int i = 0; i < 4; ++i) wmma::load_matrix_sync(fa[i], xs + (wm * 64 + i * 16) * kLd + kk, kLd);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], ws + (wn * 32 + j * 16) * kLd + kk, kLd);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
      }
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      wmma::store_matrix_sync(cs + (wm * 64 + i * 16) * kLdc + wn * 32 + j * 16, acc[i][j], kLdc, wmma::mem_row_major);
    }
  }
  __syncthreads();
  for (int i = tid; i < kBM * kOutCols; i += kThreads) {
    const int r = i / kOutCols, c = i % kOutCols;
    if (r >= rows || n0 + c >= a.n_out) continue;
    float* out = a.y + dst[r] * a.n_out + n0 + c;
    if constexpr (M == Mode::GateUp) {
      const float g = cs[r * kLdc + c], u = cs[r * kLdc + kOutCols + c];
      *out = (g / (1.0f + expf(-g))) * u;  // kernels.cu's expert_gate_up_kernel, the same float operations
    } else {
      const float s = cs[r * kLdc + c];
      *out = a.accumulate ? *out + s : s;
    }
  }
}

// Scratch of the grouped GEMMs, in ints: per expert a count and a cursor; the tile count; the tiles (expert,
// first sorted pair, rows); the pairs sorted by expert.
struct Buckets {
  int* counts;
  int* cursor;
  int* n_tiles;
  int* tiles;
  int* order;
};

int64_t max_tiles(int64_t pairs, int num_experts) {
  return (pairs + kBM - 1) / kBM + num_experts;  // each expert's last tile may be partial
}

Buckets buckets_in(void* scratch, int64_t pairs, int num_experts) {
  int* p = static_cast<int*>(scratch);
  Buckets b;
  b.counts = p;
  b.cursor = b.counts + num_experts;
  b.n_tiles = b.cursor + num_experts;
  b.tiles = b.n_tiles + 1;
  b.order = b.tiles + 3 * max_tiles(pairs, num_experts);
  return b;
}

__global__ void count_kernel(const int* ids, int64_t pairs, const uint8_t* const* table, int* counts) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j < pairs && table[ids[j]] != nullptr) atomicAdd(&counts[ids[j]], 1);
}

// One thread: the exclusive scan of the counts into cursors, and each expert's row tiles (few hundred at most).
__global__ void plan_kernel(int num_experts, Buckets b) {
  int off = 0, t = 0;
  for (int e = 0; e < num_experts; ++e) {
    const int n = b.counts[e];
    b.cursor[e] = off;
    for (int r = 0; r < n; r += kBM) {
      b.tiles[3 * t] = e;
      b.tiles[3 * t + 1] = off + r;
      b.tiles[3 * t + 2] = n - r < kBM ? n - r : kBM;
      ++t;
    }
    off += n;
  }
  *b.n_tiles = t;
}

// Pairs into their expert's bucket; the order inside a bucket is whatever the atomics give, which changes no bits
// (an output element's sum does not depend on its row's place in the tile).
__global__ void scatter_kernel(const int* ids, int64_t pairs, const uint8_t* const* table, Buckets b) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j < pairs && table[ids[j]] != nullptr) b.order[atomicAdd(&b.cursor[ids[j]], 1)] = int(j);
}

Buckets bucket_pairs(const int* ids, int64_t pairs, const uint8_t* const* table, int num_experts, void* scratch,
                     cudaStream_t stream) {
  const Buckets b = buckets_in(scratch, pairs, num_experts);
  check(cudaMemsetAsync(b.counts, 0, size_t(num_experts) * sizeof(int), stream), "clearing the expert counts");
  const unsigned blocks = unsigned((pairs + 255) / 256);
  count_kernel<<<blocks, 256, 0, stream>>>(ids, pairs, table, b.counts);
  check(cudaGetLastError(), "expert bucketing (count)");
  plan_kernel<<<1, 1, 0, stream>>>(num_experts, b);
  check(cudaGetLastError(), "expert bucketing (plan)");
  scatter_kernel<<<blocks, 256, 0, stream>>>(ids, pairs, table, b);
  check(cudaGetLastError(), "expert bucketing (scatter)");
  return b;
}

template <CodecId C, Mode M>
void launch(dim3 grid, const GemmArgs& a, cudaStream_t stream, const char* what) {
  // Above 48 KB of dynamic shared memory a kernel must opt in, once.
  static const cudaError_t raised =
      cudaFuncSetAttribute(gemm_kernel<C, M>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes));
  check(raised, "raising the tensor-core GEMM's shared memory");
  gemm_kernel<C, M><<<grid, kThreads, kSmemBytes, stream>>>(a);
  check(cudaGetLastError(), what);
}

// The arguments every product shares: x (rows of cols floats) into y (rows of n_out floats).
GemmArgs product(const float* x, int64_t n_out, int64_t cols, float* y) {
  GemmArgs a;
  a.x = x;
  a.x_vec = reinterpret_cast<uintptr_t>(x) % 16 == 0 && cols % 4 == 0;
  a.n_out = n_out;
  a.cols = cols;
  a.y = y;
  return a;
}

// A grouped product's tiles: the buckets of the pairs and the experts' table.
void bucketed(GemmArgs& a, const Buckets& b, const uint8_t* const* table) {
  a.tiles = b.tiles;
  a.n_tiles = b.n_tiles;
  a.order = b.order;
  a.table = table;
}

unsigned tiles_for(int64_t n, int per) {
  return unsigned((n + per - 1) / per);
}

}  // namespace

void matmul_tc(const float* x, int64_t m, const DeviceMatrix& w, float* y, bool accumulate, cudaStream_t stream) {
  if (m == 0 || w.rows == 0) return;
  GemmArgs a = product(x, w.rows, w.cols, y);
  a.m = m;
  a.accumulate = accumulate;
  a.w = static_cast<const uint8_t*>(w.data);
  const dim3 grid(tiles_for(m, kBM), tiles_for(w.rows, kBN));
  dispatch_codec(w.codec, [&]<CodecId C>() { launch<C, Mode::Plain>(grid, a, stream, "matmul_tc"); });
}

size_t expert_gemm_scratch_bytes(int64_t m, int k, int num_experts) {
  const int64_t pairs = m * k;
  return size_t(2 * num_experts + 1 + 3 * max_tiles(pairs, num_experts) + pairs) * sizeof(int);
}

void expert_gate_up_tc(const float* x, int64_t m, int k, const int* ids, const uint8_t* const* table, int num_experts,
                       const ExpertLayout& l, float* act, void* scratch, cudaStream_t stream) {
  const int64_t pairs = m * k;
  if (pairs == 0 || l.intermediate == 0) return;
  GemmArgs a = product(x, l.intermediate, l.hidden, act);
  bucketed(a, bucket_pairs(ids, pairs, table, num_experts, scratch, stream), table);
  a.k = k;
  a.off_b = l.up_offset;
  const dim3 grid(unsigned(max_tiles(pairs, num_experts)), tiles_for(l.intermediate, kBN / 2));
  dispatch_codec(l.gate_up, [&]<CodecId C>() { launch<C, Mode::GateUp>(grid, a, stream, "expert_gate_up_tc"); });
}

void expert_down_tc(const float* act, int64_t pairs, const int* ids, const uint8_t* const* table, int num_experts,
                    const ExpertLayout& l, float* out, void* scratch, cudaStream_t stream) {
  if (pairs == 0 || l.hidden == 0) return;
  GemmArgs a = product(act, l.hidden, l.intermediate, out);
  bucketed(a, bucket_pairs(ids, pairs, table, num_experts, scratch, stream), table);
  a.off_a = l.down_offset;
  const dim3 grid(unsigned(max_tiles(pairs, num_experts)), tiles_for(l.hidden, kBN));
  dispatch_codec(l.down, [&]<CodecId C>() { launch<C, Mode::Down>(grid, a, stream, "expert_down_tc"); });
}

}  // namespace seedling::cuda
