// ops::expert_products (ops/expert_products.h): a claim counter over an ordered list of pieces, run by one
// parallel_for of one chunk a thread, and per job a stage word that later pieces wait on.
#include "ops/expert_products.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SEEDLING_SPIN_PAUSE() _mm_pause()
#else
#define SEEDLING_SPIN_PAUSE() std::this_thread::yield()
#endif

namespace seedling::ops {

namespace {
enum Stage : int { kNothing = 0, kLoaded = 1, kActivated = 2 };
enum class Kind : uint8_t { Load, GateUp, Down };
struct Piece {
  Kind kind;
  uint32_t job;
  int64_t n0, n1;
};
struct JobState {
  std::atomic<int> stage{kNothing};
  std::atomic<int64_t> gate_up_left{0};
  Int8Rows xq_gate, xq_up, xq_down;  // x (for gate, and for up where its group differs) and a, quantized
};
// Up reads x quantized on its own only where gate reads no int8 or another group.
bool up_quantized_apart(const ExpertJob& job) {
  return matmul_piece_reads_int8(job.up) && matmul_piece_group(job.up) != matmul_piece_group(job.gate);
}
}  // namespace

void expert_products(std::span<const ExpertJob> jobs, const ExpertSteps& steps) {
  std::vector<Piece> pieces;
  auto state = std::make_unique<JobState[]>(jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j) pieces.push_back({Kind::Load, uint32_t(j), 0, 0});
  for (size_t j = 0; j < jobs.size(); ++j) {
    const int64_t I = jobs[j].gate.rows;
    state[j].gate_up_left.store((I + kMatmulPiece - 1) / kMatmulPiece, std::memory_order_relaxed);
    for (int64_t n = 0; n < I; n += kMatmulPiece)
      pieces.push_back({Kind::GateUp, uint32_t(j), n, std::min(n + kMatmulPiece, I)});
  }
  for (size_t j = 0; j < jobs.size(); ++j) {
    const int64_t H = jobs[j].down.rows;
    for (int64_t n = 0; n < H; n += kMatmulPiece)
      pieces.push_back({Kind::Down, uint32_t(j), n, std::min(n + kMatmulPiece, H)});
  }
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex error_mu;
  std::exception_ptr error;
  // Waits until job j reaches stage s; false when a piece has failed (then the region is abandoned).
  const auto wait = [&](size_t j, int s) {
    for (int spins = 0; state[j].stage.load(std::memory_order_acquire) < s; ++spins) {
      if (failed.load(std::memory_order_relaxed)) return false;
      if (spins < (1 << 12)) {
        SEEDLING_SPIN_PAUSE();
      } else {
        std::this_thread::yield();  // the thread on the piece waited for was descheduled: let it run
      }
    }
    return true;
  };
  const auto run = [&](const Piece& p) {
    const ExpertJob& job = jobs[p.job];
    JobState& st = state[p.job];
    switch (p.kind) {
      case Kind::Load: {
        steps.load(p.job);
        if (matmul_piece_reads_int8(job.gate)) quantize_for_pieces(job.x, job.m, job.gate, st.xq_gate);
        if (up_quantized_apart(job)) quantize_for_pieces(job.x, job.m, job.up, st.xq_up);
        st.stage.store(kLoaded, std::memory_order_release);
        return;
      }
      case Kind::GateUp: {
        if (!wait(p.job, kLoaded)) return;
        matmul_piece(job.x, job.m, st.xq_gate, job.gate, job.g, p.n0, p.n1);
        matmul_piece(job.x, job.m, up_quantized_apart(job) ? st.xq_up : st.xq_gate, job.up, job.u, p.n0, p.n1);
        steps.activate(p.job, p.n0, p.n1);
        if (st.gate_up_left.fetch_sub(1, std::memory_order_acq_rel) == 1) {  // the last: a is whole
          if (matmul_piece_reads_int8(job.down)) quantize_for_pieces(job.a, job.m, job.down, st.xq_down);
          st.stage.store(kActivated, std::memory_order_release);
        }
        return;
      }
      case Kind::Down:
        if (!wait(p.job, kActivated)) return;
        matmul_piece(job.a, job.m, st.xq_down, job.down, job.d, p.n0, p.n1);
        steps.finish(p.job, p.n0, p.n1);
        return;
    }
  };
  ThreadPool& pool = ThreadPool::global();
  pool.parallel_for(size_t(pool.size()), 1, [&](size_t, size_t) {
    for (size_t p = next.fetch_add(1, std::memory_order_relaxed); p < pieces.size() && !failed.load();
         p = next.fetch_add(1, std::memory_order_relaxed)) {
      try {
        run(pieces[p]);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
        failed.store(true);
      }
    }
  });
  if (error) std::rethrow_exception(error);
}

}  // namespace seedling::ops
