#include "tokenizer/bpe.h"

#include <fmt/format.h>

#include <queue>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace seedling::tok {

namespace {
constexpr size_t kCacheMaxEntries = 1 << 16;
constexpr size_t kCacheMaxPieceBytes = 256;

std::string optional_string(const Json& model, const char* name, const JsonContext& ctx) {
  if (!model.contains(name) || model.at(name).is_null()) return {};
  return json_string(model, name, ctx);
}
}  // namespace

BpeModel::BpeModel(const Json& model, const JsonContext& ctx) {
  std::fill(std::begin(byte_ids_), std::end(byte_ids_), -1);
  if (model.contains("dropout") && !model.at("dropout").is_null() && model.at("dropout").get<double>() != 0.0) {
    fail("{}.dropout: BPE dropout is not supported (expected null)", ctx.where());
  }
  const Json& vocab = json_at(model, "vocab", ctx);
  if (!vocab.is_object()) fail("{}.vocab: expected an object token -> id", ctx.where());
  vocab_.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const int32_t id = json_token_id(it.value(), fmt::format("{}.vocab[{:?}]", ctx.where(), it.key()));
    vocab_.emplace(it.key(), id);
    if (static_cast<size_t>(id) >= tokens_.size()) {
      tokens_.resize(id + 1);
      has_token_.resize(id + 1, false);
    }
    tokens_[id] = it.key();
    has_token_[id] = true;
  }
  byte_fallback_ = json_bool(model, "byte_fallback", ctx, false);
  fuse_unk_ = json_bool(model, "fuse_unk", ctx, false);
  ignore_merges_ = json_bool(model, "ignore_merges", ctx, false);
  prefix_ = optional_string(model, "continuing_subword_prefix", ctx);
  suffix_ = optional_string(model, "end_of_word_suffix", ctx);
  std::string unk = optional_string(model, "unk_token", ctx);
  if (!unk.empty()) {
    unk_id_ = token_to_id(unk);
    if (unk_id_ < 0) fail("{}.unk_token: \"{}\" is not in the vocab", ctx.where(), unk);
  }
  for (int b = 0; b < 256; ++b) byte_ids_[b] = token_to_id(fmt::format("<0x{:02X}>", b));

  const Json& merges = json_at(model, "merges", ctx);
  if (!merges.is_array()) fail("{}.merges: expected a list", ctx.where());
  merges_.reserve(merges.size() * 2);
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const Json& m = merges[rank];
    std::string a, b;
    if (m.is_string()) {  // "a b"
      const std::string& s = m.get_ref<const std::string&>();
      size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        fail("{}.merges[{}]: expected \"left right\", got {:?}", ctx.where(), rank, s);
      }
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {  // ["a", "b"]
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      fail("{}.merges[{}]: expected \"left right\" or [left, right]", ctx.where(), rank);
    }
    int32_t ia = token_to_id(a), ib = token_to_id(b);
    if (ia < 0 || ib < 0) fail("{}.merges[{}]: {:?} is not in the vocab", ctx.where(), rank, ia < 0 ? a : b);
    std::string merged = a + (b.compare(0, prefix_.size(), prefix_) == 0 ? b.substr(prefix_.size()) : b);
    int32_t im = token_to_id(merged);
    if (im < 0) fail("{}.merges[{}]: the merged token {:?} is not in the vocab", ctx.where(), rank, merged);
    uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(ia)) << 32) | static_cast<uint32_t>(ib);
    // A pair listed twice keeps its last rank: HF collects the merges into a HashMap, where a later entry
    // overwrites an earlier one.
    merges_.insert_or_assign(key, std::make_pair(static_cast<int32_t>(rank), im));
  }
}

int32_t BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_.size() || !has_token_[id]) return nullptr;
  return &tokens_[id];
}

void BpeModel::tokenize(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  bool cacheable = piece.size() <= kCacheMaxPieceBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(piece);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  if (ignore_merges_) {
    int32_t id = token_to_id(piece);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  size_t before = out.size();
  merge_word(piece, out);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kCacheMaxEntries) cache_.clear();
    cache_.emplace(std::string(piece), std::vector<int32_t>(out.begin() + before, out.end()));
  }
}

namespace {
struct Symbol {
  int32_t id;
  int32_t prev, next;
  bool alive;
};
struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t new_id;
  // std::priority_queue pops the largest: "larger" = higher rank, then higher position.
  bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};
}  // namespace

void BpeModel::merge_word(std::string_view w, std::vector<int32_t>& out) const {
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> heap_storage;
  symbols.clear();
  auto add = [&](int32_t id) {
    int32_t n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, n + 1, true});
  };
  bool unk_pending = false;
  std::string scratch;
  size_t i = 0;
  while (i < w.size()) {
    size_t start = i;
    i += utf8_len(static_cast<unsigned char>(w[i]));
    if (i > w.size()) i = w.size();
    std::string_view ch = w.substr(start, i - start);
    int32_t id;
    if (prefix_.empty() && suffix_.empty()) {
      id = token_to_id(ch);
    } else {
      scratch.clear();
      if (start != 0) scratch += prefix_;
      scratch += ch;
      if (i == w.size()) scratch += suffix_;
      id = token_to_id(scratch);
    }
    if (id >= 0) {
      if (unk_pending) {
        add(unk_id_);
        unk_pending = false;
      }
      add(id);
      continue;
    }
    if (byte_fallback_) {
      std::string_view bytes = (prefix_.empty() && suffix_.empty()) ? ch : std::string_view(scratch);
      bool all = true;
      for (char c : bytes) all = all && byte_ids_[static_cast<unsigned char>(c)] >= 0;
      if (all) {
        for (char c : bytes) add(byte_ids_[static_cast<unsigned char>(c)]);
        continue;
      }
    }
    if (unk_id_ >= 0) {
      if (unk_pending && !fuse_unk_) add(unk_id_);
      unk_pending = true;
    }
  }
  if (unk_pending) add(unk_id_);
  if (symbols.empty()) return;
  symbols.back().next = -1;

  heap_storage.clear();
  std::priority_queue<Candidate, std::vector<Candidate>> heap(std::less<Candidate>(), std::move(heap_storage));
  auto lookup = [&](int32_t a, int32_t b) -> const std::pair<int32_t, int32_t>* {
    auto it = merges_.find((static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b));
    return it == merges_.end() ? nullptr : &it->second;
  };
  for (size_t k = 0; k + 1 < symbols.size(); ++k) {
    if (auto* m = lookup(symbols[k].id, symbols[k + 1].id)) heap.push({m->first, static_cast<int32_t>(k), m->second});
  }
  while (!heap.empty()) {
    Candidate top = heap.top();
    heap.pop();
    Symbol& left = symbols[top.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    auto* m = lookup(left.id, right.id);
    if (!m || m->second != top.new_id) continue;  // stale entry
    left.id = top.new_id;
    right.alive = false;
    int32_t after = right.next;
    left.next = after;
    if (after >= 0) symbols[after].prev = top.pos;
    if (left.prev >= 0) {
      if (auto* pm = lookup(symbols[left.prev].id, left.id)) heap.push({pm->first, left.prev, pm->second});
    }
    if (after >= 0) {
      if (auto* nm = lookup(left.id, symbols[after].id)) heap.push({nm->first, top.pos, nm->second});
    }
  }
  for (const Symbol& s : symbols)
    if (s.alive) out.push_back(s.id);
}

}  // namespace seedling::tok
