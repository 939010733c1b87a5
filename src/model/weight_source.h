// model/weight_source.h - where Model::load gets its weights: a Hugging Face checkpoint, a packed folder or a GGUF
// file (model.cpp, model/gguf_source.cpp), behind one interface, so every source is held to the same shape checks.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/codec_layout.h"
#include "experts/expert_provider.h"
#include "model/family.h"

namespace seedling {

// One stored tensor as a weight source hands it out: its codec, bytes and shape, and where it came from.
struct WeightView {
  Codec codec = Codec::F32;
  const void* data = nullptr;
  std::vector<int64_t> shape;
  std::string file;  // for error messages
};

// Model::load asks by the family's tensor name and does every shape check itself.
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual bool has(const std::string& name) const = 0;
  virtual WeightView get(const std::string& name) const = 0;
  // gate, up, down of one routed expert, as (rows, cols) matrices; `parts` says where the checkpoint keeps them.
  virtual ExpertWeights expert(int layer, int expert, const ExpertParts& parts, int64_t I, int64_t H) const = 0;
  // The default provider over the experts table built from expert() views.
  virtual std::unique_ptr<ExpertProvider> resident_experts(std::vector<std::vector<ExpertWeights>> table) = 0;
  // After every tensor was read: an Error for what the source holds that the model would leave unread.
  virtual void finish() const {}
};

}  // namespace seedling
