// cuda/gemm.h - tensor-core matrix products for prompt rows: a plain matmul and the grouped expert GEMMs.
//
// The twins of kernels.h's matmul and expert_gate_up / expert_down, with the same contracts, for many rows: tiles
// of rows x outputs x 64 of k in shared memory, TF32 MMAs (m16n8k8 by mma.sync) with float32 accumulation. Weights
// widen exactly as codec.h says (codec_device.cuh; the seed codecs p3, p4, s3 decode in registers, 8 weights at a time,
// by seed_device.cuh's seed_piece_decode: decode_seed_matrix's weights bit for bit), then both weights and activations
// are rounded to TF32 (10 stored mantissa bits, unit roundoff 2^-11), so results differ from the float32 CUDA-core
// kernels by about 2^-10 of sum |x_k w_k|; tests/unit/cuda/gemm_test.cpp bounds it. The affine codecs (q8_g32, q8_g64,
// q4_g32, q4_g64) run an f16 kernel instead (m16n8k16 from ldmatrix; the grouped products always, matmul_tc given its
// scratch): the same 10 mantissa bits for both operands, weights widened in one f16 fma (their d and m are f16
// already), each x row scaled by a power of 2 into f16's range and rounded to f16 once per product, the sums scaled
// back, exactly; its bound is the TF32 one plus f16's subnormals (2^-25 absolute, for weights under 2^-14 and x under
// 2^-28 of its row's largest). GGUF's ggml types (ggml_pieces.h): q8_0, q4_0, q5_0, q5_1 and iq4_nl take the f16
// kernel as the affine codecs do (d q, or d q + m, one f16 operation of their float16 fields and exact codes); the K
// types (q2_k .. q6_k) and iq4_xs, whose sub-block scale d_block * scale is a float f16 need not hold, the TF32 kernel
// (their float value, codec_value's, rounded to TF32). mxfp4 and mxfp4_ggml are not read here. Every output element
// sums its k-tiles in one fixed order that depends only on k, never on m, on the tile shape or on which rows share a
// tile: a row (or expert pair) gives the same bits alone, in a batch, or in a pass over any subset of experts.
// FP8 (fp8_g32) runs the TF32 kernel: each weight is its e4m3 value times its group's float32 scale, up to 28
// significant bits, which f16 would round once more and whose range (the scale is any float) f16 cannot hold; so it
// is widened exactly to float, as codec_value, and rounded to TF32 like the float codecs.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/kernels.h"

