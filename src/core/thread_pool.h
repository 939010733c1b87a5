// core/thread_pool.h - a small fixed pool that runs parallel_for over index ranges.
//
// Work is split into contiguous chunks by index, and which thread runs a chunk never changes arithmetic:
// kernels split over independent outputs (matrix rows, heads), never over a reduction, so results are the
// same for any thread count. An exception thrown by fn in any thread is carried to the caller of parallel_for and
// rethrown there (the first one thrown; the other chunks still run to their end), never std::terminate.
//
// A decoded token runs several hundred parallel_for calls of tens of microseconds each (a few per layer), so the
// hand-off is on atomics: a call publishes its job in one word (generation, chunk count, next chunk) that workers
// claim chunks from by compare-and-swap, and waits for a done counter. Workers spin on that word for a while after
// each job (kSpinRounds pauses, tens of microseconds) and only then sleep on a condition variable, so back-to-back
// calls never pay a futex wake-up; an idle pool sleeps. A call from inside a chunk (nested) runs serially in place;
// calls from two threads at once take turns.
//
// set_profiling(true) counts, per call site (file and line of the parallel_for), the calls, the calling thread's time
// inside them and the time the chunks ran summed over threads (`bench --profile` prints it for decode): a measuring
// tool, two clock reads a chunk while on, one relaxed load a call while off.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <source_location>
#include <string>
#include <thread>
#include <vector>

namespace seedling {

// What profiling counted at one call site of parallel_for (ThreadPool::set_profiling).
struct RegionProfile {
  std::string site;           // the call's file (from src/ on) and line
  uint64_t calls = 0;         // calls made, nested ones (run inside a chunk) not counted
  uint64_t serial_calls = 0;  // of which ran on the calling thread alone (one chunk)
  double wall_s = 0.0;        // the calling thread's time inside the calls
  double busy_s = 0.0;        // the chunks' own time, summed over the threads that ran them
  double before_s = 0.0;      // the calling thread's time since the end of the call before this one (any site)
};

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint chunks covering [0, n), each at least `grain` long, and waits. Rethrows the
  // first exception any chunk threw, after every chunk has finished. At most chunks_per_thread x size() chunks: 1
  // gives each thread one long range; more let the threads that finish first take the work of one that lags (a
  // product over many outputs, where a long range's prefetch matters less than an even finish).
  void parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn, size_t chunks_per_thread = 1,
                    std::source_location where = std::source_location::current());

  // Starts (true: from zero) or stops counting calls by site; profile() returns the counts, the most time first.
  void set_profiling(bool on);
  std::vector<RegionProfile> profile() const;

  // The process-wide pool; its size is set once by set_global_threads (default: hardware threads).
  static ThreadPool& global();
  static void set_global_threads(int threads);

 private:
  void worker_loop();
  // Claims and runs chunks of the job of generation `gen` until none is left or the word holds a later job.
  void run_chunks(uint32_t gen);
  // Runs one chunk; an exception is kept in error_ (the first one wins).
  void run_chunk(size_t chunk);
  void record(const std::source_location& where, bool serial, uint64_t start_ns, uint64_t end_ns, uint64_t busy_ns);

  std::vector<std::thread> workers_;
  // The job: generation (high 32 bits), chunk count (bits 16-31), next chunk to claim (bits 0-15). fn_, n_ are
  // written before the word that publishes them and stay fixed until every chunk of that generation is done.
  std::atomic<uint64_t> word_{0};
  std::atomic<size_t> done_{0};
  const std::function<void(size_t, size_t)>* fn_ = nullptr;
  size_t n_ = 0, chunks_ = 0;
  bool timed_ = false;  // this job's chunks add their time to busy_ns_ (published with fn_)
  std::atomic<uint64_t> busy_ns_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int> sleepers_{0};
  std::mutex sleep_mu_;
  std::condition_variable wake_;
  std::mutex call_mu_;  // one parallel_for at a time
  std::mutex error_mu_;
  std::exception_ptr error_;  // guarded by error_mu_
  struct Site {
    const char* file;
    uint32_t line;
    RegionProfile counts;
  };
  std::atomic<bool> profiling_{false};
  mutable std::mutex profile_mu_;
  std::vector<Site> sites_;   // guarded by profile_mu_
  uint64_t last_end_ns_ = 0;  // guarded by profile_mu_: when the last call counted ended
};

}  // namespace seedling
