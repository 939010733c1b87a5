// experts/resident_experts.cpp - the resident provider, and its construction over a packed folder's expert files.
#include "experts/resident_experts.h"

#include <string>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/thread_pool.h"
#include "io/packed_model.h"

namespace seedling {

std::unique_ptr<ResidentExperts> ResidentExperts::from_packed(std::shared_ptr<const PackedModel> packed) {
  std::vector<std::vector<ExpertWeights>> table(size_t(packed->num_layers()));
  std::vector<std::shared_ptr<const void>> maps;
  std::vector<std::unique_ptr<std::atomic<bool>[]>> verified(table.size());
  for (int l = 0; l < packed->num_layers(); ++l) {
    if (!packed->layer_has_experts(l)) continue;
    const PackedExpertLayer& pl = packed->expert_layer(l);
    auto map = std::make_shared<const MappedFile>(pl.file);
    if (map->size() != pl.file_bytes) fail("{}: changed size since the manifest was read", pl.file);
    const int n = packed->num_experts(l);
    verified[size_t(l)] = std::make_unique<std::atomic<bool>[]>(size_t(n));
    for (int e = 0; e < n; ++e) {
      table[size_t(l)].push_back(decode_expert_blob(*packed, map->data() + pl.blobs[size_t(e)].offset, l, e));
    }
    maps.push_back(std::move(map));
  }
  auto r = std::make_unique<ResidentExperts>(std::move(table));
  r->packed_ = std::move(packed);
  r->mappings_ = std::move(maps);
  r->verified_ = std::move(verified);
  return r;
}

ExpertWeights ResidentExperts::acquire(int layer, int expert) {
  const ExpertWeights& w = table_[size_t(layer)][size_t(expert)];
  if (packed_ != nullptr) {
    std::atomic<bool>& ok = verified_[size_t(layer)][size_t(expert)];
    if (!ok.load(std::memory_order_acquire)) {
      packed_->verify_blob(layer, expert,
                           static_cast<const uint8_t*>(w.gate.data) - packed_->expert_layer(layer).parts[0].offset);
      validate_expert_weights(w, packed_->expert_blob(layer, expert).file, layer, expert);
      ok.store(true, std::memory_order_release);
    }
  }
  return w;
}

void ResidentExperts::validate_all() const {
  if (packed_ == nullptr) return;
  for (int l = 0; l < int(table_.size()); ++l) {
    const std::vector<ExpertWeights>& row = table_[size_t(l)];
    if (row.empty()) continue;
    bool seeds = false;
    for (const ops::Matrix& m : {row[0].gate, row[0].up, row[0].down}) seeds = seeds || codec_is_seed(m.codec);
    if (!seeds) continue;
    const std::string& file = packed_->expert_layer(l).file;
    // A bad blob's Error reaches here from whichever thread found it (ThreadPool carries it).
    ThreadPool::global().parallel_for(row.size(), 1, [&](size_t e0, size_t e1) {
      for (size_t e = e0; e < e1; ++e) validate_expert_weights(row[e], file, l, int(e));
    });
  }
}

}  // namespace seedling
