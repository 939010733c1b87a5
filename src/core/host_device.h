// core/host_device.h - SEEDLING_HD: marks a function that both the host compiler and nvcc compile, so CPU code, CPU
// tests and CUDA kernels run one definition (index arithmetic, the seed format's float operations).
#pragma once

#ifdef __CUDACC__
#define SEEDLING_HD __host__ __device__ __forceinline__
#else
#define SEEDLING_HD inline
#endif
