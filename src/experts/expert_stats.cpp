// experts/expert_stats.cpp - the end-of-run lines of an expert provider's statistics.
#include <fmt/format.h>

#include "experts/expert_provider.h"

namespace seedling {

std::string format_expert_stats(const ExpertStats& s, const char* provider, int64_t tokens) {
  if (s.hits + s.misses == 0 && s.reads == 0) return "";
  std::string out;
  out += fmt::format("experts: {} provider", provider);
  if (s.slots > 0) {
    out += fmt::format(", {} slots x {:.2f} MB = {:.2f} GB, policy {}", s.slots, double(s.slot_bytes) / 1e6,
                       double(s.slot_bytes) * s.slots / 1e9, s.policy);
  }
  out += "\n";
  out += fmt::format("experts: {} hits, {} misses, hit rate {:.2f}%\n", s.hits, s.misses, 100.0 * s.hit_rate());
  if (s.prefetched > 0) {
    out += fmt::format("experts: {} prefetched ({:.3f} GB), {} of them then routed to ({:.2f}%)\n", s.prefetched,
                       double(s.prefetch_bytes) / 1e9, s.prefetch_used,
                       100.0 * double(s.prefetch_used) / double(s.prefetched));
  }
  if (s.vram_copies) {
    out += fmt::format("experts: {} copies to VRAM, {:.3f} GB copied, {:.3f} GB/s while copying\n", s.reads,
                       double(s.bytes_read) / 1e9, s.read_gb_per_s());
    return out;
  }
  out += fmt::format("experts: {} reads, {:.3f} GB read, {:.3f} GB/s while reading\n", s.reads,
                     double(s.bytes_read) / 1e9, s.read_gb_per_s());
  out += fmt::format("experts: read latency p50 {:.3f} ms, p95 {:.3f} ms, p99 {:.3f} ms\n", s.read_p50_s * 1e3,
                     s.read_p95_s * 1e3, s.read_p99_s * 1e3);
  out += fmt::format("experts: waiting on I/O {:.3f} s", s.io_wait_s);
  if (tokens > 0) out += fmt::format(", {:.3f} ms per token", s.io_wait_s * 1e3 / double(tokens));
  out += "\n";
  return out;
}

}  // namespace seedling
