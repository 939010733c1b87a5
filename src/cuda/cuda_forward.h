// cuda/cuda_forward.h - Model::forward on a CUDA device: decoder.cpp's data path, step for step, from cuda/kernels.h.
//
// Dense weights are copied to VRAM as stored (same codec, same bytes); routed experts go through VramExperts.
// Each sequence's keys and values live in VRAM, owned by its KvCache (KvCache::device) and grown with it.
// Batch-1 decode with every expert resident is replayed as one CUDA graph, bit-identical to the op-by-op launches.
// Invariant: forward() returns only after its logits are on the host and every kernel it launched has finished.
#pragma once

#include <memory>

#include "cuda/device.h"

namespace seedling {

std::unique_ptr<DeviceForward> make_cuda_forward(Model& model, const CudaForwardOptions& options);
// How many forwards replayed the decode graph (CudaForwardOptions::graphs) rather than launching op by op.
int64_t cuda_graph_replays(const DeviceForward& forward);

}  // namespace seedling
