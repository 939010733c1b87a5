// tokenizer/bpe.h - the BPE model of a tokenizer.json ("model": {"type": "BPE", ...}), encoding one pre-token the
// way HF `tokenizers` does: one symbol per char (byte_fallback to <0xNN> tokens, else unk, fused or not), then the
// lowest-ranked adjacent pair merged first (leftmost on ties) until no merge applies.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/components.h"

namespace seedling::tok {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class BpeModel {
 public:
  BpeModel(const Json& model, const JsonContext& ctx);

  // Appends the ids of one pre-token.
  void tokenize(std::string_view piece, std::vector<int32_t>& out) const;

  int32_t token_to_id(std::string_view token) const;  // -1 when absent
  const std::string* id_to_token(int32_t id) const;   // nullptr when absent
  int32_t max_id() const { return static_cast<int32_t>(tokens_.size()) - 1; }
  int32_t unk_id() const { return unk_id_; }  // -1 when the model has none

 private:
  void merge_word(std::string_view piece, std::vector<int32_t>& out) const;

  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> vocab_;
  std::vector<std::string> tokens_;  // by id; empty where no token has the id
  std::vector<bool> has_token_;
  // (left id << 32 | right id) -> (rank, merged id)
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;
  int32_t unk_id_ = -1;
  bool byte_fallback_ = false, fuse_unk_ = false, ignore_merges_ = false;
  std::string prefix_, suffix_;  // continuing_subword_prefix, end_of_word_suffix
  int32_t byte_ids_[256];        // <0xNN> tokens, -1 where absent

  // Word cache: results are a pure function of the piece; bounded, cleared when full.
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace seedling::tok
