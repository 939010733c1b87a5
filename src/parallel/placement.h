// parallel/placement.h - which rank owns each routed expert of each MoE layer (expert parallelism).
//
// Every MoE layer's experts are divided among R ranks (one GPU each): balanced by measured load, the times the
// router chose each expert (a route trace, docs/formats/route-trace.md), so that the busiest rank of a layer, which
// the others wait for, carries as little as can be; and by bytes, within each rank's budget (its VRAM for experts).
// Deterministic: the same inputs give the same placement on every rank, which each computes for itself.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "experts/route_trace.h"

namespace seedling {

struct PlacementInput {
  int ranks = 1;
  int num_experts = 0;
  std::vector<uint8_t> layer_has_experts;  // per layer
  std::vector<uint64_t> expert_bytes;      // per layer: bytes of one routed expert (layers without experts: ignored)
  // [layer][expert]: how often the router chose the expert (expert_load_from_trace); empty: every expert the same,
  // which gives the uniform split. A layer's row may be empty (uniform for that layer).
  std::vector<std::vector<uint64_t>> load;
  std::vector<uint64_t> rank_budget;  // bytes of routed experts each rank may hold; empty: no limit
};

struct ExpertPlacement {
  int ranks = 1;
  std::vector<std::vector<int>> owner;  // [layer][expert] -> rank; empty for layers without experts
  std::vector<uint64_t> rank_bytes;     // bytes of experts placed on each rank
  // [layer][rank]: the load placed on each rank (experts counted once each when no load was given).
  std::vector<std::vector<uint64_t>> rank_load;

  int owner_of(int layer, int expert) const { return owner[size_t(layer)][size_t(expert)]; }
  std::vector<int> experts_of(int layer, int rank) const;  // ascending
  // The layer's busiest rank's load over the mean (1: balanced); 1 for a layer without experts or load.
  double imbalance(int layer) const;
};

// The placement. Per layer, experts in order of load (heaviest first, then by id) each go to the rank with the least
// load so far, ties to the rank holding the fewest bytes over all layers, then the lowest rank; a rank takes at most
// ceil(E / R) experts of a layer (equal bytes per rank) unless the budgets leave no other room. Without load this
// is the uniform split: each rank ceil or floor of E / R experts of every layer, extra experts spread over ranks.
// An Error when the experts cannot fit the budgets: naming the total against the budgets' sum, or the layer and
// expert that fits on no rank, with what each rank holds.
ExpertPlacement plan_placement(const PlacementInput& in);

// The router's choices counted per [layer][expert] from a trace's records (read_route_trace); an Error naming the
// token when a record names a layer without experts or an expert the model does not have.
std::vector<std::vector<uint64_t>> expert_load_from_trace(const std::vector<RouteRecord>& records,
                                                          const std::vector<uint8_t>& layer_has_experts,
                                                          int num_experts);

// A few lines for stderr: bytes per rank against the budgets, the worst layer's load imbalance.
std::string describe_placement(const ExpertPlacement& p, const PlacementInput& in);

}  // namespace seedling
