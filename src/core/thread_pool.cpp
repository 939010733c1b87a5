#include "core/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <system_error>
#include <utility>

#include "core/error.h"

namespace seedling {

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < std::max(threads, 1); ++i) {
    try {
      workers_.emplace_back([this, i] { worker_loop(i); });
    } catch (const std::system_error& e) {  // the system refused a thread: stop the ones started, then say so
      {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
      }
      wake_.notify_all();
      for (auto& t : workers_) t.join();
      fail("cannot start thread {} of {}: {} (ask for fewer with -t)", i + 1, threads, e.what());
    }
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  grain = std::max<size_t>(grain, 1);
  const size_t max_chunks = (n + grain - 1) / grain;
  const size_t chunks = std::min<size_t>(max_chunks, size_t(size()));
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);
  error_ = nullptr;
  job_ = &fn;
  job_n_ = n;
  job_chunks_ = chunks;
  next_chunk_ = 0;
  chunks_done_ = 0;
  ++generation_;
  wake_.notify_all();
  // The caller works too.
  while (next_chunk_ < job_chunks_) {
    const size_t c = next_chunk_++;
    lock.unlock();
    run_chunk(fn, c * n / chunks, (c + 1) * n / chunks);
    lock.lock();
    ++chunks_done_;
  }
  done_.wait(lock, [&] { return chunks_done_ == job_chunks_; });
  job_ = nullptr;
  if (error_) {
    std::exception_ptr e = std::exchange(error_, nullptr);
    lock.unlock();
    std::rethrow_exception(e);
  }
}

void ThreadPool::run_chunk(const std::function<void(size_t, size_t)>& fn, size_t begin, size_t end) {
  try {
    fn(begin, end);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_) error_ = std::current_exception();
  }
}

void ThreadPool::worker_loop(int /*index*/) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || (generation_ != seen && job_ != nullptr); });
    if (stop_) return;
    seen = generation_;
    while (job_ != nullptr && next_chunk_ < job_chunks_) {
      const size_t c = next_chunk_++;
      const auto* fn = job_;
      const size_t n = job_n_, chunks = job_chunks_;
      lock.unlock();
      run_chunk(*fn, c * n / chunks, (c + 1) * n / chunks);
      lock.lock();
      if (++chunks_done_ == job_chunks_) done_.notify_all();
    }
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
