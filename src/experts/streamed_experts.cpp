// experts/streamed_experts.cpp - the RAM slot cache filled by O_DIRECT reads through io_uring (see the header).
#include "experts/streamed_experts.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "core/error.h"
#include "io/packed_model.h"

namespace seedling {

namespace {

constexpr uint64_t kAlign = 4096;
constexpr size_t kLatencySample = 1 << 16;

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string errno_text(int err) {
  return std::strerror(err);
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t i = size_t(std::ceil(q * double(v.size()))) - (q > 0.0 ? 1 : 0);
  return v[std::min(i, v.size() - 1)];
}

uint64_t max_blob_bytes(const std::vector<std::vector<BlobLocation>>& where) {
  uint64_t m = 0;
  for (const auto& row : where) {
    for (const auto& b : row) m = std::max(m, b.bytes);
  }
  return m;
}

int64_t expert_count(const std::vector<std::vector<BlobLocation>>& where) {
  int64_t n = 0;
  for (const auto& row : where) n += int64_t(row.size());
  return n;
}

}  // namespace

uint64_t parse_byte_size(const std::string& text, const char* flag) {
  size_t used = 0;
  double value = 0.0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    fail("{}: '{}' is not a size (expected e.g. 4G, 512M, 1.5G or a byte count)", flag, text);
  }
  std::string unit = text.substr(used);
  if (unit.ends_with("iB"))
    unit.resize(unit.size() - 2);
  else if (unit.ends_with("B") && unit.size() > 1)
    unit.pop_back();
  double scale = 1.0;
  if (unit.empty() || unit == "B")
    scale = 1.0;
  else if (unit == "K" || unit == "k")
    scale = 1024.0;
  else if (unit == "M" || unit == "m")
    scale = 1024.0 * 1024.0;
  else if (unit == "G" || unit == "g")
    scale = 1024.0 * 1024.0 * 1024.0;
  else if (unit == "T" || unit == "t")
    scale = 1024.0 * 1024.0 * 1024.0 * 1024.0;
  else
    fail("{}: '{}' has an unknown unit '{}' (expected K, M, G or T)", flag, text, unit);
  if (!(value >= 0.0) || value * scale > 1.8e19) fail("{}: '{}' is not a size", flag, text);
  return uint64_t(value * scale);
}

int streamed_slot_count(const StreamedOptions& o, uint64_t blob_bytes) {
  SEEDLING_CHECK(blob_bytes > 0, "expert blobs of 0 bytes");
  const double need_mb = double(blob_bytes) * o.min_slots / 1e6;
  if (o.slots > 0) {
    if (o.slots < o.min_slots) {
      fail("--expert-slots {} is below the minimum: the router's top-k, {} slots ({:.2f} MB of {:.2f} MB blobs)",
           o.slots, o.min_slots, need_mb, double(blob_bytes) / 1e6);
    }
    return o.slots;
  }
  if (o.ram_budget == 0) fail("the streamed expert provider needs --expert-slots or --ram-budget");
  const uint64_t n = o.ram_budget / blob_bytes;
  if (n < uint64_t(o.min_slots)) {
    fail(
        "--ram-budget {:.2f} MB holds {} expert blobs of {:.2f} MB; the minimum is the router's top-k, {} slots "
        "({:.2f} MB)",
        double(o.ram_budget) / 1e6, n, double(blob_bytes) / 1e6, o.min_slots, need_mb);
  }
  return int(std::min<uint64_t>(n, 1u << 30));
}

void StreamedExperts::FreeAligned::operator()(uint8_t* p) const {
  std::free(p);
}

