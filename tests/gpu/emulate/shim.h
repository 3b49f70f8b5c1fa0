// Lets kernels/reduce.cu compile as host C++ so that its logic (integer wrap, rounding, Avg, the grid-stride
// and unrolled loops, the verification count) runs on the CPU in tests/kernels_host.rs. Launches are run one
// thread per block, block after block: with one-thread warps the verify kernel's shuffle has nothing to add.
// Half conversions use F16C, as the CPU kernels do; on the device they are PTX cvt instructions, which only a
// GPU run checks.
#pragma once
#include <cmath>
#include <cstring>
#include <immintrin.h>

#define __device__
#define __global__
#define __forceinline__ inline

struct alignas(16) uint4 {
    unsigned int x, y, z, w;
};
struct dim3 {
    unsigned int x;
};
static dim3 threadIdx, blockIdx, blockDim, gridDim;

inline float __uint_as_float(unsigned int u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline unsigned int __float_as_uint(float f) {
    unsigned int u;
    std::memcpy(&u, &f, 4);
    return u;
}
#define __fadd_rn(a, b) ((float)(a) + (float)(b))
#define __fmul_rn(a, b) ((float)(a) * (float)(b))
#define __fdiv_rn(a, b) ((float)(a) / (float)(b))
#define __dadd_rn(a, b) ((double)(a) + (double)(b))
#define __dmul_rn(a, b) ((double)(a) * (double)(b))
#define __ddiv_rn(a, b) ((double)(a) / (double)(b))
using std::fmax;
using std::fmaxf;
using std::fmin;
using std::fminf;

// A one-thread warp: the lane offset is always past the warp, so nothing comes from another lane.
template <typename T> T __shfl_down_sync(unsigned int, T, int) { return 0; }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
    unsigned long long old = *p;
    *p += v;
    return old;
}

__attribute__((target("f16c"))) inline float host_half_to_f32(unsigned short h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) inline unsigned short host_f32_to_half(float f) {
    return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}
