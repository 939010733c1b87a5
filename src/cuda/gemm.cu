// cuda/gemm.cu - the tensor-core products declared in cuda/gemm.h.
//
// Two kernels serve the three products (Plain, GateUp, Down); gemm.h's GemmKernel picks one (and may force a tile).
// mma_kernel (the default): a block owns a tile of rows (of x, or of one expert's bucket of pairs) by output columns
// (gate_up: half gate, the same half up), TileL 128 x 128 with 8 warps or TileS 64 x 64 with 4, whichever leaves the
// busiest SM the least to do. Each 64-wide slice of k goes through two stages of shared memory: x by cp.async, the
// weights fetched raw into registers a slice ahead (seed codecs: the fields of the blocks) and widened (decoded) as
// 8 pieces of 8 values a row (mma_layout.h), both rounded to TF32; warps multiply with mma.sync m16n8k8 from
// fragments whose indices mma_layout.h computes (tested on the CPU against the PTX ISA's layouts).
// mma16_kernel: the affine codecs' twin of mma_kernel, with f16 operands (x rows scaled into f16's range by a power
// of 2), mma.sync m16n8k16 and ldmatrix (see its comment); it also reads the 32-element ggml types whose values are
// one f16 operation of float16 fields (f16_weights). The ggml codecs are fetched and widened a piece of 8 consecutive
// weights at a time (ggml_pieces.h): the K types and iq4_xs on the TF32 kernel.
// In all, the accumulators go through shared memory to one epilogue (bounds, accumulate, SiLU product), and an
// output element is 0 plus its MMAs in k order, one per 8 of k (16 in the f16 kernel; matmul_tc_split with scratch:
// per part of k, the parts then added in order): its sum never depends on m, on the tile shape or on the other rows
// of its tile.
#include <cuda_fp16.h>
#include <mma.h>  // nvcuda::wmma::__float_to_tf32

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <string>

#include "cuda/codec_device.cuh"
#include "cuda/gemm.h"
#include "cuda/mma_layout.h"
#include "cuda/norm_rope_topk.cuh"

