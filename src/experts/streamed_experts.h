// experts/streamed_experts.h - routed experts streamed from disk into a bounded RAM slot cache.
//
// Each expert is one contiguous blob in a file (offset and size 4 KiB aligned, from the packed format). A miss
// reads the blob into a slot with O_DIRECT through io_uring, so the footprint is the slots and not whatever the
// page cache keeps; several reads are in flight when the MoE block calls prefetch() after routing. Where O_DIRECT
// is refused (EINVAL) or io_uring is unavailable, reads fall back to plain pread after one warning on stderr.
// Every blob is checked (verify callback) after its first read, before it is decoded into ExpertWeights that point
// into the slot; a later read of a checked blob is not hashed again, as a mapped blob is checked once though its
// pages may be read from disk again (hashing every read took 9% of a 2-core decode at 12% hits, 2026-12-06).
//
// Slot bookkeeping and eviction are ExpertSlotCache's (slot_cache.h), shared with the cache simulator. A slot
// being read or acquired and not released is never evicted. Hits and misses are counted once per access: at
// prefetch() for the experts it covered, else at acquire().
//
// Threads: every public method takes one lock; the MoE block calls them from one thread. Reads complete in the
// kernel while the caller computes; their completions are collected inside prefetch/acquire.
#pragma once

#include <liburing.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "experts/expert_provider.h"
#include "experts/slot_cache.h"

namespace seedling {

class PackedModel;

// Where one expert's blob lives (the packed format's ExpertBlobLocation).
struct BlobLocation {
  std::string file;
  uint64_t offset = 0;  // 4 KiB aligned
  uint64_t bytes = 0;   // padded to 4 KiB
  uint64_t xxh64 = 0;
};

// Turns a verified blob into weight views into that blob (decode_expert_blob, for a packed folder).
using DecodeExpertBlob = std::function<ExpertWeights(const uint8_t* blob, int layer, int expert)>;
// Throws a seedling::Error when the blob's checksum does not match (the packed format's verify_blob).
using VerifyExpertBlob = std::function<void(const uint8_t* blob, size_t bytes, const BlobLocation& where)>;

struct StreamedOptions {
  int slots = 0;                                // --expert-slots; 0: ram_budget / blob size
  uint64_t ram_budget = 0;                      // --ram-budget in bytes, used when slots == 0
  int min_slots = 1;                            // the router's top-k: the smallest legal slot count
  EvictionPolicy policy = EvictionPolicy::lru;  // --expert-policy
  // Reads in flight at most. 8 because this machine's disk gives ~1.7 GB/s for 2.7 MB O_DIRECT reads with 8 in
  // flight against 0.64 GB/s for one stream (docs: design.md, "Numbers that bound us").
  int queue_depth = 8;
  // Test hooks: the Nth blob read (1-based) fails with EIO; act as if O_DIRECT were refused with EINVAL.
  uint64_t fail_read_number = 0;
  bool refuse_direct = false;
};

// "4G", "512M", "1.5G", "300K", "4096" (bytes; K/M/G/T are powers of 1024, optional trailing "B" or "iB")
// -> bytes; an Error naming `flag` otherwise.
uint64_t parse_byte_size(const std::string& text, const char* flag = "--ram-budget");

// The slot count `o` gives for blobs of `blob_bytes` each: o.slots, else o.ram_budget / blob_bytes. An Error
// naming the minimum (o.min_slots slots and their bytes) when it is smaller, or when neither is given.
int streamed_slot_count(const StreamedOptions& o, uint64_t blob_bytes);

// The disk's O_DIRECT random-read rate for whole blobs: what the provider's reads are held against (`seedling
// bench`). Blobs picked at random (a fixed seed), `queue_depth` reads in flight through io_uring, for about `seconds`
// (and at least 2 * queue_depth reads); the clock runs from the first submission to the last completion.
struct RandomReadRate {
  int queue_depth = 0;
  uint64_t reads = 0;
  uint64_t bytes = 0;
  double seconds = 0.0;
  double gb_per_s() const { return seconds > 0.0 ? double(bytes) / seconds / 1e9 : 0.0; }
};
// An Error naming the file when one cannot be opened with O_DIRECT or a read fails.
RandomReadRate measure_random_reads(std::span<const BlobLocation> blobs, int queue_depth, double seconds,
                                    uint64_t seed = 1);

class StreamedExperts final : public ExpertProvider {
 public:
  // where[layer][expert]; layers without routed experts have an empty row. Opens every file named (an Error
  // naming a missing one) and allocates the slots.
  StreamedExperts(std::vector<std::vector<BlobLocation>> where, DecodeExpertBlob decode, VerifyExpertBlob verify,
                  StreamedOptions options);
  // Over a packed folder's expert files: each blob read is checked against its xxh64, then its seed parts are
  // validated (validate_expert_weights), before its views are handed out. `packed` is kept alive by the provider.
  static std::unique_ptr<StreamedExperts> from_packed(std::shared_ptr<const PackedModel> packed,
                                                      StreamedOptions options);
  ~StreamedExperts() override;
  StreamedExperts(const StreamedExperts&) = delete;
  StreamedExperts& operator=(const StreamedExperts&) = delete;

