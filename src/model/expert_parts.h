// model/expert_parts.h - a routed expert's parts as the kernels read them, from however a checkpoint stores them.
//
// Kernels read each part (gate, up, down) as one (out_features, in_features) row-major matrix. Hub checkpoints of
// most families store exactly that, one tensor per expert and part: those are handed out as views into the mapping.
// Others stack every expert of a layer in one tensor, some transposed (experts, in, out) and with gate and up
// interleaved along out (gpt_oss): such parts are rearranged once into memory the model owns.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/family.h"
#include "model/fp8_weights.h"
#include "ops/matrix.h"

namespace seedling {

// The float codec a checkpoint tensor is stored in; an Error naming the file and tensor for other dtypes.
Codec stored_float_codec(const TensorInfo& t);

// Part `part` of one expert as a (rows, cols) matrix in its stored float codec. The tensor's shape is checked against
// the layout (its own: (rows, cols); stacked: (experts, rows x row_step x row_blocks, cols) or, transposed, (experts,
// cols, rows x row_step x row_blocks)), with an Error naming the file, the tensor and both shapes. A view when the rows
// are contiguous in the file; else a copy appended to `owned`, which must outlive the matrix. A stacked part the
// checkpoint holds as MXFP4 (`name_blocks` + `name_scales`, as gpt-oss releases them) comes back in the mxfp4 codec,
// its bytes as stored. A part of its own stored in FP8 (F8_E4M3 + weight_scale_inv) comes back in fp8_g32
// (model/fp8_weights.h).
ops::Matrix read_expert_part(const Checkpoint& ck, const ExpertPart& part, int num_experts, int64_t rows, int64_t cols,
                             std::vector<std::vector<uint8_t>>* owned, const Fp8Blocks& fp8 = {});

// The rows of `part` from a per-expert vector laid out like its out dimension (a stacked bias (experts, rows x
// row_step)), as floats: expert e's entries row_offset, row_offset + row_step, ...
std::vector<float> expert_part_rows(const std::vector<float>& stacked, const ExpertPart& part, int num_experts,
                                    int64_t rows);

}  // namespace seedling
