// cuda/device.cpp - device discovery through the CUDA runtime, or the reason there is none.
#include "cuda/device.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

#ifdef SEEDLING_HAVE_CUDA
#include <cuda_runtime.h>

#include "cuda/cuda_forward.h"
#include "cuda/kernels.h"
#endif

namespace seedling {

bool cuda_compiled() {
#ifdef SEEDLING_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

CudaDevices cuda_devices() {
  CudaDevices out;
#ifdef SEEDLING_HAVE_CUDA
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    out.why_none = std::string("the CUDA runtime found no usable GPU (") + cudaGetErrorString(e) + ")";
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return out;
  }
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    CudaDeviceInfo d;
    d.index = i;
    d.name = p.name;
    d.sm_major = p.major;
    d.sm_minor = p.minor;
    d.multiprocessors = p.multiProcessorCount;
    d.total_bytes = p.totalGlobalMem;
    size_t free_b = 0, total_b = 0;
    if (cudaSetDevice(i) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) d.free_bytes = free_b;
    out.devices.push_back(d);
  }
  if (out.devices.empty()) out.why_none = "the CUDA runtime reports no GPU";
#else
  out.why_none = "this seedling was built without CUDA (no nvcc at build time, or -DSEEDLING_CUDA=OFF)";
#endif
  return out;
}

#ifdef SEEDLING_HAVE_CUDA
namespace {
void must(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail("CUDA: {} failed: {}", what, cudaGetErrorString(e));
}
// Median GB/s of 5 timed copies of `bytes` from src to dst (after one untimed), `moved` bytes counted per copy.
double timed_copy_gbs(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, double moved) {
  cudaEvent_t a, b;
  must(cudaEventCreate(&a), "creating an event");
  must(cudaEventCreate(&b), "creating an event");
  must(cudaMemcpy(dst, src, bytes, kind), "a warm-up copy");
  std::vector<double> gbs;
  for (int i = 0; i < 5; ++i) {
    must(cudaEventRecord(a), "recording an event");
    must(cudaMemcpyAsync(dst, src, bytes, kind), "a timed copy");
    must(cudaEventRecord(b), "recording an event");
    must(cudaEventSynchronize(b), "waiting for a copy");
    float ms = 0;
    must(cudaEventElapsedTime(&ms, a, b), "reading an event");
    gbs.push_back(moved / (double(ms) * 1e-3) / 1e9);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(gbs.begin(), gbs.end());
  return gbs[gbs.size() / 2];
}
}  // namespace
#endif

double cuda_device_copy_gbs(int device, size_t bytes) {
#ifdef SEEDLING_HAVE_CUDA
  must(cudaSetDevice(device), "selecting the device");
  void *a = nullptr, *b = nullptr;
  must(cudaMalloc(&a, bytes), "allocating a copy buffer");
  must(cudaMalloc(&b, bytes), "allocating a copy buffer");
  must(cudaMemset(a, 1, bytes), "filling a copy buffer");
  const double g = timed_copy_gbs(b, a, bytes, cudaMemcpyDeviceToDevice, 2.0 * double(bytes));
  cudaFree(a);
  cudaFree(b);
  return g;
#else
  fail("no CUDA device: {}", cuda_devices().why_none);
#endif
}

uint64_t cuda_free_bytes(int device) {
#ifdef SEEDLING_HAVE_CUDA
  must(cudaSetDevice(device), "selecting the device");
  size_t free_b = 0, total_b = 0;
  must(cudaMemGetInfo(&free_b, &total_b), "reading the free memory");
  return free_b;
#else
  fail("no CUDA device: {}", cuda_devices().why_none);
#endif
}

double cuda_pinned_upload_gbs(int device, size_t bytes) {
#ifdef SEEDLING_HAVE_CUDA
  must(cudaSetDevice(device), "selecting the device");
  void *h = nullptr, *d = nullptr;
  must(cudaHostAlloc(&h, bytes, cudaHostAllocDefault), "allocating pinned memory");
  must(cudaMalloc(&d, bytes), "allocating a copy buffer");
  std::memset(h, 1, bytes);
  const double g = timed_copy_gbs(d, h, bytes, cudaMemcpyHostToDevice, double(bytes));
  cudaFree(d);
  cudaFreeHost(h);
  return g;
#else
  fail("no CUDA device: {}", cuda_devices().why_none);
#endif
}

void cuda_stage_clock_reset() {
#ifdef SEEDLING_HAVE_CUDA
  cuda::stage_clock_reset(nullptr);
#endif
}

std::string cuda_stage_clock_report() {
#ifdef SEEDLING_HAVE_CUDA
  return cuda::stage_clock_report();
#else
  return "";
#endif
}

void use_cuda_forward(Model& model, const CudaForwardOptions& options) {
  const CudaDevices d = cuda_devices();
  if (d.devices.empty()) fail("--device cuda: no CUDA device: {}", d.why_none);
  if (options.device < 0 || options.device >= int(d.devices.size())) {
    fail("--device cuda:{}: there are {} CUDA devices (0 to {})", options.device, d.devices.size(),
         d.devices.size() - 1);
  }
#ifdef SEEDLING_HAVE_CUDA
  model.set_device_forward(make_cuda_forward(model, options));
#endif
}

void use_cuda_expert_parallel(Model& model, const CudaForwardOptions& options,
                              std::shared_ptr<const ExpertPlacement> placement, Transport& transport) {
  CudaForwardOptions o = options;
  o.placement = std::move(placement);
  o.transport = &transport;
  use_cuda_forward(model, o);
}

#ifndef SEEDLING_HAVE_CUDA
// Without CUDA there is no NCCL transport (cuda/nccl_transport.cpp is built with the backend only).
std::vector<uint8_t> nccl_unique_id() {
  fail("--devices: {}", cuda_devices().why_none);
}

size_t nccl_unique_id_bytes() {
  return 128;
}

std::unique_ptr<Transport> nccl_transport(int, int, int, std::span<const uint8_t>, void*) {
  fail("--devices: {}", cuda_devices().why_none);
}
#endif

}  // namespace seedling
