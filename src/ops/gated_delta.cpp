#include "ops/gated_delta.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/ops.h"

namespace seedling::ops {

void l2_normalize(float* x, int n, float eps, float scale) {
  double ss = 0.0;
  for (int i = 0; i < n; ++i) ss += double(x[i]) * double(x[i]);
  const double inv = 1.0 / std::sqrt(ss + double(eps));
  for (int i = 0; i < n; ++i) x[i] = float(double(x[i]) * inv * double(scale));
}

double softplus(double x) {
  return x > 20.0 ? x : std::log1p(std::exp(x));
}

void ungroup_qkvz_ba(const float* qkvz, const float* ba, int64_t m, int key_heads, int value_heads, int key_dim,
                     int value_dim, float* mixed, float* z, float* b, float* a) {
  const int NK = key_heads, NV = value_heads, dk = key_dim, rep = value_heads / key_heads, rv = rep * value_dim;
  const int64_t KW = int64_t(NK) * dk, VW = int64_t(NV) * value_dim, C = 2 * KW + VW, group = 2 * dk + 2 * rv;
  for (int64_t i = 0; i < m; ++i) {
    for (int h = 0; h < NK; ++h) {
      const float* src = qkvz + (i * NK + h) * group;
      float* row = mixed + i * C;
      std::copy_n(src, dk, row + h * dk);
      std::copy_n(src + dk, dk, row + KW + h * dk);
      std::copy_n(src + 2 * dk, rv, row + 2 * KW + h * rv);
      std::copy_n(src + 2 * dk + rv, rv, z + i * VW + h * rv);
      const float* bas = ba + i * 2 * NV + h * 2 * rep;
      std::copy_n(bas, rep, b + i * NV + h * rep);
      std::copy_n(bas + rep, rep, a + i * NV + h * rep);
    }
  }
}

void delta_gates(const float* b, const float* a, const float* a_log, const float* dt_bias, int64_t rows, int heads,
                 float* beta, float* g) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int h = 0; h < heads; ++h) {
      const int64_t at = i * heads + h;
      beta[at] = sigmoid(b[at]);
      const double decay = std::exp(double(a_log[h]));
      g[at] = float(-decay * softplus(double(a[at]) + double(dt_bias[h])));
    }
  }
}

void causal_conv1d_silu_step(const float* x, float* window, const float* w, int channels, int kernel, float* out,
                             int c0, int c1) {
  const int64_t C = channels, from = c0, to = c1 < 0 ? C : c1;
  for (int64_t c = from; c < to; ++c) {
    const float* wc = w + c * kernel;
    double s = double(wc[kernel - 1]) * double(x[c]);
    for (int j = 0; j < kernel - 1; ++j) s += double(wc[j]) * double(window[int64_t(j) * C + c]);
    out[c] = float(s / (1.0 + std::exp(-s)));
  }
  if (kernel > 1) {
    const size_t bytes = size_t(to - from) * sizeof(float);
    for (int j = 0; j + 1 < kernel - 1; ++j) {
      std::memmove(window + int64_t(j) * C + from, window + int64_t(j + 1) * C + from, bytes);
    }
    std::memcpy(window + int64_t(kernel - 2) * C + from, x + from, bytes);
  }
}

namespace {
// Token t of a run: its rows, the decay exp(g) rounded to float and beta, as both recurrent forms read them.
struct DeltaToken {
  const float *q, *k, *v;
  float decay;
  double beta;
};
DeltaToken token_at(const DeltaRun& run, int t) {
  return {run.q + t * run.q_stride, run.k + t * run.k_stride, run.v + t * run.v_stride,
          float(std::exp(double(run.g[t * run.gb_stride]))), double(run.beta[t * run.gb_stride])};
}
}  // namespace

