// cuda/device.h - the CUDA devices this process can use, and the switch that moves a model's forward onto one.
//
// Compiled with or without CUDA. Without the toolkit at build time, or without a driver or GPU at run time, the
// device list is empty and `why_none` says which; asking for the CUDA forward then fails with that reason, one
// clear Error, never a crash or a silent fall back to the CPU.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "experts/slot_cache.h"
#include "model/model.h"
#include "parallel/placement.h"
#include "parallel/transport.h"

namespace seedling {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  int sm_major = 0, sm_minor = 0;
  int multiprocessors = 0;
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;
};

struct CudaDevices {
  std::vector<CudaDeviceInfo> devices;
  std::string why_none;  // set when devices is empty: built without CUDA, no driver, no GPU
};
CudaDevices cuda_devices();
bool cuda_compiled();

// Where a model's expert weights live on the device.
struct CudaForwardOptions {
  int device = 0;
  // Bytes of VRAM for routed experts. 0: every expert in VRAM when they fit in what is free minus a reserve, else
  // a slot cache of that size fed from pinned host memory (the choice printed with its reason). A budget below one
  // layer's top-k experts is an Error naming the minimum.
  uint64_t vram_budget = 0;
  bool budget_given = false;
  bool verbose = true;  // print the placement on stderr
  bool graphs = true;   // batch-1 decode as one replayed CUDA graph (all experts resident); false: op by op
  EvictionPolicy policy = EvictionPolicy::lru;  // the VRAM slot cache's eviction (--expert-policy)
  // Next-layer prefetch into the VRAM cache (--prefetch-width): before each MoE layer's attention, its router applied
  // to the residual entering the layer names its `prefetch_width` likeliest experts, copied ahead while the
  // attention runs. 0: off. Needs the cache fed from pinned host memory (an Error otherwise, and with every expert
  // resident there is nothing to fetch).
  int prefetch_width = 0;
  // Misses a decode step copies into the VRAM cache (--vram-admit). A decode step that reads its misses in place
  // over PCIe copies them into slots afterwards, so every miss it admits crosses the bus twice; past the cap a miss
  // stays out of the cache (a later step reads it in place again). On a trained router's trace a cap of 16-32 a step
  // (48 layers) cut that traffic by 28-44% for 3-8 points of hit rate
  // (docs/results/2026-12-06-cache-admission-cap-trained-trace.md); the default stays every miss until a GPU run
  // measures the cap's speed. Prompt passes, which copy their misses before reading them, admit every miss.
  static constexpr int kAdmitEveryMiss = 1 << 30;
  int vram_admit = kAdmitEveryMiss;
  // The share of each decode step's misses, per layer, that the host CPU computes (--cpu-misses) instead of the GPU
  // reading them over PCIe: 0 (default) none, 1 all, as llama.cpp's `-ot exps=CPU` does for every expert. The host's
  // memory bandwidth then adds to the bus's. Needs a VRAM cache read in place (pinned host memory; otherwise a note
  // says it changes nothing). Not the bits of the all-GPU step: the CPU's kernels, and the two parts' sums added in
  // turn.
  double cpu_misses = 0.0;
  // Expert parallelism (use_cuda_expert_parallel): the experts of this rank (transport->rank()) are those the
  // placement gives it, all in VRAM; the other ranks run theirs. Null: every expert here.
  std::shared_ptr<const ExpertPlacement> placement;
  Transport* transport = nullptr;
};

// Ceilings for benchmarks, measured now on `device` with CUDA events (median of 5 after a warm-up):
// a device-to-device copy of `bytes`, counting bytes read plus bytes written (the HBM ceiling), and a pinned
// host-to-device copy of `bytes` (the PCIe ceiling). GB/s. An Error without a device.
double cuda_device_copy_gbs(int device, size_t bytes);
// The device's free memory now (cudaMemGetInfo: every process's allocations count, in the driver's pages). An Error
// without a device.
uint64_t cuda_free_bytes(int device);
double cuda_pinned_upload_gbs(int device, size_t bytes);

// The stage clock (cuda/kernels.h; a measuring build, cmake -DSEEDLING_STAGE_CLOCK=ON): zero its sums before the
// steps to measure, then its report ("" in other builds).
void cuda_stage_clock_reset();
std::string cuda_stage_clock_report();

// Expert parallelism over NCCL (cuda/nccl_transport.cpp), libnccl.so.2 loaded at run time; each an Error naming
// the library when it cannot be loaded, or saying the build has no CUDA. NCCL_NVLS_ENABLE is set to 0 first.
// A new unique id (nccl_unique_id_bytes() bytes) for the ranks to meet by; made by the launcher, read by each rank.
std::vector<uint8_t> nccl_unique_id();
size_t nccl_unique_id_bytes();
// Joins rank `rank` of `ranks` on `device` (blocks until all have joined); its exchanges run on `stream` (a
// cudaStream_t; null: the default stream) over device memory.
std::unique_ptr<Transport> nccl_transport(int device, int rank, int ranks, std::span<const uint8_t> id,
                                          void* stream = nullptr);

// Expert parallelism (--devices): puts the model's forward on options.device holding only the routed experts
// `placement` gives `transport`'s rank, every MoE layer's routed sum exchanged with the other ranks through it
// (docs/expert-parallel.md); an Error naming what is missing otherwise.
void use_cuda_expert_parallel(Model& model, const CudaForwardOptions& options,
                              std::shared_ptr<const ExpertPlacement> placement, Transport& transport);

// Puts the model's forward on a CUDA device (cuda/cuda_forward.h): an Error naming the reason when there is none.
void use_cuda_forward(Model& model, const CudaForwardOptions& options);

}  // namespace seedling