  void prefetch(int layer, std::span<const int> experts) override;
  // Starts reads of the guessed experts not in a slot, into slots admitted unpinned (ExpertSlotCache::admit), while
  // fewer than queue_depth reads are in flight; none through the pread fallback, which would block.
  void prefetch_guess(int layer, std::span<const int> experts) override;
  ExpertWeights acquire(int layer, int expert) override;
  void release(int layer, int expert) override;
  // Collects the reads that have finished, then: is the expert's blob in a slot, read and checked?
  bool ready(int layer, int expert) override;
  ExpertStats stats() const override;
  const char* name() const override { return "streamed"; }

  int slots() const { return slots_; }
  int queue_depth() const { return options_.queue_depth; }
  // Every expert's blob, layer by layer (for measure_random_reads).
  std::vector<BlobLocation> blobs() const;
  uint64_t slot_bytes() const { return slot_bytes_; }
  // True while reads go through O_DIRECT and io_uring (false after a fallback).
  bool direct_io() const;

 private:
  enum class SlotState { empty, reading, ready };
  struct SlotIo {
    SlotState state = SlotState::empty;
    bool prefetch_pin = false;  // prefetch() pinned it and counted the access; the next acquire takes the pin over
    bool guessed = false;       // read by prefetch_guess and not routed to since
    int layer = -1, expert = -1;
    uint64_t done = 0;  // bytes read so far
    double started = 0.0;
    ExpertWeights weights;
  };
  struct OpenFile {
    int fd = -1;
    bool direct = false;
  };

  const BlobLocation& location(int layer, int expert) const;
  uint8_t* slot_data(int slot) const { return buffer_.get() + size_t(slot) * slot_bytes_; }
  OpenFile& file_of(const std::string& path);
  void warn_once(const std::string& line);
  void start_read(int slot, int layer, int expert);
  void submit_remaining(int slot);
  void read_synchronously(int slot);
  // Handles one finished read (res: bytes or -errno).
  void on_read_done(int slot, int64_t res);
  void finish_slot(int slot);
  [[noreturn]] void fail_slot(int slot, const std::string& why);
  void reap(bool wait);
  void wait_ready(int slot);
  void drop_stale_prefetch_pins();
  void count_hit(int slot);  // a routed access found `slot`: a guess it read is used
  void busy_begin();
  void busy_end();

  std::vector<std::vector<BlobLocation>> where_;
  std::vector<std::vector<uint8_t>> verified_;  // per layer and expert: its blob passed verify once
  DecodeExpertBlob decode_;
  VerifyExpertBlob verify_;
  StreamedOptions options_;
  int slots_ = 0;
  uint64_t slot_bytes_ = 0;
  ExpertSlotCache cache_;
  std::vector<SlotIo> io_;
  struct FreeAligned {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t[], FreeAligned> buffer_;
  std::vector<std::pair<std::string, OpenFile>> files_;
  io_uring ring_{};
  bool ring_ok_ = false;
  bool warned_ = false;
  int in_flight_ = 0;
  double busy_since_ = 0.0;
  uint64_t read_count_ = 0;  // first completions of blob reads, for fail_read_number

  // Statistics.
  uint64_t bytes_read_ = 0;
  uint64_t reads_ = 0;
  double busy_s_ = 0.0;
  double io_wait_s_ = 0.0;
  std::vector<double> latency_sample_;  // reservoir of read latencies, at most kLatencySample
  uint64_t latency_seen_ = 0;
  uint64_t guessed_ = 0, guess_used_ = 0, guess_bytes_ = 0;
  uint64_t rng_ = 0x9e3779b97f4a7c15ull;
  mutable std::mutex mutex_;
};

}  // namespace seedling
