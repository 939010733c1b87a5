// ops/matmul.h - the matrix products every layer spends its time in.
//
// matmul computes y[i][n] = sum_k x[i][k] * W[n][k] for m rows of float32 activations x (row-major, m x cols)
// against a stored weight matrix W (rows x cols), into y (m x rows). The fast version (SIMD through Highway,
// threads over output columns n) computes each y[i][n] with one fixed order of additions that does not depend on
// m, on the thread count or on the other rows: a row gives the same bits alone or in a batch. ref::matmul is the
// plain loop it is tested against.
//
// Affine weights (q4/q8) take one of two paths, chosen by cpu_dot(): float (each weight widened to d * q + m, one
// float multiply-add per weight; what ref::matmul computes up to float rounding) or int8 (matmul_int8 below).
#pragma once

#include <cstdint>
#include <vector>

#include "ops/matrix.h"

namespace seedling::ops {

void matmul(const float* x, int64_t m, const Matrix& w, float* y);
// The MXFP4 kernel matmul hands those weights to (ops/matmul_mxfp4.cpp).
void mxfp4_matmul(const float* x, int64_t m, const Matrix& w, float* y);

// ggml's quant blocks (codec/ggml_quants.h: q8_0 ... iq4_xs, mxfp4_ggml) take the float path: each weight widened
// in SIMD lanes exactly as the reference computes it (ops/ggml_decode-inl.h), then multiplied and added in the
// order above. Plain decoding reads each weight through the scalar reference instead: the same bits, slower; for
// tests and the bench. Simd unless set. Under cpu_dot() == Int8 they take ggml_matmul_int8 (ops/ggml_int8.h).
enum class GgmlDecode : uint8_t { Simd, Plain };
GgmlDecode ggml_decode();
void set_ggml_decode(GgmlDecode mode);
// A row of `cols` elements (whole blocks) of ggml codec c widened to float by the kernels' SIMD decoder: each value
// codec_value's bit for bit.
void ggml_decode_row(Codec c, const uint8_t* row, int64_t cols, float* out);

// How matmul multiplies quantized weights (the affine and ggml codecs) on the CPU. Int8 quantizes each row of x to
// int8 blocks and takes integer dot products (llama.cpp's trade: about +0.0007 KLD on the demo, 3-4x faster for the
// affine codecs); Float keeps x in float32 and is the exact product of the stored weights, the reference the tests
// hold the kernels to. Auto, the default, is Int8 for every quantized codec: the int8 kernel is the faster for each
// (bench/matmul_bench --codecs: the 32-element ggml types took the float path until their kernel served a tile of
// outputs a lane each, docs/results/2026-12-06-cpu-ggml32-int8-tiles.md). Read once from SEEDLING_CPU_DOT (auto,
// float or int8; any other value fails, naming it); set_cpu_dot overrides it (--cpu-dot, tests, benches).
enum class CpuDot : uint8_t { Auto, Float, Int8 };
CpuDot cpu_dot();
void set_cpu_dot(CpuDot mode);
// Whether matmul multiplies weights of codec c with int8 activations under the current mode.
bool int8_products(Codec c);
// Sets the mode for a scope and puts the previous one back (tests and benches that pin a definition).
class ScopedCpuDot {
 public:
  explicit ScopedCpuDot(CpuDot mode) : before_(cpu_dot()) { set_cpu_dot(mode); }
  ~ScopedCpuDot() { set_cpu_dot(before_); }
  ScopedCpuDot(const ScopedCpuDot&) = delete;
  ScopedCpuDot& operator=(const ScopedCpuDot&) = delete;

