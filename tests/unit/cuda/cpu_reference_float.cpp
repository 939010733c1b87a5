// The CUDA tests hold the GPU to the CPU's float path: CUDA's products keep x in float32, so the CPU reference
// must too (the CPU's default for quantized weights is int8 activations, ops/matmul.h). Set for this process and,
// through the environment, for every `seedling` command a test runs.
#include <gtest/gtest.h>

#include <cstdlib>

#include "ops/matmul.h"

namespace seedling {
namespace {

class FloatCpuReference : public ::testing::Environment {
 public:
  void SetUp() override {
    ::setenv("SEEDLING_CPU_DOT", "float", 1);
    ops::set_cpu_dot(ops::CpuDot::Float);
  }
};

[[maybe_unused]] const ::testing::Environment* const kFloatCpuReference =
    ::testing::AddGlobalTestEnvironment(new FloatCpuReference);

}  // namespace
}  // namespace seedling
