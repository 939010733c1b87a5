// cuda/forward_products.cpp - the product choice of cuda/forward_products.h.
#include "cuda/forward_products.h"

#include "core/codec_layout.h"
#include "cuda/gemm.h"

namespace seedling::cuda {

bool on_tensor_cores(int64_t m, Codec c) {
  return m >= kTensorCoreRows && c != Codec::MXFP4 && c != Codec::MXFP4_GGML;
}

void accurate_product(const float* x, int64_t m, const DeviceMatrix& w, float* y, bool accumulate,
                      cudaStream_t stream) {
  if (on_tensor_cores(m, w.codec)) {
    matmul_tc_split(x, m, w, y, accumulate, stream);
  } else {
    matmul(x, m, w, y, accumulate, stream);
  }
}

void product(const float* x, int64_t m, const DeviceMatrix& w, float* y, bool accumulate, cudaStream_t stream,
             DeviceScratch& f16_scratch, bool float32) {
  if (float32) {
    accurate_product(x, m, w, y, accumulate, stream);
  } else if (on_tensor_cores(m, w.codec)) {
    matmul_tc(x, m, w, y, accumulate, stream, f16_scratch.get<uint8_t>(matmul_tc_scratch_bytes(m, w.cols)));
  } else {
    matmul(x, m, w, y, accumulate, stream);
  }
}

void products(const float* x, int64_t m, const DeviceMatrix* ws, float* const* ys, int count, cudaStream_t stream,
              DeviceScratch& f16_scratch, bool float32) {
  bool same = true;
  for (int i = 1; i < count; ++i) same = same && ws[i].codec == ws[0].codec && ws[i].cols == ws[0].cols;
  if (!float32 && on_tensor_cores(m, ws[0].codec) && same) {
    void* scratch = f16_scratch.get<uint8_t>(matmul_tc_scratch_bytes(m, ws[0].cols));
    matmul_tc_stacked(x, m, ws, ys, count, false, stream, scratch);
  } else {
    for (int i = 0; i < count; ++i) product(x, m, ws[i], ys[i], false, stream, f16_scratch, float32);
  }
}

}  // namespace seedling::cuda
