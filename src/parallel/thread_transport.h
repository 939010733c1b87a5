// parallel/thread_transport.h - expert parallelism's transport with the ranks as threads of one process.
//
// For the CPU tests of dispatch and combine (and any CPU run that wants ranks without GPUs): R threads, each with
// its rank's Transport, meet at a std::barrier; each rank copies what the others posted for it straight from their
// send buffers, so an exchange is one memcpy per segment. Every rank checks every rank's counts, so a mismatch is
// the same Error on all of them, never a hang; a rank that stops calling (an exception of its own) leaves the
// others waiting, as a process leaving an NCCL group would.
#pragma once

#include <barrier>
#include <memory>
#include <vector>

#include "parallel/transport.h"

namespace seedling {

class ThreadGroup {
 public:
  explicit ThreadGroup(int ranks);
  int ranks() const { return ranks_; }
  // The transport of `rank`, to be used by one thread; the group must outlive it.
  std::unique_ptr<Transport> transport(int rank);

 private:
  friend class ThreadTransport;
  int ranks_;
  std::barrier<> sync_;
  std::vector<const AllToAllV*> posted_;       // per rank, during an all_to_all_v
  std::vector<const int64_t*> posted_counts_;  // per rank, during exchange_counts
};

}  // namespace seedling
