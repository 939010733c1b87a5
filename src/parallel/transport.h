// parallel/transport.h - how the ranks of expert parallelism exchange rows: all-to-all-v and a barrier.
//
// One interface, two implementations: ThreadTransport (parallel/thread_transport.h), ranks as threads of one
// process over host memory, for the CPU tests; NcclTransport (cuda/nccl_transport.h), one process per GPU over
// NCCL, device memory. Buffers live where the transport moves data: host memory for the first, the rank's GPU for
// the second. Every rank calls the same operations in the same order (collectives); counts and offsets are in
// items of `item_bytes` and every count a rank sends must be the count its peer expects to receive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace seedling {

// One all-to-all-v: to each rank d, send_count[d] items from send + send_offset[d] items; from each rank s,
// recv_count[s] items into recv + recv_offset[s] items. Send segments may overlap (an all-gather sends one segment
// to everyone); receive segments must not. A rank sends to itself too.
struct AllToAllV {
  const void* send = nullptr;
  std::span<const int64_t> send_count, send_offset;
  void* recv = nullptr;
  std::span<const int64_t> recv_count, recv_offset;
  size_t item_bytes = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int ranks() const = 0;
  // recv[s] = the send[rank()] of rank s: the counts each rank is about to send to each other, exchanged first so
  // every receiver can size its buffers. Both spans hold ranks() entries, in host memory for every transport.
  virtual void exchange_counts(std::span<const int64_t> send, std::span<int64_t> recv) = 0;
  virtual void all_to_all_v(const AllToAllV& a) = 0;
  // Returns once every rank has called it.
  virtual void barrier() = 0;
  // Where a device transport enqueues its exchanges (a cudaStream_t: the forward's, so they run in order with its
  // kernels); host transports ignore it.
  virtual void set_stream(void* stream) { (void)stream; }
  // What it runs over, for messages ("threads", "nccl 2.21.5").
  virtual const char* name() const = 0;
};

// Offsets of consecutive segments of these counts: {0, c0, c0 + c1, ...}, counts.size() + 1 entries.
std::vector<int64_t> segment_offsets(std::span<const int64_t> counts);

// An all-to-all-v of rows of `width` floats (or int32s), segments consecutive in rank order on both sides.
void all_to_all_rows(Transport& t, const float* send, std::span<const int64_t> send_rows, float* recv,
                     std::span<const int64_t> recv_rows, int64_t width);
void all_to_all_rows(Transport& t, const int32_t* send, std::span<const int64_t> send_rows, int32_t* recv,
                     std::span<const int64_t> recv_rows, int64_t width);

}  // namespace seedling
