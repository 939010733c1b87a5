// experts/expert_provider.h - the seam between the MoE block and wherever routed experts live.
//
// The MoE block asks for the experts its router chose and never learns where they are: mapped from the
// checkpoint (ResidentExperts, here), in a RAM slot cache filled from disk, or in VRAM. acquire() may block on
// I/O; the weights stay valid until the matching release(). Every provider must hand out the same numbers for the
// same (layer, expert), so the choice of provider never changes a logit.
#pragma once

#include <cstdint>

#include "ops/matrix.h"

namespace seedling {

struct ExpertWeights {
  ops::Matrix gate;  // (moe_intermediate, hidden)
  ops::Matrix up;    // (moe_intermediate, hidden)
  ops::Matrix down;  // (hidden, moe_intermediate)
};

struct ExpertStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t bytes_read = 0;
};

class ExpertProvider {
 public:
  virtual ~ExpertProvider() = default;
  virtual ExpertWeights acquire(int layer, int expert) = 0;
  virtual void release(int layer, int expert) = 0;
  virtual ExpertStats stats() const { return {}; }
  virtual const char* name() const = 0;
};

}  // namespace seedling
