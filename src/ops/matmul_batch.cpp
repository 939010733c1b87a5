// ops::matmul_batch and the pieces it is made of (ops/matmul.h). Pieces are whole tiles of one job, and each
// output is computed by the same range function as matmul would use, so the split changes no bits.
#include <algorithm>

#include "core/thread_pool.h"
#include "ops/ggml_int8.h"
#include "ops/matmul.h"

namespace seedling::ops {

bool matmul_by_pieces(const Matrix& w) {
  if (codec_is_seed(w.codec) || w.codec == Codec::MXFP4) return false;  // kernels with threads of their own
  if (!matmul_piece_reads_int8(w)) return true;
  return codec_is_ggml(w.codec) ? ggml_int8_has_kernel() : int8_tile_outputs(w.codec) != 0;
}

bool matmul_piece_reads_int8(const Matrix& w) {
  return (codec_is_affine(w.codec) || codec_is_ggml(w.codec)) && int8_products(w.codec);
}

int64_t matmul_piece_group(const Matrix& w) {
  if (!matmul_piece_reads_int8(w)) return 0;
  return codec_is_ggml(w.codec) ? ggml_int8_group(w.codec) : codec_group(w.codec);
}

void quantize_for_pieces(const float* x, int64_t m, const Matrix& w, Int8Rows& xq) {
  if (codec_is_ggml(w.codec)) return quantize_ggml_int8_rows(x, m, w.cols, ggml_int8_group(w.codec), xq);
  quantize_int8_rows(x, m, w.cols, codec_group(w.codec), xq);
}

void matmul_piece(const float* x, int64_t m, const Int8Rows& xq, const Matrix& w, float* y, int64_t n0, int64_t n1) {
  if (!matmul_piece_reads_int8(w)) return matmul_range(x, m, w, y, n0, n1);
  if (codec_is_ggml(w.codec)) return ggml_matmul_int8_range(xq, w, y, n0, n1);
  matmul_int8_range(xq, w, y, n0, n1);
}

void matmul_batch(const std::vector<MatmulJob>& jobs) {
  struct Piece {
    size_t job;
    int64_t n0, n1;
  };
  thread_local std::vector<Int8Rows> quantized;  // the caller's; workers read it by reference while it waits
  std::vector<Int8Rows>& xq = quantized;
  std::vector<size_t> xq_of(jobs.size(), 0);  // job -> its quantized x in xq (xq[0] when it reads none)
  std::vector<const float*> source;           // xq[q] is source[q] quantized
  if (xq.empty()) xq.emplace_back();
  std::vector<Piece> pieces;
  int64_t rows = 0;  // the most rows of x a piece's job has: decode's products split finer (matmul.h)
  size_t weight_bytes = 0;
  for (size_t j = 0; j < jobs.size(); ++j) {
    const MatmulJob& job = jobs[j];
    if (job.m <= 0 || job.w.rows <= 0) continue;
    if (!matmul_by_pieces(job.w)) {
      matmul(job.x, job.m, job.w, job.y);
      continue;
    }
    if (matmul_piece_reads_int8(job.w)) {
      const int64_t g = matmul_piece_group(job.w);
      size_t q = 0;
      while (q < source.size() &&
             !(source[q] == job.x && xq[q].rows == job.m && xq[q].cols == job.w.cols && xq[q].group == g))
        ++q;
      if (q == source.size()) {
        if (xq.size() <= q) xq.emplace_back();
        quantize_for_pieces(job.x, job.m, job.w, xq[q]);
        source.push_back(job.x);
      }
      xq_of[j] = q;
    }
    rows = std::max(rows, job.m);
    weight_bytes += job.w.nbytes();
    for (int64_t n = 0; n < job.w.rows; n += kMatmulPiece)
      pieces.push_back({j, n, std::min(n + kMatmulPiece, job.w.rows)});
  }
  // A chunk's pieces of one job are consecutive rows: one range each, so the kernel's prefetch runs on across them.
  ThreadPool::global().parallel_for(
      pieces.size(), 1,
      [&](size_t p0, size_t p1) {
        for (size_t p = p0, q; p < p1; p = q) {
          for (q = p + 1; q < p1 && pieces[q].job == pieces[p].job;) ++q;
          const MatmulJob& job = jobs[pieces[p].job];
          matmul_piece(job.x, job.m, xq[xq_of[pieces[p].job]], job.w, job.y, pieces[p].n0, pieces[q - 1].n1);
        }
      },
      product_chunks_per_thread(rows, weight_bytes, ThreadPool::global().size()));
}

}  // namespace seedling::ops
