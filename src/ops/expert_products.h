// ops/expert_products.h - the routed experts of one MoE layer in one parallel region.
//
// Every expert's work is cut into pieces that the pool's threads claim in order, all in one parallel_for: first
// each expert's load (its rows of x gathered, and quantized once for gate and up with int8 activations), then
// (expert, 64 outputs) of gate and up together, each followed by the activation of those columns, then (expert, 64
// outputs) of down. A piece that needs an earlier one waits for it (gate/up for its expert's load; down for all of
// its expert's gate/up pieces, the last of which quantizes the activations for down); every earlier piece has
// been claimed by a running thread, so the waits end. No fork and join per matrix, and each product has matmul's
// bits (matmul_piece): the same outputs alone, batched, or with any thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "ops/matmul.h"

namespace seedling::ops {

// One routed expert: m rows, x (m x gate.cols) -> g, u (m x gate.rows) -> a (m x gate.rows) -> d (m x down.rows).
// The caller owns the buffers; every matrix must be matmul_by_pieces.
struct ExpertJob {
  int64_t m = 0;
  Matrix gate, up, down;
  float *x = nullptr, *g = nullptr, *u = nullptr, *a = nullptr, *d = nullptr;
};

// The caller's steps, called from any thread, each on its own job's buffers: load writes x; activate writes a's
// columns [n0, n1) of every row from g and u (biases, then the activation); finish follows down's columns [n0, n1).
struct ExpertSteps {
  std::function<void(size_t job)> load;
  std::function<void(size_t job, int64_t n0, int64_t n1)> activate;
  std::function<void(size_t job, int64_t n0, int64_t n1)> finish;
};

// Runs every job's steps and products; rethrows the first exception a step or product threw, after the region.
void expert_products(std::span<const ExpertJob> jobs, const ExpertSteps& steps);

}  // namespace seedling::ops