StreamedExperts::StreamedExperts(std::vector<std::vector<BlobLocation>> where, DecodeExpertBlob decode,
                                 VerifyExpertBlob verify, StreamedOptions options)
    : where_(std::move(where)),
      decode_(std::move(decode)),
      verify_(std::move(verify)),
      options_(options),
      // More slots than experts would never be used: cap, which changes no decision.
      slots_(int(std::min<int64_t>(streamed_slot_count(options_, std::max<uint64_t>(max_blob_bytes(where_), 1)),
                                   std::max<int64_t>(expert_count(where_), 1)))),
      slot_bytes_((max_blob_bytes(where_) + kAlign - 1) / kAlign * kAlign),
      cache_(std::max(slots_, options_.min_slots), options_.policy) {
  if (options_.policy == EvictionPolicy::belady) fail("--expert-policy belady needs the future; use lru or lfu");
  if (options_.queue_depth < 1 || options_.queue_depth > 4096) {
    fail("expert read queue depth {} (expected 1..4096)", options_.queue_depth);
  }
  slots_ = cache_.size();
  verified_.resize(where_.size());
  for (size_t l = 0; l < where_.size(); ++l) {
    verified_[l].assign(where_[l].size(), 0);
    for (size_t e = 0; e < where_[l].size(); ++e) {
      const BlobLocation& b = where_[l][e];
      if (b.offset % kAlign != 0 || b.bytes % kAlign != 0 || b.bytes == 0) {
        fail("{}: expert {}.{} at offset {} with {} bytes is not a 4 KiB aligned blob", b.file, l, e, b.offset,
             b.bytes);
      }
      file_of(b.file);
    }
  }
  io_.resize(size_t(slots_));
  buffer_.reset(static_cast<uint8_t*>(std::aligned_alloc(kAlign, size_t(slot_bytes_) * size_t(slots_))));
  if (!buffer_) fail("cannot allocate {} expert slots of {} bytes", slots_, slot_bytes_);
  const int rc = io_uring_queue_init(unsigned(options_.queue_depth), &ring_, 0);
  if (rc == 0) {
    ring_ok_ = true;
  } else {
    warn_once(fmt::format("seedling: warning: io_uring unavailable ({}); reading experts with pread, one at a time",
                          errno_text(-rc)));
  }
}

StreamedExperts::~StreamedExperts() {
  // The kernel may still be writing into slot memory: wait for every read before the buffer goes.
  if (ring_ok_) {
    io_uring_submit(&ring_);  // reads prepared before an Error cut a prefetch short
    while (in_flight_ > 0) {
      io_uring_cqe* cqe = nullptr;
      if (io_uring_wait_cqe(&ring_, &cqe) != 0) break;
      io_uring_cqe_seen(&ring_, cqe);
      --in_flight_;
    }
    io_uring_queue_exit(&ring_);
  }
  for (auto& [path, f] : files_) ::close(f.fd);
}

void StreamedExperts::warn_once(const std::string& line) {
  if (warned_) return;
  warned_ = true;
  std::fprintf(stderr, "%s\n", line.c_str());
}

StreamedExperts::OpenFile& StreamedExperts::file_of(const std::string& path) {
  for (auto& [p, f] : files_) {
    if (p == path) return f;
  }
  OpenFile f;
  int fd = options_.refuse_direct ? -1 : ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  const int err = options_.refuse_direct ? EINVAL : errno;
  if (fd >= 0) {
    f.direct = true;
  } else if (err == EINVAL) {
    warn_once(
        fmt::format("seedling: warning: {} refuses O_DIRECT; expert reads go through the page cache (pread)", path));
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } else {
    fail("{}: cannot open expert file: {}", path, errno_text(err));
  }
  if (fd < 0) fail("{}: cannot open expert file: {}", path, errno_text(errno));
  f.fd = fd;
  files_.emplace_back(path, f);
  return files_.back().second;
}

bool StreamedExperts::direct_io() const {
  std::lock_guard lock(mutex_);
  if (!ring_ok_) return false;
  return std::all_of(files_.begin(), files_.end(), [](const auto& pf) { return pf.second.direct; });
}

const BlobLocation& StreamedExperts::location(int layer, int expert) const {
  if (layer < 0 || size_t(layer) >= where_.size() || expert < 0 || size_t(expert) >= where_[size_t(layer)].size()) {
    fail("streamed experts: no blob for expert {} of layer {}", expert, layer);
  }
  return where_[size_t(layer)][size_t(expert)];
}

void StreamedExperts::busy_begin() {
  if (in_flight_++ == 0) busy_since_ = seconds_now();
}

void StreamedExperts::busy_end() {
  if (--in_flight_ == 0) busy_s_ += seconds_now() - busy_since_;
}

void StreamedExperts::start_read(int slot, int layer, int expert) {
  SlotIo& s = io_[size_t(slot)];
  s.state = SlotState::reading;
  s.guessed = false;
  s.layer = layer;
  s.expert = expert;
  s.done = 0;
  s.started = seconds_now();
  cache_.pin(slot);  // the read's own pin, dropped when it completes
  submit_remaining(slot);
}

