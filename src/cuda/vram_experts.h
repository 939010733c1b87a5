// cuda/vram_experts.h - routed experts on the GPU: all in VRAM, or a VRAM slot cache fed from host memory or NVMe.
//
// Each expert is one blob [gate][up][down] (cuda/kernels.h ExpertLayout), the bytes the model's provider hands out
// (MXFP4's rearranged by a kernel where they land in VRAM, cuda/device_layout.h), so where a blob sits never changes a
// number; host memory and PCIe carry the packed blob. Resident: every blob in VRAM and one device table of
// pointers per layer, so the kernels find experts without the host. Cached: `slots` VRAM slots kept by the same
// ExpertSlotCache (LRU) as the CPU's streamed provider; after each router the host learns the chosen experts,
// copies the missed ones on their own stream (timed with events: stats() reports their PCIe GB/s as
// read_gb_per_s) and runs the layer's experts in passes of at most `slots` experts. The misses come from
//   - all pinned: every blob copied into pinned host memory at start (the experts are mapped: they fit in host
//     memory and no RAM budget was asked for), or
//   - three tiers: the model's streamed provider (a RAM slot cache over the packed folder's files, under the RAM
//     budget), fetched miss by miss through a ring of pinned staging buffers (cuda/expert_staging.h); no full host
//     copy, and the provider's own statistics count the RAM tier (hits, misses, NVMe bytes and GB/s).
// Direct reads (all pinned, every layer's blob the same bytes in host memory and in VRAM): a decode step reads each
// expert where it is, through one table per layer whose entries are VRAM slots or pinned host blobs (the GPU reads
// those over PCIe), so the step needs no host round trip and runs as one CUDA graph; after the step the host learns
// its routes (learn()) and copies its misses into slots for the steps after.
// Next-layer prefetch (prefetch()): guesses copied ahead into unpinned slots of the same cache, on the same copy
// stream. Invariants: a slot is overwritten only after every kernel that read it has finished (the router's copy-back
// synchronises the compute stream before any slot is chosen); a staging buffer is rewritten only after its copy
// finished.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "cuda/device.h"
#include "cuda/expert_staging.h"
#include "cuda/kernels.h"
#include "experts/slot_cache.h"

namespace seedling::cuda {

// The blob layout of a layer's routed experts as packed on the host (pack_expert_blob), from the layer's first
// expert (bytes padded to 256 per matrix); every expert of the layer must have it. Layers may differ: a Q4_K_M GGUF
// stores some layers' down projections in Q6_K and the others' in Q4_K. layer -1: the first layer with experts.
ExpertLayout packed_expert_layout(Model& model, int layer = -1);
// The same blobs as they sit in VRAM, what the kernels read (device_expert_layout of the packed one).
ExpertLayout expert_layout(Model& model, int layer = -1);
// A VRAM slot of the cache: the largest of the layers' VRAM blobs, so any layer's expert fits any slot.
size_t expert_slot_bytes(Model& model);

class VramExperts {
 public:
  // Copies the experts of `model` (through its expert provider) to VRAM or pinned host memory. `free_bytes`: VRAM
  // free after the dense weights; used for the default placement.
  VramExperts(Model& model, const CudaForwardOptions& o, uint64_t free_bytes, cudaStream_t compute);
  ~VramExperts();
  VramExperts(const VramExperts&) = delete;
  VramExperts& operator=(const VramExperts&) = delete;

  // The layout of `layer`'s experts in VRAM, what its kernels are given.
  const ExpertLayout& layout(int layer) const { return layouts_[size_t(layer)]; }
  bool resident() const { return resident_; }
  // Cached mode with the misses fetched through the model's streamed provider (three tiers).
  bool three_tier() const { return ring_ != nullptr; }
  // Resident mode: the device table of this layer's expert blobs.
  const uint8_t* const* table(int layer) const { return tables_dev_ + size_t(layer) * size_t(num_experts_); }
  // Cached mode: makes `used` (distinct experts of `layer`) present in passes and calls `run(table, only_pass)` for
  // each pass (only_pass: this one pass holds every expert of `used`); absent experts have null entries in the
  // table. Returns after the last pass is enqueued.
  void run_layer(int layer, std::span<const int> used,
                 const std::function<void(const uint8_t* const*, bool only_pass)>& run);
  // Cached mode, all pinned: starts copies of `experts` of `layer` that are not in VRAM into unpinned slots on the
  // copy stream (ExpertSlotCache::admit: a guess may evict an unpinned slot, never one a kernel reads: every pass
  // has finished when run_layer returns), so the layer's run_layer finds them; it waits for the copy stream before
  // its kernels read a slot. A wrong guess costs a copy and a slot, never a number.
  void prefetch(int layer, std::span<const int> experts);
  // Cached, all pinned, not turned off by SEEDLING_NO_DIRECT_MISSES: a decode step may read experts in place.
  bool direct() const { return direct_dev_ != nullptr; }
  // Why a decode step cannot read misses in place (the flags that need it say so): null where it can.
  const char* why_not_direct() const { return why_not_direct_; }
  // Cached: whether `expert` of `layer` holds a VRAM slot (the LRU order untouched: learn() counts the step's uses).
  bool in_vram(int layer, int expert) const { return cache_ && cache_->find(expert_key(layer, expert)) >= 0; }
  // Direct reads: `layer`'s table, up to date once refresh_direct() has been enqueued.
  const uint8_t* const* direct_table(int layer) const { return direct_dev_ + size_t(layer) * size_t(num_experts_); }
  // Direct reads: enqueues on the compute stream, before a step that reads the tables, their upload where run_layer,
  // prefetch or learn moved experts since the last one (after the copy stream's pending copies).
  void refresh_direct();
  // Direct reads, after a step (its stream synchronised): `ids` holds each model layer's k routed experts
  // ([layers][k], rows of layers without experts ignored). Counts their hits and misses as run_layer does and
  // copies the first misses, in layer order, up to the step's admission cap (CudaForwardOptions::vram_admit), into
  // slots on the compute stream, ahead of the next step; the others stay out of the cache.
  void learn(std::span<const int> ids, int k);
  ExpertStats stats() const;

