// cli/cmd_bench.cpp - `seedling bench`: prefill and decode speed against a read bandwidth measured in the same run.
//
// Batch-1 decode reads every active weight once per token, so tokens/s <= bandwidth / bytes per token. The
// bandwidth is a multithreaded streaming read of a 1 GiB buffer, measured between the timed arms (A B A B ...),
// and the report gives decode GB/s as a fraction of it. Times are medians over --repeats, with min and max. A
// streamed model's expert reads are likewise held against the disk's O_DIRECT rate, measured before and after.
#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>

#include "cli/commands.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "cuda/device.h"
#include "engine/sampler.h"
#include "experts/streamed_experts.h"
#include "ops/matmul.h"

namespace seedling::cli {

namespace {
struct BenchFlags {
  ModelFlags model;
  int prompt_tokens = 128;
  int decode_tokens = 32;
  int repeats = 3;
  int warmup = 0;
  bool profile = false;
};

// The disk's O_DIRECT random-read rates for the model's own expert blobs, at the provider's queue depth and at four
// times it. bench takes them before and after the timed runs (a shared disk moves between the two) and holds what the
// decode steps' reads got while in flight against the largest, the disk's ceiling; and prints the decode rate those
// reads allow: the ceiling over the bytes a token read.
std::vector<RandomReadRate> disk_rates(const StreamedExperts& streamed) {
  const std::vector<BlobLocation> blobs = streamed.blobs();
  return {measure_random_reads(blobs, streamed.queue_depth(), 2.0),
          measure_random_reads(blobs, 4 * streamed.queue_depth(), 2.0)};
}

void report_disk_ceiling(const std::vector<RandomReadRate>& rates, const ExpertStats& decode, double decode_tok_s,
                         int64_t tokens) {
  double ceiling = 0.0;
  std::printf("disk: O_DIRECT random reads of whole expert blobs, before and after the runs:");
  for (const RandomReadRate& r : rates) {
    std::printf(" %.2f GB/s with %d in flight;", r.gb_per_s(), r.queue_depth);
    ceiling = std::max(ceiling, r.gb_per_s());
  }
  std::printf("\n");
  const double per_token = double(decode.bytes_read) / 1e9 / double(tokens);
  std::printf(
      "decode expert reads: %.2f GB/s while in flight = %.1f%% of the disk's ceiling (%.2f GB/s); "
      "%.3f GB a token allows %.2f tok/s at the ceiling, decode ran %.2f\n",
      decode.read_gb_per_s(), 100.0 * decode.read_gb_per_s() / ceiling, ceiling, per_token,
      per_token > 0.0 ? ceiling / per_token : 0.0, decode_tok_s);
}

// Streaming read of `buf` with every thread of the pool (SIMD loads, four accumulators); returns GB/s.
double read_bandwidth(const std::vector<float>& buf) {
  const double t0 = now_seconds();
  volatile float sink = ops::stream_read(buf.data(), int64_t(buf.size()));
  (void)sink;
  return double(buf.size() * sizeof(float)) / (now_seconds() - t0) / 1e9;
}

struct Stat {
  double median, min, max;
};
Stat stat(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

// Reads one byte of every page of every mapped tensor, so the timed runs find the weights in memory, not on disk.
// For a packed folder that is the resident tensors; its experts are the provider's business (mapped or streamed).
// Returns the bytes touched.
uint64_t touch_weights(const Model& model) {
  volatile uint8_t sink = 0;
  uint64_t total = 0;
  auto touch = [&](const uint8_t* data, size_t bytes) {
    for (size_t off = 0; off < bytes; off += 4096) sink = sink + data[off];
    total += bytes;
  };
  if (model.packed()) {
    for (const auto& [name, t] : model.packed()->tensors()) touch(t.data, t.bytes);
  } else if (model.gguf()) {
    for (const GgufTensor& t : model.gguf()->tensors()) touch(t.data, t.nbytes);
  } else {
    for (const auto& [name, t] : model.checkpoint().all()) touch(t->data, t->nbytes);
  }
  return total;
}

// What one sequence's cache takes, measured: a fresh sequence allocated alone for `positions` (Engine::reserve: its
// rows at that capacity and its recurrent state, in host arrays or in VRAM) between two readings of the process's
// resident set (VmRSS) and, on CUDA, of the device's free memory (cudaMemGetInfo), against what KvCache computes.
// malloc_trim first hands the freed pages of the sequences removed before back to the kernel, so the new arrays fault
// pages in rather than reuse resident ones unseen. VRAM moves in the driver's pages (2 MiB) and counts every process
// on the device.
struct SequenceMemory {
  int capacity = 0;
  size_t computed = 0, state = 0;  // KvCache::bytes(), of which recurrent state
  int64_t rss = 0, vram = 0;       // growth, bytes
};
SequenceMemory measure_sequence(Engine& engine, int positions, int device) {
  malloc_trim(0);
  SequenceMemory m;
  const uint64_t rss0 = rss_bytes(), free0 = device >= 0 ? cuda_free_bytes(device) : 0;
  const int seq = engine.add_sequence();
  engine.reserve(seq, positions);
  m.rss = int64_t(rss_bytes()) - int64_t(rss0);
  m.vram = device >= 0 ? int64_t(free0) - int64_t(cuda_free_bytes(device)) : 0;
  const KvCache& kv = engine.kv(seq);
  m.capacity = kv.capacity();
  m.computed = kv.bytes();
  m.state = kv.bytes_at(0);
  engine.remove_sequence(seq);
  return m;
}

// --profile's table: each parallel region's share of the decode steps' time, how busy it kept the threads (the
// chunks' time over the region's time times the pool's threads: 1/threads for a call that ran on one thread), and
// the calling thread's time alone just before its calls (since the previous region ended: the serial code between
// regions, attributed to the region it leads to). What the regions leave of the steps ran on the calling thread.
void print_profile(const std::vector<RegionProfile>& regions, double seconds, int tokens, int threads) {
  std::printf("decode by parallel region (--profile: the last repeat's %d steps, %d threads):\n", tokens, threads);
  std::printf("  %-44s %10s %10s %7s %13s %14s\n", "call site", "calls/tok", "us/tok", "share", "threads busy",
              "before, us/tok");
  double inside = 0.0;
  for (const RegionProfile& p : regions) {
    inside += p.wall_s;
    std::printf("  %-44s %10.1f %10.1f %6.1f%% %12.1f%% %14.1f", p.site.c_str(), double(p.calls) / tokens,
                1e6 * p.wall_s / tokens, 100.0 * p.wall_s / seconds, 100.0 * p.busy_s / (p.wall_s * threads),
                1e6 * p.before_s / tokens);
    if (p.serial_calls > 0) std::printf(" (%llu calls on one thread)", (unsigned long long)p.serial_calls);
    std::printf("\n");
  }
  std::printf("  %-44s %10s %10.1f %6.1f%%\n", "outside the regions (one thread)", "",
              1e6 * (seconds - inside) / tokens, 100.0 * (seconds - inside) / seconds);
}

int run(const BenchFlags& f) {
  auto model = load_model(f.model);
  const ModelConfig& c = model->config();
  const Model::Sizes sizes = model->sizes();
  EngineOptions eo;
  eo.max_context =
      f.model.ctx > 0 ? f.model.ctx : std::max(c.max_position_embeddings, f.prompt_tokens + f.decode_tokens + 1);
  Engine engine(*model, eo);
  std::mt19937 rng(1234);
  std::vector<int32_t> prompt(size_t(f.prompt_tokens));
  for (auto& t : prompt) t = int32_t(rng() % uint32_t(c.vocab_size));
  const uint64_t touched = touch_weights(*model);
  std::fprintf(stderr, "bench: touched %.3f GB of mapped weights%s\n", double(touched) / 1e9,
               model->packed() ? " (the packed folder's resident tensors; experts are read by their provider)" : "");
  // The ceiling: a streaming read of RAM on the CPU; a device-to-device copy of 2 GiB (read + written) on CUDA.
  const bool cuda = model->device_forward() != nullptr;
  std::vector<float> buf(cuda ? 0 : (size_t(1) << 30) / sizeof(float), 1.0f);
  // The ceilings of the device the forward runs on: with --devices, this rank's.
  const int device = !cuda                     ? -1
                     : f.model.devices.empty() ? parse_device(f.model.device)
                                               : check_devices_flags(f.model)[size_t(std::max(f.model.ep_rank, 0))];
  auto ceiling = [&] { return cuda ? cuda_device_copy_gbs(device, size_t(1) << 31) : read_bandwidth(buf); };
  ceiling();  // warm

  std::vector<double> bw, prefill, decode, decode_device;
  size_t kv_bytes = 0;
  // The expert caches' counts over the decode steps alone (the prompts' batches touch most experts at once): the
  // VRAM cache (CUDA) and the model's provider (the RAM slot cache of a streamed model).
  ExpertStats decode_vram, decode_ram;
  const auto vram_stats = [&] { return cuda ? model->device_forward()->expert_stats() : ExpertStats{}; };
  const auto add_difference = [](ExpertStats& sum, const ExpertStats& before, const ExpertStats& after) {
    sum.hits += after.hits - before.hits;
    sum.misses += after.misses - before.misses;
    sum.bytes_read += after.bytes_read - before.bytes_read;
    sum.read_busy_s += after.read_busy_s - before.read_busy_s;
    sum.host_computed += after.host_computed - before.host_computed;
    sum.host_seconds += after.host_seconds - before.host_seconds;
  };
  // Untimed passes first (the prompt and one decode step): the first forward also pays each expert's first acquire
  // (its xxh64 check) and the first touch of pages, which llama-bench's own warm-up leaves out of its figures.
  for (int w = 0; w < f.warmup; ++w) {
    const int seq = engine.add_sequence();
    SequenceStep ps{seq, prompt, false};
    const std::vector<float> logits = engine.step({&ps, 1});
    const int32_t tok = argmax({logits.data(), size_t(c.vocab_size)});
    SequenceStep ds{seq, {&tok, 1}, false};
    engine.step({&ds, 1});
    engine.remove_sequence(seq);
  }
  // --profile: the pool's counts by call site over the last repeat's decode steps (CPU).
  ThreadPool& pool = ThreadPool::global();
  std::vector<RegionProfile> regions;
  double profiled_s = 0.0;
  const auto* streamed = dynamic_cast<const StreamedExperts*>(&model->experts());
  std::vector<RandomReadRate> disk;
  if (streamed != nullptr && streamed->direct_io()) disk = disk_rates(*streamed);
  for (int r = 0; r < f.repeats; ++r) {
    bw.push_back(ceiling());
    const int seq = engine.add_sequence();
    const double t0 = now_seconds();
    SequenceStep ps{seq, prompt, false};
    std::vector<float> logits = engine.step({&ps, 1});
    const double t1 = now_seconds();
    prefill.push_back(double(prompt.size()) / (t1 - t0));
    bw.push_back(ceiling());
    int32_t tok = argmax({logits.data(), size_t(c.vocab_size)});
    if (cuda) cuda_stage_clock_reset();  // the last repeat's decode steps only (a stage-clock build)
    const ExpertStats vram_before = vram_stats(), ram_before = model->experts().stats();
    const bool profiled = f.profile && !cuda && r + 1 == f.repeats;
    if (profiled) pool.set_profiling(true);
    const double t2 = now_seconds();
    double on_device = 0.0;
    for (int i = 0; i < f.decode_tokens; ++i) {
      SequenceStep ds{seq, {&tok, 1}, false};
      engine.step({&ds, 1}, logits);
      if (cuda) on_device += model->device_forward()->last_device_seconds();
      tok = argmax({logits.data(), size_t(c.vocab_size)});
    }
    const double t3 = now_seconds();
    if (profiled) {
      pool.set_profiling(false);
      regions = pool.profile();
      profiled_s = t3 - t2;
    }
    add_difference(decode_vram, vram_before, vram_stats());
    add_difference(decode_ram, ram_before, model->experts().stats());
    decode.push_back(double(f.decode_tokens) / (t3 - t2));
    if (on_device > 0.0) decode_device.push_back(double(f.decode_tokens) / on_device);
    kv_bytes = engine.kv_bytes();
    engine.remove_sequence(seq);
  }
  const SequenceMemory seq_mem = measure_sequence(engine, f.prompt_tokens + f.decode_tokens, device);
  const Stat b = stat(bw), p = stat(prefill), d = stat(decode);
  const double bytes = double(sizes.bytes_per_token);
  const double gbs = d.median * bytes / 1e9;
  std::printf("model: %s (%s, %d layers, %d experts top-%d)\n", model->dir().c_str(), c.model_type.c_str(),
              c.num_layers, c.num_experts, c.experts_per_token);
  std::printf("device: %s; threads: %d; repeats: %d; prompt %d tokens; decode %d tokens\n", cuda ? "cuda" : "cpu",
              ThreadPool::global().size(), f.repeats, f.prompt_tokens, f.decode_tokens);
  std::printf("%s: %.2f GB/s (min %.2f, max %.2f)\n",
              cuda ? "device copy bandwidth (2 GiB, read + written)" : "read bandwidth (1 GiB streaming read)",
              b.median, b.min, b.max);
  if (cuda) {
    const ExpertStats es = model->device_forward()->expert_stats();
    if (es.slots > 0) {
      std::printf("pinned host-to-device copy (1 GiB): %.2f GB/s\n", cuda_pinned_upload_gbs(device, size_t(1) << 30));
    }
  }
  std::printf("prefill: %.2f tok/s (min %.2f, max %.2f)\n", p.median, p.min, p.max);
  std::printf("decode:  %.2f tok/s (min %.2f, max %.2f)\n", d.median, d.min, d.max);
  if (!decode_device.empty()) {  // the same steps, counting only the device's span of each (cuda events)
    const Stat dd = stat(decode_device);
    std::printf("decode, device time only: %.2f tok/s (min %.2f, max %.2f): the host adds %.1f us a token\n", dd.median,
                dd.min, dd.max, 1e6 / d.median - 1e6 / dd.median);
  }
  if (!regions.empty()) print_profile(regions, profiled_s, f.decode_tokens, pool.size());
  std::printf("bytes per token: %.1f MB; decode reads %.2f GB/s = %.1f%% of the measured read bandwidth\n", bytes / 1e6,
              gbs, 100.0 * gbs / b.median);
  std::printf("ceiling at this bandwidth: %.2f tok/s\n", b.median * 1e9 / bytes);
  // The linear layers' recurrent state (conv windows, delta-rule states): fixed per sequence, inside the KV figure.
  std::printf("peak RSS: %.2f GB; KV cache: %.2f MB", double(peak_rss_bytes()) / 1e9, double(kv_bytes) / 1e6);
  if (seq_mem.state > 0) std::printf(" (of which %.3f MB recurrent state per sequence)", double(seq_mem.state) / 1e6);
  std::printf("\n");
  std::printf(
      "one sequence at %d positions: %.3f MB computed (%.3f MB rows + %.3f MB recurrent state); measured: RSS "
      "%+.3f MB",
      seq_mem.capacity, double(seq_mem.computed) / 1e6, double(seq_mem.computed - seq_mem.state) / 1e6,
      double(seq_mem.state) / 1e6, double(seq_mem.rss) / 1e6);
  if (cuda) std::printf(", VRAM %+.3f MB (cudaMemGetInfo, 2 MiB pages)", double(seq_mem.vram) / 1e6);
  std::printf("\n");
  const auto print_decode_uses = [&](const char* tier, const ExpertStats& s) {
    if (s.hits + s.misses == 0) return;
    std::printf("decode steps, %s expert cache: %llu hits of %llu uses (%.2f%%), %.3f GB read%s", tier,
                (unsigned long long)s.hits, (unsigned long long)(s.hits + s.misses), 100.0 * s.hit_rate(),
                double(s.bytes_read) / 1e9, s.read_gb_per_s() > 0.0 ? " at " : "\n");
    if (s.read_gb_per_s() > 0.0) std::printf("%.2f GB/s\n", s.read_gb_per_s());
  };
  print_decode_uses("VRAM", decode_vram);
  if (decode_vram.host_computed > 0) {  // --cpu-misses
    const double tokens = double(int64_t(f.repeats) * f.decode_tokens);
    std::printf("decode steps, misses computed on the CPU: %llu of %llu (%.2f a token), %.3f ms a token on the host\n",
                (unsigned long long)decode_vram.host_computed, (unsigned long long)decode_vram.misses,
                double(decode_vram.host_computed) / tokens, 1e3 * decode_vram.host_seconds / tokens);
  }
  print_decode_uses("RAM", decode_ram);
  if (!disk.empty() && decode_ram.read_busy_s > 0.0) {
    for (const RandomReadRate& r : disk_rates(*streamed)) disk.push_back(r);
    report_disk_ceiling(disk, decode_ram, d.median, int64_t(f.repeats) * f.decode_tokens);
  }
  if (cuda) std::printf("%s", cuda_stage_clock_report().c_str());
  finish_model(*model,
               int64_t(f.repeats) * (f.prompt_tokens + f.decode_tokens) + int64_t(f.warmup) * (f.prompt_tokens + 1));
  return 0;
}
}  // namespace

void add_bench(CLI::App& app, int* status) {
  auto f = std::make_shared<BenchFlags>();
  CLI::App* cmd = app.add_subcommand("bench", "Measure prefill and decode speed against the read bandwidth");
  add_model_flags(cmd, &f->model);
  add_devices_flags(cmd, &f->model);
  cmd->add_option("--prompt-tokens", f->prompt_tokens, "prompt length (random ids)")->check(CLI::PositiveNumber);
  cmd->add_option("-n,--decode-tokens", f->decode_tokens, "tokens to decode")->check(CLI::PositiveNumber);
  cmd->add_option("--repeats", f->repeats, "repeats; medians are reported")->check(CLI::PositiveNumber);
  cmd->add_option("--warmup", f->warmup,
                  "untimed passes (the prompt and one decode step) before the repeats, as llama-bench warms up "
                  "(default 0: the first repeat also pays first touches and each expert's first checksum)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--profile", f->profile,
                "CPU: print the decode steps' time by parallel region (call site), and how busy each kept the threads");
  cmd->callback([f, status] { *status = run(*f); });
}

}  // namespace seedling::cli
