// ThreadPool: chunks cover [0, n) exactly once, and an exception thrown in any thread reaches the caller.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

namespace seedling {
namespace {

TEST(ThreadPool, ChunksCoverTheRangeExactlyOnce) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> seen(1000);
  pool.parallel_for(seen.size(), 7, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) seen[i]++;
  });
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i].load(), 1) << i;
}

TEST(ThreadPool, ExceptionInAnyChunkReachesTheCallerAndThePoolStaysUsable) {
  ThreadPool pool(4);
  // Throw from each chunk in turn: the last chunk, the first (run by the caller or a worker), and all.
  for (size_t bad : {size_t(0), size_t(999), size_t(500)}) {
    std::atomic<size_t> ran{0};
    EXPECT_THROW(pool.parallel_for(1000, 1,
                                   [&](size_t b, size_t e) {
                                     ran += e - b;
                                     if (b <= bad && bad < e) throw std::runtime_error("chunk failed");
                                   }),
                 std::runtime_error);
    EXPECT_EQ(ran.load(), 1000u) << "every chunk still runs to its end";
  }
  EXPECT_THROW(pool.parallel_for(64, 1, [](size_t, size_t) { throw std::logic_error("all"); }), std::logic_error);
  std::atomic<size_t> total{0};
  pool.parallel_for(100, 1, [&](size_t b, size_t e) { total += e - b; });
  EXPECT_EQ(total.load(), 100u);
}

}  // namespace
}  // namespace seedling
