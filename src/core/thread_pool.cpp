#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <system_error>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SEEDLING_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define SEEDLING_CPU_RELAX() asm volatile("yield" ::: "memory")
#else
#define SEEDLING_CPU_RELAX() std::this_thread::yield()
#endif

#include "core/error.h"

namespace seedling {

namespace {
// Pauses a worker spins for the next job before it sleeps: at 30-140 cycles a pause, tens of microseconds, longer
// than the gaps between the parallel_for calls of one forward, far shorter than a gap between requests.
constexpr int kSpinRounds = 1 << 14;
// Set while a thread runs a chunk: a parallel_for from inside one runs serially rather than wait on itself.
thread_local bool t_in_chunk = false;

constexpr uint64_t pack(uint64_t gen, uint64_t chunks, uint64_t next) {
  return (gen << 32) | (chunks << 16) | next;
}

uint64_t now_ns() {
  return uint64_t(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}
}  // namespace

ThreadPool::ThreadPool(int threads) {
  // The chunk count lives in 16 bits of the job word.
  threads = std::clamp(threads, 1, 1 << 15);
  for (int i = 1; i < threads; ++i) {
    try {
      workers_.emplace_back([this] { worker_loop(); });
    } catch (const std::system_error& e) {  // the system refused a thread: stop the ones started, then say so
      stop_.store(true);
      { std::lock_guard<std::mutex> lock(sleep_mu_); }
      wake_.notify_all();
      for (auto& t : workers_) t.join();
      fail("cannot start thread {} of {}: {} (ask for fewer with -t)", i + 1, threads, e.what());
    }
  }
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  { std::lock_guard<std::mutex> lock(sleep_mu_); }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunk(size_t c) {
  t_in_chunk = true;
  const uint64_t t0 = timed_ ? now_ns() : 0;
  try {
    (*fn_)(c * n_ / chunks_, (c + 1) * n_ / chunks_);
  } catch (...) {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!error_) error_ = std::current_exception();
  }
  if (timed_) busy_ns_.fetch_add(now_ns() - t0, std::memory_order_relaxed);
  t_in_chunk = false;
}

void ThreadPool::record(const std::source_location& where, bool serial, uint64_t start_ns, uint64_t end_ns,
                        uint64_t busy_ns) {
  std::lock_guard<std::mutex> lock(profile_mu_);
  auto it = std::find_if(sites_.begin(), sites_.end(), [&](const Site& s) {
    return s.line == where.line() && std::strcmp(s.file, where.file_name()) == 0;
  });
  if (it == sites_.end()) {
    std::string file = where.file_name();
    const size_t src = file.rfind("src/");
    if (src != std::string::npos) file.erase(0, src);
    sites_.push_back({where.file_name(), where.line(), {file + ":" + std::to_string(where.line())}});
    it = sites_.end() - 1;
  }
  RegionProfile& p = it->counts;
  ++p.calls;
  p.serial_calls += serial ? 1 : 0;
  p.wall_s += double(end_ns - start_ns) * 1e-9;
  p.busy_s += double(busy_ns) * 1e-9;
  p.before_s += double(start_ns - std::min(start_ns, last_end_ns_)) * 1e-9;
  last_end_ns_ = end_ns;
}

void ThreadPool::set_profiling(bool on) {
  std::lock_guard<std::mutex> lock(profile_mu_);
  if (on) sites_.clear();
  last_end_ns_ = now_ns();
  profiling_.store(on, std::memory_order_relaxed);
}

std::vector<RegionProfile> ThreadPool::profile() const {
  std::vector<RegionProfile> out;
  {
    std::lock_guard<std::mutex> lock(profile_mu_);
    for (const Site& s : sites_) out.push_back(s.counts);
  }
  std::sort(out.begin(), out.end(), [](const RegionProfile& a, const RegionProfile& b) { return a.wall_s > b.wall_s; });
  return out;
}

void ThreadPool::run_chunks(uint32_t gen) {
  uint64_t w = word_.load(std::memory_order_acquire);
  for (;;) {
    if (uint32_t(w >> 32) != gen) return;  // a later job: this one is over
    const uint64_t chunks = (w >> 16) & 0xffff, next = w & 0xffff;
    if (next >= chunks) return;
    // A successful claim of chunk `next` of generation `gen`: fn_, n_ and chunks_ stay those of this job until
    // this chunk is counted done.
    if (!word_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    run_chunk(size_t(next));
    done_.fetch_add(1, std::memory_order_acq_rel);
    w = word_.load(std::memory_order_acquire);
  }
}

void ThreadPool::parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn,
                              size_t chunks_per_thread, std::source_location where) {
  if (n == 0) return;
  grain = std::max<size_t>(grain, 1);
  const size_t max_chunks = (n + grain - 1) / grain;
  const size_t most = size_t(size()) * std::clamp<size_t>(chunks_per_thread, 1, 64);  // the job word holds 16 bits
  const size_t chunks = std::min<size_t>(max_chunks, most);
  if (chunks <= 1 || t_in_chunk) {
    if (t_in_chunk || !profiling_.load(std::memory_order_relaxed)) return fn(0, n);
    const uint64_t t0 = now_ns();
    fn(0, n);
    const uint64_t t1 = now_ns();
    record(where, true, t0, t1, t1 - t0);
    return;
  }
  std::lock_guard<std::mutex> call(call_mu_);
  const bool timed = profiling_.load(std::memory_order_relaxed);
  const uint64_t t0 = timed ? now_ns() : 0;
  error_ = nullptr;
  fn_ = &fn;
  n_ = n;
  chunks_ = chunks;
  timed_ = timed;
  busy_ns_.store(0, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  const uint32_t gen = uint32_t(word_.load(std::memory_order_relaxed) >> 32) + 1;
  word_.store(pack(gen, chunks, 0), std::memory_order_seq_cst);  // publishes fn_, n_, chunks_, done_
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    { std::lock_guard<std::mutex> lock(sleep_mu_); }
    wake_.notify_all();
  }
  run_chunks(gen);  // the caller works too
  for (int spins = 0; done_.load(std::memory_order_acquire) != chunks; ++spins) {
    if (spins < kSpinRounds) {
      SEEDLING_CPU_RELAX();
    } else {
      std::this_thread::yield();  // a worker was descheduled mid-chunk: let it run
    }
  }
  fn_ = nullptr;
  if (timed) record(where, false, t0, now_ns(), busy_ns_.load(std::memory_order_relaxed));
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void ThreadPool::worker_loop() {
  uint32_t seen = 0;
  for (;;) {
    uint32_t gen = uint32_t(word_.load(std::memory_order_acquire) >> 32);
    for (int spins = 0; gen == seen && spins < kSpinRounds; ++spins) {
      if (stop_.load(std::memory_order_relaxed)) return;
      SEEDLING_CPU_RELAX();
      gen = uint32_t(word_.load(std::memory_order_acquire) >> 32);
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(sleep_mu_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      wake_.wait(lock, [&] { return stop_.load() || uint32_t(word_.load(std::memory_order_seq_cst) >> 32) != seen; });
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
      if (stop_.load()) return;
      gen = uint32_t(word_.load(std::memory_order_acquire) >> 32);
    }
    if (stop_.load(std::memory_order_relaxed)) return;
    seen = gen;
    run_chunks(gen);
  }
}

namespace {
std::unique_ptr<ThreadPool>& global_slot() {
  static std::unique_ptr<ThreadPool> pool;
  return pool;
}
}  // namespace

ThreadPool& ThreadPool::global() {
  auto& slot = global_slot();
  if (!slot) slot = std::make_unique<ThreadPool>(int(std::max(1u, std::thread::hardware_concurrency())));
  return *slot;
}

void ThreadPool::set_global_threads(int threads) {
  global_slot() = std::make_unique<ThreadPool>(std::max(threads, 1));
}

}  // namespace seedling
