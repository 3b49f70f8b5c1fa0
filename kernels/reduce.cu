// Element-wise reductions and the verification kernel of collbench's GPU path.
//
// Compiled at run time with NVRTC for the device present (src/gpu/), and in CI with nvcc to PTX
// (kernels/check.sh). No includes: half and bfloat16 are converted by hand (PTX cvt for half, the
// CPU's integer rounding for bfloat16), which keeps NVRTC free of include paths.
//
// Results are bit-identical to the CPU kernels (src/reduce/kernel.rs): integers wrap, floats are
// IEEE (compiled without FMA contraction), half and bfloat16 are widened to f32, combined and rounded
// back to nearest even, max/min ignore a NaN operand (maxNum/minNum, as fmaxf), and Avg is a Sum
// that the finalize kernel divides by the rank count (truncating for integers).
//
// Entry points (extern "C", so their names are fixed):
//   reduce_<dtype>_<op>(dst, a, b, n)        dst[i] = op(a[i], b[i]) for i < n
//   finalize_<dtype>_avg(buf, n, nranks)     buf[i] = buf[i] / nranks
//   verify_<dtype>(got, n, first, want, wrong)  adds to *wrong the count of i with got[i] != want[(first + i) % 8]

typedef signed char i8;
typedef unsigned char u8;
typedef int i32;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;
typedef unsigned short u16;

// Storage types for the 16-bit floats: the bits, converted by hand.
struct half_t { u16 bits; };
struct bf16_t { u16 bits; };

// On the device, PTX conversions; compiled as host C++ (tests/kernels_host.rs runs the kernels' logic on the
// CPU through tests/gpu/emulate/shim.h), the shim's.
#ifdef __CUDACC__
__device__ __forceinline__ float half_to_f32(half_t h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
    return f;
}

// Round to nearest even, as F16C's vcvtps2ph with _MM_FROUND_TO_NEAREST_INT.
__device__ __forceinline__ half_t f32_to_half(float f) {
    half_t h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
    return h;
}
#else
inline float half_to_f32(half_t h) { return host_half_to_f32(h.bits); }
inline half_t f32_to_half(float f) {
    half_t h;
    h.bits = host_f32_to_half(f);
    return h;
}
#endif

__device__ __forceinline__ float bf16_to_f32(bf16_t b) {
    return __uint_as_float(((u32)b.bits) << 16);
}

// The CPU's f32_to_bf16_bits: round to nearest even by integer arithmetic; NaN stays a quiet NaN.
__device__ __forceinline__ bf16_t f32_to_bf16(float f) {
    u32 b = __float_as_uint(f);
    bf16_t r;
    if ((b & 0x7fffffffu) > 0x7f800000u) {
        r.bits = (u16)((b >> 16) | 0x40u);
    } else {
        r.bits = (u16)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
    }
    return r;
}

// Per-type arithmetic. Signed integers go through their unsigned type so that overflow wraps
// (signed overflow is undefined in C++).
template <typename T> struct Arith;

// Division by the rank count in 64 bits (W: i64 or u64), truncating like the CPU's finalize; a count
// above the type's range gives 0 there as here, where a division in T would wrap the divisor.
#define INT_ARITH(T, U, W)                                                                   \
    template <> struct Arith<T> {                                                            \
        static __device__ __forceinline__ T sum(T a, T b) { return (T)((U)a + (U)b); }       \
        static __device__ __forceinline__ T prod(T a, T b) { return (T)((U)a * (U)b); }      \
        static __device__ __forceinline__ T max(T a, T b) { return a > b ? a : b; }          \
        static __device__ __forceinline__ T min(T a, T b) { return a < b ? a : b; }          \
        static __device__ __forceinline__ T div(T a, u64 n) { return (T)((W)a / (W)n); }     \
        static __device__ __forceinline__ bool same(T a, T b) { return a == b; }             \
    };
INT_ARITH(i8, u32, i64)
INT_ARITH(u8, u32, u64)
INT_ARITH(i32, u32, i64)
INT_ARITH(u32, u32, u64)
INT_ARITH(i64, u64, i64)
INT_ARITH(u64, u64, u64)

