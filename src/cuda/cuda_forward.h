// cuda/cuda_forward.h - Model::forward on a CUDA device: decoder.cpp's data path, step for step, from cuda/kernels.h.
//
// Dense weights are copied to VRAM as stored (same codec, same bytes); routed experts go through VramExperts.
// Each sequence's keys and values live in VRAM, owned by its KvCache (KvCache::device) and grown with it; so do a
// hybrid's recurrent states (cuda/linear_attention.h), allocated once.
// Batch-1 decode with every expert resident is replayed as one CUDA graph, bit-identical to the op-by-op launches.
// Invariant: forward() returns only after its logits are on the host and every kernel it launched has finished.
#pragma once

#include <memory>
#include <string_view>

#include "cuda/device.h"

namespace seedling {

// SEEDLING_DECODE_SKIP, a measuring tool (its outputs are wrong): a comma-separated list of the batch-1 decode
// launches to leave out of every step (qkv, attention, o, router, gate_up, down, head), so that `seedling bench`
// shows what each costs inside the graph. The buffers they would write keep finite old values.
enum DecodeSkip : unsigned {
  kSkipQkv = 1,
  kSkipAttention = 2,
  kSkipO = 4,
  kSkipRouter = 8,
  kSkipGateUp = 16,
  kSkipDown = 32,
  kSkipHead = 64
};
// The list's bits (0 for an empty list); an unknown or empty name is an error naming it and the known ones.
unsigned parse_decode_skips(std::string_view list);

std::unique_ptr<DeviceForward> make_cuda_forward(Model& model, const CudaForwardOptions& options);
// How many forwards replayed the decode graph (CudaForwardOptions::graphs) rather than launching op by op.
int64_t cuda_graph_replays(const DeviceForward& forward);

}  // namespace seedling