void StreamedExperts::submit_remaining(int slot) {
  SlotIo& s = io_[size_t(slot)];
  const BlobLocation& b = location(s.layer, s.expert);
  OpenFile& f = file_of(b.file);
  if (!ring_ok_ || !f.direct) {
    read_synchronously(slot);
    return;
  }
  // Keep at most queue_depth reads in flight: collect a completion first when the queue is full.
  while (in_flight_ >= options_.queue_depth) reap(true);
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) {
    io_uring_submit(&ring_);
    sqe = io_uring_get_sqe(&ring_);
  }
  SEEDLING_CHECK(sqe != nullptr, "io_uring submission queue full with {} reads in flight", in_flight_);
  io_uring_prep_read(sqe, f.fd, slot_data(slot) + s.done, unsigned(b.bytes - s.done), b.offset + s.done);
  io_uring_sqe_set_data64(sqe, uint64_t(slot));
  busy_begin();
}

void StreamedExperts::read_synchronously(int slot) {
  SlotIo& s = io_[size_t(slot)];
  const BlobLocation& b = location(s.layer, s.expert);
  const int fd = file_of(b.file).fd;
  busy_begin();
  const ssize_t n = ::pread(fd, slot_data(slot) + s.done, size_t(b.bytes - s.done), off_t(b.offset + s.done));
  const int64_t res = n < 0 ? -int64_t(errno) : int64_t(n);
  busy_end();
  on_read_done(slot, res);
}

void StreamedExperts::on_read_done(int slot, int64_t res) {
  SlotIo& s = io_[size_t(slot)];
  const BlobLocation& b = location(s.layer, s.expert);
  if (s.done == 0 && ++read_count_ == options_.fail_read_number) res = -EIO;  // test hook: this read fails
  if (res == -EINVAL) {
    OpenFile& f = file_of(b.file);
    if (f.direct) {
      // The filesystem took O_DIRECT at open but refuses the read: reopen buffered and read this blob again.
      warn_once(
          fmt::format("seedling: warning: {} refuses O_DIRECT reads; expert reads go through the page cache "
                      "(pread)",
                      b.file));
      const int fd = ::open(b.file.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) fail_slot(slot, errno_text(errno));
      ::close(f.fd);
      f.fd = fd;
      f.direct = false;
      read_synchronously(slot);
      return;
    }
  }
  if (res < 0) fail_slot(slot, errno_text(int(-res)));
  if (res == 0) {
    fail_slot(slot, fmt::format("unexpected end of file after {} of {} bytes (truncated?)", s.done, b.bytes));
  }
  s.done += uint64_t(res);
  if (s.done < b.bytes) {
    submit_remaining(slot);
    if (ring_ok_) io_uring_submit(&ring_);
    return;
  }
  finish_slot(slot);
}

void StreamedExperts::finish_slot(int slot) {
  SlotIo& s = io_[size_t(slot)];
  const BlobLocation& b = location(s.layer, s.expert);
  const double latency = seconds_now() - s.started;
  ++latency_seen_;
  if (latency_sample_.size() < kLatencySample) {
    latency_sample_.push_back(latency);
  } else {
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    const uint64_t j = rng_ % latency_seen_;
    if (j < kLatencySample) latency_sample_[size_t(j)] = latency;
  }
  bytes_read_ += b.bytes;
  ++reads_;
  try {
    uint8_t& checked = verified_[size_t(s.layer)][size_t(s.expert)];
    if (verify_ && checked == 0) verify_(slot_data(slot), size_t(b.bytes), b);
    checked = 1;
    s.weights = decode_(slot_data(slot), s.layer, s.expert);
  } catch (const Error& e) {
    fail_slot(slot, e.what());
  }
  s.state = SlotState::ready;
  cache_.unpin(slot);
}

void StreamedExperts::fail_slot(int slot, const std::string& why) {
  SlotIo& s = io_[size_t(slot)];
  const BlobLocation& b = location(s.layer, s.expert);
  const std::string what = fmt::format("{}: reading expert {} of layer {} at offset {} ({} bytes): {}", b.file,
                                       s.expert, s.layer, b.offset, b.bytes, why);
  cache_.drop(slot);
  s = SlotIo{};
  throw Error(what);
}

