// cuda/forward_products.h - what the CUDA forward's blocks share (cuda_forward.cpp, mla_forward.cpp,
// linear_attention.cpp): the choice between the CUDA-core and the tensor-core products by row count and precision.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/device_scratch.h"
#include "cuda/kernels.h"

namespace seedling::cuda {

// Rows from which a forward's products run on tensor cores (cuda/gemm.h: TF32 or f16 inputs, float32 sums): below it
// the CUDA-core kernels are faster (docs/results/2026-11-30-cuda-prefill-gemm.md: 0.81x at 32 rows, 1.43x at 64).
// The router's and the head's products are the exceptions (cuda_forward.cpp's router_product, accurate_product):
// about float32's accuracy. So is every product of a model with Gated DeltaNet layers (CudaForward::float32_): their
// recurrent states amplify rounding, so TF32 inputs moved the tiny hybrid checkpoints' prompt logits by 0.13 (the
// experts' inputs) to 0.37 (the Gated DeltaNet projections'), and float32-sized changes of every input by 1.5e-4
// (measured on the CPU). Those run on tensor cores too, x (and weights not exact in TF32) split in two TF32 parts
// (matmul_tc_split, the grouped products' float32): two or three MMAs where TF32 takes one.
constexpr int64_t kTensorCoreRows = 64;

// Whether m rows of products with codec c run on tensor cores: from kTensorCoreRows rows, every codec but MXFP4 and
// mxfp4_ggml, which the tensor-core GEMMs do not read (gemm.h); their prompt rows take the CUDA-core products instead,
// which read every codec of has_kernel (slower for long prompts, the same contract).
bool on_tensor_cores(int64_t m, Codec c);

// y = x W^T (or y +=) for m rows keeping float32's accuracy: on tensor cores from kTensorCoreRows rows with x (and
// weights other than bf16 and f16) split in two (matmul_tc_split), MXFP4 and fewer rows on CUDA cores. The head's
// product for several rows (logits of many positions: `seedling logits`, `perplexity`), whose sums are the logits
// themselves (a q4 head costs about 0.3 s more for 2,048 rows of 151,936 words on the H200; TF32 or f16 inputs would
// put their 2^-11 rounding straight onto the logits: on its own, up to 0.011 on the tiny checkpoints' 150-token
// prompts, whose largest |logit| is 25-37: docs/results/2026-11-30-cuda-prompt-logit-error.md), and every product of a
// float32 forward. A step that wants one row's logits is the matvec's.
void accurate_product(const float* x, int64_t m, const DeviceMatrix& w, float* y, bool accumulate, cudaStream_t stream);

// y = x W^T (or y +=) for m rows, on tensor cores from kTensorCoreRows rows (every codec but MXFP4, the seed codecs
// too; the affine codecs on the f16 kernel, its operand in f16_scratch; the others, FP8 among them, on the TF32 one);
// with float32, accurate_product.
void product(const float* x, int64_t m, const DeviceMatrix& w, float* y, bool accumulate, cudaStream_t stream,
             DeviceScratch& f16_scratch, bool float32 = false);

// product for count matrices of x (q, k, v): on tensor cores one stacked product (cuda::matmul_tc_stacked) when
// they share a codec, as packs write them, else one product each (float32: accurate_product each).
void products(const float* x, int64_t m, const DeviceMatrix* ws, float* const* ys, int count, cudaStream_t stream,
              DeviceScratch& f16_scratch, bool float32 = false);

}  // namespace seedling::cuda
