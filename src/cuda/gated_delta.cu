// cuda/gated_delta.cu - the Gated DeltaNet mixer's kernels (declared in cuda/kernels.h), each the twin of an op of
// ops/gated_delta.h: qwen3_next's grouped projections put in order, the causal conv1d + SiLU through each sequence's
// window, the L2 norms of q and k, the gates (beta, the log decay), and the gated delta rule in its two forms, the
// recurrent step for decode rows and the chunked form for prompt runs.
//
// The state of a head is S (key_dim x value_dim, row-major), float32 in VRAM, owned by the sequence (DeltaRow). Every
// sum is float32 in one fixed order that depends on neither the batch nor the launch, so a row's bits are the same
// alone or batched; the CPU sums in double, so the two differ by float32 rounding (tests/unit/cuda/gated_delta_test.cpp
// bounds it). The conv and the gates run in double, as on the CPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "cuda/kernels.h"
#include "cuda/launch.cuh"
#include "cuda/warp_primitives.cuh"

namespace seedling::cuda {

namespace {

constexpr int kDecodeCols = 32;     // value columns of one decode block (a warp, a column a lane)
constexpr int kChunkThreads = 512;  // threads of a chunked block
constexpr int kChunkCols = 32;      // value columns of a chunked block when a head's columns are split (a warp's width)

__global__ void ungroup_kernel(const float* qkvz, const float* ba, int64_t per_row, DeltaShape s, float* mixed,
                               float* z, float* b, float* a) {
  pdl_wait();
  const int64_t e = int64_t(blockIdx.y) * blockDim.x + threadIdx.x;
  if (e >= per_row) return;
  const int64_t i = blockIdx.x;  // the row
  const int dk = s.key_dim, dv = s.value_dim, r = s.value_heads / s.key_heads;
  const int64_t KW = int64_t(s.key_heads) * dk, VW = int64_t(s.value_heads) * dv, C = s.channels();
  const int64_t group = 2 * dk + 2 * int64_t(r) * dv, qkvz_row = s.key_heads * group;
  if (e < qkvz_row) {  // [q k v z] of key head h
    const int64_t h = e / group, o = e % group, rv = int64_t(r) * dv;
    const float x = qkvz[i * qkvz_row + e];
    if (o < dk) {
      mixed[i * C + h * dk + o] = x;
    } else if (o < 2 * dk) {
      mixed[i * C + KW + h * dk + (o - dk)] = x;
    } else if (o < 2 * dk + rv) {
      mixed[i * C + 2 * KW + h * rv + (o - 2 * dk)] = x;
    } else {
      z[i * VW + h * rv + (o - 2 * dk - rv)] = x;
    }
    return;
  }
  const int64_t f = e - qkvz_row, h = f / (2 * r), o = f % (2 * r);  // [b a] of key head h
  const float x = ba[i * 2 * s.value_heads + f];
  if (o < r) {
    b[i * s.value_heads + h * r + o] = x;
  } else {
    a[i * s.value_heads + h * r + (o - r)] = x;
  }
}

// A thread per (row, channel). A run's rows from kernel - 1 on read only x; its first row's thread computes the rows
// that reach into the window (at most kernel - 1), then moves the window past the run: it alone touches the window of
// its sequence and channel, so nothing races.
__global__ void conv_kernel(const float* x, const float* w, const DeltaRow* rows, int64_t C, int K, size_t offset,
                            float* out) {
  pdl_wait();
  const int64_t c = int64_t(blockIdx.y) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int i = int(blockIdx.x);
  const DeltaRow r = rows[i];
  const int t = i - r.first;
  float* win = r.state + offset;  // [K - 1][C]
  const float* wc = w + c * K;
  // Row tt of the run: ops::causal_conv1d_silu_step's sum (the newest input first, then the window oldest first), over
  // the run's inputs and, before them, the window.
  auto conv = [&](int tt) {
    double sum = double(wc[K - 1]) * double(x[int64_t(r.first + tt) * C + c]);
    for (int j = 0; j < K - 1; ++j) {
      const int at = tt - (K - 1) + j;  // the input's index in the run; negative: in the window
      const float v = at >= 0 ? x[int64_t(r.first + at) * C + c] : win[int64_t(tt + j) * C + c];
      sum += double(wc[j]) * double(v);
    }
    out[int64_t(r.first + tt) * C + c] = float(sum / (1.0 + exp(-sum)));
  };
  if (t >= K - 1) {
    conv(t);
    return;
  }
  if (t != 0) return;
  for (int tt = 0; tt < min(r.n, K - 1); ++tt) conv(tt);
  // The window becomes the last K - 1 of [window, run]: entry q is that sequence's entry r.n + q, read before it is
  // overwritten (entries only move towards the front).
  for (int q = 0; q < K - 1; ++q) {
    const int from = r.n + q;
    win[int64_t(q) * C + c] = from < K - 1 ? win[int64_t(from) * C + c] : x[int64_t(r.first + from - (K - 1)) * C + c];
  }
}

// A warp per (row, head).
__global__ void l2_kernel(float* x, int64_t stride, int heads, int dim, int scaled, float scale, float eps) {
  pdl_wait();
  const int h = int(blockIdx.y) * kWarpsPerBlock + int(threadIdx.x) / kWarp, lane = int(threadIdx.x) % kWarp;
  if (h >= heads) return;
  float* v = x + int64_t(blockIdx.x) * stride + int64_t(h) * dim;
  float ss = 0.0f;
  for (int i = lane; i < dim; i += kWarp) ss = fmaf(v[i], v[i], ss);
  const float inv = 1.0f / sqrtf(warp_sum(ss) + eps);
  const float f = h < scaled ? scale : 1.0f;
  for (int i = lane; i < dim; i += kWarp) v[i] = v[i] * inv * f;
}

__global__ void gates_kernel(const float* b, const float* a, const float* a_log, const float* dt_bias, int64_t total,
                             int heads, float* beta, float* g) {
  pdl_wait();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int h = int(i % heads);
  beta[i] = 1.0f / (1.0f + expf(-b[i]));  // ops::sigmoid
  const double decay = exp(double(a_log[h]));
  const double z = double(a[i]) + double(dt_bias[h]);
  const double softplus = z > 20.0 ? z : log1p(exp(z));  // ops::softplus
  g[i] = float(-decay * softplus);
}

// Block (decode row, value head, 32 value columns), a lane per column j of S: S = S exp(g); u = beta (v - S^T k);
// S = S + k u^T; out = S^T q (ops::ref::gated_delta_rule's step). DK, DV > 0 (the key and value dims, known when
// compiled, so the state's row offsets are constants): the column's DK decayed values are loaded into registers at
// once and kept for both sums, so the state is read once, its loads all in flight together (at 128 x 128 the loop
// that read it twice, one row after the other, left a warp an SM waiting on each load: 16 us a layer of Qwen3.5's
// shape); DK = DV = 0, any dims: it is read twice. The same operations in the same order either way, so the same bits.
template <int DK, int DV>
__global__ void decode_kernel(const float* qkv, const float* g, const float* beta, const int* row_ids,
                              const DeltaRow* rows, DeltaShape s, float* out) {
  extern __shared__ float qk[];  // the row's q, then k, of its key head
  pdl_wait();
  const int row = row_ids[blockIdx.x];
  const int h = int(blockIdx.y), dk = DK > 0 ? DK : s.key_dim, dv = DV > 0 ? DV : s.value_dim;
  const int kh = h / (s.value_heads / s.key_heads);
  const int64_t KW = int64_t(s.key_heads) * dk;
  const float* src = qkv + int64_t(row) * s.channels();
  for (int i = int(threadIdx.x); i < dk; i += int(blockDim.x)) {
    qk[i] = src[int64_t(kh) * dk + i];
    qk[dk + i] = src[KW + int64_t(kh) * dk + i];
  }
  __syncthreads();
  const int j = int(blockIdx.z) * kDecodeCols + int(threadIdx.x);
  if (j >= dv) return;
  const float *q = qk, *k = qk + dk;
  const int64_t at = int64_t(row) * s.value_heads + h;
  const float decay = float(exp(double(g[at])));
  const float b = beta[at];
  float* S = rows[row].state + s.state_offset + s.conv_floats() + size_t(h) * size_t(dk) * size_t(dv) + size_t(j);
  const float v = src[2 * KW + int64_t(h) * dv + j];
  float mem = 0.0f, o = 0.0f;
  if constexpr (DK > 0) {
    float sd[DK];  // S[i][j] * decay
#pragma unroll
    for (int i = 0; i < DK; ++i) sd[i] = S[int64_t(i) * dv];
#pragma unroll
    for (int i = 0; i < DK; ++i) {
      sd[i] = sd[i] * decay;
      mem = fmaf(sd[i], k[i], mem);
    }
    const float u = (v - mem) * b;
#pragma unroll
    for (int i = 0; i < DK; ++i) {
      const float sn = fmaf(k[i], u, sd[i]);
      S[int64_t(i) * dv] = sn;
      o = fmaf(sn, q[i], o);
    }
  } else {
    for (int i = 0; i < dk; ++i) mem = fmaf(S[int64_t(i) * dv] * decay, k[i], mem);
    const float u = (v - mem) * b;
    for (int i = 0; i < dk; ++i) {
      const float sn = fmaf(k[i], u, S[int64_t(i) * dv] * decay);
      S[int64_t(i) * dv] = sn;
      o = fmaf(sn, q[i], o);
    }
  }
  out[int64_t(row) * s.value_heads * dv + int64_t(h) * dv + j] = o;
}

// Shared memory of the chunked kernel, C = kDeltaChunk: cum (C doubles: the log decays' running sums), then floats:
// K, Q and W (C rows of key_dim + 1: rows one bank apart), U (C rows of dv + 1, dv the block's value columns), A and
// QK (C x C), and exp(cum_t), exp(cum_last - cum_t) and beta_t (C each).
__host__ __device__ constexpr size_t chunk_smem_bytes(int dk, int dv) {
  constexpr size_t C = kDeltaChunk;
  return C * sizeof(double) + (C * (3 * size_t(dk + 1) + size_t(dv + 1) + 2 * C) + 3 * C) * sizeof(float);
}

// Block (run, value head, columns): ops::gated_delta_chunked over the run, chunk after chunk, the state in VRAM, for
// the value columns [j0, j0 + cols) of the head, cols = s.value_dim or kChunkCols. A value column's sums (U's solve,
// u, the output, the state's column) read only that column, A, QK and W, so a head's columns can go to several blocks,
// each computing A, QK and W itself in the same order: the same bits at any split. Per chunk of L rows: a[t][s] =
// beta_t (k_t . k_s) exp(cum_t - cum_s) (s < t) and qk[t][s] = (q_t . k_s) exp(cum_t - cum_s) (s <= t); forward
// substitution, a thread per column, U_t = beta_t v_t - sum_s a[t][s] U_s and W_t = beta_t exp(cum_t) k_t - sum_s
// a[t][s] W_s; u_t = U_t - W_t S; out_t = exp(cum_t) S^T q_t + sum_{s <= t} qk[t][s] u_s; then S = exp(cum_last) S +
// sum_s exp(cum_last - cum_s) k_s u_s^T. Where a thread computes four sums (four keys of a row of A and QK, four rows
// of u and of the output, four rows of the state's column), they share their loads, each summed in the order above.
// acc[m] = rows[t0 + m] . S[:, j] for m < 4 (rows of dk floats, K1 apart; S's rows dv apart), summed in i order
// with one load of S for the four.
__device__ __forceinline__ void rows_times_state(const float* rows, int K1, int t0, const float* S, int dk, int dv,
                                                 int j, float (&acc)[4]) {
#pragma unroll
  for (int m = 0; m < 4; ++m) acc[m] = 0.0f;
  for (int i = 0; i < dk; ++i) {
    const float sv = S[int64_t(i) * dv + j];
#pragma unroll
    for (int m = 0; m < 4; ++m) acc[m] = fmaf(rows[(t0 + m) * K1 + i], sv, acc[m]);
  }
}

__global__ void __launch_bounds__(kChunkThreads)
    chunked_kernel(const float* qkv, const float* g, const float* beta, const int* runs, const DeltaRow* rows,
                   DeltaShape s, int cols, float* out) {
  extern __shared__ double smem_d[];
  pdl_wait();
  constexpr int CH = kDeltaChunk;
  const int dk = s.key_dim, dv = s.value_dim, NV = s.value_heads, K1 = dk + 1;
  const int h = int(blockIdx.y), kh = h / (NV / s.key_heads);
  const int j0 = int(blockIdx.z) * cols, nc = min(cols, dv - j0), V1 = cols + 1;  // this block's value columns
  const int first = runs[blockIdx.x];
  const DeltaRow run = rows[first];
  const int64_t C = s.channels(), KW = int64_t(s.key_heads) * dk, VW = int64_t(NV) * dv;
  float* S = run.state + s.state_offset + s.conv_floats() + size_t(h) * size_t(dk) * size_t(dv) + j0;
  double* cum = smem_d;
  float* ks = reinterpret_cast<float*>(cum + CH);
  float* qs = ks + CH * K1;
  float* ws = qs + CH * K1;
  float* us = ws + CH * K1;
  float* A = us + CH * V1;
  float* QK = A + CH * CH;
  float* ef = QK + CH * CH;  // exp(cum_t)
  float* ff = ef + CH;       // exp(cum_last - cum_t)
  float* bt = ff + CH;
  const int tid = int(threadIdx.x), nt = int(blockDim.x);
  for (int start = 0; start < run.n; start += CH) {
    const int L = min(CH, run.n - start);
    const int64_t row0 = int64_t(first) + start;
    for (int e = tid; e < L * dk; e += nt) {
      const int t = e / dk, i = e % dk;
      const float* src = qkv + (row0 + t) * C;
      qs[t * K1 + i] = src[int64_t(kh) * dk + i];
      ks[t * K1 + i] = src[KW + int64_t(kh) * dk + i];
    }
    for (int e = tid; e < L * nc; e += nt) {
      const int t = e / nc, j = e % nc;
      us[t * V1 + j] = qkv[(row0 + t) * C + 2 * KW + int64_t(h) * dv + j0 + j];  // v, solved in place into U
    }
    for (int t = tid; t < L; t += nt) {  // the gates into shared memory, for one thread's running sums (ff is free)
      ff[t] = g[(row0 + t) * NV + h];
      bt[t] = beta[(row0 + t) * NV + h];
    }
    __syncthreads();
    if (tid == 0) {
      double c = 0.0;
      for (int t = 0; t < L; ++t) {
        c += double(ff[t]);
        cum[t] = c;
      }
    }
    __syncthreads();
    for (int t = tid; t < L; t += nt) {
      ef[t] = float(exp(cum[t]));
      ff[t] = float(exp(cum[L - 1] - cum[t]));
    }
    __syncthreads();
    const int RB = (L + 3) / 4;  // four keys r a thread, sharing the loads of k_t and q_t
    for (int p = tid; p < L * RB; p += nt) {
      const int t = p / RB, r0 = (p % RB) * 4;
      if (r0 > t) continue;
      float kk[4] = {}, qk[4] = {};
      for (int i = 0; i < dk; ++i) {
        const float kt = ks[t * K1 + i], qt = qs[t * K1 + i];
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          const float kr = ks[(r0 + m) * K1 + i];  // rows past t (or L): summed, never stored
          kk[m] = fmaf(kt, kr, kk[m]);
          qk[m] = fmaf(qt, kr, qk[m]);
        }
      }
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const int r = r0 + m;
        if (r > t) break;
        const float d = float(exp(cum[t] - cum[r]));
        A[t * CH + r] = bt[t] * kk[m] * d;
        QK[t * CH + r] = qk[m] * d;
      }
    }
    __syncthreads();
    for (int col = tid; col < nc + dk; col += nt) {  // column col of U (col < nc), else of W
      if (col < nc) {
        for (int t = 0; t < L; ++t) {
          float u = bt[t] * us[t * V1 + col];
          for (int r = 0; r < t; ++r) u -= A[t * CH + r] * us[r * V1 + col];
          us[t * V1 + col] = u;
        }
      } else {
        const int i = col - nc;
        for (int t = 0; t < L; ++t) {
          float w = bt[t] * ef[t] * ks[t * K1 + i];
          for (int r = 0; r < t; ++r) w -= A[t * CH + r] * ws[r * K1 + i];
          ws[t * K1 + i] = w;
        }
      }
    }
    __syncthreads();
    const int TB = (L + 3) / 4;  // four rows t a thread, sharing each load of S
    // u_t = U_t - W_t S (S as before the chunk)
    for (int p = tid; p < TB * nc; p += nt) {
      const int t0 = (p / nc) * 4, j = p % nc;
      float acc[4];
      rows_times_state(ws, K1, t0, S, dk, dv, j, acc);
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        if (t0 + m < L) us[(t0 + m) * V1 + j] -= acc[m];
      }
    }
    __syncthreads();
    for (int p = tid; p < TB * nc; p += nt) {
      const int t0 = (p / nc) * 4, j = p % nc;
      float acc[4];
      rows_times_state(qs, K1, t0, S, dk, dv, j, acc);
#pragma unroll
      for (int m = 0; m < 4; ++m) acc[m] *= ef[min(t0 + m, CH - 1)];
      const int r_end = min(t0 + 3, L - 1);
      for (int r = 0; r <= r_end; ++r) {
        const float u = us[r * V1 + j];
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          if (r <= t0 + m) acc[m] = fmaf(QK[(t0 + m) * CH + r], u, acc[m]);
        }
      }
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        if (t0 + m < L) out[(row0 + t0 + m) * VW + int64_t(h) * dv + j0 + j] = acc[m];
      }
    }
    __syncthreads();  // every read of the old state is done
    const float last = ef[L - 1];
    const int IB = (dk + 3) / 4;  // four rows i of the state a thread, sharing each load of u
    for (int p = tid; p < IB * nc; p += nt) {
      const int i0 = (p / nc) * 4, j = p % nc;
      float acc[4];
#pragma unroll
      for (int m = 0; m < 4; ++m) acc[m] = i0 + m < dk ? S[int64_t(i0 + m) * dv + j] * last : 0.0f;
      for (int r = 0; r < L; ++r) {
        const float u = us[r * V1 + j], f = ff[r];
#pragma unroll
        for (int m = 0; m < 4; ++m) acc[m] = fmaf(f * ks[r * K1 + i0 + m], u, acc[m]);
      }
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        if (i0 + m < dk) S[int64_t(i0 + m) * dv + j] = acc[m];
      }
    }
    __syncthreads();  // the state written, the chunk's shared memory free
  }
}

