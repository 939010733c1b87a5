// core/thread_pool.h - a small fixed pool that runs parallel_for over index ranges.
//
// Work is split into contiguous chunks by index, and which thread runs a chunk never changes arithmetic:
// kernels split over independent outputs (matrix rows, heads), never over a reduction, so results are the
// same for any thread count. An exception thrown by fn in any thread is carried to the caller of parallel_for and
// rethrown there (the first one thrown; the other chunks still run to their end), never std::terminate.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace seedling {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint chunks covering [0, n), each at least `grain` long, and waits. Rethrows the
  // first exception any chunk threw, after every chunk has finished.
  void parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn);

  // The process-wide pool; its size is set once by set_global_threads (default: hardware threads).
  static ThreadPool& global();
  static void set_global_threads(int threads);

 private:
  void worker_loop(int index);
  // Runs one chunk; an exception is kept in error_ (the first one wins). Called without mu_ held.
  void run_chunk(const std::function<void(size_t, size_t)>& fn, size_t begin, size_t end);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(size_t, size_t)>* job_ = nullptr;
  size_t job_n_ = 0;
  size_t job_chunks_ = 0;
  size_t next_chunk_ = 0;
  size_t chunks_done_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;  // guarded by mu_
};

}  // namespace seedling
