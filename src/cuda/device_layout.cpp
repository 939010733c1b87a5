// cuda/device_layout.cpp - the VRAM sizes and forms of weights (see the header); the MXFP4 kernel is in
// mxfp4_layout.cu.
#include "cuda/device_layout.h"

#include "core/codec_layout.h"
#include "cuda/mxfp4_layout.h"

namespace seedling::cuda {

namespace {

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

}  // namespace

size_t device_matrix_bytes(Codec c, int64_t rows, int64_t cols) {
  if (rearranged_on_device(c)) return size_t(rows) * mxfp4::row_bytes(cols);
  return codec_matrix_bytes(c, rows, cols);
}

bool rearranged_on_device(Codec c) {
  return c == Codec::MXFP4 || c == Codec::MXFP4_GGML;
}

void to_device_layout(Codec c, const void* src, void* dst, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  if (rearranged_on_device(c)) {
    mxfp4_rows_to_device(static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), rows, cols,
                         c == Codec::MXFP4_GGML, stream);
  } else {
    check(cudaMemcpyAsync(dst, src, codec_matrix_bytes(c, rows, cols), cudaMemcpyDeviceToDevice, stream),
          "copying a matrix in VRAM");
  }
}

ExpertLayout device_expert_layout(const ExpertLayout& stored) {
  ExpertLayout d = stored;
  d.up_offset = round_up(device_matrix_bytes(stored.gate_up, stored.intermediate, stored.hidden), 256);
  d.down_offset = d.up_offset + round_up(device_matrix_bytes(stored.gate_up, stored.intermediate, stored.hidden), 256);
  d.bytes = d.down_offset + round_up(device_matrix_bytes(stored.down, stored.hidden, stored.intermediate), 256);
  return d;
}

bool rearranged_on_device(const ExpertLayout& stored) {
  return rearranged_on_device(stored.gate_up) || rearranged_on_device(stored.down);
}

void expert_to_device_layout(const uint8_t* src, const ExpertLayout& stored, uint8_t* dst, const ExpertLayout& device,
                             cudaStream_t stream) {
  const int64_t I = stored.intermediate, H = stored.hidden;
  struct Part {
    Codec c;
    int64_t rows, cols;
    size_t from, to, end;
  };
  const Part parts[3] = {{stored.gate_up, I, H, 0, 0, device.up_offset},
                         {stored.gate_up, I, H, stored.up_offset, device.up_offset, device.down_offset},
                         {stored.down, H, I, stored.down_offset, device.down_offset, device.bytes}};
  for (const Part& p : parts) {
    to_device_layout(p.c, src + p.from, dst + p.to, p.rows, p.cols, stream);
    const size_t used = device_matrix_bytes(p.c, p.rows, p.cols);
    check(cudaMemsetAsync(dst + p.to + used, 0, p.end - p.to - used, stream), "zeroing an expert blob's padding");
  }
}

}  // namespace seedling::cuda