namespace seedling::cuda {

// y[i][n] = sum_k x[i][k] * W[n][k] for m rows (x: m x W.cols, y: m x W.rows); with `accumulate`, y += that sum.
// Any m, n, k; every codec has_kernel accepts but mxfp4 and mxfp4_ggml, a clear error here (a seed blob 4-byte
// aligned, a ggml matrix as check_weight_alignment says, as for matmul). x needs no alignment (rows of a multiple of 4
// floats starting 16-byte aligned are read as float4). scratch: matmul_tc_scratch_bytes(m, W.cols) bytes of device
// memory (4-byte aligned) for the f16 kernel's operand; with it the affine codecs (and the f16 ggml types above) run
// the f16 kernel (see above), without it the TF32 one.
void matmul_tc(const float* x, int64_t m, const DeviceMatrix& w, float* y, bool accumulate, cudaStream_t stream,
               void* scratch = nullptr);
size_t matmul_tc_scratch_bytes(int64_t m, int64_t cols);
// As matmul_tc for count (1 to 3) matrices of one codec and one k, stacked by rows into one product: ys[i] = x
// ws[i]^T (or +=), in one launch with x converted once; each output has the bits matmul_tc gives it alone. For q,
// k and v, whose k and v products alone leave most of the GPU idle. Matrices that differ in codec or k, or another
// count, are a clear error.
void matmul_tc_stacked(const float* x, int64_t m, const DeviceMatrix* ws, float* const* ys, int count, bool accumulate,
                       cudaStream_t stream, void* scratch = nullptr);

// As matmul_tc, with x carried to float32 accuracy: each x is split into two TF32 parts (x = hi + lo to 2^-22 |x|).
// Weights that widen exactly to TF32 (bf16, f16) take two MMAs a product, x_lo w + x_hi w, within (2^-22 + (2k + 8)
// 2^-23) of sum |x_k w_k| (gemm_test.cpp), about float32's error, at twice the MMAs; every other codec but MXFP4 (a
// clear error) is split the same way and takes three, x_lo w_hi + x_hi w_lo + x_hi w_hi, within (3 2^-22 + (3k + 8)
// 2^-23). For the router, whose top-k should not move with TF32 rounding of its input, and every product of a model
// whose recurrent states amplify rounding (forward_products.h). The same bits alone or batched.
// With scratch (matmul_tc_split_scratch_bytes(m, w) bytes, 4-byte aligned), k is split into parts of 256 summed by
// their own blocks, then added in order: m x 128 outputs (a router) fill a grid at a few hundred rows instead of
// 16 blocks; a row's bits still do not depend on m (they differ from the unsplit product's).
void matmul_tc_split(const float* x, int64_t m, const DeviceMatrix& w, float* y, bool accumulate, cudaStream_t stream,
                     void* scratch = nullptr);
size_t matmul_tc_split_scratch_bytes(int64_t m, const DeviceMatrix& w);
// The kernel behind the products: Mma (mma.sync, cp.async-staged, picking a 128 x 128 or a 64 x 64 tile per call;
// m16n8k16 f16 for the affine codecs (and f16 ggml types) where the call allows it, m16n8k8 TF32 otherwise; the
// default), MmaLarge / MmaSmall (the same, always 128 x 128 / 64 x 64: for the bench, to tune the pick), MmaTf32 (as
// Mma, TF32 for every codec: the f16 kernel's baseline). The environment's SEEDLING_GEMM (mma, mma128, mma64 or tf32;
// anything else is an error at the first product) sets it at start; use_gemm_kernel overrides it for the products
// called after it. Mma, MmaLarge and MmaSmall give the same bits; MmaTf32 differs from them within gemm_test's bound.
enum class GemmKernel { Mma, MmaLarge, MmaSmall, MmaTf32 };
void use_gemm_kernel(GemmKernel k);

// Bytes of device scratch the grouped expert GEMMs need for m rows of k experts each over num_experts experts of
// layout l: per expert a count and an offset, the list of row tiles, and the m * k pairs sorted by expert (a few
// ints per pair), then the f16 kernel's operand (the larger of x, m x hidden, and the activations, m k x
// intermediate, in f16, and a float per row). The scratch needs 4-byte alignment (cudaMalloc's is fine).
size_t expert_gemm_scratch_bytes(int64_t m, int k, int num_experts, const ExpertLayout& l);

// As expert_gate_up (kernels.h): for the pairs j of (row j / k, expert ids[j]) whose expert is present
// (table[ids[j]] != null), act[j][n] = silu(gate . x[j / k]) * (up . x[j / k]) (or math's biases and activation,
// the same operations as expert_gate_up); other pairs' act is left alone.
// ids[j] < num_experts. The pairs are bucketed by expert on the device (count, scan, scatter into `scratch`), then
// one launch covers every expert's row tiles, gate and up in one pass with the SiLU product in the epilogue. No
// host round trip: it can be captured in a CUDA graph.
// float32: every product carried to float32's accuracy as matmul_tc_split's (x split in two TF32 parts, and the
// weights too unless they widen exactly to TF32; no f16 kernel), for the models whose recurrent states amplify
// rounding (forward_products.h).
void expert_gate_up_tc(const float* x, int64_t m, int k, const int* ids, const uint8_t* const* table, int num_experts,
                       const ExpertLayout& l, float* act, void* scratch, cudaStream_t stream,
                       const ExpertMath& math = {}, bool float32 = false);
// As expert_down: out[j][h] = down . act[j] (+ math's down bias) for the present pairs (out: pairs x H), the same
// bucketing (scratch of expert_gemm_scratch_bytes(pairs, 1, num_experts) or more).
void expert_down_tc(const float* act, int64_t pairs, const int* ids, const uint8_t* const* table, int num_experts,
                    const ExpertLayout& l, float* out, void* scratch, cudaStream_t stream, const ExpertMath& math = {},
                    bool float32 = false);
// expert_gate_up_tc then expert_down_tc on its activations (act: m k x intermediate, out: m k x hidden), with the
// pairs bucketed once when both products take tiles of as many rows (the same bits as the two calls).
void expert_gemms_tc(const float* x, int64_t m, int k, const int* ids, const uint8_t* const* table, int num_experts,
                     const ExpertLayout& l, float* act, float* out, void* scratch, cudaStream_t stream,
                     const ExpertMath& math = {}, bool float32 = false);

}  // namespace seedling::cuda