template <> struct Arith<float> {
    static __device__ __forceinline__ float sum(float a, float b) { return __fadd_rn(a, b); }
    static __device__ __forceinline__ float prod(float a, float b) { return __fmul_rn(a, b); }
    static __device__ __forceinline__ float max(float a, float b) { return fmaxf(a, b); }
    static __device__ __forceinline__ float min(float a, float b) { return fminf(a, b); }
    static __device__ __forceinline__ float div(float a, u64 n) { return __fdiv_rn(a, (float)n); }
    // Numeric equality: +0 == -0, NaN equals nothing (the CPU check's rule).
    static __device__ __forceinline__ bool same(float a, float b) { return a == b; }
};

template <> struct Arith<double> {
    static __device__ __forceinline__ double sum(double a, double b) { return __dadd_rn(a, b); }
    static __device__ __forceinline__ double prod(double a, double b) { return __dmul_rn(a, b); }
    static __device__ __forceinline__ double max(double a, double b) { return fmax(a, b); }
    static __device__ __forceinline__ double min(double a, double b) { return fmin(a, b); }
    static __device__ __forceinline__ double div(double a, u64 n) { return __ddiv_rn(a, (double)n); }
    static __device__ __forceinline__ bool same(double a, double b) { return a == b; }
};

// The 16-bit floats: f(x, y) in f32, rounded back once.
#define NARROW_ARITH(T, TO, FROM, NAN_ABOVE)                                                                       \
    template <> struct Arith<T> {                                                                                  \
        static __device__ __forceinline__ T sum(T a, T b) { return FROM(__fadd_rn(TO(a), TO(b))); }                \
        static __device__ __forceinline__ T prod(T a, T b) { return FROM(__fmul_rn(TO(a), TO(b))); }               \
        static __device__ __forceinline__ T max(T a, T b) { return FROM(fmaxf(TO(a), TO(b))); }                    \
        static __device__ __forceinline__ T min(T a, T b) { return FROM(fminf(TO(a), TO(b))); }                    \
        static __device__ __forceinline__ T div(T a, u64 n) { return FROM(__fdiv_rn(TO(a), (float)n)); }           \
        /* Bit equality of a non-NaN, or both zeros. */                                                            \
        static __device__ __forceinline__ bool same(T a, T b) {                                                    \
            return (a.bits == b.bits && (a.bits & 0x7fffu) <= NAN_ABOVE) || ((a.bits | b.bits) & 0x7fffu) == 0;    \
        }                                                                                                          \
    };
NARROW_ARITH(half_t, half_to_f32, f32_to_half, 0x7c00u)
NARROW_ARITH(bf16_t, bf16_to_f32, f32_to_bf16, 0x7f80u)

struct OpSum  { template <typename T> static __device__ __forceinline__ T apply(T a, T b) { return Arith<T>::sum(a, b); } };
struct OpProd { template <typename T> static __device__ __forceinline__ T apply(T a, T b) { return Arith<T>::prod(a, b); } };
struct OpMax  { template <typename T> static __device__ __forceinline__ T apply(T a, T b) { return Arith<T>::max(a, b); } };
struct OpMin  { template <typename T> static __device__ __forceinline__ T apply(T a, T b) { return Arith<T>::min(a, b); } };
// Avg accumulates as a sum; finalize divides.
typedef OpSum OpAvg;

// Sixteen bytes of elements: the unit of the vectorised loops (one 128-bit load per operand).
template <typename T> union Vec {
    uint4 raw;
    T e[16 / sizeof(T)];
};

__device__ __forceinline__ bool aligned16(const void* p) { return ((u64)p & 15) == 0; }