// Throws Error naming the call and its sizes when they are not a layer the kernels run.
void check_shape(const char* what, const DeltaShape& s) {
  const bool ok = s.key_heads > 0 && s.value_heads > 0 && s.value_heads % s.key_heads == 0 && s.key_dim > 0 &&
                  s.value_dim > 0 && s.conv_kernel >= 1;
  if (ok) return;
  char msg[200];  // no fmt in .cu files: check() throws Error with this text
  std::snprintf(msg, sizeof msg, "%s: %d key heads, %d value heads of %d x %d, conv kernel %d", what, s.key_heads,
                s.value_heads, s.key_dim, s.value_dim, s.conv_kernel);
  check(cudaErrorInvalidValue, msg);
}

}  // namespace

void gated_delta_ungroup(const float* qkvz, const float* ba, int64_t m, const DeltaShape& s, float* mixed, float* z,
                         float* b, float* a, cudaStream_t stream) {
  if (m == 0) return;
  check_shape("gated_delta_ungroup", s);
  const int64_t per_row = s.channels() + int64_t(s.value_heads) * s.value_dim + 2 * int64_t(s.value_heads);
  const dim3 grid{unsigned(m), unsigned(blocks_for(per_row, 256))};
  launch_pdl("gated_delta_ungroup", ungroup_kernel, grid, 256, 0, stream, qkvz, ba, per_row, s, mixed, z, b, a);
}

