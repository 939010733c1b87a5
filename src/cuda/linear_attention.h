// cuda/linear_attention.h - the Gated DeltaNet mixer on CUDA: model/linear_attention.cpp's layer step for step, from
// the kernels of cuda/kernels.h (gated_delta.cu). CudaForward (cuda_forward.cpp) owns one and hands it every layer
// whose plan's mixer is Mixer::GatedDeltaNet, with the batch described once per forward (DeltaBatch).
//
// A sequence's states (every such layer's conv window and per-head state matrices, float32, the layout of
// KvCache::state one layer after the other) are one VRAM array owned by its KvCache through the forward's device
// state, allocated once; a run of rows starting at position 0 finds it zeroed. A sequence with one row in a forward
// takes the recurrent step, one with more the chunked form, as on the CPU.
#pragma once

#include <array>
#include <functional>
#include <vector>

#include "cuda/device_scratch.h"
#include "cuda/kernels.h"
#include "model/config.h"
#include "model/family.h"

namespace seedling::cuda {

// The rows of one forward as the mixer sees them (device arrays of the forward's batch description).
struct DeltaBatch {
  int64_t m = 0;
  const DeltaRow* rows = nullptr;  // (m): each row's sequence state and run
  const int* decode = nullptr;     // rows alone in their sequence in this forward: the recurrent step
  int64_t decode_rows = 0;
  const int* runs = nullptr;  // the first rows of runs of two or more: the chunked form
  int64_t runs_n = 0;
};

class GatedDeltaNet {
 public:
  // y = x W^T (or y +=, accumulate) for m rows, as the forward runs its products (CUDA or tensor cores by m).
  using Product = std::function<void(const float* x, int64_t m, const DeviceMatrix& w, float* y, bool accumulate)>;
  // Each Gated DeltaNet layer's place in a sequence's state array; a layer whose head dims the chunked kernel cannot
  // hold on this device is refused, naming it.
  GatedDeltaNet(const ModelConfig& c, Product product);
  // Floats of one sequence's state array (0: the model has no Gated DeltaNet layer).
  size_t state_floats() const { return state_floats_; }
  // x += out_proj(mixer(norm(x))) for layer `layer`, its weights by role (the forward's device copies); the normed
  // rows are left in xn.
  void run(int layer, const std::array<DeviceMatrix, kRoleCount>& matrices,
           const std::array<const float*, kRoleCount>& vectors, float* x, float* xn, const DeltaBatch& b,
           cudaStream_t stream);
  // The scratch every launch's buffers are carved from (a decode graph stays valid while it is unchanged).
  const void* scratch() const { return s_.ptr(); }

 private:
  const ModelConfig c_;
  Product product_;
  std::vector<size_t> offset_;  // per layer: its state's offset in the array
  size_t state_floats_ = 0;
  DeviceScratch s_;
};

}  // namespace seedling::cuda