 private:
  CpuDot before_;
};

// Rows of x quantized for matmul_int8: row i cut into `blocks` blocks of `group` (the weight's G), block (i, b) =
// index i * blocks + b holding
//   q[index * group + k] = round-to-nearest-even(x[k] * (127 / amax)), in [-127, 127], 0 past the row's end,
//   scale[index] = amax / 127  (amax = max |x[k]| over the block; scale 0 and all q 0 when amax is 0),
//   sum[index] = the sum of the block's q (an integer, exact in float).
// For ggml's 256-value types (ops/ggml_int8.h, quantize_ggml_int8_rows: ggml's Q8_K) also
//   bsum[index * 16 + g] = the sum of the q of group g (16 values) of the block; empty otherwise.
struct Int8Rows {
  int64_t rows = 0, cols = 0, group = 0, blocks = 0;
  std::vector<int8_t> q;
  std::vector<float> scale, sum;
  std::vector<int32_t> bsum;
};
void quantize_int8_rows(const float* x, int64_t m, int64_t cols, int64_t group, Int8Rows& out);

// y = x W^T for an affine W with x quantized by quantize_int8_rows. Output y[i][n] is, for blocks b in order,
//   acc = acc + scale[i,b] * (d[n,b] * float(sum_k q_w[n,b,k] * q_x[i,b,k]) + m[n,b] * float(sum[i,b]))
// from acc = 0, every operation a float32 one rounded on its own (no fused multiply-add), the integer sum exact.
// So a row gives the same bits alone or batched, with any thread count and on every SIMD target; ref::matmul_int8
// is the plain loop of this definition. Against the float path the error is W's dot with x's rounding, at most
// sum_b scale[b] / 2 * sum_k |w_k| a row and output (tests/unit/engine/int8_dot_test.cpp).
void matmul_int8(const float* x, int64_t m, const Matrix& w, float* y);

// sum_k a[k] * b[k] in the fast kernels' order; for attention scores.
float dot(const float* a, const float* b, int64_t n);
// y[k] += s * x[k]; for attention's weighted sum of values.
void axpy(float s, const float* x, float* y, int64_t n);

// Sum of n floats read once, front to back, by every thread of the pool: the streaming-read ceiling that decode
// speed is reported against (bench). Four accumulators per thread keep the loads, not the adds, the limit.
float stream_read(const float* x, int64_t n);

// One product of a batch: y (m x w.rows) = x (m x w.cols) W^T.
struct MatmulJob {
  const float* x = nullptr;
  int64_t m = 0;
  Matrix w;
  float* y = nullptr;
};
// Every job's product in one parallel region (one fork and join for all, not one per matrix), cut into pieces of
// at most 64 outputs of one job; with int8, each distinct x (same pointer, rows, cols and group) is quantized once.
// Each y gets exactly matmul's bits. Seed matrices run one after another first, on their own threads.
void matmul_batch(const std::vector<MatmulJob>& jobs);

// The pieces matmul and matmul_batch are made of: outputs [n0, n1) of every row, on the calling thread.
void matmul_range(const float* x, int64_t m, const Matrix& w, float* y, int64_t n0, int64_t n1);  // float path
// int8 has two kernels with the same bits: Rows (a block's codes loaded once for 4 rows, outputs reduced across
// lanes; for one row) and Gemm (a tile of outputs repacked to one output a lane, reused by every row; for more).
// Auto takes Gemm from kInt8GemmRows rows. Tests name one to hold each to the definition.
enum class Int8Kernel : uint8_t { Auto, Rows, Gemm };
inline constexpr int64_t kInt8GemmRows = 2;  // bench/int8_gemm_bench.cpp: Gemm from 2 rows, Rows for 1
void matmul_int8_range(const Int8Rows& xq, const Matrix& w, float* y, int64_t n0, int64_t n1,
                       Int8Kernel kernel = Int8Kernel::Auto);
// Outputs per int8 tile for codec c on this CPU (a piece of whole tiles runs fastest); 0: no SIMD kernel here.
size_t int8_tile_outputs(Codec c);

// A product cut into pieces of outputs that any thread may run, each with matmul's bits (matmul_batch and
// expert_products are made of them). matmul_by_pieces: false where matmul's kernel for w has threads of its own
// (seed, MXFP4) or no piece form (int8 without a SIMD kernel here); such a product runs whole, through matmul.
// matmul_piece_reads_int8: the pieces read x quantized (int8 activations: an affine w, or one of ggml's types):
// quantize_for_pieces quantizes x once for w (blocks of matmul_piece_group(w); ggml's 256-value types with their
// sums of 16) and every piece is handed it; else xq is not read.
inline constexpr int64_t kMatmulPiece = 64;  // outputs a piece; a multiple of every tile (4 floats, 4-16 int8 lanes)
// ThreadPool::parallel_for's chunks a thread for a product of m rows of x over its outputs: at decode (under 8 rows)
// 4, so threads that finish first take the outputs of one that lags (a 16-thread profile found the dense products'
// regions 70-73% busy with one chunk a thread, 2026-12-06), and more for a large matrix, so that no chunk holds
// much more than kDecodeChunkBytes of weights, as the last chunk claimed is the region's tail (with a 151936-row head
// in 4 MB chunks, its region with o_proj's was 88% busy at 16 threads, 2026-12-07); a prompt's tile GEMMs keep one
// long range a thread. weight_bytes: the whole product's, split over `threads`.
inline constexpr size_t kDecodeChunkBytes = size_t(512) << 10;
inline size_t product_chunks_per_thread(int64_t m, size_t weight_bytes, int threads) {
  if (m >= 8) return 1;
  const size_t per_thread = weight_bytes / (kDecodeChunkBytes * size_t(threads > 0 ? threads : 1));
  return per_thread < 4 ? 4 : per_thread > 64 ? 64 : per_thread;
}
bool matmul_by_pieces(const Matrix& w);
bool matmul_piece_reads_int8(const Matrix& w);
int64_t matmul_piece_group(const Matrix& w);  // the int8 block of x for w's pieces; 0 where they read floats
void quantize_for_pieces(const float* x, int64_t m, const Matrix& w, Int8Rows& xq);
void matmul_piece(const float* x, int64_t m, const Int8Rows& xq, const Matrix& w, float* y, int64_t n0, int64_t n1);

namespace ref {
void matmul(const float* x, int64_t m, const Matrix& w, float* y);
// The definitions above as plain scalar loops.
void quantize_int8_rows(const float* x, int64_t m, int64_t cols, int64_t group, Int8Rows& out);
void matmul_int8(const float* x, int64_t m, const Matrix& w, float* y);
}  // namespace ref

}  // namespace seedling::ops
