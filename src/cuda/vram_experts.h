// cuda/vram_experts.h - routed experts on the GPU: all in VRAM, or a VRAM slot cache fed from pinned host memory.
//
// Each expert is one blob [gate][up][down] (cuda/kernels.h ExpertLayout), the same bytes as the model's provider
// hands out, so where a blob sits never changes a number. Resident: every blob in VRAM and one device table of
// pointers per layer, so the kernels find experts without the host. Cached: every blob in pinned host memory and
// `slots` VRAM slots kept by the same ExpertSlotCache (LRU) as the CPU's streamed provider; after each router the
// host learns the chosen experts, copies the missed ones on their own stream (timed with events: stats() reports
// their PCIe GB/s as read_gb_per_s) and runs the layer's experts in
// passes of at most `slots` experts. Invariant: a slot is overwritten only after every kernel that read it has
// finished (the router's copy-back synchronises the compute stream before any slot is chosen).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "cuda/device.h"
#include "cuda/kernels.h"
#include "experts/slot_cache.h"

namespace seedling::cuda {

// The blob layout of the model's routed experts, from its first expert (bytes padded to 256 per matrix).
ExpertLayout expert_layout(Model& model);

class VramExperts {
 public:
  // Copies the experts of `model` (through its expert provider) to VRAM or pinned host memory. `free_bytes`: VRAM
  // free after the dense weights; used for the default placement.
  VramExperts(Model& model, const CudaForwardOptions& o, uint64_t free_bytes, cudaStream_t compute);
  ~VramExperts();
  VramExperts(const VramExperts&) = delete;
  VramExperts& operator=(const VramExperts&) = delete;

  const ExpertLayout& layout() const { return layout_; }
  bool resident() const { return resident_; }
  // Resident mode: the device table of this layer's expert blobs.
  const uint8_t* const* table(int layer) const { return tables_dev_ + size_t(layer) * size_t(num_experts_); }
  // Cached mode: makes `used` (distinct experts of `layer`) present in passes and calls `run(table, only_pass)` for
  // each pass (only_pass: this one pass holds every expert of `used`); absent experts have null entries in the
  // table. Returns after the last pass is enqueued.
  void run_layer(int layer, std::span<const int> used,
                 const std::function<void(const uint8_t* const*, bool only_pass)>& run);
  ExpertStats stats() const;

 private:
  uint8_t* host_blob(int layer, int expert) const;

  ExpertLayout layout_;
  int num_layers_ = 0, num_experts_ = 0;
  bool resident_ = false;
  cudaStream_t compute_ = nullptr, copy_ = nullptr;
  cudaEvent_t copied_ = nullptr;
  cudaEvent_t copy_start_ = nullptr, copy_end_ = nullptr;  // timing events around each pass's copies
  std::vector<int> layer_index_;                           // model layer -> index among MoE layers, -1 without experts
  uint8_t* vram_ = nullptr;                                // resident: every blob; cached: the slots
  uint8_t* host_ = nullptr;                                // cached: every blob, pinned
  const uint8_t** tables_dev_ = nullptr;                   // resident: [layers][E]; cached: one [E] table per pass
  const uint8_t** table_host_ = nullptr;                   // cached: pinned staging of one pass's table
  std::unique_ptr<ExpertSlotCache> cache_;
  uint64_t bytes_copied_ = 0;
  double copy_seconds_ = 0.0;  // sum over passes of the copy stream's time from first to last copy
};

}  // namespace seedling::cuda
