// cuda/expert_staging.cpp - packing expert blobs and the staging ring of the third tier (see the header).
#include "cuda/expert_staging.h"

#include <cstring>

#include "core/error.h"

namespace seedling::cuda {

void check_expert_layout(const ExpertWeights& ew, const ExpertLayout& l, int layer, int expert) {
  if (ew.gate.codec != l.gate_up || ew.up.codec != l.gate_up || ew.down.codec != l.down ||
      ew.gate.rows != l.intermediate || ew.gate.cols != l.hidden || ew.up.rows != l.intermediate ||
      ew.up.cols != l.hidden || ew.down.rows != l.hidden || ew.down.cols != l.intermediate) {
    fail(
        "layer {} expert {}: codecs {}/{}/{} or shapes differ from the layer's first expert's {}/{}/{} (the CUDA "
        "forward needs one expert layout per layer)",
        layer, expert, codec_name(ew.gate.codec), codec_name(ew.up.codec), codec_name(ew.down.codec),
        codec_name(l.gate_up), codec_name(l.gate_up), codec_name(l.down));
  }
}

void pack_expert_blob(const ExpertWeights& ew, const ExpertLayout& l, uint8_t* blob) {
  const ops::Matrix* parts[3] = {&ew.gate, &ew.up, &ew.down};
  const size_t offsets[3] = {0, l.up_offset, l.down_offset};
  const size_t ends[3] = {l.up_offset, l.down_offset, l.bytes};
  for (int i = 0; i < 3; ++i) {
    const size_t n = parts[i]->nbytes();
    SEEDLING_CHECK(offsets[i] + n <= ends[i], "expert blob part {} of {} bytes overruns its {} bytes", i, n,
                   ends[i] - offsets[i]);
    std::memcpy(blob + offsets[i], parts[i]->data, n);
    std::memset(blob + offsets[i] + n, 0, ends[i] - offsets[i] - n);
  }
}

void fetch_expert_blob(ExpertProvider& provider, int layer, int expert, const ExpertLayout& l, uint8_t* blob) {
  const ExpertWeights ew = provider.acquire(layer, expert);
  try {
    check_expert_layout(ew, l, layer, expert);
    pack_expert_blob(ew, l, blob);
  } catch (...) {
    provider.release(layer, expert);
    throw;
  }
  provider.release(layer, expert);
}

StagingRing::StagingRing(std::vector<uint8_t*> buffers, Send send, Wait wait)
    : buffers_(std::move(buffers)), in_flight_(buffers_.size(), false), send_(std::move(send)), wait_(std::move(wait)) {
  SEEDLING_CHECK(!buffers_.empty(), "a staging ring needs at least one buffer");
}

void StagingRing::fetch(ExpertProvider& provider, int layer, const ExpertLayout& layout,
                        std::span<const SlotFill> fills) {
  if (fills.empty()) return;
  std::vector<int> experts;
  experts.reserve(fills.size());
  for (const SlotFill& f : fills) experts.push_back(f.expert);
  provider.prefetch(layer, experts);  // NVMe reads of the RAM misses in flight before the first acquire
  for (const SlotFill& f : fills) {
    const int b = next_;
    next_ = (next_ + 1) % int(buffers_.size());
    if (in_flight_[size_t(b)]) {
      wait_(b);
      in_flight_[size_t(b)] = false;
    }
    fetch_expert_blob(provider, layer, f.expert, layout, buffers_[size_t(b)]);
    send_(b, buffers_[size_t(b)], layer, f.slot);
    in_flight_[size_t(b)] = true;
  }
}

void StagingRing::drain() {
  for (size_t b = 0; b < buffers_.size(); ++b) {
    if (!in_flight_[b]) continue;
    wait_(int(b));
    in_flight_[b] = false;
  }
}

}  // namespace seedling::cuda
