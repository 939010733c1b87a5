// experts/resident_experts.h - every routed expert mapped in memory; acquire is a table lookup.
//
// Two sources: views into the mapped Hugging Face checkpoint, or views into the mapped expert files of a packed
// folder (from_packed), whose blobs are checked against their xxh64 and seed parts validated the first time each
// expert is acquired (a full scan at load would read every expert of a model that may be far larger than RAM);
// validate_all() validates every seed part at once, for a caller that has decided to keep them all mapped.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "experts/expert_provider.h"

namespace seedling {

class PackedModel;

class ResidentExperts final : public ExpertProvider {
 public:
  // table[layer][expert]; layers without experts have an empty row.
  explicit ResidentExperts(std::vector<std::vector<ExpertWeights>> table) : table_(std::move(table)) {}
  // Maps every experts-LLL.bin of `packed` and decodes each blob in place; `packed` must outlive the provider.
  static std::unique_ptr<ResidentExperts> from_packed(std::shared_ptr<const PackedModel> packed);

  // Packed only: validates every seed part of every expert now (validate_expert_weights), threads over experts;
  // what a caller that keeps the experts mapped runs at open. acquire() validates each expert on first use anyway.
  void validate_all() const;
  ExpertWeights acquire(int layer, int expert) override;
  void release(int, int) override {}
  const char* name() const override { return "resident"; }
  const std::vector<std::vector<ExpertWeights>>& table() const { return table_; }

 private:
  std::vector<std::vector<ExpertWeights>> table_;
  // Packed only: the mappings, and a flag per expert set once its blob passed verify_blob.
  std::shared_ptr<const PackedModel> packed_;
  std::vector<std::shared_ptr<const void>> mappings_;
  std::vector<std::unique_ptr<std::atomic<bool>[]>> verified_;
};

}  // namespace seedling
