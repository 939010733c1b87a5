// experts/slot_cache.cpp - slot bookkeeping and the eviction policies (see slot_cache.h).
#include "experts/slot_cache.h"

#include "core/error.h"

namespace seedling {

EvictionPolicy parse_eviction_policy(const std::string& text, const char* flag) {
  if (text == "lru") return EvictionPolicy::lru;
  if (text == "lfu") return EvictionPolicy::lfu;
  if (text == "belady") return EvictionPolicy::belady;
  fail("{}: unknown eviction policy '{}' (expected lru, lfu or belady)", flag, text);
}

const char* policy_name(EvictionPolicy p) {
  switch (p) {
    case EvictionPolicy::lru:
      return "lru";
    case EvictionPolicy::lfu:
      return "lfu";
    case EvictionPolicy::belady:
      return "belady";
  }
  return "?";
}

ExpertSlotCache::ExpertSlotCache(int slots, EvictionPolicy policy) : policy_(policy) {
  if (slots < 1) fail("expert slot cache: {} slots (at least 1 needed)", slots);
  slots_.resize(size_t(slots));
  where_.reserve(size_t(slots) * 2);
}

bool ExpertSlotCache::evict_before(const Slot& a, const Slot& b) const {
  switch (policy_) {
    case EvictionPolicy::lru:
      return a.last_use < b.last_use;
    case EvictionPolicy::lfu: {
      return a.uses != b.uses ? a.uses < b.uses : a.last_use < b.last_use;
    }
    case EvictionPolicy::belady:
      return a.next_use != b.next_use ? a.next_use > b.next_use : a.last_use < b.last_use;
  }
  return false;
}

int ExpertSlotCache::choose_slot() const {
  int best = -1;
  for (int i = 0; i < int(slots_.size()); ++i) {
    const Slot& s = slots_[size_t(i)];
    if (!s.occupied) return i;
    if (s.pins > 0) continue;
    if (best < 0 || evict_before(s, slots_[size_t(best)])) best = i;
  }
  return best;
}

bool ExpertSlotCache::install(uint64_t key, Access& a) {
  a.slot = choose_slot();
  if (a.slot < 0) return false;
  Slot& s = slots_[size_t(a.slot)];
  if (s.occupied) {
    a.evicted = s.key;
    where_.erase(s.key);
  }
  s = Slot{};
  s.key = key;
  s.occupied = true;
  where_[key] = a.slot;
  return true;
}

std::optional<ExpertSlotCache::Access> ExpertSlotCache::access(uint64_t key, uint64_t next_use) {
  Access a;
  if (auto it = where_.find(key); it != where_.end()) {
    a.slot = it->second;
    a.hit = true;
    ++hits_;
  } else {
    if (!install(key, a)) return std::nullopt;
    ++misses_;
  }
  Slot& s = slots_[size_t(a.slot)];
  s.last_use = ++tick_;
  s.next_use = next_use;
  s.pins += 1;
  s.uses = ++uses_[key];
  return a;
}

std::optional<ExpertSlotCache::Access> ExpertSlotCache::admit(uint64_t key) {
  if (where_.contains(key)) return std::nullopt;
  Access a;
  if (!install(key, a)) return std::nullopt;
  Slot& s = slots_[size_t(a.slot)];
  s.last_use = ++tick_;
  s.uses = uses_.try_emplace(key, 0).first->second;
  return a;
}

void ExpertSlotCache::pin(int slot) {
  slots_[size_t(slot)].pins += 1;
}

void ExpertSlotCache::unpin(int slot) {
  Slot& s = slots_[size_t(slot)];
  SEEDLING_CHECK(s.pins > 0, "unpin of slot {} that is not pinned", slot);
  s.pins -= 1;
}

void ExpertSlotCache::drop(int slot) {
  Slot& s = slots_[size_t(slot)];
  if (s.occupied) where_.erase(s.key);
  s = Slot{};
}

int ExpertSlotCache::find(uint64_t key) const {
  auto it = where_.find(key);
  return it == where_.end() ? -1 : it->second;
}

}  // namespace seedling