// No fmt here (see products.cu): errors go through check() (runtime.cpp).
namespace seedling::cuda {

namespace {

constexpr int kBK = 64;  // k of a slice, every tile

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
  // Plain, parts > 0 (matmul_tc_stacked): up to 3 matrices stacked by rows, n_out their rows in all; output n below
  // part_end[0] is row n of w_part[0], into y_part[0] (rows of part_end[0] floats), then up to part_end[1] rows of
  // w_part[1] into y_part[1] (rows of part_end[1] - part_end[0] floats), ...
  int parts = 0;
  const uint8_t* w_part[3] = {};
  float* y_part[3] = {};
  int64_t part_end[3] = {};
  // Plain, k_split > 0 (matmul_tc_split's split over k): block z sums k from z k_split up to (z + 1) k_split into
  // y + z m n_out (a partial product), added up by split_sum_kernel.
  int64_t k_split = 0;
  // Grouped: the bucketing's tiles (expert, first sorted pair, rows), their count and the sorted pairs.
  const int* tiles = nullptr;
  const int* n_tiles = nullptr;
  const int* order = nullptr;
  int k = 1;  // GateUp: pair j reads row j / k of x
  const uint8_t* const* table = nullptr;
  size_t off_a = 0, off_b = 0;  // GateUp: gate and up in the blob; Down: down in off_a
  ExpertMath math;              // GateUp: biases and activation; Down: its bias (the tile's expert's slices)
  // The f16 kernel: x row r's scale, a power of 2 that puts its largest |x| in [2^14, 2^15), and the row times it
  // in f16, ld16 halves a row (to_f16).
  const float* xscale = nullptr;
  const __half* x16 = nullptr;
  int64_t ld16 = 0;
};

__device__ __forceinline__ float tf32(float v) {
  return nvcuda::wmma::__float_to_tf32(v);
}

// Four floats rounded to TF32 (unless !Round: weights that matmul_tc_split splits into two TF32 parts itself).
template <bool Round = true>
__device__ __forceinline__ void store4(float* dst, float a, float b, float c, float d) {
  if constexpr (Round) {
    *reinterpret_cast<float4*>(dst) = make_float4(tf32(a), tf32(b), tf32(c), tf32(d));
  } else {
    *reinterpret_cast<float4*>(dst) = make_float4(a, b, c, d);
  }
}

// A block's rows: fills src (the x row of each tile row) and dst (the output row), sets the weights (wa: the matrix,
// or gate; wb: up), and gives the tile's row count, or -1 for a grouped block past the routing's tiles.
template <Mode M, int BM, int kThreadsOf>
__device__ __forceinline__ int tile_rows(const GemmArgs& a, int64_t* src, int64_t* dst, const uint8_t*& wa,
                                         const uint8_t*& wb) {
  const int tid = threadIdx.x;
  if constexpr (M == Mode::Plain) {
    const int64_t r0 = int64_t(blockIdx.x) * BM;
    wa = a.w;
    wb = nullptr;
    for (int r = tid; r < BM; r += kThreadsOf) src[r] = dst[r] = r0 + r;
    return int(a.m - r0 < BM ? a.m - r0 : BM);
  } else {
    const int t = int(blockIdx.x);
    if (t >= *a.n_tiles) return -1;  // the grid covers the most tiles any routing can make
    const int e = a.tiles[3 * t], start = a.tiles[3 * t + 1], rows = a.tiles[3 * t + 2];
    const uint8_t* blob = a.table[e];
    wa = blob + a.off_a;
    wb = blob + a.off_b;
    for (int r = tid; r < BM; r += kThreadsOf) {
      const int64_t p = r < rows ? a.order[start + r] : 0;
      src[r] = M == Mode::GateUp ? p / a.k : p;
      dst[r] = p;
    }
    return rows;
  }
}

// Output n of a stacked product (GemmArgs::parts): its matrix, its row there, and that matrix's rows.
struct Part {
  int mi;
  int64_t n, rows;
};
__device__ __forceinline__ Part part_of(const GemmArgs& a, int64_t n) {
  int mi = 0;
  while (mi < a.parts - 1 && n >= a.part_end[mi]) ++mi;
  const int64_t start = mi > 0 ? a.part_end[mi - 1] : 0;
  return {mi, n - start, a.part_end[mi] - start};
}

// Tile row nr's weight row (GateUp: BN / 2 gate rows, then the same up rows; row_at: a byte pointer, or a SeedRow),
// or a null one (null pointer, SeedRow with a null blob) past n_out.
template <CodecId C, Mode M, int BN>
__device__ __forceinline__ WRow<C> weight_row(const GemmArgs& a, const uint8_t* wa, const uint8_t* wb, int64_t n0,
                                              int nr) {
  const uint8_t* base = wa;
  int64_t n = n0 + nr;
  if constexpr (M == Mode::GateUp) {
    if (nr >= BN / 2) {
      base = wb;
      n = n0 + nr - BN / 2;
    }
  }
  if (n >= a.n_out) return WRow<C>{};
  if constexpr (M == Mode::Plain) {
    if (a.parts > 0) {
      const Part p = part_of(a, n);
      return row_at<C>(a.w_part[p.mi], p.rows, a.cols, p.n);
    }
  }
  return row_at<C>(base, a.n_out, a.cols, n);
}

// The epilogue from the accumulator tile cs (BM x ldc, in shared memory): bounds, accumulate, the SiLU product.
template <Mode M, int BM, int BN, int kThreadsOf>
__device__ __forceinline__ void epilogue(const GemmArgs& a, const float* cs, int ldc, const int64_t* dst, int rows,
                                         int64_t n0) {
  constexpr int kOutCols = M == Mode::GateUp ? BN / 2 : BN;
  for (int i = threadIdx.x; i < BM * kOutCols; i += kThreadsOf) {
    const int r = i / kOutCols, c = i % kOutCols;
    if (r >= rows || n0 + c >= a.n_out) continue;
    float* out = a.y + dst[r] * a.n_out + n0 + c;
    if constexpr (M == Mode::Plain) {
      if (a.k_split > 0) out += int64_t(blockIdx.z) * a.m * a.n_out;
      if (a.parts > 0) {
        const Part p = part_of(a, n0 + c);
        out = a.y_part[p.mi] + dst[r] * p.rows + p.n;
      }
    }
    if constexpr (M == Mode::GateUp) {
      const float g = cs[r * ldc + c], u = cs[r * ldc + kOutCols + c];
      // experts.cu's expert_gate_up_kernel, the same float operations; the tile's expert for its biases
      *out = expert_act(g, u, a.math, a.tiles[3 * blockIdx.x], a.n_out, n0 + c);
    } else {
      float s = cs[r * ldc + c];
      if constexpr (M == Mode::Down) {
        if (a.math.down_bias != nullptr) s = s + a.math.down_bias[int64_t(a.tiles[3 * blockIdx.x]) * a.n_out + n0 + c];
      }
      *out = a.accumulate ? *out + s : s;
    }
  }
}

// ---- The mma.sync kernel (GemmKernel::Mma) ----

// Two tile shapes, one arithmetic: every output element is 0 plus one m16n8k8 MMA per 8 of k, in k order, whatever
// the shape, so the host may pick either for any call without changing a bit.
using TileL = mma::Tile<128, 128, 2, 4>;  // 256 threads, warps of 64 x 32; 136 KB of shared memory: 1 block an SM
using TileS = mma::Tile<64, 64, 2, 2>;    // 128 threads, warps of 32 x 32; 68 KB: 3 blocks an SM
static_assert(TileL::kBK == kBK && TileS::kBK == kBK, "both kernels slice k alike");

template <class T>
constexpr int min_blocks() {
  return T::BM == 128 ? 1 : 3;
}
template <class T>
constexpr size_t smem_bytes() {
  static_assert(T::BM * T::kLdc <= 2 * T::kStageFloats, "the accumulator tile fits in the two stages");
  return size_t(2 * T::kStageFloats) * sizeof(float);
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

// d += a b on TF32 operands (their bits: values already rounded to TF32, so the hardware reads them exactly).
__device__ __forceinline__ void mma_tf32(float* d, const uint32_t* a, const uint32_t* b) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// x's k-slice at k0 into xs (BM x kLd): cp.async, 16 bytes a copy, zeros past the tile's rows and past k; rows that
// are not float4-aligned (x_vec false) are stored synchronously. Values stay float32 until round_x. Each thread
// copies, and later rounds, the same 8 float4s.
template <class T>
__device__ __forceinline__ void stage_x(const GemmArgs& a, const int64_t* src, int rows, int64_t k0, float* xs) {
  constexpr int kCopies = T::BM * (kBK / 4) / T::kThreads;
  static_assert(T::BM * (kBK / 4) % T::kThreads == 0, "threads share an x slice evenly");
#pragma unroll
  for (int j = 0; j < kCopies; ++j) {
    const int i = int(threadIdx.x) + j * T::kThreads, r = i / (kBK / 4), c = (i % (kBK / 4)) * 4;
    const int64_t kk = k0 + c;
    float* d = xs + r * T::kLd + c;
    if (a.x_vec) {  // cols % 4 == 0: a float4 is all inside k or all past it
      const bool in = r < rows && kk < a.cols;
      cp_async16(d, in ? a.x + src[r] * a.cols + kk : a.x, in ? 16 : 0);
    } else {
      float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if (r < rows) {
        const float* xr = a.x + src[r] * a.cols;
#pragma unroll
        for (int e = 0; e < 4; ++e) v[e] = kk + e < a.cols ? xr[kk + e] : 0.0f;
      }
      *reinterpret_cast<float4*>(d) = make_float4(v[0], v[1], v[2], v[3]);
    }
  }
}

// Rounds this thread's float4s of a landed x slice (stage_x's) to TF32, in place.
template <class T>
__device__ __forceinline__ void round_x(float* xs) {
  constexpr int kCopies = T::BM * (kBK / 4) / T::kThreads;
#pragma unroll
  for (int j = 0; j < kCopies; ++j) {
    const int i = int(threadIdx.x) + j * T::kThreads, r = i / (kBK / 4), c = (i % (kBK / 4)) * 4;
    float* p = xs + r * T::kLd + c;
    const float4 v = *reinterpret_cast<const float4*>(p);
    store4(p, v.x, v.y, v.z, v.w);
  }
}

// Whether the f16 kernel reads codec c: the affine codecs, and the ggml types whose value is d q (+ m) with d and m
// float16 fields and q a small integer (q8_0, q4_0, q5_0, q5_1, iq4_nl): each weight is then one f16 multiply (q5_1:
// fma) of exact f16 operands, rounded once, as the affine codecs' q d + m. The K types' and iq4_xs's d is a float16
// times a sub-block scale, a float that f16 need not hold: they take the TF32 kernel (each value, exact in float,
// rounded to TF32 once).
__host__ __device__ constexpr bool f16_weights(CodecId c) {
  return is_affine(c) || c == Id::Q8_0 || c == Id::Q4_0 || c == Id::Q5_0 || c == Id::Q5_1 || c == Id::IQ4_NL;
}

template <CodecId C>
__host__ __device__ constexpr mma::Piece piece(int p) {
  if constexpr (ggml_dev::has_pair_pieces(C)) {  // ggml_pieces.h's pair pieces: placed as q4_g32's code words
    return mma::piece_of(32, true, true, p);
  } else if constexpr (is_seed(C) || is_ggml(C) || C == Id::FP8_G32) {
    return mma::piece_of(8, false, false, p);  // 8 consecutive weights, as a float codec's
  } else {
    return mma::piece_of(Unit<C>::G, is_affine(C), C == Id::Q4_G32 || C == Id::Q4_G64, p);
  }
}

// Piece p (mma_layout.h) of a weight row's k-slice at k0, raw: affine, the unit's d/m word and one or two code
// words (zeros for a unit past k); FP8, its group's scale and its two code words (8 consecutive weights; zeros past
// k); float codecs, 8 values' bits (zeros past k); seed codecs, the fields of the one or two blocks holding the piece
// (seed_device.cuh's seed_piece_fetch); ggml codecs, ggml_pieces.h's fetch of the 8 weights k0 + 8p .. (zeros past
// k). A null row (past n_out) gives zeros.
template <CodecId C>
__device__ __forceinline__ void fetch_piece(WRow<C> row, int64_t k0, int p, int64_t cols, uint32_t* raw) {
#pragma unroll
  for (int j = 0; j < 8; ++j) raw[j] = 0;
  if constexpr (is_seed(C)) {
    if (row.blob == nullptr) return;
    seeddev::seed_piece_fetch(seed_geom(C), row.blob, row.n_blocks, row.first, cols, k0 + 8 * p, raw);
  } else if constexpr (is_affine(C)) {
    if (row == nullptr) return;
    constexpr int G = Unit<C>::G;
    const mma::Piece pc = piece<C>(p);
    const int64_t u = k0 / G + pc.unit;
    if (u * G >= cols) return;
    const uint32_t* w = reinterpret_cast<const uint32_t*>(row + u * Unit<C>::bytes);
    raw[0] = w[0];
    raw[1] = w[1 + pc.word];
    if constexpr (C == Id::Q8_G32 || C == Id::Q8_G64) raw[2] = w[2 + pc.word];
  } else if constexpr (C == Id::FP8_G32) {  // the group's scale and the piece's two code words
    if (row == nullptr) return;
    const int64_t k = k0 + 8 * p;
    if (k >= cols) return;
    const uint32_t* w = reinterpret_cast<const uint32_t*>(row + size_t(k / 32) * Unit<C>::bytes);
    const int at = int(k % 32) / 4;
    raw[0] = w[0];
    raw[1] = w[1 + at];
    raw[2] = w[2 + at];
  } else if constexpr (ggml_dev::has_pair_pieces(C)) {
    if (row == nullptr) return;
    const mma::Piece pc = piece<C>(p);
    const int64_t u = k0 / Unit<C>::G + pc.unit;
    if (u * Unit<C>::G >= cols) return;
    ggml_dev::pair_fetch<C>(row + u * Unit<C>::bytes, pc.word, raw);
  } else if constexpr (is_ggml(C)) {
    if (row == nullptr) return;
    const int64_t k = k0 + 8 * p;
    if (k >= cols) return;
    ggml_dev::fetch<C>(row + (k / Unit<C>::G) * Unit<C>::bytes, int(k % Unit<C>::G), raw);
  } else {
    if (row == nullptr) return;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int64_t k = k0 + 8 * p + j;
      if (k >= cols) continue;
      if constexpr (C == Id::F32) {
        raw[j] = reinterpret_cast<const uint32_t*>(row)[k];
      } else {
        raw[j] = reinterpret_cast<const uint16_t*>(row)[k];
      }
    }
  }
}

// A fetched ggml piece p of the slice at k0, decoded (a pair piece, or 8 consecutive elements).
template <CodecId C>
__device__ __forceinline__ ggml_dev::Piece ggml_piece(const uint32_t* raw, int64_t k0, int p) {
  if constexpr (ggml_dev::has_pair_pieces(C)) {
    return ggml_dev::pair_decode<C>(raw, piece<C>(p).word);
  } else {
    return ggml_dev::decode<C>(raw, int((k0 + 8 * p) % Unit<C>::G));
  }
}

// Widens a fetched piece (as load_unit would: codec_device.cuh's widen_word, widen_fp8_word and bit widenings; seed
// codecs, decoded by seed_piece_decode, decode_seed_matrix's weights; ggml codecs, ggml_pieces.h's values,
// codec_value's), zeros the values past k (an affine or FP8 block's padding, a seed row's partial last block), rounds
// to TF32 (unless !Round: kept float32) and stores the two runs of 4 in weight row ws_row.
template <CodecId C, bool Round = true>
__device__ __forceinline__ void store_piece(const uint32_t* raw, int64_t k0, int p, int64_t cols, float* ws_row) {
  const mma::Piece pc = piece<C>(p);
  float v[8];
  if constexpr (is_seed(C)) {
    constexpr seeddev::Geom g = seed_geom(C);
    seeddev::seed_piece_decode<g.C, g.P>(g, raw, k0 + 8 * p, cols, kDeviceStreamTables.lo, kDeviceStreamTables.hi, v);
  } else if constexpr (is_affine(C)) {
    float d, m;
    unit_scale(raw[0], d, m);
    if constexpr (C == Id::Q8_G32 || C == Id::Q8_G64) {
      widen_word<C>(raw[1], d, m, v, nullptr);
      widen_word<C>(raw[2], d, m, v + 4, nullptr);
    } else {
      widen_word<C>(raw[1], d, m, v, v + 4);
    }
  } else if constexpr (C == Id::FP8_G32) {
    const float d = __uint_as_float(raw[0]);
    widen_fp8_word(raw[1], d, v);
    widen_fp8_word(raw[2], d, v + 4);
  } else if constexpr (is_ggml(C)) {
    ggml_dev::values<C>(ggml_piece<C>(raw, k0, p), v);
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if constexpr (C == Id::F32) {
        v[j] = __uint_as_float(raw[j]);
      } else if constexpr (C == Id::BF16) {
        v[j] = bf16_bits(uint16_t(raw[j]));
      } else {
        v[j] = f16_bits(uint16_t(raw[j]));
      }
    }
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    v[j] = k0 + pc.first + j < cols ? v[j] : 0.0f;
    v[4 + j] = k0 + pc.second + j < cols ? v[4 + j] : 0.0f;
  }
  store4<Round>(ws_row + pc.first, v[0], v[1], v[2], v[3]);
  store4<Round>(ws_row + pc.second, v[4], v[5], v[6], v[7]);
}