void causal_conv1d_silu(const float* x, int64_t m, const float* w, const DeltaRow* rows, int64_t channels, int kernel,
                        size_t window_offset, float* out, cudaStream_t stream) {
  if (m == 0) return;
  const dim3 grid{unsigned(m), unsigned(blocks_for(channels, 256))};
  launch_pdl("causal_conv1d_silu", conv_kernel, grid, 256, 0, stream, x, w, rows, channels, kernel, window_offset, out);
}

void l2_normalize_heads(float* x, int64_t m, int64_t stride, int heads, int dim, int scaled, float scale, float eps,
                        cudaStream_t stream) {
  if (m == 0 || heads == 0) return;
  const dim3 grid{unsigned(m), unsigned(blocks_for(heads, kWarpsPerBlock))};
  launch_pdl("l2_normalize_heads", l2_kernel, grid, kWarp * kWarpsPerBlock, 0, stream, x, stride, heads, dim, scaled,
             scale, eps);
}

void delta_gates(const float* b, const float* a, const float* a_log, const float* dt_bias, int64_t m, int heads,
                 float* beta, float* g, cudaStream_t stream) {
  const int64_t total = m * heads;
  if (total == 0) return;
  launch_pdl("delta_gates", gates_kernel, dim3(unsigned(blocks_for(total, 256))), 256, 0, stream, b, a, a_log, dt_bias,
             total, heads, beta, g);
}