void ref::gated_delta_rule(const DeltaRun& run, int key_dim, int value_dim, float* state) {
  std::vector<double> u(static_cast<size_t>(value_dim));
  for (int t = 0; t < run.n; ++t) {
    const auto [q, k, v, decay, beta] = token_at(run, t);
    for (int64_t i = 0; i < int64_t(key_dim) * value_dim; ++i) state[i] = state[i] * decay;
    for (int j = 0; j < value_dim; ++j) {
      double mem = 0.0;
      for (int i = 0; i < key_dim; ++i) mem += double(state[int64_t(i) * value_dim + j]) * double(k[i]);
      u[size_t(j)] = (double(v[j]) - mem) * beta;
    }
    for (int i = 0; i < key_dim; ++i) {
      float* s = state + int64_t(i) * value_dim;
      for (int j = 0; j < value_dim; ++j) s[j] = float(double(s[j]) + double(k[i]) * u[size_t(j)]);
    }
    float* o = run.out + t * run.out_stride;
    for (int j = 0; j < value_dim; ++j) {
      double acc = 0.0;
      for (int i = 0; i < key_dim; ++i) acc += double(state[int64_t(i) * value_dim + j]) * double(q[i]);
      o[j] = float(acc);
    }
  }
}

void gated_delta_recurrent(const DeltaRun& run, int key_dim, int value_dim, float* state) {
  thread_local std::vector<double> sums;  // mem (S^T k), then u, then out's accumulators
  sums.resize(size_t(2 * value_dim));
  double* mem = sums.data();
  double* acc = mem + value_dim;
  for (int t = 0; t < run.n; ++t) {
    const auto [q, k, v, decay, beta] = token_at(run, t);
    // Pass 1, row by row: the decay, and mem[j] += S[i][j] k[i] in the order of i, as the reference sums it.
    std::fill(mem, mem + value_dim, 0.0);
    for (int i = 0; i < key_dim; ++i) {
      float* s = state + int64_t(i) * value_dim;
      const double ki = k[i];
      for (int j = 0; j < value_dim; ++j) {
        s[j] = s[j] * decay;
        mem[j] += double(s[j]) * ki;
      }
    }
    double* u = mem;  // u[j] = (v[j] - mem[j]) beta, in place
    for (int j = 0; j < value_dim; ++j) u[j] = (double(v[j]) - mem[j]) * beta;
    // Pass 2: S += k u^T, and out[j] += S[i][j] q[i] from the updated row, in the order of i.
    std::fill(acc, acc + value_dim, 0.0);
    for (int i = 0; i < key_dim; ++i) {
      float* s = state + int64_t(i) * value_dim;
      const double ki = k[i], qi = q[i];
      for (int j = 0; j < value_dim; ++j) {
        s[j] = float(double(s[j]) + ki * u[j]);
        acc[j] += double(s[j]) * qi;
      }
    }
    float* o = run.out + t * run.out_stride;
    for (int j = 0; j < value_dim; ++j) o[j] = float(acc[j]);
  }
}