// This thread's weight pieces of a slice: item tid + j * kThreads is piece (item % 8) of tile row item / 8.
template <class T>
constexpr int kPiecesOf = T::BN * 8 / T::kThreads;

template <CodecId C, class T>
__device__ __forceinline__ void fetch_pieces(const WRow<C> (&wrow)[kPiecesOf<T>], int64_t k0, int64_t cols,
                                             uint32_t (&raw)[kPiecesOf<T>][8]) {
#pragma unroll
  for (int j = 0; j < kPiecesOf<T>; ++j)
    fetch_piece<C>(wrow[j], k0, (int(threadIdx.x) + j * T::kThreads) % 8, cols, raw[j]);
}

template <CodecId C, class T, bool Round = true>
__device__ __forceinline__ void store_pieces(const uint32_t (&raw)[kPiecesOf<T>][8], int64_t k0, int64_t cols,
                                             float* ws) {
#pragma unroll
  for (int j = 0; j < kPiecesOf<T>; ++j) {
    const int item = int(threadIdx.x) + j * T::kThreads;
    store_piece<C, Round>(raw[j], k0, item % 8, cols, ws + (item / 8) * T::kLd);
  }
}

// This thread's weight rows, one per piece it widens (item tid + j * kThreads: tile row item / 8).
template <CodecId C, Mode M, class T>
__device__ __forceinline__ void thread_rows(const GemmArgs& a, const uint8_t* wa, const uint8_t* wb, int64_t n0,
                                            WRow<C> (&wrow)[kPiecesOf<T>]) {
  static_assert(T::BN * 8 % T::kThreads == 0, "threads share a weight slice evenly");
#pragma unroll
  for (int j = 0; j < kPiecesOf<T>; ++j) {
    wrow[j] = weight_row<C, M, T::BN>(a, wa, wb, n0, (int(threadIdx.x) + j * T::kThreads) / 8);
  }
}

template <class T>
__device__ __forceinline__ void zero_acc(float (&acc)[T::MT][T::NT][4]) {
#pragma unroll
  for (int i = 0; i < T::MT; ++i) {
#pragma unroll
    for (int j = 0; j < T::NT; ++j) {
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;
    }
  }
}

// The warp's accumulators into the accumulator tile cs, each divided by div(tile row).
template <class T, class Div>
__device__ __forceinline__ void store_acc(const float (&acc)[T::MT][T::NT][4], float* cs, int warp, int lane, Div div) {
#pragma unroll
  for (int i = 0; i < T::MT; ++i) {
#pragma unroll
    for (int j = 0; j < T::NT; ++j) {
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int r = (warp / T::WN) * T::kWarpRows + i * 16 + mma::frag_c(lane, q).row;
        cs[T::c_index(warp, lane, i, j, q)] = acc[i][j][q] / div(r);
      }
    }
  }
}

// The mma.sync kernel. Two stages of shared memory: while the warps multiply slice s, x's next slice lands by
// cp.async in the other stage and each thread's weight pieces of it are already in registers; after the MMAs they
// are widened into that stage, x is rounded to TF32, and one barrier ends the slice.
// Split (matmul_tc_split) 1, weights that widen exactly to TF32: x stays float32 in shared memory and each MMA of x
// is two, x's TF32 rounding lo = tf32(x - tf32(x)) then hi = tf32(x), so x is carried to 2^-22 instead of 2^-11.
// Split 2, any other weights: they stay float32 in shared memory too and split the same way, and each MMA is three,
// x_lo w_hi, x_hi w_lo, x_hi w_hi (x_lo w_lo, about 2^-22 of the product, left out).
template <CodecId C, Mode M, class T, int Split = 0>
__global__ void __launch_bounds__(T::kThreads, min_blocks<T>()) mma_kernel(GemmArgs a) {
  extern __shared__ __align__(128) float sm[];
  __shared__ int64_t src[T::BM];
  __shared__ int64_t dst[T::BM];
  const uint8_t* wa = nullptr;
  const uint8_t* wb = nullptr;
  const int rows = tile_rows<M, T::BM, T::kThreads>(a, src, dst, wa, wb);
  if (rows < 0) return;
  constexpr int kOutCols = M == Mode::GateUp ? T::BN / 2 : T::BN;
  const int64_t n0 = int64_t(blockIdx.y) * kOutCols;
  const int tid = int(threadIdx.x), warp = tid / 32, lane = tid % 32;

  WRow<C> wrow[kPiecesOf<T>];
  thread_rows<C, M, T>(a, wa, wb, n0, wrow);
  uint32_t raw[kPiecesOf<T>][8];
  float acc[T::MT][T::NT][4];
  zero_acc<T>(acc);
  __syncthreads();  // src, dst

  // k from kb up to ke: all of it, or block z's part of a split over k.
  const int64_t kb = a.k_split > 0 ? int64_t(blockIdx.z) * a.k_split : 0;
  const int64_t ke = a.k_split > 0 && kb + a.k_split < a.cols ? kb + a.k_split : a.cols;
  // Slice kb into stage 0.
  stage_x<T>(a, src, rows, kb, sm);
  cp_async_commit();
  fetch_pieces<C, T>(wrow, kb, a.cols, raw);
  constexpr bool kRoundW = Split < 2;  // Split 2 keeps the weights float32 in shared memory
  store_pieces<C, T, kRoundW>(raw, kb, a.cols, sm + T::BM * T::kLd);
  cp_async_wait_all();
  if constexpr (Split == 0) round_x<T>(sm);
  __syncthreads();

  int s = 0;
  for (int64_t k0 = kb; k0 < ke; k0 += kBK, s ^= 1) {
    const bool more = k0 + kBK < ke;
    float* next = sm + (s ^ 1) * T::kStageFloats;
    if (more) {
      stage_x<T>(a, src, rows, k0 + kBK, next);
      cp_async_commit();
      fetch_pieces<C, T>(wrow, k0 + kBK, a.cols, raw);
    }
    const float* xs = sm + s * T::kStageFloats;
    const float* ws = xs + T::BM * T::kLd;
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 8) {
      uint32_t fb[T::NT][2];
      [[maybe_unused]] uint32_t fb_lo[T::NT][2];  // Split 2: the weights' low parts
#pragma unroll
      for (int j = 0; j < T::NT; ++j) {
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          const float v = ws[T::b_index(warp, lane, j, kk, q)];
          if constexpr (Split == 2) {
            const float h = tf32(v);
            fb[j][q] = __float_as_uint(h);
            fb_lo[j][q] = __float_as_uint(tf32(v - h));
          } else {
            fb[j][q] = __float_as_uint(v);
          }
        }
      }
      if constexpr (Split > 0) {
#pragma unroll
        for (int i = 0; i < T::MT; ++i) {
          uint32_t hi[4], lo[4];
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const float v = xs[T::a_index(warp, lane, i, kk, q)], h = tf32(v);
            hi[q] = __float_as_uint(h);
            lo[q] = __float_as_uint(tf32(v - h));
          }
#pragma unroll
          for (int j = 0; j < T::NT; ++j) {
            mma_tf32(acc[i][j], lo, fb[j]);
            if constexpr (Split == 2) mma_tf32(acc[i][j], hi, fb_lo[j]);
            mma_tf32(acc[i][j], hi, fb[j]);
          }
        }
      } else {
        uint32_t fa[T::MT][4];
#pragma unroll
        for (int i = 0; i < T::MT; ++i) {
#pragma unroll
          for (int q = 0; q < 4; ++q) fa[i][q] = __float_as_uint(xs[T::a_index(warp, lane, i, kk, q)]);
        }
#pragma unroll
        for (int i = 0; i < T::MT; ++i) {
#pragma unroll
          for (int j = 0; j < T::NT; ++j) mma_tf32(acc[i][j], fa[i], fb[j]);
        }
      }
    }
    if (more) {
      store_pieces<C, T, kRoundW>(raw, k0 + kBK, a.cols, next + T::BM * T::kLd);
      cp_async_wait_all();
      if constexpr (Split == 0) round_x<T>(next);
    }
    __syncthreads();
  }

  float* cs = sm;  // the stages are free after the last barrier
  store_acc<T>(acc, cs, warp, lane, [](int) { return 1.0f; });
  __syncthreads();
  epilogue<M, T::BM, T::BN, T::kThreads>(a, cs, T::kLdc, dst, rows, n0);
}