void gated_delta_decode(const float* qkv, const float* g, const float* beta, const int* row_ids, int64_t n_rows,
                        const DeltaRow* rows, const DeltaShape& s, float* out, cudaStream_t stream, bool any_dims) {
  if (n_rows == 0) return;
  check_shape("gated_delta_decode", s);
  const dim3 grid{unsigned(n_rows), unsigned(s.value_heads), unsigned(blocks_for(s.value_dim, kDecodeCols))};
  auto* kernel = any_dims || s.key_dim != 128 || s.value_dim != 128 ? decode_kernel<0, 0> : decode_kernel<128, 128>;
  launch_pdl("gated_delta_decode", kernel, grid, kDecodeCols, 2 * size_t(s.key_dim) * sizeof(float), stream, qkv, g,
             beta, row_ids, rows, s, out);
}

size_t gated_delta_chunked_smem_bytes(int key_dim, int value_dim) {
  return chunk_smem_bytes(key_dim, value_dim);
}

bool gated_delta_chunked_fits(int key_dim, int value_dim) {
  int device = 0, optin = 0;
  check(cudaGetDevice(&device), "gated_delta_chunked: cudaGetDevice");
  check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
        "gated_delta_chunked: reading the shared memory per block");
  return chunk_smem_bytes(key_dim, value_dim) <= size_t(optin);
}

