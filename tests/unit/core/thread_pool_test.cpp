// ThreadPool: chunks cover [0, n) exactly once, and an exception thrown in any thread reaches the caller.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
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

// More chunks than threads (chunks_per_thread): still every index once, in as many chunks as asked (grain allowing),
// each at least about the grain, and a thread may run several.
TEST(ThreadPool, SeveralChunksAThreadCoverTheRangeExactlyOnce) {
  ThreadPool pool(3);
  for (const size_t per : {size_t{1}, size_t{4}, size_t{1000}}) {
    std::vector<std::atomic<int>> seen(1000);
    std::atomic<int> calls{0};
    pool.parallel_for(
        seen.size(), 7,
        [&](size_t b, size_t e) {
          EXPECT_GE(e - b, size_t{6});
          calls++;
          for (size_t i = b; i < e; ++i) seen[i]++;
        },
        per);
    for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i].load(), 1) << i << " per " << per;
    // 3 threads: 3, 12, and at most 64 a thread (192), the grain allowing 143.
    EXPECT_EQ(calls.load(), per == 1 ? 3 : per == 4 ? 12 : 143) << per;
  }
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

TEST(ThreadPool, ManyBackToBackCallsAndCallsAfterTheWorkersSleptEachCoverTheRange) {
  ThreadPool pool(6);  // more threads than this machine may have cores: workers spin, sleep and wake
  for (int round = 0; round < 2000; ++round) {
    std::atomic<size_t> total{0};
    const size_t n = 1 + size_t(round % 97);
    pool.parallel_for(n, 1, [&](size_t b, size_t e) { total += e - b; });
    ASSERT_EQ(total.load(), n) << "round " << round;
    if (round % 500 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));  // long enough to sleep
  }
}

TEST(ThreadPool, ACallFromInsideAChunkRunsInPlace) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> seen(64 * 10);
  pool.parallel_for(64, 1, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      pool.parallel_for(10, 1, [&](size_t b2, size_t e2) {
        for (size_t j = b2; j < e2; ++j) seen[i * 10 + j]++;
      });
    }
  });
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i].load(), 1) << i;
}

TEST(ThreadPool, CallsFromTwoThreadsAtOnceTakeTurns) {
  ThreadPool pool(4);
  std::atomic<size_t> a{0}, b{0};
  auto caller = [&](std::atomic<size_t>* sum) {
    for (int r = 0; r < 500; ++r) pool.parallel_for(33, 1, [&](size_t x, size_t y) { *sum += y - x; });
  };
  std::thread t1(caller, &a), t2(caller, &b);
  t1.join();
  t2.join();
  EXPECT_EQ(a.load(), 500u * 33u);
  EXPECT_EQ(b.load(), 500u * 33u);
}

TEST(ThreadPool, ProfilingCountsCallsBySiteWithTheirTimesAndNothingWhileOff) {
  ThreadPool pool(4);
  const auto spin = [](std::chrono::microseconds d) {
    const auto end = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < end) {
    }
  };
  pool.parallel_for(8, 1, [](size_t, size_t) {});  // before profiling: not counted
  pool.set_profiling(true);
  for (int r = 0; r < 3; ++r) {
    spin(std::chrono::microseconds(2000));         // serial time before site A
    pool.parallel_for(4, 1, [&](size_t, size_t) {  // site A
      spin(std::chrono::microseconds(1000));
      pool.parallel_for(4, 1, [](size_t, size_t) {});  // nested in a chunk: runs in place, not counted
    });
    pool.parallel_for(1, 1, [&](size_t, size_t) { spin(std::chrono::microseconds(100)); });  // site B: one chunk
  }
  pool.set_profiling(false);
  pool.parallel_for(8, 1, [](size_t, size_t) {});  // after: not counted
  const std::vector<RegionProfile> p = pool.profile();
  ASSERT_EQ(p.size(), 2u);
  const RegionProfile& a = p[0];  // the most time first
  const RegionProfile& b = p[1];
  EXPECT_NE(a.site.find("thread_pool_test.cpp:"), std::string::npos) << a.site;
  EXPECT_NE(a.site, b.site);
  EXPECT_EQ(a.calls, 3u);
  EXPECT_EQ(a.serial_calls, 0u);
  EXPECT_EQ(b.calls, 3u);
  EXPECT_EQ(b.serial_calls, 3u);
  // Site A: four chunks of 1 ms each call, on up to four threads; the 2 ms of spinning before each call are its
  // "before", and site B follows A at once.
  EXPECT_GE(a.busy_s, 3 * 4 * 1e-3);
  EXPECT_GE(a.wall_s, 3 * 1e-3);
  EXPECT_LE(a.busy_s, a.wall_s * pool.size() * 1.01);
  EXPECT_GE(a.before_s, 3 * 2e-3);
  EXPECT_LT(b.before_s, a.before_s);
  EXPECT_DOUBLE_EQ(b.busy_s, b.wall_s);  // one thread: its chunk is its call
}

}  // namespace
}  // namespace seedling
