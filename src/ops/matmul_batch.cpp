// ops::matmul_batch: many products in one parallel region (ops/matmul.h). Pieces are whole tiles of one job, and
// each output is computed by the same range function as matmul would use, so the split changes no bits.
#include <algorithm>

#include "core/thread_pool.h"
#include "ops/matmul.h"

namespace seedling::ops {

void matmul_batch(const std::vector<MatmulJob>& jobs) {
  constexpr int64_t kPiece = 64;  // outputs; a multiple of every tile (4 floats, 4-16 int8 lanes)
  struct Piece {
    size_t job;
    int64_t n0, n1;
  };
  const bool int8 = cpu_dot() == CpuDot::Int8;
  thread_local std::vector<Int8Rows> quantized;  // the caller's; workers read it by reference while it waits
  std::vector<Int8Rows>& xq = quantized;
  std::vector<size_t> xq_of(jobs.size(), 0);  // job -> its quantized x in xq
  std::vector<const float*> source;           // xq[q] is source[q] quantized
  std::vector<Piece> pieces;
  for (size_t j = 0; j < jobs.size(); ++j) {
    const MatmulJob& job = jobs[j];
    if (job.m <= 0 || job.w.rows <= 0) continue;
    if (codec_is_seed(job.w.codec) || job.w.codec == Codec::MXFP4 ||
        (int8 && codec_is_ggml(job.w.codec))) {  // kernels with threads of their own
      matmul(job.x, job.m, job.w, job.y);
      continue;
    }
    if (int8 && codec_is_affine(job.w.codec)) {
      if (int8_tile_outputs(job.w.codec) == 0) {  // no SIMD kernel on this CPU: the scalar definition
        matmul_int8(job.x, job.m, job.w, job.y);
        continue;
      }
      const int64_t g = codec_group(job.w.codec);
      size_t q = 0;
      while (q < source.size() &&
             !(source[q] == job.x && xq[q].rows == job.m && xq[q].cols == job.w.cols && xq[q].group == g))
        ++q;
      if (q == source.size()) {
        if (xq.size() <= q) xq.emplace_back();
        quantize_int8_rows(job.x, job.m, job.w.cols, g, xq[q]);
        source.push_back(job.x);
      }
      xq_of[j] = q;
    }
    for (int64_t n = 0; n < job.w.rows; n += kPiece) pieces.push_back({j, n, std::min(n + kPiece, job.w.rows)});
  }
  ThreadPool::global().parallel_for(pieces.size(), 1, [&](size_t p0, size_t p1) {
    for (size_t p = p0; p < p1; ++p) {
      const MatmulJob& job = jobs[pieces[p].job];
      if (int8 && codec_is_affine(job.w.codec)) {
        matmul_int8_range(xq[xq_of[pieces[p].job]], job.w, job.y, pieces[p].n0, pieces[p].n1);
      } else {
        matmul_range(job.x, job.m, job.w, job.y, pieces[p].n0, pieces[p].n1);
      }
    }
  });
}

}  // namespace seedling::ops