void StreamedExperts::reap(bool wait) {
  if (!ring_ok_ || in_flight_ == 0) return;
  if (wait) io_uring_submit(&ring_);  // reads prepared but not yet submitted would never complete
  io_uring_cqe* cqe = nullptr;
  for (;;) {
    const int rc = wait ? io_uring_wait_cqe(&ring_, &cqe) : io_uring_peek_cqe(&ring_, &cqe);
    if (rc == -EINTR) continue;
    if (rc == -EAGAIN || (rc == 0 && cqe == nullptr)) return;
    if (rc < 0) fail("io_uring: waiting for an expert read: {}", errno_text(-rc));
    const int slot = int(io_uring_cqe_get_data64(cqe));
    const int64_t res = cqe->res;
    io_uring_cqe_seen(&ring_, cqe);
    busy_end();
    on_read_done(slot, res);
    if (wait) return;
  }
}

void StreamedExperts::wait_ready(int slot) {
  if (io_[size_t(slot)].state == SlotState::ready) return;
  const double t0 = seconds_now();
  if (ring_ok_) io_uring_submit(&ring_);
  while (io_[size_t(slot)].state == SlotState::reading) reap(true);
  io_wait_s_ += seconds_now() - t0;
  SEEDLING_CHECK(io_[size_t(slot)].state == SlotState::ready, "expert slot {} neither read nor reading", slot);
}

void StreamedExperts::drop_stale_prefetch_pins() {
  for (int i = 0; i < slots_; ++i) {
    if (io_[size_t(i)].prefetch_pin) {
      io_[size_t(i)].prefetch_pin = false;
      cache_.unpin(i);
    }
  }
}

void StreamedExperts::count_hit(int slot) {
  if (!io_[size_t(slot)].guessed) return;
  io_[size_t(slot)].guessed = false;
  ++guess_used_;
}

void StreamedExperts::prefetch(int layer, std::span<const int> experts) {
  std::lock_guard lock(mutex_);
  drop_stale_prefetch_pins();
  for (const int e : experts) {
    location(layer, e);
    const uint64_t key = expert_key(layer, e);
    if (const int s = cache_.find(key); s >= 0 && io_[size_t(s)].prefetch_pin) continue;  // listed twice
    const auto a = cache_.access(key);
    if (!a) break;  // every slot pinned: the rest are fetched by acquire, after earlier experts are released
    io_[size_t(a->slot)].prefetch_pin = true;
    if (a->hit) count_hit(a->slot);
    if (!a->hit) start_read(a->slot, layer, e);
  }
  if (ring_ok_) io_uring_submit(&ring_);
  reap(false);
}

void StreamedExperts::prefetch_guess(int layer, std::span<const int> experts) {
  std::lock_guard lock(mutex_);
  if (!ring_ok_) return;
  for (const int e : experts) {
    const BlobLocation& b = location(layer, e);
    if (in_flight_ >= options_.queue_depth) break;  // a guess never waits for the disk
    const uint64_t key = expert_key(layer, e);
    if (cache_.find(key) >= 0 || !file_of(b.file).direct) continue;
    const auto a = cache_.admit(key);
    if (!a) break;  // every slot pinned
    start_read(a->slot, layer, e);
    io_[size_t(a->slot)].guessed = true;
    ++guessed_;
    guess_bytes_ += b.bytes;
  }
  io_uring_submit(&ring_);
  reap(false);
}

ExpertWeights StreamedExperts::acquire(int layer, int expert) {
  std::lock_guard lock(mutex_);
  location(layer, expert);
  const uint64_t key = expert_key(layer, expert);
  int slot = cache_.find(key);
  if (slot >= 0 && io_[size_t(slot)].prefetch_pin) {
    io_[size_t(slot)].prefetch_pin = false;  // the prefetch's pin becomes this acquire's
  } else {
    auto a = cache_.access(key);
    // A read in flight (a guess's) pins its slot until it completes: wait for reads before saying no slot is free.
    while (!a && ring_ok_ && in_flight_ > 0) {
      reap(true);
      a = cache_.access(key);
    }
    if (!a) {
      fail(
          "streamed experts: all {} slots are in use; cannot acquire expert {} of layer {} (more experts held at "
          "once than slots)",
          slots_, expert, layer);
    }
    slot = a->slot;
    if (a->hit) count_hit(slot);
    if (!a->hit) start_read(slot, layer, expert);
  }
  try {
    wait_ready(slot);
  } catch (const Error&) {
    // Another slot's read failed while we waited: give back this acquire's pin, which the caller will not release.
    if (cache_.occupied(slot) && cache_.key_of(slot) == key && cache_.pins(slot) > 0) cache_.unpin(slot);
    throw;
  }
  return io_[size_t(slot)].weights;
}