void gated_delta_chunked(const float* qkv, const float* g, const float* beta, const int* runs, int64_t n_runs,
                         const DeltaRow* rows, const DeltaShape& s, float* out, cudaStream_t stream, int value_cols) {
  if (n_runs == 0) return;
  check_shape("gated_delta_chunked", s);
  const size_t smem = chunk_smem_bytes(s.key_dim, s.value_dim);
  if (!gated_delta_chunked_fits(s.key_dim, s.value_dim)) {
    char what[200];
    std::snprintf(what, sizeof what,
                  "gated_delta_chunked at key_dim %d, value_dim %d (needs %zu bytes of shared memory)", s.key_dim,
                  s.value_dim, smem);
    check(cudaErrorInvalidValue, what);
  }
  // A head's value columns in blocks of kChunkCols while the (run, head) blocks leave SMs idle: each such block
  // computes A, QK and W again, and a quarter of the solve, outputs and state at 128 columns (the same bits).
  const int64_t heads = n_runs * s.value_heads;
  const int cols = value_cols > 0                                   ? std::min(value_cols, s.value_dim)
                   : heads < sm_count() && s.value_dim > kChunkCols ? kChunkCols
                                                                    : s.value_dim;
  const dim3 grid{unsigned(n_runs), unsigned(s.value_heads), unsigned(blocks_for(s.value_dim, cols))};
  launch_pdl("gated_delta_chunked", chunked_kernel, grid, kChunkThreads, chunk_smem_bytes(s.key_dim, cols), stream, qkv,
             g, beta, runs, rows, s, cols, out);
}

}  // namespace seedling::cuda
