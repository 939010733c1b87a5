#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "cli/commands.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "cuda/device.h"
#include "experts/streamed_experts.h"
#include "ops/matmul.h"
#include "tokenizer/tokenizer.h"

#ifndef SEEDLING_SOURCE_DIR
#define SEEDLING_SOURCE_DIR "."
#endif

namespace seedling::cli {

std::string default_model_dir() {
  if (const char* env = std::getenv("SEEDLING_MODEL")) return env;
  return std::string(SEEDLING_SOURCE_DIR) + "/models/seedling-demo-moe";
}

void place_experts(Model& model, const ModelFlags& f);
void open_route_trace(Model& model, const ModelFlags& f);

void add_model_flags(CLI::App* cmd, ModelFlags* f) {
  cmd->add_option("-m,--model", f->model, "Hugging Face model folder (default: the bundled model)");
  cmd->add_option("-t,--threads", f->threads, "CPU threads, 1 to 1024 (default: all)")->check(CLI::Range(0, 1024));
  cmd->add_option("--ctx", f->ctx, "context limit in positions (default: the model's)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--ram-budget", f->ram_budget, "RAM for streamed experts, e.g. 4G (packed folders)");
  cmd->add_option("--expert-slots", f->expert_slots, "expert slots in RAM (at least the router's top-k)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--expert-policy", f->expert_policy, "slot eviction of the RAM and VRAM expert caches: lru or lfu")
      ->capture_default_str();
  cmd->add_option("--route-trace", f->route_trace, "write the chosen experts per token and layer to FILE (CSV)");
  cmd->add_option("--device", f->device, "where the forward runs: cpu (default), cuda or cuda:N");
  cmd->add_option("--vram-budget", f->vram_budget,
                  "VRAM for routed experts, e.g. 8G (--device cuda; default: all when they fit, else what is free)");
  cmd->add_option("--vram-admit", f->vram_admit,
                  "VRAM cache, decode: copy at most N of a step's missed experts into the cache (the others are read "
                  "in place over PCIe and stay out), or all (the default)");
  cmd->add_option("--cpu-misses", f->cpu_misses,
                  "VRAM cache, decode: the share (0 to 1) of each layer's missed experts that the CPU computes from "
                  "host memory while the GPU runs the others (default 0: the GPU reads every miss over PCIe; 1: the "
                  "CPU computes them all, as llama.cpp's -ot exps=CPU does for every expert)");
  cmd->add_option(
      "--route-replay", f->route_replay,
      "measuring tool: take every token's experts and weights from the route trace FILE instead of the "
      "router (same routes on different models; changes logits; keyed by token, so any batching replays it)");
  cmd->add_option("--prefetch-width", f->prefetch_width,
                  "next-layer prefetch: before each MoE layer's attention, start fetching the N experts its router "
                  "picks from the residual entering the layer: reads from disk into the RAM slot cache (streamed "
                  "experts: --ram-budget or --expert-slots), or with --device cuda copies into a VRAM cache over "
                  "pinned host memory (default 0: off)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--prefetch-replay", f->prefetch_replay,
                  "measuring tool, with --route-replay and --prefetch-width: take the next-layer guesses from the "
                  "prediction FILE (token_index,layer,predicted_ids) instead of the model's router");
  cmd->add_option("--cpu-dot", f->cpu_dot,
                  "how the CPU multiplies quantized weights (q4/q8 packs, GGUF quant types): int8 (activations "
                  "quantized to int8 per block, as llama.cpp does: up to 4x faster, ~0.0007 KLD), float (activations "
                  "kept in float32: the exact product of the stored weights) or auto (default: int8, whose kernel is "
                  "the faster for every quantized codec)")
      ->check(CLI::IsMember({"auto", "float", "int8"}));
  cmd->add_flag("--no-cuda-graph", f->no_cuda_graph,
                "--device cuda: launch batch-1 decode op by op instead of replaying one CUDA graph (for comparison)");
}

int parse_device(const std::string& text) {
  if (text == "cpu" || text.empty()) return -1;
  if (text == "cuda") return 0;
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5 && text.size() < 9 &&
      text.find_first_not_of("0123456789", 5) == std::string::npos) {
    return std::stoi(text.substr(5));
  }
  fail("--device: '{}' is not a device (expected cpu, cuda or cuda:N)", text);
}

std::string model_dir(const ModelFlags& f) {
  const std::string dir = f.model.empty() ? default_model_dir() : f.model;
  if (f.model.empty() && !std::filesystem::exists(dir)) fail("no -m given and the default model {} is missing", dir);
  return dir;
}

