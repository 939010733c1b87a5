// experts/resident_experts.h - every routed expert mapped from the checkpoint; acquire is a table lookup.
#pragma once

#include <vector>

#include "experts/expert_provider.h"

namespace seedling {

class ResidentExperts final : public ExpertProvider {
 public:
  // table[layer][expert]; layers without experts have an empty row.
  explicit ResidentExperts(std::vector<std::vector<ExpertWeights>> table) : table_(std::move(table)) {}
  ExpertWeights acquire(int layer, int expert) override { return table_[size_t(layer)][size_t(expert)]; }
  void release(int, int) override {}
  const char* name() const override { return "resident"; }

 private:
  std::vector<std::vector<ExpertWeights>> table_;
};

}  // namespace seedling