// Grid-stride loops: whole 16-byte vectors first when every pointer allows it, then the tail
// (or everything, when a pointer is not 16-byte aligned) element by element.
template <typename T, typename Op>
__device__ __forceinline__ void reduce_body(T* __restrict__ dst, const T* __restrict__ a, const T* __restrict__ b, u64 n) {
    const u64 per = 16 / sizeof(T);
    const u64 tid = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    const u64 stride = (u64)gridDim.x * blockDim.x;
    u64 done = 0;
    if (aligned16(dst) && aligned16(a) && aligned16(b)) {
        const u64 nvec = n / per;
        const uint4* va = (const uint4*)a;
        const uint4* vb = (const uint4*)b;
        uint4* vd = (uint4*)dst;
        // UNROLL vectors per thread per step, all loads issued before any store, so that each thread
        // keeps several memory requests in flight (the reduction must run near copy bandwidth).
        const int UNROLL = 4;
        u64 v = tid;
        for (; v + (UNROLL - 1) * stride < nvec; v += UNROLL * stride) {
            Vec<T> x[UNROLL], y[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                x[u].raw = va[v + u * stride];
                y[u].raw = vb[v + u * stride];
            }
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                Vec<T> r;
#pragma unroll
                for (int k = 0; k < (int)per; k++) r.e[k] = Op::apply(x[u].e[k], y[u].e[k]);
                vd[v + u * stride] = r.raw;
            }
        }
        for (; v < nvec; v += stride) {
            Vec<T> x, y, r;
            x.raw = va[v];
            y.raw = vb[v];
#pragma unroll
            for (int k = 0; k < (int)per; k++) r.e[k] = Op::apply(x.e[k], y.e[k]);
            vd[v] = r.raw;
        }
        done = nvec * per;
    }
    for (u64 i = done + tid; i < n; i += stride) dst[i] = Op::apply(a[i], b[i]);
}

template <typename T>
__device__ __forceinline__ void finalize_body(T* buf, u64 n, u64 nranks) {
    const u64 tid = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = tid; i < n; i += stride) buf[i] = Arith<T>::div(buf[i], nranks);
}

// Counts per thread, then one atomic per warp.
template <typename T>
__device__ __forceinline__ void verify_body(const T* __restrict__ got, u64 n, u64 first, const T* __restrict__ want,
                                            u64* wrong) {
    const u64 per = 16 / sizeof(T);
    const u64 tid = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    const u64 stride = (u64)gridDim.x * blockDim.x;
    T table[8];
#pragma unroll
    for (int k = 0; k < 8; k++) table[k] = want[k];
    u64 count = 0;
    u64 done = 0;
    if (aligned16(got)) {
        const u64 nvec = n / per;
        const uint4* vg = (const uint4*)got;
        for (u64 v = tid; v < nvec; v += stride) {
            Vec<T> x;
            x.raw = vg[v];
            const u64 base = first + v * per;
#pragma unroll
            for (int k = 0; k < (int)per; k++) count += Arith<T>::same(x.e[k], table[(base + k) & 7]) ? 0 : 1;
        }
        done = nvec * per;
    }
    for (u64 i = done + tid; i < n; i += stride) count += Arith<T>::same(got[i], table[(first + i) & 7]) ? 0 : 1;
    for (int off = 16; off > 0; off >>= 1) count += __shfl_down_sync(0xffffffffu, count, off);
    if ((threadIdx.x & 31) == 0 && count != 0) atomicAdd(wrong, count);
}

#define REDUCE(NAME, T, OP)                                                                              \
    extern "C" __global__ void reduce_##NAME##_##OP(T* dst, const T* a, const T* b, u64 n) {            \
        reduce_body<T, Op_##OP>(dst, a, b, n);                                                           \
    }
typedef OpSum Op_sum;
typedef OpProd Op_prod;
typedef OpMax Op_max;
typedef OpMin Op_min;
typedef OpAvg Op_avg;

#define DTYPE(NAME, T)                                                                                   \
    REDUCE(NAME, T, sum)                                                                                 \
    REDUCE(NAME, T, prod)                                                                                \
    REDUCE(NAME, T, max)                                                                                 \
    REDUCE(NAME, T, min)                                                                                 \
    REDUCE(NAME, T, avg)                                                                                 \
    extern "C" __global__ void finalize_##NAME##_avg(T* buf, u64 n, u64 nranks) {                        \
        finalize_body<T>(buf, n, nranks);                                                                \
    }                                                                                                    \
    extern "C" __global__ void verify_##NAME(const T* got, u64 n, u64 first, const T* want, u64* wrong) { \
        verify_body<T>(got, n, first, want, wrong);                                                      \
    }

DTYPE(int8, i8)
DTYPE(uint8, u8)
DTYPE(int32, i32)
DTYPE(uint32, u32)
DTYPE(int64, i64)
DTYPE(uint64, u64)
DTYPE(half, half_t)
DTYPE(bfloat16, bf16_t)
DTYPE(float, float)
DTYPE(double, double)
