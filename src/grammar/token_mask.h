// grammar/token_mask.h - which tokens may come next under a JSON matcher: logits -> [this mask] -> Sampler.
//
// TokenTrie holds the vocabulary's bytes (Tokenizer::token_bytes) as one byte trie in depth-first order, so a mask
// walks each shared prefix once: a node's state is its parent's stepped by one byte, and a byte the matcher refuses
// skips the node's whole subtree. Tokens that are not text (added, special, unknown) and empty ones are never in it.
// TokenConstraint is one choice's matcher over that trie: the allowed ids for the next step (the end ids only once the
// value may end, and only they once it is complete), then the chosen id taken. Masks are cached by matcher state,
// so the steps inside a long string or a repeated structure reuse one.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/json_matcher.h"
#include "tokenizer/tokenizer.h"

namespace seedling::grammar {

class TokenTrie {
 public:
  // `tokens[id]` for ids [0, tokens.size()); `vocab` (>= tokens.size()) is the width of the masks (the model's
  // vocabulary, which may have more ids than the tokenizer).
  TokenTrie(const std::vector<TokenBytes>& tokens, size_t vocab);
  static std::shared_ptr<const TokenTrie> from_tokenizer(const Tokenizer& tok, size_t vocab);

  size_t vocab() const { return vocab_; }
  size_t nodes() const { return byte_.size(); }
  size_t max_depth() const { return max_depth_; }
  // The bytes of a text token; nullptr for the others.
  const std::string* bytes(int32_t id) const;

 private:
  friend class TokenConstraint;
  size_t vocab_;
  size_t max_depth_ = 0;
  std::vector<std::string> bytes_;  // by id ("" for tokens left out)
  std::vector<uint8_t> byte_;       // per node, depth-first order; node 0 is the root
  std::vector<uint16_t> depth_;
  std::vector<uint32_t> end_;        // one past the node's subtree
  std::vector<uint32_t> ids_begin_;  // tokens ending at node i: ids_[ids_begin_[i], ids_begin_[i + 1])
  std::vector<int32_t> ids_;
};

class TokenConstraint {
 public:
  // `end_ids`: what may end the output (EOS, end of turn); allowed once the value may end.
  TokenConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                  std::vector<int32_t> end_ids);
  TokenConstraint(const TokenConstraint&) = delete;
  TokenConstraint& operator=(const TokenConstraint&) = delete;

  // Free text until token `id` has been taken (the end of reasoning), the grammar from then on.
  void start_after(int32_t id) { start_after_ = id; }
  bool active() const { return start_after_ < 0; }
  // Bits over [0, vocab): 1 for a token that may come next. Only while active().
  void allowed(std::vector<uint64_t>& bits);
  // Takes the chosen id; false when the grammar refuses it (nothing changes then).
  bool accept(int32_t id);
  // The value is complete and nothing may follow.
  bool done() const { return active() && matcher_.done(); }
  bool can_end() const { return active() && matcher_.can_end(); }
  const JsonMatcher& matcher() const { return matcher_; }
  // How many masks the cache keeps (32 by default; 0: none, each mask computed).
  void set_cache_size(size_t n) { cache_size_ = n; }
  // Masks computed and masks found in the cache so far.
  size_t computed() const { return computed_; }
  size_t cached() const { return cached_; }

 private:
  void compute(std::vector<uint64_t>& bits);
  std::string state_key() const;

  std::shared_ptr<const TokenTrie> trie_;
  JsonMatcher matcher_;
  std::vector<int32_t> end_ids_;
  int32_t start_after_ = -1;
  // scratch of compute(): an arena copy and one thread list per trie depth
  Arena arena_;
  std::vector<std::vector<Thread>> level_;
  std::vector<size_t> mark_;
  // masks by state, least recently used last
  std::list<std::pair<std::string, std::vector<uint64_t>>> lru_;
  std::unordered_map<std::string, decltype(lru_)::iterator> cache_;
  size_t cache_size_ = 32;
  size_t computed_ = 0, cached_ = 0;
};

}  // namespace seedling::grammar
