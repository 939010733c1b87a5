// cli/commands.h - the subcommands of `seedling`, each in its own file, registered by main.cpp.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/model.h"

namespace seedling::cli {

// Flags every command that loads a model shares.
struct ModelFlags {
  std::string model;  // -m; empty: the bundled default model
  int threads = 0;    // 0: all hardware threads
  int ctx = 0;        // 0: the model's max_position_embeddings
  // Where routed experts live (packed folders): --ram-budget 4G or --expert-slots N streams them from disk into a
  // RAM slot cache; with neither, the budget comes from the memory available (printed with its reason).
  std::string ram_budget;
  int expert_slots = 0;
  std::string expert_policy = "lru";
  std::string route_trace;      // --route-trace FILE: chosen experts per token and layer (docs/formats/route-trace.md)
  std::string device;           // --device cpu | cuda | cuda:N; empty: not given (the CPU)
  std::string vram_budget;      // --vram-budget SIZE: VRAM for routed experts (--device cuda)
  std::string vram_admit;       // --vram-admit N|all: misses a decode step copies into the VRAM cache
  std::string cpu_misses;       // --cpu-misses F: the share of a decode step's VRAM-cache misses the CPU computes
  std::string route_replay;     // --route-replay FILE: routes taken from a trace instead of the router (measuring)
  std::string prefetch_replay;  // --prefetch-replay FILE: next-layer guesses from a prediction file (measuring)
  int prefetch_width = 0;       // --prefetch-width N: next-layer prefetch (streamed experts, or a VRAM cache)
  bool no_cuda_graph = false;   // --no-cuda-graph: batch-1 decode launched op by op (--device cuda)
  std::string cpu_dot;          // --cpu-dot auto | float | int8 (ops/matmul.h); empty: SEEDLING_CPU_DOT, else auto
  // Expert parallelism (run, bench, serve; cli/expert_parallel.cpp): --devices cuda:0,cuda:1,... and the route trace
  // whose expert counts balance the placement; the rank and meeting file the launcher gives each rank process.
  std::string devices;
  std::string placement_trace;
  int ep_rank = -1;
  std::string ep_id;
};
void add_model_flags(CLI::App* cmd, ModelFlags* f);
// Sets the thread count, loads the model named by -m (or the default model) and places its experts.
std::unique_ptr<Model> load_model(const ModelFlags& f);
// --device: "cpu" (or not given) -> -1, "cuda" -> 0, "cuda:N" -> N; anything else is an Error naming the flag.
int parse_device(const std::string& text);
// --devices and its companions on run, bench and serve (cli/expert_parallel.cpp).
void add_devices_flags(CLI::App* cmd, ModelFlags* f);
// The checks of --devices that need no device (the list, no --device beside it); the device indices.
std::vector<int> check_devices_flags(const ModelFlags& f);
// The model of an expert-parallel run: in the process the user started, launches one rank process per device and
// throws RanksFinished with their status; in a rank, joins the others and loads the model with its experts.
std::unique_ptr<Model> load_expert_parallel(const ModelFlags& f);
// Thrown by the launcher when its ranks have finished: main returns `status` without running the command further.
struct RanksFinished {
  int status = 0;
};
// The command line as main received it, for the launcher to run again per rank.
void set_command_line(int argc, char** argv);

// At the end of a command: closes the route trace and prints the expert statistics (hits, reads, latency) for
// `tokens` processed tokens on stderr.
void finish_model(Model& model, int64_t tokens);
std::string default_model_dir();
// The model folder -m names, or the default model's.
std::string model_dir(const ModelFlags& f);

// "1,2,3" -> ids; an Error naming the flag on anything that is not a comma-separated list of integers.
std::vector<int32_t> parse_ids(const std::string& text, const char* flag);
std::string join_ids(const std::vector<int32_t>& ids);
// The token ids of a text file (no special tokens added), by the tokenizer of model folder `dir`; an Error naming
// the file when it cannot be read.
std::vector<int32_t> read_text_tokens(const std::string& dir, const std::string& file);

double now_seconds();
// Peak resident set size of this process in bytes (VmHWM).
uint64_t peak_rss_bytes();
// Resident set size of this process now, in bytes (VmRSS).
uint64_t rss_bytes();

// Each adds its subcommand to `app`; when parsed, the subcommand runs and stores its exit status in *status.
void add_run(CLI::App& app, int* status);
void add_logits(CLI::App& app, int* status);
void add_info(CLI::App& app, int* status);
void add_bench(CLI::App& app, int* status);
void add_synth(CLI::App& app, int* status);
void add_chat(CLI::App& app, int* status);
void add_tokenize(CLI::App& app, int* status);
void add_detokenize(CLI::App& app, int* status);
void add_perplexity(CLI::App& app, int* status);
void add_pack(CLI::App& app, int* status);

void add_quant_report(CLI::App& app, int* status);
void add_cache_sim(CLI::App& app, int* status);
void add_imatrix(CLI::App& app, int* status);
void add_serve(CLI::App& app, int* status);

}  // namespace seedling::cli