// y[i] (or y[i] +) the splits' partial sums of element i, added in split order: partial[0][i] + partial[1][i] + ...
__global__ void split_sum_kernel(const float* partial, int splits, int64_t count, float* y, bool accumulate) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  float v = partial[i];
  for (int z = 1; z < splits; ++z) v += partial[z * count + i];
  y[i] = accumulate ? y[i] + v : v;
}

// The f16 kernel, for the affine codecs (q8_g32, q8_g64, q4_g32, q4_g64): the mma kernel's tiles, stages and k order,
// with f16 operands, mma.sync m16n8k16 (twice the k of an m16n8k8 TF32 MMA, at the same rate) fed by ldmatrix.x4
// (mma_layout.h's Tile16: two 16 x 16 or 16 x 8 operands a load instead of 4 and 2 scalar loads). Both operands keep
// TF32's 10 stored mantissa bits, and f16's narrower range is handled, so the error bound is the TF32 kernel's plus
// terms for f16's subnormals (gemm_test.cpp):
// - Weights: an affine unit's d and m are f16 in the pack, and a code q is exact in f16, so each weight is one
//   f16 fma, q d + m rounded once (the CPU's float value is q d + m rounded to float; the two differ by at most
//   2^-11 + 2^-24 of it, or 2^-25 below f16's normal range). Codes are widened two at a time: a code under the
//   exponent of 1024 (0x6400 | q is 1024 + q), less 1024, then the fma.
// - x: row r is multiplied by xscale[r], a power of 2 that puts its largest |x| in [2^14, 2^15) (so no x overflows
//   f16, and only elements under 2^-28 of the row's largest fall below f16's normal range), and rounded to f16, once
//   per product before the kernel (to_f16); the sums are multiplied by 1 / xscale[r] in the epilogue: both scalings
//   exact, a row's bits its own.
using Tile16L = mma::Tile16<128, 128, 2, 4>;  // 256 threads; 72 KB of shared memory (min_blocks16)
using Tile16S = mma::Tile16<64, 64, 2, 2>;    // 128 threads; 36 KB
static_assert(Tile16L::BM == TileL::BM && Tile16L::BN == TileL::BN && Tile16S::BM == TileS::BM &&
                  Tile16S::BN == TileS::BN,
              "the f16 tiles have the TF32 tiles' shapes, so one tile pick serves both");

template <class T>
constexpr size_t smem16_bytes() {
  constexpr size_t stages = size_t(2 * (T::BM + T::BN) * T::kLdh) * 2;
  static_assert(size_t(T::BM * T::kLdc) * 4 <= stages, "the accumulator tile fits in the stages");
  return stages;
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const __half* p) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s)
               : "memory");
}

// d += a b on f16 operands, float32 accumulators.
__device__ __forceinline__ void mma_f16(float* d, const uint32_t* a, const uint32_t* b) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Two codes (each in the low 8 bits of a 16-bit half of `codes`, nothing above them) widened to q d + m in f16.
__device__ __forceinline__ uint32_t widen2(uint32_t codes, __half2 d, __half2 m) {
  const uint32_t biased = codes | 0x64006400u;  // 1024 + q in each half
  const __half2 q = __hsub2(*reinterpret_cast<const __half2*>(&biased), __float2half2_rn(1024.0f));
  const __half2 w = __hfma2(q, d, m);
  return *reinterpret_cast<const uint32_t*>(&w);
}

// The f16 kernel's weights of a fetched ggml piece (f16_weights: d and m float16 fields, codes exact in f16): d q, or
// for q5_1 d q + m, each one f16 operation rounded once; as four pairs of halves in element order.
template <CodecId C>
__device__ __forceinline__ void ggml_piece16(const uint32_t* raw, int64_t k0, int p, uint32_t (&v)[4]) {
  const ggml_dev::Piece pc = ggml_piece<C>(raw, k0, p);
  const __half2 d = __float2half2_rn(pc.d), m = __float2half2_rn(pc.m);  // exact: both were float16
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __half2 q = __floats2half2_rn(pc.q[2 * i], pc.q[2 * i + 1]);  // exact: |q| <= 128
    const __half2 w = ggml_dev::has_offset(C) ? __hfma2(q, d, m) : __hmul2(q, d);
    v[i] = *reinterpret_cast<const uint32_t*>(&w);
  }
}

// store_piece's twin for the f16 kernel (f16_weights: the affine codecs widened by widen2, the ggml ones by
// ggml_piece16), zeros past k, stored as two runs of 4 halves in weight row ws_row.
template <CodecId C>
__device__ __forceinline__ void store_piece16(const uint32_t* raw, int64_t k0, int p, int64_t cols, __half* ws_row) {
  static_assert(f16_weights(C), "the f16 kernel reads the affine codecs and f16_weights' ggml ones");
  const mma::Piece pc = piece<C>(p);
  uint32_t v[4];  // values 0-1, 2-3 (at first), 4-5, 6-7 (at second)
  if constexpr (is_ggml(C)) {
    ggml_piece16<C>(raw, k0, p, v);
  } else {
    const uint32_t dmw = raw[0];
    const uint32_t dw = __byte_perm(dmw, 0, 0x1010), mw = __byte_perm(dmw, 0, 0x3232);
    const __half2 d = *reinterpret_cast<const __half2*>(&dw), m = *reinterpret_cast<const __half2*>(&mw);
    if constexpr (C == Id::Q8_G32 || C == Id::Q8_G64) {
      v[0] = widen2(__byte_perm(raw[1], 0, 0x4140), d, m);
      v[1] = widen2(__byte_perm(raw[1], 0, 0x4342), d, m);
      v[2] = widen2(__byte_perm(raw[2], 0, 0x4140), d, m);
      v[3] = widen2(__byte_perm(raw[2], 0, 0x4342), d, m);
    } else {  // bytes 0..3 of the word: values 0..3 in their low nibbles, 4..7 in their high ones
      const uint32_t b01 = __byte_perm(raw[1], 0, 0x4140), b23 = __byte_perm(raw[1], 0, 0x4342);
      v[0] = widen2(b01 & 0x000f000fu, d, m);
      v[1] = widen2(b23 & 0x000f000fu, d, m);
      v[2] = widen2((b01 >> 4) & 0x000f000fu, d, m);
      v[3] = widen2((b23 >> 4) & 0x000f000fu, d, m);
    }
  }
  if (k0 + kBK > cols) {  // a partial slice: positions past k hold padding codes
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int pos = j < 4 ? pc.first + j : pc.second + j - 4;
      if (k0 + pos >= cols) v[j / 2] &= (j % 2 == 0 ? 0xffff0000u : 0x0000ffffu);
    }
  }
  *reinterpret_cast<uint2*>(ws_row + pc.first) = make_uint2(v[0], v[1]);
  *reinterpret_cast<uint2*>(ws_row + pc.second) = make_uint2(v[2], v[3]);
}

