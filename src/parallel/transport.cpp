// parallel/transport.cpp - the helpers every transport shares.
#include "parallel/transport.h"

#include "core/error.h"

namespace seedling {

std::vector<int64_t> segment_offsets(std::span<const int64_t> counts) {
  std::vector<int64_t> off(counts.size() + 1, 0);
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] < 0) fail("transport: a negative count ({}) for rank {}", counts[i], i);
    off[i + 1] = off[i] + counts[i];
  }
  return off;
}

namespace {

void rows(Transport& t, const void* send, std::span<const int64_t> send_rows, void* recv,
          std::span<const int64_t> recv_rows, size_t row_bytes) {
  const std::vector<int64_t> so = segment_offsets(send_rows), ro = segment_offsets(recv_rows);
  t.all_to_all_v({.send = send,
                  .send_count = send_rows,
                  .send_offset = std::span<const int64_t>(so).first(send_rows.size()),
                  .recv = recv,
                  .recv_count = recv_rows,
                  .recv_offset = std::span<const int64_t>(ro).first(recv_rows.size()),
                  .item_bytes = row_bytes});
}

}  // namespace

void all_to_all_rows(Transport& t, const float* send, std::span<const int64_t> send_rows, float* recv,
                     std::span<const int64_t> recv_rows, int64_t width) {
  rows(t, send, send_rows, recv, recv_rows, size_t(width) * sizeof(float));
}

void all_to_all_rows(Transport& t, const int32_t* send, std::span<const int64_t> send_rows, int32_t* recv,
                     std::span<const int64_t> recv_rows, int64_t width) {
  rows(t, send, send_rows, recv, recv_rows, size_t(width) * sizeof(int32_t));
}

}  // namespace seedling