bool StreamedExperts::ready(int layer, int expert) {
  std::lock_guard lock(mutex_);
  location(layer, expert);
  reap(false);
  const int slot = cache_.find(expert_key(layer, expert));
  return slot >= 0 && io_[size_t(slot)].state == SlotState::ready;
}

void StreamedExperts::release(int layer, int expert) {
  std::lock_guard lock(mutex_);
  const int slot = cache_.find(expert_key(layer, expert));
  SEEDLING_CHECK(slot >= 0 && cache_.pins(slot) > 0 && !io_[size_t(slot)].prefetch_pin,
                 "release of expert {} of layer {} that is not acquired", expert, layer);
  cache_.unpin(slot);
}

ExpertStats StreamedExperts::stats() const {
  std::lock_guard lock(mutex_);
  ExpertStats s;
  s.hits = cache_.hits();
  s.misses = cache_.misses();
  s.bytes_read = bytes_read_;
  s.reads = reads_;
  s.read_p50_s = percentile(latency_sample_, 0.50);
  s.read_p95_s = percentile(latency_sample_, 0.95);
  s.read_p99_s = percentile(latency_sample_, 0.99);
  s.read_busy_s = busy_s_;
  s.io_wait_s = io_wait_s_;
  s.slots = slots_;
  s.slot_bytes = slot_bytes_;
  s.policy = policy_name(cache_.policy());
  s.prefetched = guessed_;
  s.prefetch_used = guess_used_;
  s.prefetch_bytes = guess_bytes_;
  return s;
}

std::vector<BlobLocation> StreamedExperts::blobs() const {
  std::vector<BlobLocation> all;
  for (const auto& layer : where_) all.insert(all.end(), layer.begin(), layer.end());
  return all;
}