template <CodecId C, class T>
__device__ __forceinline__ void store_pieces16(const uint32_t (&raw)[kPiecesOf<T>][8], int64_t k0, int64_t cols,
                                               __half* ws) {
#pragma unroll
  for (int j = 0; j < kPiecesOf<T>; ++j) {
    const int item = int(threadIdx.x) + j * T::kThreads;
    store_piece16<C>(raw[j], k0, item % 8, cols, ws + (item / 8) * T::kLdh);
  }
}

// The f16 x's k-slice at k0 into xh (BM x kLdh halves): cp.async, 8 halves a copy, zeros past the tile's rows and
// past k (a copy that starts inside k and runs past it reads the zeros to_f16 wrote from cols to ld16, a multiple of
// 8, so no copy leaves its row).
template <class T>
__device__ __forceinline__ void stage_x16(const GemmArgs& a, const int64_t* src, int rows, int64_t k0, __half* xh) {
  constexpr int kCopies = T::BM * (kBK / 8) / T::kThreads;
  static_assert(T::BM * (kBK / 8) % T::kThreads == 0, "threads share an x slice evenly");
#pragma unroll
  for (int j = 0; j < kCopies; ++j) {
    const int i = int(threadIdx.x) + j * T::kThreads, r = i / (kBK / 8), c = (i % (kBK / 8)) * 8;
    const int64_t kk = k0 + c;
    const bool in = r < rows && kk < a.cols;
    cp_async16(xh + r * T::kLdh + c, in ? a.x16 + src[r] * a.ld16 + kk : a.x16, in ? 16 : 0);
  }
}

// Blocks an SM. q4_g64 (the codec of every figure in docs/results): 64 x 64 tiles at 4 (no spill) and 128 x 128 at 2
// (128 registers, 32-36 bytes spilled): prefill 1.08x at 2,048 and 1.05x at 512 on the H200 over 3 and 1
// (docs/results/2026-11-30-cuda-prefill-session8-occupancy.md). The other affine codecs spill 20-44 bytes at 4 and more
// at 2: 3 and 1, as the TF32 kernel.
template <class T, CodecId C>
constexpr int min_blocks16() {
  if constexpr (C == Id::Q4_G64) return T::BM == 128 ? 2 : 4;
  return T::BM == 128 ? 1 : 3;
}

// The f16 kernel: mma_kernel's pipeline (x's next slice by cp.async into the other stage and the weights' into
// registers while the warps multiply, widened into that stage after the MMAs; one barrier a slice).
template <CodecId C, Mode M, class T>
__global__ void __launch_bounds__(T::kThreads, min_blocks16<T, C>()) mma16_kernel(GemmArgs a) {
  extern __shared__ __align__(128) float sm[];
  __shared__ int64_t src[T::BM];
  __shared__ int64_t dst[T::BM];
  __shared__ float scale[T::BM];
  const uint8_t* wa = nullptr;
  const uint8_t* wb = nullptr;
  const int rows = tile_rows<M, T::BM, T::kThreads>(a, src, dst, wa, wb);
  if (rows < 0) return;
  for (int r = int(threadIdx.x); r < T::BM; r += T::kThreads) scale[r] = r < rows ? a.xscale[src[r]] : 1.0f;
  constexpr int kOutCols = M == Mode::GateUp ? T::BN / 2 : T::BN;
  const int64_t n0 = int64_t(blockIdx.y) * kOutCols;
  const int tid = int(threadIdx.x), warp = tid / 32, lane = tid % 32;
  __half* const h0 = reinterpret_cast<__half*>(sm);  // stage s: x at h0 + s * kStage, weights kX after it
  constexpr int kX = T::BM * T::kLdh, kStage = (T::BM + T::BN) * T::kLdh;

  WRow<C> wrow[kPiecesOf<T>];
  thread_rows<C, M, T>(a, wa, wb, n0, wrow);
  uint32_t raw[kPiecesOf<T>][8];
  float acc[T::MT][T::NT][4];
  zero_acc<T>(acc);
  __syncthreads();  // src, dst, scale

  stage_x16<T>(a, src, rows, 0, h0);
  cp_async_commit();
  fetch_pieces<C, T>(wrow, 0, a.cols, raw);
  store_pieces16<C, T>(raw, 0, a.cols, h0 + kX);
  cp_async_wait_all();
  __syncthreads();

  int s = 0;
  for (int64_t k0 = 0; k0 < a.cols; k0 += kBK, s ^= 1) {
    const bool more = k0 + kBK < a.cols;
    __half* const next = h0 + (s ^ 1) * kStage;
    if (more) {
      stage_x16<T>(a, src, rows, k0 + kBK, next);
      cp_async_commit();
      fetch_pieces<C, T>(wrow, k0 + kBK, a.cols, raw);
    }
    const __half* xs = h0 + s * kStage;
    const __half* ws = xs + kX;
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      uint32_t fb[T::NT / 2][4];
#pragma unroll
      for (int j = 0; j < T::NT / 2; ++j) ldmatrix_x4(fb[j], ws + T::b_ldm(warp, lane, j, kk));
#pragma unroll
      for (int i = 0; i < T::MT; ++i) {
        uint32_t fa[4];
        ldmatrix_x4(fa, xs + T::a_ldm(warp, lane, i, kk));
#pragma unroll
        for (int j = 0; j < T::NT; ++j) mma_f16(acc[i][j], fa, fb[j / 2] + 2 * (j % 2));
      }
    }
    if (more) {
      store_pieces16<C, T>(raw, k0 + kBK, a.cols, next + kX);
      cp_async_wait_all();
    }
    __syncthreads();
  }

  // The stages are free after the last barrier; the scales are powers of 2, so the division is exact.
  float* cs = sm;
  store_acc<T>(acc, cs, warp, lane, [&](int r) { return scale[r]; });
  __syncthreads();
  epilogue<M, T::BM, T::BN, T::kThreads>(a, cs, T::kLdc, dst, rows, n0);
}

// One warp a row: scale[r] = 2^(14 - e) for the row's largest |x| in [2^e, 2^(e+1)), e clamped so the scale and its
// inverse are normal floats, or 1 for a row of zeros or with a non-finite value (which the product then carries, as
// the float32 kernels would); then the row times its scale in f16 into x16 (ld16 halves a row, zeros past cols).
__global__ void to_f16_kernel(const float* x, int64_t rows, int64_t cols, int64_t ld16, float* scale, __half* x16) {
  const int64_t r = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= rows) return;
  const int lane = int(threadIdx.x % 32);
  const float* xr = x + r * cols;
  // vec: rows of a multiple of 4 floats, 16-byte aligned: float4 reads and 4 halves a write.
  const bool vec = cols % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
  float mx = 0.0f;
  bool finite = true;
  const auto see = [&](float v) {
    v = fabsf(v);
    finite = finite && v <= 3.402823466e38f;  // false for inf and NaN
    mx = fmaxf(mx, v);
  };
  if (vec) {
    for (int64_t i = 4 * lane; i < cols; i += 128) {
      const float4 v = *reinterpret_cast<const float4*>(xr + i);
      see(v.x);
      see(v.y);
      see(v.z);
      see(v.w);
    }
  } else {
    for (int64_t i = lane; i < cols; i += 32) see(xr[i]);
  }
  for (int o = 16; o > 0; o /= 2) {
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    finite = __shfl_xor_sync(0xffffffffu, int(finite), o) != 0 && finite;
  }
  float s = 1.0f;
  if (finite && mx > 0.0f) {
    const int sh = 14 - ilogbf(mx);
    s = ldexpf(1.0f, sh < -126 ? -126 : sh > 126 ? 126 : sh);
  }
  __half* out = x16 + r * ld16;
  if (vec) {  // ld16 % 8 == 0, so a run of 4 is all inside cols or all past it
    for (int64_t i = 4 * lane; i < ld16; i += 128) {
      const float4 v = i < cols ? *reinterpret_cast<const float4*>(xr + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      const __half2 lo = __floats2half2_rn(v.x * s, v.y * s), hi = __floats2half2_rn(v.z * s, v.w * s);
      *reinterpret_cast<uint2*>(out + i) =
          make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
    }
  } else {
    for (int64_t i = lane; i < ld16; i += 32) out[i] = __float2half_rn(i < cols ? xr[i] * s : 0.0f);
  }
  if (lane == 0) scale[r] = s;
}

