// cli/expert_placement.cpp - where a loaded model's routed experts live, from the flags or the memory available.
//
// A Hugging Face folder keeps its experts mapped. A packed folder either keeps them mapped (when everything fits
// in the memory available with room to spare) or streams them from disk into a RAM slot cache: sized by
// --expert-slots or --ram-budget, else by MemAvailable minus the resident tensors and a reserve. The choice and its
// reason are printed on stderr; when not even the top-k experts of one layer fit, the load is refused with the
// minimum named.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "core/error.h"
#include "experts/resident_experts.h"
#include "experts/route_trace.h"
#include "experts/streamed_experts.h"

namespace seedling::cli {

namespace {

std::unique_ptr<RouteTraceWriter>& trace_slot() {
  static std::unique_ptr<RouteTraceWriter> w;
  return w;
}

std::unique_ptr<RouteReplay>& replay_slot() {
  static std::unique_ptr<RouteReplay> r;
  return r;
}

// MemAvailable from /proc/meminfo. SEEDLING_MEM_AVAILABLE (bytes) stands in for it, so tests can act out a small
// machine.
uint64_t mem_available_bytes() {
  if (const char* fake = std::getenv("SEEDLING_MEM_AVAILABLE")) return std::strtoull(fake, nullptr, 10);
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit) {
    if (key == "MemAvailable:") return kb * 1024;
  }
  return 0;
}

double gb(uint64_t b) {
  return double(b) / 1e9;
}

}  // namespace

void place_experts(Model& model, const ModelFlags& f) {
  const bool asked = !f.ram_budget.empty() || f.expert_slots > 0;
  const EvictionPolicy policy = parse_eviction_policy(f.expert_policy);
  auto packed = model.packed();
  if (!packed) {
    if (asked)
      fail("--ram-budget and --expert-slots need a packed folder: run `seedling pack -m {} -o DIR` first", model.dir());
    return;
  }
  const ModelConfig& c = model.config();
  uint64_t blob = 0;
  for (int l = 0; l < c.num_layers; ++l) {
    if (packed->layer_has_experts(l)) blob = std::max(blob, packed->expert_layer(l).blob_bytes);
  }
  StreamedOptions o;
  o.slots = f.expert_slots;
  o.min_slots = c.experts_per_token;
  o.policy = policy;
  const uint64_t experts = packed->expert_bytes_total();
  if (!f.ram_budget.empty()) o.ram_budget = parse_byte_size(f.ram_budget);
  if (!asked) {
    const uint64_t avail = mem_available_bytes();
    const uint64_t resident = uint64_t(model.sizes().total_params - model.sizes().expert_params) * 2;  // upper bound
    const uint64_t reserve = (uint64_t(1) << 30) + avail / 10;  // KV cache, activations, the rest of the system
    if (resident + experts + reserve <= avail) {
      std::fprintf(
          stderr,
          "experts: all %.2f GB mapped: they fit in the %.2f GB available (resident %.2f GB, reserve %.2f GB)\n",
          gb(experts), gb(avail), gb(resident), gb(reserve));
      // Mapped for good: every seed part is validated now, before any kernel reads one.
      if (auto* r = dynamic_cast<const ResidentExperts*>(&model.experts())) r->validate_all();
      return;
    }
    const uint64_t minimum = uint64_t(c.experts_per_token) * blob;
    if (avail < resident + reserve + minimum) {
      fail(
          "not enough memory for {}: {:.2f} GB available, but the resident tensors ({:.2f} GB), a reserve ({:.2f} GB) "
          "and the smallest expert cache (top-{} experts, {:.1f} MB) need {:.2f} GB",
          model.dir(), gb(avail), gb(resident), gb(reserve), c.experts_per_token, double(minimum) / 1e6,
          gb(resident + reserve + minimum));
    }
    o.ram_budget = avail - resident - reserve;
    std::fprintf(stderr,
                 "experts: %.2f GB do not fit in the %.2f GB available; streaming them with --ram-budget %.2f GB "
                 "(available - resident %.2f GB - reserve %.2f GB)\n",
                 gb(experts), gb(avail), gb(o.ram_budget), gb(resident), gb(reserve));
  }
  model.set_expert_provider(StreamedExperts::from_packed(packed, o));
}

void open_route_trace(Model& model, const ModelFlags& f) {
  if (!f.route_replay.empty()) {
    const ModelConfig& c = model.config();
    replay_slot() =
        std::make_unique<RouteReplay>(f.route_replay, c.layer_has_experts, c.num_experts, c.experts_per_token);
    if (!f.prefetch_replay.empty()) replay_slot()->load_predictions(f.prefetch_replay);
    model.set_route_source(replay_slot().get());
  }
  if (f.route_trace.empty()) return;
  trace_slot() = std::make_unique<RouteTraceWriter>(f.route_trace);
  model.set_route_observer(trace_slot().get());
}

void finish_model(Model& model, int64_t tokens) {
  if (replay_slot()) {
    std::fprintf(stderr, "routes: replayed %zu of the %zu routes in %s\n", replay_slot()->used(), replay_slot()->size(),
                 replay_slot()->path().c_str());
    model.set_route_source(nullptr);
    replay_slot().reset();
  }
  if (trace_slot()) {
    trace_slot()->close();
    model.set_route_observer(nullptr);
    trace_slot().reset();
  }
  const std::string stats = format_expert_stats(model.experts().stats(), model.experts().name(), tokens);
  std::fputs(stats.c_str(), stderr);
  if (const DeviceForward* d = model.device_forward()) {
    std::fputs(format_expert_stats(d->expert_stats(), "vram", tokens).c_str(), stderr);
    const DeviceForward::Exchanges x = d->exchanges();
    if (x.layers > 0) {  // --devices: the all-to-all time per MoE layer, to hold against nccl-tests' bandwidth
      std::fprintf(stderr,
                   "exchanges: %lld MoE layers, %.3f ms a layer on the stream (dispatch + return + all-gather, "
                   "waits included), %.3f GB sent, %.2f GB/s\n",
                   (long long)x.layers, x.seconds * 1e3 / double(x.layers), double(x.bytes_sent) / 1e9,
                   x.seconds > 0 ? double(x.bytes_sent) / x.seconds / 1e9 : 0.0);
    }
  }
  std::fprintf(stderr, "memory: peak RSS (VmHWM) %.3f GB\n", double(peak_rss_bytes()) / 1e9);
}

}  // namespace seedling::cli
