// experts/expert_provider.h - the seam between the MoE block and wherever routed experts live.
//
// The MoE block asks for the experts its router chose and never learns where they are: mapped from the
// checkpoint (ResidentExperts, here), in a RAM slot cache filled from disk, or in VRAM. acquire() may block on
// I/O; the weights stay valid until the matching release(). Every provider must hand out the same numbers for the
// same (layer, expert), so the choice of provider never changes a logit.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "ops/matrix.h"

namespace seedling {

class PackedModel;

struct ExpertWeights {
  ops::Matrix gate;  // (moe_intermediate, hidden)
  ops::Matrix up;    // (moe_intermediate, hidden)
  ops::Matrix down;  // (hidden, moe_intermediate)
};

// Checks every seed-coded part (p3/p4/s3) of `w` with seed::validate_seed_blob: size against the manifest's shape,
// seeds, padding, exponent range. Throws Error naming `file`, the layer, the expert and the part; float and affine
// parts pass untouched. Providers call it on every blob before any kernel reads it (experts/expert_weights.cpp).
void validate_expert_weights(const ExpertWeights& w, const std::string& file, int layer, int expert);

// Views of gate, up and down INTO `blob` (the bytes of packed.expert_blob(layer, expert), starting at its offset;
// no copy), laid out as the manifest's parts say (io/packed_model.h). The blob must stay alive while the views are
// used. Throws Error naming the layer and expert when the folder has no such expert.
ExpertWeights decode_expert_blob(const PackedModel& packed, const uint8_t* blob, int layer, int expert);

// What a provider did over a run. Resident providers report zeros.
struct ExpertStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t bytes_read = 0;
  uint64_t reads = 0;       // blobs read from disk
  double read_p50_s = 0.0;  // read latency, submission to completion being noticed, in seconds
  double read_p95_s = 0.0;
  double read_p99_s = 0.0;
  double read_busy_s = 0.0;  // wall time with at least one read in flight
  double io_wait_s = 0.0;    // time acquire() spent blocked on reads
  int slots = 0;             // RAM slots (0: not a slot cache)
  uint64_t slot_bytes = 0;   // bytes per slot
  const char* policy = "";   // eviction policy name
  // Misses are copies from pinned host memory into VRAM slots (the CUDA forward's cache), timed as a whole on the
  // copy stream: no per-read latencies and no measured wait, so those lines are left out.
  bool vram_copies = false;
  // Copies (VRAM) or reads (streamed) started ahead of the router (--prefetch-width), not in misses; a streamed
  // provider's are in reads and bytes_read (the disk served them), a VRAM cache's are not.
  uint64_t prefetched = 0;
  uint64_t prefetch_used = 0;   // of those, the experts the router then chose (a hit instead of a miss)
  uint64_t prefetch_bytes = 0;  // bytes the prefetches copied or read
  // A VRAM cache's misses computed on the host CPU (--cpu-misses; among misses), and the host's time in them.
  uint64_t host_computed = 0;
  double host_seconds = 0.0;

  double hit_rate() const { return hits + misses == 0 ? 0.0 : double(hits) / double(hits + misses); }
  // Bytes read over the time reads were in flight: what the disk delivered while we asked it for something.
  double read_gb_per_s() const { return read_busy_s > 0.0 ? double(bytes_read) / read_busy_s / 1e9 : 0.0; }
};

// The lines printed on stderr at the end of a run and by `seedling bench`, each starting with "experts: ";
// `tokens` > 0 adds the I/O wait per token. Empty for a provider that read nothing and counted nothing.
std::string format_expert_stats(const ExpertStats& s, const char* provider, int64_t tokens = 0);

// Route of one row in one layer, reported by the MoE block to an observer (route traces, statistics).
struct RouteObserver {
  virtual ~RouteObserver() = default;
  virtual void on_route(int layer, int row, std::span<const int> experts, std::span<const float> weights) = 0;
};

// Routes that replace the router's top-k, for measuring (experts/route_trace.h, RouteReplay): the MoE block asks
// for each row's experts and weights after routing and before anything else sees them, so prefetch, acquire, expert
// math, combine and the observer all see the replayed route. It changes logits. A model without one pays one null
// test per row.
struct RouteSource {
  virtual ~RouteSource() = default;
  // Overwrites the row's top-k experts and weights (spans of the router's top-k); an Error when it has none to give.
  virtual void route(int layer, int row, std::span<int> experts, std::span<float> weights) = 0;
  // Next-layer prefetch: the experts to copy ahead for the row in `layer`, likeliest first, into `experts` (asked
  // before the layer's attention, so before route() for that layer). Returns how many it wrote; -1: this source has
  // no predictions (the forward keeps its own predictor's).
  virtual int predict(int layer, int row, std::span<int> experts) {
    (void)layer, (void)row, (void)experts;
    return -1;
  }
};

// The matrices whose inputs an ActivationObserver sees: attention q/k/v (one input) and o, a routed expert's gate/up
// (one input) and down, a dense MLP's gate/up and down.
enum class MatrixInput : uint8_t { AttnQkv, AttnO, ExpertGateUp, ExpertDown, MlpGateUp, MlpDown };

// The inputs of a layer's matrices, reported by the forward before they are multiplied (imatrix collection). x holds
// n rows of `width` floats; `expert` is the routed expert for ExpertGateUp/ExpertDown (the rows routed to it in this
// batch), -1 otherwise. Called on the forward's own thread; a model without an observer pays one null test per call.
struct ActivationObserver {
  virtual ~ActivationObserver() = default;
  virtual void on_input(int layer, MatrixInput which, int expert, const float* x, int64_t n, int64_t width) = 0;
};

class ExpertProvider {
 public:
  virtual ~ExpertProvider() = default;
  // The experts one MoE block is about to acquire, in the order it will acquire them, called right after
  // routing: a streaming provider starts their reads now so several are in flight before the first acquire.
  virtual void prefetch(int layer, std::span<const int> experts) {}
  // Next-layer prefetch (--prefetch-width): experts `layer`'s router will likely choose, guessed before the layer's
  // mixer runs. A streaming provider starts reading those it lacks into slots it may evict as usual, as far as its
  // queue has room and without waiting for the disk, counting no hit or miss (stats(): prefetched, prefetch_used);
  // others ignore it. A wrong guess costs a read and a slot, never a number.
  virtual void prefetch_guess(int layer, std::span<const int> experts) {}
  virtual ExpertWeights acquire(int layer, int expert) = 0;
  virtual void release(int layer, int expert) = 0;
  // Whether acquire(layer, expert) would return without waiting for the disk (counting no hit or miss): the MoE
  // block runs the experts a streaming provider already holds while the others are still being read.
  virtual bool ready(int layer, int expert) { return true; }
  virtual ExpertStats stats() const { return {}; }
  virtual const char* name() const = 0;
};

}  // namespace seedling
