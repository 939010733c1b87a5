// cuda/expert_staging.h - the host half of the VRAM expert cache's fills: packing an expert into its blob, and the
// third tier's ring of staging buffers.
//
// Three tiers: a VRAM slot miss is fetched through the model's expert provider (the streamed one: a RAM slot hit,
// or an NVMe read into a RAM slot), packed into one staging buffer (pinned host memory, owned by the caller), and
// that buffer's copy to the VRAM slot is handed to `send`. Invariant: a staging buffer is written only after its
// previous copy finished (`wait` is called on it first). Each miss is one acquire of the provider, so the
// provider's hits + misses over these fetches equal the VRAM misses. No CUDA here: the caller supplies `send` and
// `wait`, so the bookkeeping is tested without a GPU (tests/unit/cuda/expert_staging_test.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "cuda/kernels.h"
#include "experts/expert_provider.h"

namespace seedling::cuda {

// An Error naming the layer and expert when `ew`'s codecs or shapes are not `l`'s (the CUDA forward needs one
// layout for every expert of a layer).
void check_expert_layout(const ExpertWeights& ew, const ExpertLayout& l, int layer, int expert);
// Copies the three matrices of `ew` into `blob` (host memory of l.bytes) at l's offsets; the padding is zeroed.
void pack_expert_blob(const ExpertWeights& ew, const ExpertLayout& l, uint8_t* blob);
// Acquires (layer, expert) from `provider`, checks it against `l` and packs it into `blob`, then releases it (also
// when the check throws).
void fetch_expert_blob(ExpertProvider& provider, int layer, int expert, const ExpertLayout& l, uint8_t* blob);

// One VRAM miss: the expert and the slot its blob goes to.
struct SlotFill {
  int expert = 0;
  int slot = 0;
};

class StagingRing {
 public:
  // Enqueues the copy of buffer `buffer` (holding one packed blob of `layer`) to VRAM slot `slot`; returns at once.
  using Send = std::function<void(int buffer, const uint8_t* data, int layer, int slot)>;
  // Returns once buffer `buffer`'s last copy has finished.
  using Wait = std::function<void(int buffer)>;

  // `buffers`: at least one, each of the largest layer's packed blob, owned by the caller and outliving the ring.
  StagingRing(std::vector<uint8_t*> buffers, Send send, Wait wait);
  // Fetches `fills` of `layer` (whose experts are packed as `layout`) through `provider` (one prefetch of them all,
  // then acquire, pack, release, send one by one, cycling through the buffers). Returns when the last copy is
  // enqueued, not finished.
  void fetch(ExpertProvider& provider, int layer, const ExpertLayout& layout, std::span<const SlotFill> fills);
  // Waits for every buffer with a copy not yet waited for.
  void drain();
  int size() const { return int(buffers_.size()); }

 private:
  std::vector<uint8_t*> buffers_;
  std::vector<bool> in_flight_;
  Send send_;
  Wait wait_;
  int next_ = 0;
};

}  // namespace seedling::cuda