 private:
  uint8_t* host_blob(int layer, int expert) const;
  void start_three_tier(ExpertProvider& provider, int buffers);
  void reclaim(int buffer);  // waits for a staging buffer's copy and adds its time to copy_seconds_
  // Enqueues `layer`'s packed blob `src` (host memory) into VRAM blob `dst` on `stream`: a copy, or where the layer's
  // layouts differ a copy into vram_staging_ and the rearranging kernel (the next copy into vram_staging_ waits for it
  // on `stream`).
  void land(uint8_t* dst, const uint8_t* src, int layer, cudaStream_t stream);
  // Adds the time of learn()'s last copies (timed on the compute stream) to copy_seconds_ once they have finished.
  void settle_learn_timing() const;

  std::vector<ExpertLayout> layouts_;  // per model layer, in VRAM (layers without experts: the default)
  std::vector<ExpertLayout> packed_;   // per model layer, in host memory and over PCIe
  size_t slot_bytes_ = 0;              // the largest VRAM blob: one slot of the cache
  size_t packed_max_ = 0;              // the largest packed blob: one staging buffer
  std::vector<size_t> host_offset_;    // all pinned: per model layer, its first blob's offset in host_
  uint8_t* vram_staging_ = nullptr;    // one packed blob in VRAM, where some layer's two layouts differ
  int num_layers_ = 0, num_experts_ = 0;
  bool resident_ = false;
  cudaStream_t compute_ = nullptr, copy_ = nullptr;
  cudaEvent_t copied_ = nullptr;
  cudaEvent_t copy_start_ = nullptr, copy_end_ = nullptr;  // timing events around each pass's copies
  std::vector<int> layer_index_;                           // model layer -> index among MoE layers, -1 without experts
  uint8_t* vram_ = nullptr;                                // resident: every blob; cached: the slots
  uint8_t* host_ = nullptr;                                // all pinned: every blob
  ExpertProvider* provider_ = nullptr;                     // three tiers: the streamed provider
  uint8_t* staging_ = nullptr;                             // three tiers: the ring's buffers, pinned
  std::vector<cudaEvent_t> staged_start_, staged_end_;     // three tiers: timing of each buffer's latest copy
  std::unique_ptr<StagingRing> ring_;
  const uint8_t** tables_dev_ = nullptr;  // resident: [layers][E]; cached: one [E] table per pass
  const uint8_t** table_host_ = nullptr;  // cached: pinned staging of one pass's table
  std::unique_ptr<ExpertSlotCache> cache_;
  uint64_t bytes_copied_ = 0;
  std::vector<uint8_t> guess_pending_;  // per slot: filled by prefetch and not routed to since
  uint64_t prefetched_ = 0, prefetch_used_ = 0, prefetch_bytes_ = 0;
  // All pinned: sum over passes of the copy stream's time from first to last copy; three tiers: sum over copies
  // (a pass's copies wait for NVMe reads in between, which are the RAM tier's time, not PCIe's).
  mutable double copy_seconds_ = 0.0;
  const uint8_t** direct_dev_ = nullptr;   // direct reads: [layers][E] tables on the device
  const uint8_t** direct_host_ = nullptr;  // direct reads: their pinned staging
  bool direct_stale_ = true;               // the cache moved since the tables' last upload
  const char* why_not_direct_ = nullptr;   // why_not_direct()
  mutable bool learn_timed_ = false;       // copy_start_/copy_end_ hold learn()'s copies, not yet added
  int admit_per_step_ = CudaForwardOptions::kAdmitEveryMiss;  // learn(): misses copied into slots a step
  uint64_t left_out_ = 0;                                     // learn(): misses past that cap (in stats' misses)
};

}  // namespace seedling::cuda