// The f16 kernel's operand in scratch: rows floats of scale, then (16-byte aligned) rows x ld16 halves of x16.
struct F16Operand {
  float* scale;
  __half* x16;
  int64_t ld16;
};

int64_t ld16_of(int64_t cols) {
  return (cols + 7) / 8 * 8;
}
size_t f16_operand_bytes(int64_t rows, int64_t cols) {
  return size_t(rows) * sizeof(float) + 16 + size_t(rows * ld16_of(cols)) * sizeof(__half);
}
F16Operand f16_operand_in(void* p, int64_t rows, int64_t cols) {
  const uintptr_t x16 = (reinterpret_cast<uintptr_t>(p) + size_t(rows) * sizeof(float) + 15) / 16 * 16;
  return {static_cast<float*>(p), reinterpret_cast<__half*>(x16), ld16_of(cols)};
}

// x (rows x cols floats) into the f16 operand at `scratch` (f16_operand_bytes(rows, cols) bytes), and a's fields
// that point at it.
void to_f16(const float* x, int64_t rows, int64_t cols, void* scratch, GemmArgs& a, cudaStream_t stream) {
  const F16Operand o = f16_operand_in(scratch, rows, cols);
  to_f16_kernel<<<unsigned((rows + 7) / 8), 256, 0, stream>>>(x, rows, cols, o.ld16, o.scale, o.x16);
  check(cudaGetLastError(), "the f16 GEMM's operand");
  a.xscale = o.scale;
  a.x16 = o.x16;
  a.ld16 = o.ld16;
}

// Scratch of the grouped GEMMs, in ints: per expert a count and a cursor; the tile count; the tiles (expert,
// first sorted pair, rows); the pairs sorted by expert; then the f16 kernel's operand, for the larger of gate/up's
// x (rows x hidden) and down's activations (pairs x intermediate). Laid out
// for the smallest row tile (kMinBM), so any tile size fits.
struct Buckets {
  int* counts;
  int* cursor;
  int* n_tiles;
  int* tiles;
  int* order;
  void* f16;  // the f16 kernel's operand (f16_operand_in)
};

constexpr int kMinBM = TileS::BM;
static_assert(kMinBM <= TileL::BM, "the scratch is laid out for the smallest row tile");

int64_t max_tiles(int64_t pairs, int num_experts, int bm) {
  return (pairs + bm - 1) / bm + num_experts;  // each expert's last tile may be partial
}

Buckets buckets_in(void* scratch, int64_t pairs, int num_experts) {
  int* p = static_cast<int*>(scratch);
  Buckets b;
  b.counts = p;
  b.cursor = b.counts + num_experts;
  b.n_tiles = b.cursor + num_experts;
  b.tiles = b.n_tiles + 1;
  b.order = b.tiles + 3 * max_tiles(pairs, num_experts, kMinBM);
  b.f16 = b.order + pairs;
  return b;
}

__global__ void count_kernel(const int* ids, int64_t pairs, const uint8_t* const* table, int* counts) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j < pairs && table[ids[j]] != nullptr) atomicAdd(&counts[ids[j]], 1);
}

// One block: each thread takes a run of consecutive experts; a block-wide scan of the runs' pair and tile counts
// gives each expert its cursor (the exclusive scan of the counts) and its row tiles of bm rows, in expert order.
constexpr int kPlanThreads = 256;
__global__ void __launch_bounds__(kPlanThreads) plan_kernel(int num_experts, int bm, Buckets b) {
  __shared__ int pairs_before[kPlanThreads], tiles_before[kPlanThreads];
  const int t = int(threadIdx.x), per = (num_experts + kPlanThreads - 1) / kPlanThreads;
  const int e0 = min(t * per, num_experts), e1 = min(e0 + per, num_experts);
  int pairs = 0, tiles = 0;
  for (int e = e0; e < e1; ++e) {
    const int n = b.counts[e];
    pairs += n;
    tiles += (n + bm - 1) / bm;
  }
  pairs_before[t] = pairs;
  tiles_before[t] = tiles;
  __syncthreads();
  for (int d = 1; d < kPlanThreads; d *= 2) {  // inclusive scans
    const int p = t >= d ? pairs_before[t - d] : 0, q = t >= d ? tiles_before[t - d] : 0;
    __syncthreads();
    pairs_before[t] += p;
    tiles_before[t] += q;
    __syncthreads();
  }
  int off = pairs_before[t] - pairs, tile = tiles_before[t] - tiles;
  for (int e = e0; e < e1; ++e) {
    const int n = b.counts[e];
    b.cursor[e] = off;
    for (int r = 0; r < n; r += bm, ++tile) {
      b.tiles[3 * tile] = e;
      b.tiles[3 * tile + 1] = off + r;
      b.tiles[3 * tile + 2] = n - r < bm ? n - r : bm;
    }
    off += n;
  }
  if (t == kPlanThreads - 1) *b.n_tiles = tiles_before[t];
}

// Pairs into their expert's bucket; the order inside a bucket is whatever the atomics give, which changes no bits
// (an output element's sum does not depend on its row's place in the tile).
__global__ void scatter_kernel(const int* ids, int64_t pairs, const uint8_t* const* table, Buckets b) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j < pairs && table[ids[j]] != nullptr) b.order[atomicAdd(&b.cursor[ids[j]], 1)] = int(j);
}

Buckets bucket_pairs(const int* ids, int64_t pairs, const uint8_t* const* table, int num_experts, int bm, void* scratch,
                     cudaStream_t stream) {
  const Buckets b = buckets_in(scratch, pairs, num_experts);
  check(cudaMemsetAsync(b.counts, 0, size_t(num_experts) * sizeof(int), stream), "clearing the expert counts");
  const unsigned blocks = unsigned((pairs + 255) / 256);
  count_kernel<<<blocks, 256, 0, stream>>>(ids, pairs, table, b.counts);
  check(cudaGetLastError(), "expert bucketing (count)");
  plan_kernel<<<1, kPlanThreads, 0, stream>>>(num_experts, bm, b);
  check(cudaGetLastError(), "expert bucketing (plan)");
  scatter_kernel<<<blocks, 256, 0, stream>>>(ids, pairs, table, b);
  check(cudaGetLastError(), "expert bucketing (scatter)");
  return b;
}

// Which tile a call runs: TileL or TileS.
enum class Shape { L, S };

int tile_rows_of(Shape s) {
  return s == Shape::S ? TileS::BM : TileL::BM;
}
int tile_cols_of(Shape s) {
  return s == Shape::S ? TileS::BN : TileL::BN;
}

