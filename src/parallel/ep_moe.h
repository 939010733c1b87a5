// parallel/ep_moe.h - a MoE layer's routed sum over expert-parallel ranks (Model::set_routed_sum).
//
// Every rank holds the same batch (attention, the router and the dense parts replicated) and owns the experts the
// placement gives it. Per MoE layer, rank r takes its shard of the rows (row_shard), dispatches them to the owners
// of their experts (all-to-all-v of rows and metadata), runs the pairs it was sent through Model::expert_outputs,
// sends the outputs back (all-to-all-v), combines its rows in slot order (combine_expert_outputs) and all-gathers
// the combined rows, so every rank leaves the layer with the whole batch's sum: the single-device bits.
// This is the CPU side, over host buffers (ThreadTransport in the tests); the CUDA forward would run the same plan
// over NcclTransport with device buffers (docs/expert-parallel.md says what is left).
#pragma once

#include <vector>

#include "model/model.h"
#include "parallel/dispatch.h"
#include "parallel/transport.h"

namespace seedling {

class ExpertParallelMoe final : public RoutedSum {
 public:
  // `model` computes this rank's experts (only the ones it owns are asked for); all three must outlive this.
  // from_routes: every rank works out what it receives from the routes (replicated_exchange, what the CUDA forward
  // does) instead of exchanging counts and metadata; the same rows and sums either way.
  ExpertParallelMoe(Model& model, const ExpertPlacement& placement, Transport& transport, bool from_routes = false);
  void routed_sum(int layer, int64_t M, const float* xn, const int* chosen, const float* weight, float* out) override;

  // Rows of H floats this rank sent in the last layer (dispatch, return, all-gather), for measurements.
  struct Traffic {
    int64_t dispatched_rows = 0, returned_rows = 0, gathered_rows = 0;
  };
  const Traffic& last_traffic() const { return traffic_; }

 private:
  Model& model_;
  const ExpertPlacement& placement_;
  Transport& t_;
  bool from_routes_;
  Traffic traffic_;
  // Reused between layers: a prompt's are tens of MB.
  std::vector<float> send_, recv_, outputs_, returned_;
  std::vector<int32_t> meta_;
};

// rows (M, width) on every rank, each rank's row_shard of them up to date: sends it to every other rank, so all
// hold every row (the own shard stays in place; `rows` lives where the transport moves data).
void all_gather_shards(Transport& t, float* rows, int64_t M, int64_t width);

}  // namespace seedling
