// cli/expert_parallel.cpp - `--devices cuda:0,cuda:1,...`: expert parallelism, one process per GPU.
//
// The process the user started checks the flags and the devices, makes the ranks' NCCL unique id and writes it into
// a private folder, then runs this binary once per device with the same arguments plus `--ep-rank R --ep-id FILE`
// (parallel/launch.h) and returns their status. Each rank joins the others over NCCL (cuda/nccl_transport.cpp),
// loads the model, plans the expert placement (parallel/placement.h: balanced by --placement-trace's expert counts,
// uniform without) and puts the forward on its GPU with its share of the experts. Every rank runs the same
// command on the same inputs, so all compute the same tokens; rank 0 prints them. docs/expert-parallel.md.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "cuda/device.h"
#include "experts/route_trace.h"
#include "experts/streamed_experts.h"
#include "parallel/launch.h"
#include "parallel/placement.h"

namespace seedling::cli {

void place_experts(Model& model, const ModelFlags& f);  // cli/expert_placement.cpp
void open_route_trace(Model& model, const ModelFlags& f);

namespace {

std::vector<std::string>& command_line() {
  static std::vector<std::string> args;
  return args;
}

// Lives as long as the process: the forward exchanges through it on every MoE layer.
std::unique_ptr<Transport>& transport_slot() {
  static std::unique_ptr<Transport> t;
  return t;
}

PlacementInput placement_input(const Model& model, const ModelFlags& f, int ranks) {
  const ModelConfig& c = model.config();
  PlacementInput in;
  in.ranks = ranks;
  in.num_experts = c.num_experts;
  in.layer_has_experts = c.layer_has_experts;
  in.expert_bytes.assign(size_t(c.num_layers), uint64_t(model.expert_bytes()));
  if (auto packed = model.packed()) {  // a packed folder's blobs, per layer (their codecs may differ)
    for (int l = 0; l < c.num_layers; ++l) {
      if (packed->layer_has_experts(l)) in.expert_bytes[size_t(l)] = packed->expert_layer(l).blob_bytes;
    }
  }
  if (!f.placement_trace.empty()) {
    in.load = expert_load_from_trace(read_route_trace(f.placement_trace), c.layer_has_experts, c.num_experts);
  }
  // --vram-budget is each GPU's; without it every rank's experts are placed evenly and its VRAM cache decides which
  // stay resident, as on one GPU.
  if (!f.vram_budget.empty()) in.rank_budget.assign(size_t(ranks), parse_byte_size(f.vram_budget, "--vram-budget"));
  return in;
}

}  // namespace

void set_command_line(int argc, char** argv) {
  command_line().assign(argv, argv + argc);
}

void add_devices_flags(CLI::App* cmd, ModelFlags* f) {
  cmd->add_option("--devices", f->devices,
                  "expert parallelism: one process per GPU, e.g. cuda:0,cuda:1; each GPU holds a share of every MoE "
                  "layer's experts, attention and dense layers run on all (docs/expert-parallel.md)");
  cmd->add_option("--placement-trace", f->placement_trace,
                  "with --devices: balance the experts over the GPUs by how often this route trace (--route-trace) "
                  "chose each (default: the same number of experts on each)");
  // Set by the launcher on the rank processes it starts, not by users: hidden (no group).
  cmd->add_option("--ep-rank", f->ep_rank)->group("");
  cmd->add_option("--ep-id", f->ep_id)->group("");
}

std::vector<int> check_devices_flags(const ModelFlags& f) {
  const std::vector<int> devices = parse_devices(f.devices);
  if (!f.device.empty()) {
    fail("--devices and --device cannot be given together: --devices names every GPU the run uses");
  }
  if (f.prefetch_width > 0) fail("--prefetch-width does not run with --devices yet (docs/expert-parallel.md)");
  if (!f.route_replay.empty()) fail("--route-replay does not run with --devices yet (docs/expert-parallel.md)");
  if (!f.placement_trace.empty() && !std::filesystem::is_regular_file(f.placement_trace)) {
    fail("--placement-trace: {}: no such file", f.placement_trace);
  }
  if (f.ep_rank >= int(devices.size())) fail("--ep-rank {}: --devices names {}", f.ep_rank, devices.size());
  return devices;
}

std::unique_ptr<Model> load_expert_parallel(const ModelFlags& f) {
  const std::vector<int> devices = check_devices_flags(f);
  const int ranks = int(devices.size());
  const CudaDevices cuda = cuda_devices();
  if (cuda.devices.empty()) fail("--devices: no CUDA device: {}", cuda.why_none);
  for (int d : devices) {
    if (d >= int(cuda.devices.size())) {
      fail("--devices: cuda:{} is not a device here ({} CUDA devices: cuda:0 to cuda:{})", d, cuda.devices.size(),
           cuda.devices.size() - 1);
    }
  }
  if (f.ep_rank < 0) {  // the launcher
    model_dir(f);       // a missing default model is one error here, not one per rank
    const std::vector<uint8_t> id = nccl_unique_id();
    PrivateDir dir("ep");
    const std::string id_file = dir.write_file("nccl-id", id);
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    std::vector<std::vector<std::string>> argv;
    for (int r = 0; r < ranks; ++r) {
      std::vector<std::string> a = command_line();
      a[0] = self;
      a.insert(a.end(), {"--ep-rank", std::to_string(r), "--ep-id", id_file});
      argv.push_back(std::move(a));
    }
    std::fprintf(stderr, "devices: %d ranks (%s), one process each\n", ranks, f.devices.c_str());
    throw RanksFinished{launch_ranks(argv, true)};
  }
  // A rank: join the others first, so a rank that cannot start fails them all before any loads a model.
  const int rank = f.ep_rank, device = devices[size_t(rank)];
  if (f.ep_id.empty()) fail("--ep-rank needs --ep-id (the launcher gives both)");
  const std::vector<uint8_t> id = read_meeting_file(f.ep_id, nccl_unique_id_bytes());
  transport_slot() = nccl_transport(device, rank, ranks, id);
  transport_slot()->barrier();
  if (rank == 0) std::fprintf(stderr, "devices: %d ranks joined over %s\n", ranks, transport_slot()->name());
  ModelFlags one = f;  // the rank's model, as on one GPU: its own device
  one.devices.clear();
  if (f.threads > 0) ThreadPool::set_global_threads(f.threads);
  auto model = Model::load(model_dir(one));
  place_experts(*model, one);
  if (rank == 0) open_route_trace(*model, one);  // every rank routes alike: one trace
  const PlacementInput in = placement_input(*model, f, ranks);
  auto placement = std::make_shared<const ExpertPlacement>(plan_placement(in));
  if (rank == 0) std::fputs(describe_placement(*placement, in).c_str(), stderr);
  CudaForwardOptions co;
  co.device = device;
  co.graphs = !f.no_cuda_graph;
  co.policy = parse_eviction_policy(f.expert_policy);
  co.verbose = rank == 0;
  if (!f.vram_budget.empty()) {
    co.vram_budget = parse_byte_size(f.vram_budget, "--vram-budget");
    co.budget_given = true;
  }
  use_cuda_expert_parallel(*model, co, placement, *transport_slot());
  return model;
}

}  // namespace seedling::cli
