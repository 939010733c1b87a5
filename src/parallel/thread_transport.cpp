// parallel/thread_transport.cpp - ranks as threads: post, meet, check, copy, meet.
#include "parallel/thread_transport.h"

#include <cstring>
#include <string>

#include "core/error.h"

namespace seedling {

class ThreadTransport final : public Transport {
 public:
  ThreadTransport(ThreadGroup& g, int rank) : g_(g), rank_(rank) {}
  int rank() const override { return rank_; }
  int ranks() const override { return g_.ranks_; }
  const char* name() const override { return "threads"; }

  void exchange_counts(std::span<const int64_t> send, std::span<int64_t> recv) override {
    const int R = g_.ranks_;
    if (send.size() != size_t(R) || recv.size() != size_t(R)) {
      fail("transport: rank {} exchanges {} and {} counts among {} ranks", rank_, send.size(), recv.size(), R);
    }
    g_.posted_counts_[size_t(rank_)] = send.data();
    g_.sync_.arrive_and_wait();
    for (int s = 0; s < R; ++s) recv[size_t(s)] = g_.posted_counts_[size_t(s)][rank_];
    g_.sync_.arrive_and_wait();  // every rank has read every post before any post goes away
  }

  void all_to_all_v(const AllToAllV& a) override {
    const int R = g_.ranks_;
    if (a.send_count.size() != size_t(R) || a.send_offset.size() != size_t(R) || a.recv_count.size() != size_t(R) ||
        a.recv_offset.size() != size_t(R)) {
      fail("transport: rank {} gave segments for other than {} ranks", rank_, R);  // the caller's bug: before posting
    }
    g_.posted_[size_t(rank_)] = &a;
    g_.sync_.arrive_and_wait();
    // Every rank checks every pair, so all reach the same verdict and leave together.
    std::string bad;
    for (int s = 0; s < R && bad.empty(); ++s) {
      for (int d = 0; d < R && bad.empty(); ++d) {
        const AllToAllV& from = *g_.posted_[size_t(s)];
        const AllToAllV& to = *g_.posted_[size_t(d)];
        if (from.item_bytes != to.item_bytes) {
          bad =
              fmt::format("rank {} sends items of {} bytes, rank {} receives {}", s, from.item_bytes, d, to.item_bytes);
        } else if (from.send_count[size_t(d)] != to.recv_count[size_t(s)]) {
          bad = fmt::format("rank {} sends {} items to rank {}, which expects {}", s, from.send_count[size_t(d)], d,
                            to.recv_count[size_t(s)]);
        }
      }
    }
    if (bad.empty()) {
      for (int s = 0; s < R; ++s) {
        const AllToAllV& from = *g_.posted_[size_t(s)];
        const size_t n = size_t(a.recv_count[size_t(s)]) * a.item_bytes;
        if (n == 0) continue;
        std::memcpy(static_cast<char*>(a.recv) + size_t(a.recv_offset[size_t(s)]) * a.item_bytes,
                    static_cast<const char*>(from.send) + size_t(from.send_offset[size_t(rank_)]) * a.item_bytes, n);
      }
    }
    g_.sync_.arrive_and_wait();  // no sender's buffer goes away before every copy from it is done
    if (!bad.empty()) fail("transport ({} ranks, threads): {}", R, bad);
  }

  void barrier() override { g_.sync_.arrive_and_wait(); }

 private:
  ThreadGroup& g_;
  int rank_;
};

ThreadGroup::ThreadGroup(int ranks)
    : ranks_(ranks),
      sync_(ranks < 1 ? 1 : ranks),
      posted_(size_t(ranks < 1 ? 1 : ranks)),
      posted_counts_(size_t(ranks < 1 ? 1 : ranks)) {
  if (ranks < 1) fail("transport: {} ranks (at least 1)", ranks);
}

std::unique_ptr<Transport> ThreadGroup::transport(int rank) {
  if (rank < 0 || rank >= ranks_) fail("transport: rank {} of {}", rank, ranks_);
  return std::make_unique<ThreadTransport>(*this, rank);
}

}  // namespace seedling
