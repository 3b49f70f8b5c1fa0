// kernels/reduce.cu compiled as host C++ (shim.h) and its entry points by name, with each one's element size:
// shared by the harness (main.cpp) and the fake CUDA driver (tests/gpu/fake/cuda.cpp).
#pragma once
#include "shim.h"
#include "../../../kernels/reduce.cu"

typedef void (*ReduceFn)(void*, const void*, const void*, u64);
typedef void (*FinalizeFn)(void*, u64, u64);
typedef void (*VerifyFn)(const void*, u64, u64, const void*, u64*);

struct Entry {
    const char* name;
    void* fn;
    int size;
};

#define ENTRIES(NAME, T)                                                                                    \
    {"reduce_" #NAME "_sum", (void*)reduce_##NAME##_sum, sizeof(T)},                                       \
        {"reduce_" #NAME "_prod", (void*)reduce_##NAME##_prod, sizeof(T)},                                 \
        {"reduce_" #NAME "_max", (void*)reduce_##NAME##_max, sizeof(T)},                                   \
        {"reduce_" #NAME "_min", (void*)reduce_##NAME##_min, sizeof(T)},                                   \
        {"reduce_" #NAME "_avg", (void*)reduce_##NAME##_avg, sizeof(T)},                                   \
        {"finalize_" #NAME "_avg", (void*)finalize_##NAME##_avg, sizeof(T)},                               \
        {"verify_" #NAME, (void*)verify_##NAME, sizeof(T)},

static const Entry TABLE[] = {ENTRIES(int8, i8) ENTRIES(uint8, u8) ENTRIES(int32, i32) ENTRIES(uint32, u32)
                                  ENTRIES(int64, i64) ENTRIES(uint64, u64) ENTRIES(half, half_t)
                                      ENTRIES(bfloat16, bf16_t) ENTRIES(float, float) ENTRIES(double, double)};

// Every block of the grid, one thread each, in order.
template <typename F> static void launch(unsigned grid, F body) {
    gridDim.x = grid;
    blockDim.x = 1;
    threadIdx.x = 0;
    for (unsigned b = 0; b < grid; b++) {
        blockIdx.x = b;
        body();
    }
}