void gated_delta_chunked(const DeltaRun& run, int key_dim, int value_dim, float* state, int chunk) {
  const int dk = key_dim, dv = value_dim;
  std::vector<double> cum, a, U, W, S(size_t(dk) * size_t(dv)), qk, acc, decay;
  for (int64_t i = 0; i < int64_t(dk) * dv; ++i) S[size_t(i)] = state[i];
  for (int start = 0; start < run.n; start += chunk) {
    const int L = std::min(chunk, run.n - start);
    auto q = [&](int t, int i) { return double(run.q[(start + t) * run.q_stride + i]); };
    auto k = [&](int t, int i) { return double(run.k[(start + t) * run.k_stride + i]); };
    auto v = [&](int t, int j) { return double(run.v[(start + t) * run.v_stride + j]); };
    auto beta = [&](int t) { return double(run.beta[(start + t) * run.gb_stride]); };
    cum.assign(size_t(L), 0.0);
    for (int t = 0; t < L; ++t)
      cum[size_t(t)] = (t > 0 ? cum[size_t(t - 1)] : 0.0) + run.g[(start + t) * run.gb_stride];
    // a[t][s] (s < t) = beta_t (k_t . k_s) exp(cum_t - cum_s): how much update s reads into update t.
    a.assign(size_t(L) * size_t(L), 0.0);
    qk.assign(size_t(L) * size_t(L), 0.0);
    for (int t = 0; t < L; ++t) {
      for (int s = 0; s <= t; ++s) {
        double kk = 0.0, qs = 0.0;
        for (int i = 0; i < dk; ++i) {
          kk += k(t, i) * k(s, i);
          qs += q(t, i) * k(s, i);
        }
        const double d = std::exp(cum[size_t(t)] - cum[size_t(s)]);
        if (s < t) a[size_t(t * L + s)] = beta(t) * kk * d;
        qk[size_t(t * L + s)] = qs * d;
      }
    }
    // Forward substitution: U = T^-1 (beta v), W = T^-1 (beta exp(cum) k), T unit lower triangular with a below.
    U.assign(size_t(L) * size_t(dv), 0.0);
    W.assign(size_t(L) * size_t(dk), 0.0);
    for (int t = 0; t < L; ++t) {
      double* ut = U.data() + size_t(t) * size_t(dv);
      double* wt = W.data() + size_t(t) * size_t(dk);
      const double e = std::exp(cum[size_t(t)]);
      for (int j = 0; j < dv; ++j) ut[j] = beta(t) * v(t, j);
      for (int i = 0; i < dk; ++i) wt[i] = beta(t) * e * k(t, i);
      for (int s = 0; s < t; ++s) {
        const double f = a[size_t(t * L + s)];
        const double* us = U.data() + size_t(s) * size_t(dv);
        const double* ws = W.data() + size_t(s) * size_t(dk);
        for (int j = 0; j < dv; ++j) ut[j] -= f * us[j];
        for (int i = 0; i < dk; ++i) wt[i] -= f * ws[i];
      }
    }
    // The updates written: u_t = U_t - W_t S0 (in place of U).
    for (int t = 0; t < L; ++t) {
      double* ut = U.data() + size_t(t) * size_t(dv);
      const double* wt = W.data() + size_t(t) * size_t(dk);
      for (int i = 0; i < dk; ++i) {
        const double* si = S.data() + size_t(i) * size_t(dv);
        for (int j = 0; j < dv; ++j) ut[j] -= wt[i] * si[j];
      }
    }
    // Outputs: exp(cum_t) S0^T q_t + sum_{s <= t} qk[t][s] u_s; each output's sum over i, then over s, in order,
    // all dv outputs at once (rows of S and U walked contiguously).
    acc.resize(size_t(dv));
    for (int t = 0; t < L; ++t) {
      float* o = run.out + (start + t) * run.out_stride;
      const double e = std::exp(cum[size_t(t)]);
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int i = 0; i < dk; ++i) {
        const double qi = q(t, i);
        const double* si = S.data() + size_t(i) * size_t(dv);
        for (int j = 0; j < dv; ++j) acc[size_t(j)] += qi * si[j];
      }
      for (int j = 0; j < dv; ++j) acc[size_t(j)] *= e;
      for (int s = 0; s <= t; ++s) {
        const double f = qk[size_t(t * L + s)];
        const double* us = U.data() + size_t(s) * size_t(dv);
        for (int j = 0; j < dv; ++j) acc[size_t(j)] += f * us[j];
      }
      for (int j = 0; j < dv; ++j) o[j] = float(acc[size_t(j)]);
    }
    // The state after the chunk: exp(cum_last) S0 + sum_s exp(cum_last - cum_s) k_s u_s^T.
    const double last = cum[size_t(L - 1)], e_last = std::exp(last);
    decay.resize(size_t(L));
    for (int s = 0; s < L; ++s) decay[size_t(s)] = std::exp(last - cum[size_t(s)]);
    for (int i = 0; i < dk; ++i) {
      double* si = S.data() + size_t(i) * size_t(dv);
      for (int j = 0; j < dv; ++j) si[j] *= e_last;
      for (int s = 0; s < L; ++s) {
        const double f = decay[size_t(s)] * k(s, i);
        const double* us = U.data() + size_t(s) * size_t(dv);
        for (int j = 0; j < dv; ++j) si[j] += f * us[j];
      }
    }
    // The state is float32 between calls, as each token's is in the recurrent form.
    for (double& x : S) x = double(float(x));
  }
  for (int64_t i = 0; i < int64_t(dk) * dv; ++i) state[i] = float(S[size_t(i)]);
}

}  // namespace seedling::ops
