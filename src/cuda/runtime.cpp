// cuda/runtime.cpp - CUDA runtime calls that need fmt (kept out of .cu files, which nvcc compiles without it).
#include "core/error.h"
#include "cuda/kernels.h"

namespace seedling::cuda {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail("CUDA: {} failed: {}", what, cudaGetErrorString(e));
}

}  // namespace seedling::cuda
