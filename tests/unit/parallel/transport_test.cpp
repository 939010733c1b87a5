// ThreadTransport: exchanges between thread ranks, the edge cases (nothing to a rank, everything to one rank, a
// rank alone) and count mismatches, which every rank reports alike instead of hanging.
#include <gtest/gtest.h>

#include <functional>
#include <thread>

#include "core/error.h"
#include "parallel/thread_transport.h"

namespace seedling {

namespace {

// Runs body(transport) on R threads; returns each rank's error ("" when none).
std::vector<std::string> on_ranks(int R, const std::function<void(Transport&)>& body) {
  ThreadGroup g(R);
  std::vector<std::string> errors(static_cast<size_t>(R));
  std::vector<std::thread> threads;
  for (int r = 0; r < R; ++r) {
    threads.emplace_back([&, r] {
      auto t = g.transport(r);
      try {
        body(*t);
      } catch (const Error& e) {
        errors[size_t(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

// Rank s sends counts(s, d) rows of width 3 to d, row values naming (s, d, i); every receiver checks them.
void exchange(int R, const std::function<int64_t(int, int)>& counts) {
  const auto errors = on_ranks(R, [&](Transport& t) {
    const int me = t.rank();
    std::vector<int64_t> send(static_cast<size_t>(R)), recv(static_cast<size_t>(R));
    std::vector<float> rows;
    for (int d = 0; d < R; ++d) {
      send[size_t(d)] = counts(me, d);
      for (int64_t i = 0; i < send[size_t(d)]; ++i) rows.insert(rows.end(), {float(me), float(d), float(i)});
    }
    t.exchange_counts(send, recv);
    int64_t total = 0;
    for (int s = 0; s < R; ++s) {
      EXPECT_EQ(recv[size_t(s)], counts(s, me));
      total += recv[size_t(s)];
    }
    std::vector<float> got(size_t(total * 3), -1.0f);
    all_to_all_rows(t, rows.data(), send, got.data(), recv, 3);
    size_t k = 0;
    for (int s = 0; s < R; ++s) {
      for (int64_t i = 0; i < recv[size_t(s)]; ++i, k += 3) {
        EXPECT_EQ(got[k], float(s));
        EXPECT_EQ(got[k + 1], float(me));
        EXPECT_EQ(got[k + 2], float(i));
      }
    }
    t.barrier();
  });
  for (const std::string& e : errors) EXPECT_EQ(e, "");
}

}  // namespace

TEST(ThreadTransportTest, EveryRankToEveryRankWithUnevenCounts) {
  for (int R = 1; R <= 4; ++R) exchange(R, [](int s, int d) { return int64_t(s * 3 + d + 1); });
}

TEST(ThreadTransportTest, ZeroRowsToARankAndNothingAtAll) {
  exchange(3, [](int s, int d) { return d == 1 ? int64_t(0) : int64_t(2); });  // rank 1 receives nothing
  exchange(3, [](int s, int d) { return s == 2 ? int64_t(0) : int64_t(1); });  // rank 2 sends nothing
  exchange(4, [](int, int) { return int64_t(0); });
}

TEST(ThreadTransportTest, AllRowsToOneRank) {
  exchange(4, [](int s, int d) { return d == 3 ? int64_t(5 + s) : int64_t(0); });
}

TEST(ThreadTransportTest, ACountMismatchIsTheSameErrorOnEveryRank) {
  const auto errors = on_ranks(3, [](Transport& t) {
    std::vector<int64_t> send(3, 1), recv(3, 1);
    if (t.rank() == 1) send[2] = 2;  // rank 2 expects 1
    std::vector<float> out(6, 0.0f), in(3 * 2, 0.0f);
    all_to_all_rows(t, out.data(), send, in.data(), recv, 1);
  });
  for (const std::string& e : errors) {
    EXPECT_EQ(e, "transport (3 ranks, threads): rank 1 sends 2 items to rank 2, which expects 1");
  }
  // The group is usable after the error (every rank left the exchange).
}

TEST(ThreadTransportTest, BadRanksAreErrors) {
  EXPECT_THROW(ThreadGroup(0), Error);
  ThreadGroup g(2);
  EXPECT_THROW(g.transport(2), Error);
  EXPECT_EQ(g.transport(1)->ranks(), 2);
}

}  // namespace seedling
