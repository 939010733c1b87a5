// cuda/device_layout.h - weights as they sit in VRAM: the bytes as stored, except MXFP4's (and mxfp4_ggml's), whose
// rows are rearranged where they enter VRAM (cuda/mxfp4_layout.h: a lane's codes and scales together, every row
// 16-byte aligned; mxfp4_ggml's nibbles in mxfp4's order, so mxfp4's kernels read both) by a kernel on the device, so
// what crosses PCIe and what host memory holds stay the stored bytes. Every path that puts
// weights in VRAM goes through here: the dense upload (cuda_forward.cpp), the resident experts and each VRAM cache
// fill (vram_experts.cpp), and the CUDA tests.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/kernels.h"

namespace seedling::cuda {

// Bytes of a rows x cols matrix of codec c in VRAM (as stored, MXFP4's and mxfp4_ggml's rows padded to 16 bytes).
size_t device_matrix_bytes(Codec c, int64_t rows, int64_t cols);
// Whether codec c's matrices are rearranged on their way to VRAM (MXFP4, mxfp4_ggml).
bool rearranged_on_device(Codec c);
// The stored matrix at src (device memory) in its VRAM form at dst (device memory of device_matrix_bytes; not src):
// MXFP4 and mxfp4_ggml by a kernel, other codecs copied. Enqueued on `stream`.
void to_device_layout(Codec c, const void* src, void* dst, int64_t rows, int64_t cols, cudaStream_t stream);
// The MXFP4 kernel of to_device_layout (mxfp4_layout.cu); ggml_order: the blocks are mxfp4_ggml's.
void mxfp4_rows_to_device(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols, bool ggml_order,
                          cudaStream_t stream);

// The VRAM blob of experts packed as `stored` (pack_expert_blob's layout): each matrix in its VRAM form, every part
// padded to 256 bytes as pack_expert_blob pads them.
ExpertLayout device_expert_layout(const ExpertLayout& stored);
// Whether a blob of `stored` differs from its VRAM form (any part rearranged); else the two layouts are the same.
bool rearranged_on_device(const ExpertLayout& stored);
// One packed blob at src (device memory, `stored`) into its VRAM form at dst (`device`, from device_expert_layout),
// on `stream`; the padding is zeroed.
void expert_to_device_layout(const uint8_t* src, const ExpertLayout& stored, uint8_t* dst, const ExpertLayout& device,
                             cudaStream_t stream);

}  // namespace seedling::cuda
