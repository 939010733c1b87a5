// cuda/seed_search.cu - the seed search's kernel (cuda/seeds.h: seed_search_blocks): a thread per seed, a thread
// block per 256 seeds and kSearchBlocks weight blocks.
//
// Invariant: every error is computed by codec/seed_search_detail.h's functions, the CPU search's own code, compiled
// here with -fmad=false (CMakeLists.txt: no fused multiply-add, as the host's -ffp-contract=off) and IEEE division
// and square root (nvcc's defaults), from the seed's states of lfsr.h's stream tables; so each (seed, block) error
// has the CPU's bits and the smallest key is the CPU search's choice. A thread factors its seed's Gram matrix once
// (the energies are shared by the launch's blocks), then scores each block held in shared memory; the 32 keys of a
// warp meet in a shuffle tree and one atomicMin per warp and block keeps the smallest.
#include "codec/seed_search_detail.h"
#include "cuda/codec_device.cuh"
#include "cuda/seeds.h"

namespace seedling::cuda {

namespace {

constexpr int kSearchThreads = 256;  // seeds per thread block
constexpr int kSearchBlocks = 32;    // weight blocks per thread block

template <CodecId Cd>
__global__ void __launch_bounds__(kSearchThreads)
    seed_search_kernel(const float* x, int64_t n_blocks, const float* h, int lo, int hi, uint32_t n_seeds,
                       unsigned long long* keys) {
  constexpr seeddev::Geom g = seed_geom(Cd);
  constexpr int C = g.C, P = g.P;
  __shared__ float xs[kSearchBlocks][C], hxs[kSearchBlocks][C], hs[C];
  const int64_t b0 = int64_t(blockIdx.y) * kSearchBlocks;
  const int nb = int(n_blocks - b0 < kSearchBlocks ? n_blocks - b0 : kSearchBlocks);
  for (int i = threadIdx.x; i < kSearchBlocks * C; i += blockDim.x) {
    const int b = i / C, c = i % C;
    const float v = b < nb ? x[(b0 + b) * C + c] : 0.0f;
    xs[b][c] = v;
    hxs[b][c] = h[c] * v;  // the CPU's hx = h * x
  }
  if (threadIdx.x < C) hs[threadIdx.x] = h[threadIdx.x];
  __syncthreads();
  const uint32_t seed = blockIdx.x * blockDim.x + threadIdx.x + 1;
  float U[C * P], Sf[C * P], L[P * (P + 1) / 2];
  bool ok = seed <= n_seeds;
  if (ok) {  // as the CPU's table: Sf = float(S), U = Sf * fl(1/32767), then the factor
    const uint64_t st = seeddev::stream_of(uint16_t(seed), kDeviceStreamTables.lo, kDeviceStreamTables.hi);
#pragma unroll
    for (int k = 0; k < C * P; ++k) {
      Sf[k] = float(int32_t(uint16_t(st >> (k + 1))) - 32768);
      U[k] = Sf[k] * seed::kR32;
    }
    ok = seed::detail::gram_cholesky(C, P, U, hs, L);
  }
  for (int b = 0; b < nb; ++b) {
    unsigned long long key = ~0ull;
    if (ok) {
      const seed::detail::SeedScore sc = seed::detail::score_seed(C, P, U, Sf, L, xs[b], hs, hxs[b], lo, hi);
      if (sc.err < INFINITY) {
        key = (static_cast<unsigned long long>(__float_as_uint(sc.err)) << 32) |
              static_cast<unsigned long long>(((seed - 1) << 2) | uint32_t(sc.cand));
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const unsigned long long other = __shfl_xor_sync(0xffffffffu, key, o);
      key = other < key ? other : key;
    }
    if (threadIdx.x % 32 == 0 && key != ~0ull) atomicMin(&keys[b0 + b], key);
  }
}

}  // namespace

void seed_search_blocks(Codec tier, const float* x, int64_t n_blocks, const float* h, int lo, int hi, uint32_t n_seeds,
                        unsigned long long* keys, cudaStream_t stream) {
  check(is_seed(Id(uint8_t(tier))) ? cudaSuccess : cudaErrorInvalidValue, "seed_search_blocks: not a seed tier");
  check(n_seeds >= 1 && n_seeds <= 65535 ? cudaSuccess : cudaErrorInvalidValue,
        "seed_search_blocks: n_seeds outside 1..65535");
  if (n_blocks == 0) return;
  check(cudaMemsetAsync(keys, 0xFF, size_t(n_blocks) * sizeof(unsigned long long), stream), "clearing search keys");
  const dim3 grid((n_seeds + kSearchThreads - 1) / kSearchThreads,
                  unsigned((n_blocks + kSearchBlocks - 1) / kSearchBlocks));
  dispatch_codec<true>(tier, [&]<CodecId C>() {
    if constexpr (is_seed(C)) {
      seed_search_kernel<C><<<grid, kSearchThreads, 0, stream>>>(x, n_blocks, h, lo, hi, n_seeds, keys);
    }
  });
  check(cudaGetLastError(), "seed_search_blocks");
}

}  // namespace seedling::cuda
