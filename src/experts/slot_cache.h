// experts/slot_cache.h - which expert sits in which RAM slot, and which one leaves when a new one comes in.
//
// The bookkeeping half of the streamed provider, with no I/O, so the cache simulator replays a trace through the
// very same code and the two cannot disagree on a hit. One pool of `slots` serves every layer; a key is
// (layer, expert). A pinned slot (being read, or acquired and not yet released) is never evicted. Policies:
//   lru    - evict the least recently used unpinned slot.
//   lfu    - evict the unpinned slot whose expert has the fewest uses over the whole run (counts survive
//            eviction: how often an expert is routed to is a property of the expert), least recently used first
//            on a tie. This is NVMAI's default.
//   belady - evict the unpinned slot whose next use lies furthest ahead; needs the future, so only the simulator
//            (which knows the trace) can run it. It is the ceiling for any policy on that trace.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace seedling {

enum class EvictionPolicy { lru, lfu, belady };

// "lru" | "lfu" | "belady" -> the policy; anything else is an Error naming `flag` (fails closed).
EvictionPolicy parse_eviction_policy(const std::string& text, const char* flag = "--expert-policy");
const char* policy_name(EvictionPolicy p);

inline uint64_t expert_key(int layer, int expert) {
  return (uint64_t(uint32_t(layer)) << 32) | uint32_t(expert);
}
inline int key_layer(uint64_t key) {
  return int(key >> 32);
}
inline int key_expert(uint64_t key) {
  return int(key & 0xffffffffu);
}

class ExpertSlotCache {
 public:
  static constexpr uint64_t kNever = UINT64_MAX;  // next use of a key that is never used again

  ExpertSlotCache(int slots, EvictionPolicy policy);

  struct Access {
    int slot = -1;
    bool hit = false;
    std::optional<uint64_t> evicted;  // the key that lost its slot to this miss
  };
  // Looks `key` up, counts a hit or a miss, and pins its slot. On a miss the key is installed in a free slot or
  // in the policy's victim (the caller then fills it). nullopt when it is a miss and every slot is pinned: nothing
  // changed, not even the counters. `next_use` is the position of this key's next access (belady only).
  std::optional<Access> access(uint64_t key, uint64_t next_use = kNever);
  // Installs `key` ahead of its use (a prefetch): in a free slot or the policy's victim, unpinned and most recently
  // used, counting no hit, miss or use (an lfu count is of routed uses only, so a guess that is never used is the
  // first victim). The slot to fill, with the key it evicted; nullopt when `key` is resident already or every slot
  // is pinned.
  std::optional<Access> admit(uint64_t key);
  void pin(int slot);
  void unpin(int slot);
  // Empties a slot (after a failed read): the key is no longer resident. Pins are cleared.
  void drop(int slot);

  // The slot holding `key`, or -1.
  int find(uint64_t key) const;
  int pins(int slot) const { return slots_[size_t(slot)].pins; }
  bool occupied(int slot) const { return slots_[size_t(slot)].occupied; }
  uint64_t key_of(int slot) const { return slots_[size_t(slot)].key; }
  int size() const { return int(slots_.size()); }
  EvictionPolicy policy() const { return policy_; }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }

 private:
  struct Slot {
    uint64_t key = 0;
    bool occupied = false;
    int pins = 0;
    uint64_t last_use = 0;  // tick of the latest access
    uint64_t next_use = kNever;
    uint64_t uses = 0;  // the key's lifetime accesses (uses_), kept here so a victim search reads no hash table
  };
  // Index of the slot to fill on a miss: a free one, else the policy's victim among the unpinned; -1 if none.
  int choose_slot() const;
  // Puts `key` (not resident) into choose_slot()'s slot, emptied of its pins and times; false when there is none.
  bool install(uint64_t key, Access& a);
  bool evict_before(const Slot& a, const Slot& b) const;

  EvictionPolicy policy_;
  std::vector<Slot> slots_;
  std::unordered_map<uint64_t, int> where_;      // key -> slot
  std::unordered_map<uint64_t, uint64_t> uses_;  // key -> lifetime accesses (lfu)
  uint64_t tick_ = 0;
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
};

}  // namespace seedling