std::unique_ptr<Model> load_model(const ModelFlags& f) {
  if (!f.devices.empty()) return load_expert_parallel(f);
  if (f.threads > 0) ThreadPool::set_global_threads(f.threads);
  if (!f.cpu_dot.empty()) {
    ops::set_cpu_dot(f.cpu_dot == "int8"    ? ops::CpuDot::Int8
                     : f.cpu_dot == "float" ? ops::CpuDot::Float
                                            : ops::CpuDot::Auto);
  }
  const int device = parse_device(f.device);
  if (device < 0 && !f.vram_budget.empty()) fail("--vram-budget needs --device cuda");
  if (device < 0 && f.no_cuda_graph) fail("--no-cuda-graph needs --device cuda");
  int vram_admit = CudaForwardOptions::kAdmitEveryMiss;  // "all", the default
  if (!f.vram_admit.empty() && f.vram_admit != "all") {
    const bool digits = f.vram_admit.size() < 10 && f.vram_admit.find_first_not_of("0123456789") == std::string::npos;
    if (!digits) fail("--vram-admit: '{}' is not a count of experts or all", f.vram_admit);
    vram_admit = std::stoi(f.vram_admit);
  }
  if (device < 0 && !f.vram_admit.empty()) fail("--vram-admit needs --device cuda");
  double cpu_misses = 0.0;
  if (!f.cpu_misses.empty()) {
    char* end = nullptr;
    cpu_misses = std::strtod(f.cpu_misses.c_str(), &end);
    if (end != f.cpu_misses.c_str() + f.cpu_misses.size() || !(cpu_misses >= 0.0 && cpu_misses <= 1.0)) {
      fail("--cpu-misses: '{}' is not a share from 0 to 1", f.cpu_misses);
    }
    if (device < 0) fail("--cpu-misses needs --device cuda");
  }
  if (!f.prefetch_replay.empty() && (f.route_replay.empty() || f.prefetch_width == 0)) {
    fail("--prefetch-replay needs --route-replay and --prefetch-width: its guesses are for the replayed routes");
  }
  if (!f.route_replay.empty() && f.prefetch_width > 0 && f.prefetch_replay.empty()) {
    fail(
        "--prefetch-width with --route-replay needs --prefetch-replay: the model's own router cannot guess routes "
        "it does not choose");
  }
  CudaForwardOptions co;
  co.device = device;
  co.graphs = !f.no_cuda_graph;
  co.policy = parse_eviction_policy(f.expert_policy);
  co.prefetch_width = f.prefetch_width;
  co.vram_admit = vram_admit;
  co.cpu_misses = cpu_misses;
  if (!f.vram_budget.empty()) {
    co.vram_budget = parse_byte_size(f.vram_budget, "--vram-budget");
    co.budget_given = true;
  }
  if (device >= 0 && cuda_devices().devices.empty()) {
    fail("--device {}: no CUDA device: {}", f.device, cuda_devices().why_none);  // before the model loads
  }
  auto model = Model::load(model_dir(f));
  place_experts(*model, f);
  open_route_trace(*model, f);
  if (device >= 0) use_cuda_forward(*model, co);
  if (device < 0 && f.prefetch_width > 0) {
    if (dynamic_cast<StreamedExperts*>(&model->experts()) == nullptr) {
      fail(
          "--prefetch-width: every expert is mapped in memory, so there is nothing to prefetch (stream them from a "
          "packed folder with --ram-budget or --expert-slots)");
    }
    model->set_prefetch_width(f.prefetch_width);
  }
  return model;
}

std::vector<int32_t> parse_ids(const std::string& text, const char* flag) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find(',', i);
    if (j == std::string::npos) j = text.size();
    std::string part = text.substr(i, j - i);
    while (!part.empty() && part.front() == ' ') part.erase(part.begin());
    while (!part.empty() && part.back() == ' ') part.pop_back();
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (part.empty() || used != part.size() || v < 0 || v > INT32_MAX) {
      fail("{}: '{}' is not a token id (expected comma-separated non-negative integers)", flag, part);
    }
    ids.push_back(int32_t(v));
    i = j + 1;
  }
  if (ids.empty()) fail("{}: no token ids given", flag);
  return ids;
}

std::string join_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

std::vector<int32_t> read_text_tokens(const std::string& dir, const std::string& file) {
  const Tokenizer tok = Tokenizer::from_file(find_tokenizer_file(dir));
  if (std::filesystem::is_directory(file)) fail("{}: is a folder, expected a text file", file);
  std::ifstream in(file, std::ios::binary);
  if (!in) fail("{}: cannot open", file);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return tok.encode(text, false);
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

namespace {
// A "Name:  N kB" line of /proc/self/status, in bytes (0 where absent).
uint64_t status_bytes(const char* name) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(name);
  while (std::getline(in, line)) {
    if (line.compare(0, n, name) == 0 && line.size() > n && line[n] == ':')
      return std::stoull(line.substr(n + 1)) * 1024;
  }
  return 0;
}
}  // namespace

uint64_t peak_rss_bytes() {
  return status_bytes("VmHWM");
}

uint64_t rss_bytes() {
  return status_bytes("VmRSS");
}

}  // namespace seedling::cli
