#include "grammar/token_mask.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/error.h"

namespace seedling::grammar {

namespace {

void set_bit(std::vector<uint64_t>& bits, int32_t id) {
  bits[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
}

template <typename T>
void append(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}
}  // namespace

TokenTrie::TokenTrie(const std::vector<TokenBytes>& tokens, size_t vocab) : vocab_(std::max(vocab, tokens.size())) {
  bytes_.resize(tokens.size());
  std::vector<int32_t> order;
  for (size_t id = 0; id < tokens.size(); ++id) {
    if (!tokens[id].text || tokens[id].bytes.empty()) continue;
    bytes_[id] = tokens[id].bytes;
    order.push_back(int32_t(id));
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bytes_[size_t(a)] < bytes_[size_t(b)] || (bytes_[size_t(a)] == bytes_[size_t(b)] && a < b);
  });
  // Sorted strings give the trie's nodes in depth-first order: each string shares its longest common prefix with
  // the previous one, whose deeper nodes are then finished (their subtree ends here).
  byte_.push_back(0);
  depth_.push_back(0);
  end_.push_back(0);
  std::vector<uint32_t> path = {0};                // node at each depth of the previous string
  std::vector<std::pair<uint32_t, int32_t>> ends;  // (node, id)
  const std::string* prev = nullptr;
  for (const int32_t id : order) {
    const std::string& s = bytes_[size_t(id)];
    SEEDLING_CHECK(s.size() < 65535, "token {} has {} bytes", id, s.size());
    size_t common = 0;
    if (prev != nullptr) {
      while (common < s.size() && common < prev->size() && s[common] == (*prev)[common]) ++common;
    }
    while (path.size() > common + 1) {
      end_[path.back()] = uint32_t(byte_.size());
      path.pop_back();
    }
    for (size_t k = common; k < s.size(); ++k) {
      path.push_back(uint32_t(byte_.size()));
      byte_.push_back(uint8_t(s[k]));
      depth_.push_back(uint16_t(k + 1));
      max_depth_ = std::max(max_depth_, k + 1);
      end_.push_back(0);
    }
    ends.emplace_back(path.back(), id);
    prev = &s;
  }
  while (!path.empty()) {
    end_[path.back()] = uint32_t(byte_.size());
    path.pop_back();
  }
  ids_begin_.assign(byte_.size() + 1, 0);
  for (const auto& [node, id] : ends) ++ids_begin_[node + 1];
  std::partial_sum(ids_begin_.begin(), ids_begin_.end(), ids_begin_.begin());
  ids_.resize(ends.size());
  std::vector<uint32_t> fill(ids_begin_.begin(), ids_begin_.end() - 1);
  for (const auto& [node, id] : ends) ids_[fill[node]++] = id;
}

std::shared_ptr<const TokenTrie> TokenTrie::from_tokenizer(const Tokenizer& tok, size_t vocab) {
  std::vector<TokenBytes> tokens(std::min(tok.vocab_size(), std::max(vocab, size_t(1))));
  for (size_t id = 0; id < tokens.size(); ++id) tokens[id] = tok.token_bytes(int32_t(id));
  return std::make_shared<TokenTrie>(tokens, vocab);
}

const std::string* TokenTrie::bytes(int32_t id) const {
  if (id < 0 || size_t(id) >= bytes_.size() || bytes_[size_t(id)].empty()) return nullptr;
  return &bytes_[size_t(id)];
}

TokenConstraint::TokenConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                                 std::vector<int32_t> end_ids)
    : trie_(std::move(trie)), matcher_(std::move(grammar)), end_ids_(std::move(end_ids)) {}

std::string TokenConstraint::state_key() const {
  std::string key;
  const Arena& a = matcher_.arena();
  for (const Thread& t : matcher_.threads()) {
    append(key, t.ws);
    for (int32_t i = t.top; i >= 0; i = a.links[size_t(i)].below) {
      const Frame& f = a.links[size_t(i)].frame;
      append(key, f.node);
      append(key, f.kind);
      append(key, f.phase);
      append(key, f.small);
      append(key, f.count);
      append(key, f.esc);
      append(key, f.rem);
      append(key, f.lo);
      append(key, f.hi);
      append(key, f.hex);
      append(key, f.seen);
    }
    append(key, int32_t(-1));
  }
  return key;
}

void TokenConstraint::allowed(std::vector<uint64_t>& bits) {
  SEEDLING_CHECK(active(), "a mask asked for before the constraint starts");
  if (cache_size_ == 0) {
    compute(bits);
    ++computed_;
    return;
  }
  std::string key = state_key();
  if (auto it = cache_.find(key); it != cache_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    bits = it->second->second;
    ++cached_;
    return;
  }
  compute(bits);
  ++computed_;
  lru_.emplace_front(key, bits);
  cache_[std::move(key)] = lru_.begin();
  if (lru_.size() > cache_size_) {
    cache_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

void TokenConstraint::compute(std::vector<uint64_t>& bits) {
  const TokenTrie& trie = *trie_;
  bits.assign((trie.vocab() + 63) / 64, 0);
  const Grammar& g = matcher_.grammar();
  if (matcher_.can_end()) {
    for (const int32_t id : end_ids_) {
      if (id >= 0 && size_t(id) < trie.vocab()) set_bit(bits, id);
    }
  }
  if (matcher_.done()) return;
  arena_.links = matcher_.arena().links;
  const size_t depth = trie.max_depth() + 2;
  if (level_.size() < depth) level_.resize(depth);
  if (mark_.size() < depth) mark_.resize(depth);
  level_[0].assign(matcher_.threads().begin(), matcher_.threads().end());
  mark_[1] = arena_.links.size();
  const size_t n = trie.byte_.size();
  for (size_t i = 1; i < n;) {
    const size_t d = trie.depth_[i];
    arena_.links.resize(mark_[d]);  // the links of the previous sibling's subtree are referenced no more
    std::vector<Thread>& here = level_[d];
    here.clear();
    const std::vector<Thread>& up = level_[d - 1];
    JsonMatcher::step(g, arena_, up.data(), up.size(), trie.byte_[i], here);
    if (here.empty()) {
      i = trie.end_[i];
      continue;
    }
    for (uint32_t k = trie.ids_begin_[i]; k < trie.ids_begin_[i + 1]; ++k) set_bit(bits, trie.ids_[k]);
    mark_[d + 1] = arena_.links.size();
    ++i;
  }
}

bool TokenConstraint::accept(int32_t id) {
  if (!active()) {
    if (id == start_after_) start_after_ = -1;
    return true;
  }
  if (std::find(end_ids_.begin(), end_ids_.end(), id) != end_ids_.end()) return matcher_.can_end();
  const std::string* b = trie_->bytes(id);
  return b != nullptr && matcher_.advance(*b);
}

}  // namespace seedling::grammar