// Starts kernel k (opting in, once, to its shared memory above 48 KB).
template <auto K>
void start(dim3 grid, int threads, size_t smem, const GemmArgs& a, cudaStream_t stream) {
  static const cudaError_t raised = cudaFuncSetAttribute(K, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  check(raised, "raising the tensor-core GEMM's shared memory");
  K<<<grid, threads, smem, stream>>>(a);
}

// matmul_tc_split's and the float32 grouped products' Split for codec C (mma_kernel): weights that widen exactly to
// TF32 keep one part, the others split in two as x does.
template <CodecId C>
constexpr int kSplitOf = C == Id::BF16 || C == Id::F16 ? 1 : 2;

// Split 0: the f16 kernel where a.x16 is set, else TF32; Split 1 or 2: mma_kernel carrying float32's accuracy.
template <CodecId C, Mode M, int Split = 0>
void launch(Shape shape, dim3 grid, const GemmArgs& a, cudaStream_t stream, const char* what) {
  if constexpr (Split > 0) {
    if (shape == Shape::L) {
      start<mma_kernel<C, M, TileL, Split>>(grid, TileL::kThreads, smem_bytes<TileL>(), a, stream);
    } else {
      start<mma_kernel<C, M, TileS, Split>>(grid, TileS::kThreads, smem_bytes<TileS>(), a, stream);
    }
  } else if (a.x16 != nullptr) {  // f16 (use_f16)
    if constexpr (f16_weights(C)) {
      if (shape == Shape::L) {
        start<mma16_kernel<C, M, Tile16L>>(grid, Tile16L::kThreads, smem16_bytes<Tile16L>(), a, stream);
      } else {
        start<mma16_kernel<C, M, Tile16S>>(grid, Tile16S::kThreads, smem16_bytes<Tile16S>(), a, stream);
      }
    }
  } else if (shape == Shape::L) {
    start<mma_kernel<C, M, TileL>>(grid, TileL::kThreads, smem_bytes<TileL>(), a, stream);
  } else {
    start<mma_kernel<C, M, TileS>>(grid, TileS::kThreads, smem_bytes<TileS>(), a, stream);
  }
  check(cudaGetLastError(), what);
}

// launch at TF32 (or f16) accuracy, or with float32 carried to float32's accuracy (kSplitOf<C>).
template <CodecId C, Mode M>
void launch_at(bool float32, Shape shape, dim3 grid, const GemmArgs& a, cudaStream_t stream, const char* what) {
  if (float32) {
    launch<C, M, kSplitOf<C>>(shape, grid, a, stream, what);
  } else {
    launch<C, M>(shape, grid, a, stream, what);
  }
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

// The kernel chosen by use_gemm_kernel, else by SEEDLING_GEMM, read once.
std::atomic<int> g_kernel{-1};

GemmKernel chosen_kernel() {
  int k = g_kernel.load(std::memory_order_relaxed);
  if (k < 0) {
    const char* env = std::getenv("SEEDLING_GEMM");
    const std::string v = env != nullptr ? env : "";
    if (v.empty() || v == "mma") {
      k = int(GemmKernel::Mma);
    } else if (v == "mma128") {
      k = int(GemmKernel::MmaLarge);
    } else if (v == "mma64") {
      k = int(GemmKernel::MmaSmall);
    } else if (v == "tf32") {
      k = int(GemmKernel::MmaTf32);
    } else {
      check(cudaErrorInvalidValue, "reading SEEDLING_GEMM (the tensor-core GEMM kernel: mma, mma128, mma64 or tf32)");
    }
    g_kernel.store(k, std::memory_order_relaxed);
  }
  return GemmKernel(k);
}

// Whether a product of codec c runs the f16 kernel: the affine codecs and f16_weights' ggml ones, unless the product
// carries float32's accuracy (float32: mma_kernel's Split, on the TF32 kernel) or SEEDLING_GEMM=tf32
// (GemmKernel::MmaTf32) asks for the TF32 kernel.
bool use_f16(Codec c, bool float32 = false) {
  return !float32 && chosen_kernel() != GemmKernel::MmaTf32 && f16_weights(Id(uint8_t(c)));
}

// The mma tile for a product of `row_tiles(bm)` row tiles by n outputs of codec c: the one whose busiest SM has the
// least to do, ceil(blocks / SMs) x BM x BN over the tile's speed when the GPU is full; TileL on a tie. TileS runs
// at 0.8 of TileL's TFLOP/s there (60.8 / 75.3, 61.0 / 77.6, 60.7 / 75.2, 65.5 / 80.3 on an H200,
// docs/results/2026-11-30-cuda-gemm-mma.md), and at about 0.72 on the f16 kernel's q4_g64 tiles, which run 2
// blocks of 128 x 128 an SM (137.92 / 191.60, 133.68 / 185.29: docs/results/2026-11-30-cuda-prefill-session8-
// occupancy.md). Either tile gives the same bits, so this picks speed only. float32: the product carries float32's
// accuracy (mma_kernel's Split), so q4_g64 runs the TF32 kernel, not the f16 one, and takes the TF32 factor: for
// Qwen3.5's experts at a 2,048-token prompt (64 pairs an expert) that is 64 x 64 tiles where the f16 factor took
// half-empty 128 x 128 ones, prefill +7.9% (docs/results/2026-12-07-h100-qwen35-side-by-side-session39.md).
template <typename RowTiles>
Shape pick_shape(RowTiles row_tiles, int64_t n, bool gate_up, Codec c, bool float32) {
  switch (chosen_kernel()) {
    case GemmKernel::MmaLarge:
      return Shape::L;
    case GemmKernel::MmaSmall:
      return Shape::S;
    case GemmKernel::Mma:
    case GemmKernel::MmaTf32:
      break;
  }
  const int64_t sms = sm_count();
  const bool q4_f16 = use_f16(c, float32) && Id(uint8_t(c)) == Id::Q4_G64;
  const int64_t s_cost = q4_f16 ? 7 : 5, l_cost = q4_f16 ? 5 : 4;  // a tile's time over its area, relative
  const auto cost = [&](Shape s) {
    const int bm = tile_rows_of(s), bn = tile_cols_of(s);
    const int64_t blocks = row_tiles(bm) * int64_t(tiles_for(n, gate_up ? bn / 2 : bn));
    return (blocks + sms - 1) / sms * bm * bn * (s == Shape::S ? s_cost : l_cost);
  };
  return cost(Shape::S) < cost(Shape::L) ? Shape::S : Shape::L;
}

// The grouped products' tile: row tiles counted as if the pairs spread evenly over the experts (each expert's last
// tile partial), the expected case of a router. For the f16 kernel each expert counts its mean plus one standard
// deviation of rows (per + sqrt(per), as a Poisson count spreads), so a bucket just past a tile's rows counts two
// tiles: on the H200 at 128 rows an expert (2,048 x top-8 of 128) the 64 x 64 tiles ran at 94.35 TFLOP/s and the
// 128 x 128 ones at 88.53 (docs/results/2026-11-30-cuda-gemm-f16.md); the TF32 kernel keeps the mean (there 128 x
// 128 was faster, 52.20 against 49.58: docs/results/2026-11-30-cuda-gemm-mma.md). With q4_g64's 2-block 128 x 128
// tiles and their factor (pick_shape), 2,048 x top-8 takes 128 x 128 again (122.50 against 107.05 TFLOP/s).
Shape pick_grouped(int64_t pairs, int num_experts, int64_t n, bool gate_up, Codec c, bool float32) {
  const int64_t per = (pairs + num_experts - 1) / num_experts;
  const bool f16 = use_f16(c, float32);
  const int64_t spread = f16 ? int64_t(std::ceil(std::sqrt(double(per)))) : 0;
  return pick_shape([&](int bm) { return int64_t(num_experts) * ((per + spread + bm - 1) / bm); }, n, gate_up, c,
                    float32);
}

}  // namespace

void use_gemm_kernel(GemmKernel k) {
  g_kernel.store(int(k), std::memory_order_relaxed);
}

namespace {
// A plain product's arguments (m rows of x against w), its tile shape and grid.
struct PlainProduct {
  GemmArgs a;
  Shape shape;
  dim3 grid;
};
PlainProduct plain_product(const float* x, int64_t m, const DeviceMatrix& w, float* y, bool accumulate, bool float32,
                           int splits = 1) {
  PlainProduct p;
  p.a = product(x, w.rows, w.cols, y);
  p.a.m = m;
  p.a.accumulate = accumulate;
  p.a.w = static_cast<const uint8_t*>(w.data);
  p.shape = pick_shape([&](int bm) { return int64_t(tiles_for(m, bm)) * splits; }, w.rows, false, w.codec, float32);
  p.grid = dim3(tiles_for(m, tile_rows_of(p.shape)), tiles_for(w.rows, tile_cols_of(p.shape)), unsigned(splits));
  return p;
}

// matmul_tc_split's parts of k when split: a fixed k each (so a row's bits never depend on m), a multiple of the
// tiles' k-slice.
constexpr int64_t kSplitK = 256;
static_assert(kSplitK % kBK == 0, "whole k-slices a split");
int64_t splits_of(int64_t cols) {
  return (cols + kSplitK - 1) / kSplitK;
}
}  // namespace

void matmul_tc(const float* x, int64_t m, const DeviceMatrix& w, float* y, bool accumulate, cudaStream_t stream,
               void* scratch) {
  matmul_tc_stacked(x, m, &w, &y, 1, accumulate, stream, scratch);
}

void matmul_tc_stacked(const float* x, int64_t m, const DeviceMatrix* ws, float* const* ys, int count, bool accumulate,
                       cudaStream_t stream, void* scratch) {
  check(count >= 1 && count <= 3 ? cudaSuccess : cudaErrorInvalidValue,
        "matmul_tc_stacked: 1 to 3 matrices (got another count)");
  DeviceMatrix w = ws[0];
  for (int i = 0; i < count; ++i) {
    check(ws[i].codec == ws[0].codec && ws[i].cols == ws[0].cols ? cudaSuccess : cudaErrorInvalidValue,
          "matmul_tc_stacked: the matrices differ in codec or in columns (one product reads one codec and one k)");
    check_weight_alignment(ws[i].codec, ws[i].data);
    if (i > 0) w.rows += ws[i].rows;
  }
  if (m == 0 || w.rows == 0) return;
  PlainProduct p = plain_product(x, m, w, ys[0], accumulate, false);
  if (count > 1) {
    p.a.parts = count;
    int64_t end = 0;
    for (int i = 0; i < count; ++i) {
      p.a.w_part[i] = static_cast<const uint8_t*>(ws[i].data);
      p.a.y_part[i] = ys[i];
      p.a.part_end[i] = end += ws[i].rows;
    }
  }
  if (scratch != nullptr && use_f16(w.codec)) to_f16(x, m, w.cols, scratch, p.a, stream);
  dispatch_codec<true>(w.codec,
                       [&]<CodecId C>() { launch<C, Mode::Plain>(p.shape, p.grid, p.a, stream, "matmul_tc"); });
}

size_t matmul_tc_split_scratch_bytes(int64_t m, const DeviceMatrix& w) {
  return size_t(splits_of(w.cols) * m * w.rows) * sizeof(float);
}

void matmul_tc_split(const float* x, int64_t m, const DeviceMatrix& w, float* y, bool accumulate, cudaStream_t stream,
                     void* scratch) {
  const Id c = Id(uint8_t(w.codec));
  check(c != Id::MXFP4 && c != Id::MXFP4_GGML ? cudaSuccess : cudaErrorInvalidValue,
        "matmul_tc_split: mxfp4 weights (the tensor-core GEMMs do not read them)");
  check_weight_alignment(w.codec, w.data);
  if (m == 0 || w.rows == 0) return;
  const int splits = scratch != nullptr ? int(splits_of(w.cols)) : 1;
  PlainProduct p = plain_product(x, m, w, splits > 1 ? static_cast<float*>(scratch) : y, accumulate, true, splits);
  if (splits > 1) {
    p.a.k_split = kSplitK;
    p.a.accumulate = false;
  }
  dispatch_codec<true>(w.codec, [&]<CodecId C>() {
    launch<C, Mode::Plain, kSplitOf<C>>(p.shape, p.grid, p.a, stream, "matmul_tc_split");
  });
  if (splits > 1) {
    const int64_t count = m * w.rows;
    split_sum_kernel<<<unsigned((count + 255) / 256), 256, 0, stream>>>(static_cast<const float*>(scratch), splits,
                                                                        count, y, accumulate);
    check(cudaGetLastError(), "matmul_tc_split (the sum of its splits)");
  }
}

size_t expert_gemm_scratch_bytes(int64_t m, int k, int num_experts, const ExpertLayout& l) {
  const int64_t pairs = m * k;
  return size_t(2 * num_experts + 1 + 3 * max_tiles(pairs, num_experts, kMinBM) + pairs) * sizeof(int) +
         std::max(f16_operand_bytes(m, l.hidden), f16_operand_bytes(pairs, l.intermediate));
}

size_t matmul_tc_scratch_bytes(int64_t m, int64_t cols) {
  return f16_operand_bytes(m, cols);
}

namespace {
// The grouped products on buckets already made for their tile rows (tile_rows_of(sh)).
void gate_up_on(const Buckets& b, Shape sh, const float* x, int64_t m, int k, const uint8_t* const* table,
                int num_experts, const ExpertLayout& l, float* act, cudaStream_t stream, const ExpertMath& math,
                bool float32) {
  GemmArgs a = product(x, l.intermediate, l.hidden, act);
  a.math = math;
  bucketed(a, b, table);
  if (use_f16(l.gate_up, float32)) to_f16(x, m, l.hidden, b.f16, a, stream);
  a.k = k;
  a.off_b = l.up_offset;
  const dim3 grid(unsigned(max_tiles(m * k, num_experts, tile_rows_of(sh))),
                  tiles_for(l.intermediate, tile_cols_of(sh) / 2));
  dispatch_codec<true>(
      l.gate_up, [&]<CodecId C>() { launch_at<C, Mode::GateUp>(float32, sh, grid, a, stream, "expert_gate_up_tc"); });
}
void down_on(const Buckets& b, Shape sh, const float* act, int64_t pairs, const uint8_t* const* table, int num_experts,
             const ExpertLayout& l, float* out, cudaStream_t stream, const ExpertMath& math, bool float32) {
  GemmArgs a = product(act, l.hidden, l.intermediate, out);
  a.math = math;
  bucketed(a, b, table);
  if (use_f16(l.down, float32)) to_f16(act, pairs, l.intermediate, b.f16, a, stream);
  a.off_a = l.down_offset;
  const dim3 grid(unsigned(max_tiles(pairs, num_experts, tile_rows_of(sh))), tiles_for(l.hidden, tile_cols_of(sh)));
  dispatch_codec<true>(l.down,
                       [&]<CodecId C>() { launch_at<C, Mode::Down>(float32, sh, grid, a, stream, "expert_down_tc"); });
}
}  // namespace

void expert_gate_up_tc(const float* x, int64_t m, int k, const int* ids, const uint8_t* const* table, int num_experts,
                       const ExpertLayout& l, float* act, void* scratch, cudaStream_t stream, const ExpertMath& math,
                       bool float32) {
  const int64_t pairs = m * k;
  if (pairs == 0 || l.intermediate == 0) return;
  const Shape sh = pick_grouped(pairs, num_experts, l.intermediate, true, l.gate_up, float32);
  const Buckets b = bucket_pairs(ids, pairs, table, num_experts, tile_rows_of(sh), scratch, stream);
  gate_up_on(b, sh, x, m, k, table, num_experts, l, act, stream, math, float32);
}

void expert_down_tc(const float* act, int64_t pairs, const int* ids, const uint8_t* const* table, int num_experts,
                    const ExpertLayout& l, float* out, void* scratch, cudaStream_t stream, const ExpertMath& math,
                    bool float32) {
  if (pairs == 0 || l.hidden == 0) return;
  const Shape sh = pick_grouped(pairs, num_experts, l.hidden, false, l.down, float32);
  const Buckets b = bucket_pairs(ids, pairs, table, num_experts, tile_rows_of(sh), scratch, stream);
  down_on(b, sh, act, pairs, table, num_experts, l, out, stream, math, float32);
}

void expert_gemms_tc(const float* x, int64_t m, int k, const int* ids, const uint8_t* const* table, int num_experts,
                     const ExpertLayout& l, float* act, float* out, void* scratch, cudaStream_t stream,
                     const ExpertMath& math, bool float32) {
  const int64_t pairs = m * k;
  if (pairs == 0 || l.intermediate == 0 || l.hidden == 0) return;
  const Shape gu = pick_grouped(pairs, num_experts, l.intermediate, true, l.gate_up, float32);
  const Shape dn = pick_grouped(pairs, num_experts, l.hidden, false, l.down, float32);
  const Buckets b = bucket_pairs(ids, pairs, table, num_experts, tile_rows_of(gu), scratch, stream);
  gate_up_on(b, gu, x, m, k, table, num_experts, l, act, stream, math, float32);
  // Down's pairs are gate/up's (pair j: row j / k of x, row j of act): the same buckets when the tiles have as many
  // rows. The f16 operand in the scratch is down's from here (gate/up's launch is before it on the stream).
  const Buckets d = tile_rows_of(dn) == tile_rows_of(gu)
                        ? b
                        : bucket_pairs(ids, pairs, table, num_experts, tile_rows_of(dn), scratch, stream);
  down_on(d, dn, act, pairs, table, num_experts, l, out, stream, math, float32);
}

}  // namespace seedling::cuda