RandomReadRate measure_random_reads(std::span<const BlobLocation> blobs, int queue_depth, double seconds,
                                    uint64_t seed) {
  if (blobs.empty()) fail("measure_random_reads: no blobs to read");
  if (queue_depth < 1 || queue_depth > 4096) fail("read queue depth {} (expected 1..4096)", queue_depth);
  uint64_t largest = 0;
  std::map<std::string, int> fds;
  struct Fds {
    std::map<std::string, int>& m;
    ~Fds() {
      for (auto& [path, fd] : m) ::close(fd);
    }
  } close_all{fds};
  for (const BlobLocation& b : blobs) {
    if (b.offset % kAlign != 0 || b.bytes % kAlign != 0 || b.bytes == 0) {
      fail("{}: a blob at offset {} with {} bytes is not 4 KiB aligned", b.file, b.offset, b.bytes);
    }
    largest = std::max(largest, b.bytes);
    if (fds.count(b.file) != 0) continue;
    const int fd = ::open(b.file.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0) fail("{}: cannot open with O_DIRECT to measure the disk: {}", b.file, errno_text(errno));
    fds[b.file] = fd;
  }
  std::unique_ptr<uint8_t[], void (*)(uint8_t*)> buffer(
      static_cast<uint8_t*>(std::aligned_alloc(kAlign, size_t(largest) * size_t(queue_depth))),
      [](uint8_t* p) { std::free(p); });
  if (!buffer) fail("cannot allocate {} read buffers of {} bytes", queue_depth, largest);
  io_uring ring{};
  if (const int rc = io_uring_queue_init(unsigned(queue_depth), &ring, 0); rc != 0) {
    fail("io_uring unavailable ({}): cannot measure O_DIRECT random reads", errno_text(-rc));
  }
  struct Ring {
    io_uring& r;
    int in_flight = 0;
    ~Ring() {  // the kernel may still write into the buffers: wait for every read first (an Error mid-way)
      io_uring_submit(&r);
      for (io_uring_cqe* cqe = nullptr; in_flight > 0 && io_uring_wait_cqe(&r, &cqe) == 0; --in_flight) {
        io_uring_cqe_seen(&r, cqe);
      }
      io_uring_queue_exit(&r);
    }
  } guard{ring};
  struct Slot {
    size_t blob = 0;
    uint64_t done = 0;
  };
  std::vector<Slot> slots(static_cast<size_t>(queue_depth));
  uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 1;
  auto submit = [&](int slot) {
    Slot& s = slots[size_t(slot)];
    const BlobLocation& b = blobs[s.blob];
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    SEEDLING_CHECK(sqe != nullptr, "io_uring submission queue full with {} reads in flight", guard.in_flight);
    io_uring_prep_read(sqe, fds.at(b.file), buffer.get() + size_t(slot) * largest + s.done, unsigned(b.bytes - s.done),
                       b.offset + s.done);
    io_uring_sqe_set_data64(sqe, uint64_t(slot));
    ++guard.in_flight;
  };
  auto start_blob = [&](int slot) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    slots[size_t(slot)] = {size_t(rng % blobs.size()), 0};
    submit(slot);
  };
  RandomReadRate r;
  r.queue_depth = queue_depth;
  const uint64_t min_reads = 2 * uint64_t(queue_depth);
  uint64_t started = 0;
  const double t0 = seconds_now();
  for (int i = 0; i < queue_depth; ++i, ++started) start_blob(i);
  io_uring_submit(&ring);
  while (guard.in_flight > 0) {
    io_uring_cqe* cqe = nullptr;
    const int rc = io_uring_wait_cqe(&ring, &cqe);
    if (rc == -EINTR) continue;
    if (rc < 0) fail("io_uring: waiting for a read: {}", errno_text(-rc));
    const int slot = int(io_uring_cqe_get_data64(cqe));
    const int64_t res = cqe->res;
    io_uring_cqe_seen(&ring, cqe);
    --guard.in_flight;
    Slot& s = slots[size_t(slot)];
    const BlobLocation& b = blobs[s.blob];
    if (res <= 0) {
      fail("{}: reading {} bytes at offset {}: {}", b.file, b.bytes, b.offset,
           res == 0 ? std::string("unexpected end of file") : errno_text(int(-res)));
    }
    s.done += uint64_t(res);
    if (s.done < b.bytes) {
      submit(slot);
    } else {
      ++r.reads;
      r.bytes += b.bytes;
      if (started < min_reads || seconds_now() - t0 < seconds) {
        start_blob(slot);
        ++started;
      }
    }
    io_uring_submit(&ring);
  }
  r.seconds = seconds_now() - t0;
  return r;
}

std::unique_ptr<StreamedExperts> StreamedExperts::from_packed(std::shared_ptr<const PackedModel> packed,
                                                              StreamedOptions options) {
  // The provider reads whole 4 KiB pages (O_DIRECT); the packed files are padded so that the page after a blob's
  // last byte is there. The checksum covers the blob's own bytes, remembered per location.
  std::vector<std::vector<BlobLocation>> where(size_t(packed->num_layers()));
  auto real_bytes = std::make_shared<std::map<std::pair<std::string, uint64_t>, uint64_t>>();
  for (int l = 0; l < packed->num_layers(); ++l) {
    if (!packed->layer_has_experts(l)) continue;
    for (int e = 0; e < packed->num_experts(l); ++e) {
      const ExpertBlobLocation& b = packed->expert_blob(l, e);
      const uint64_t padded = (b.bytes + 4095) / 4096 * 4096;
      where[size_t(l)].push_back({b.file, b.offset, padded, b.xxh64});
      (*real_bytes)[{b.file, b.offset}] = b.bytes;
    }
  }
  std::shared_ptr<const PackedModel> p = packed;
  // Called after the checksum: seed parts are validated before the views are handed out.
  auto decode = [p](const uint8_t* blob, int layer, int expert) {
    const ExpertWeights w = decode_expert_blob(*p, blob, layer, expert);
    validate_expert_weights(w, p->expert_blob(layer, expert).file, layer, expert);
    return w;
  };
  auto verify = [real_bytes](const uint8_t* blob, size_t, const BlobLocation& at) {
    const uint64_t got = packed_checksum(blob, real_bytes->at({at.file, at.offset}));
    if (got != at.xxh64) {
      fail("{}: expert blob at offset {} has xxh64 {:016x}, the manifest says {:016x} (corrupted file?)", at.file,
           at.offset, got, at.xxh64);
    }
  };
  return std::make_unique<StreamedExperts>(std::move(where), decode, verify, std::move(options));
}

}  // namespace seedling
