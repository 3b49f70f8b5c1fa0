// A fake libcuda.so.1 for tests: the part of the CUDA driver API that collbench (through cudarc) calls,
// on host memory, so the binary's real GPU code (src/memory/cuda*.rs, src/reduce/cuda.rs, src/nccl/,
// src/gpumatrix/) runs end to end on machines without a GPU (tests/fake_gpu.rs).
//
// What it checks that nothing else here can: every device address a copy, memset or kernel touches must lie
// inside one live allocation (device memory is malloc'd, so a wrong offset would otherwise go unnoticed),
// launches must have a sane geometry and the argument count their kernel takes, and events must have been
// recorded and passed before their time is read. Work queued on a stream runs only when the host waits for
// it (a stream or event synchronize, a blocking copy), in submission order, as a GPU may run it: a host
// that reads a copy's destination before waiting sees the old bytes. Kernels are kernels/reduce.cu itself,
// compiled as host C++ (tests/gpu/emulate/shim.h), so the device's results are the kernels' own.
//
// Environment: FAKE_CUDA_DEVICES (default 1) devices; FAKE_CUDA_CORRUPT_DTOH=1 flips the last byte of
// every device-to-host copy (to see the data check catch it); FAKE_CUDA_COPY_GBPS=R times events on a
// virtual clock on which every copy moves R GB/s (bytes per ns) and other work takes no time, so measured
// bandwidths are exact and tests need no timing thresholds (unset: events read the host's clock);
// FAKE_CUDA_CONTEXT_MIB=N makes each device's first context hold N MiB of resident host memory, as a real
// one does. FAKE_CUDA_HALF_SPEED=I[,J...] makes the copies queued while device I's context is current move at
// half FAKE_CUDA_COPY_GBPS (a GPU whose copies are slow: a throttled or faulty device or link); copies between
// host and device also move at most 85% of the PCIe link the fake NVML's FAKE_NVML_PCIE gives the device
// (`1:4x8`: gen4 x8, 13.4 GB/s), as a real GPU's do over a link trained low. FAKE_CALL_LOG=FILE appends a line naming each call that waits (cuStreamSynchronize,
// cuCtxSynchronize, cuEventSynchronize, cuEventQuery), retains or switches a context
// (cuDevicePrimaryCtxRetain, cuCtxGetCurrent, cuCtxSetCurrent), allocates or frees, copies or records an
// event, in the order made, so tests can count GPU opens and what a host does between two collectives (the
// fake libnccl writes its calls to the same file). The fake libnccl queues its point-to-point transfers
// through fake_cuda_enqueue_timed, which advances the virtual clock by what each took; a transfer that
// fails (sizes that differ) is a sticky error every later wait returns, as a device fault is. A violation prints "fake-cuda:" and what it was to
// stderr and returns an error code, as the driver would, so the caller's message names the call.
#include "../emulate/table.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void* CUcontext;
typedef void* CUstream;
typedef void* CUevent;
typedef void* CUmodule;
typedef void* CUfunction;

enum {
    OK = 0,
    INVALID_VALUE = 1,
    OUT_OF_MEMORY = 2,
    INVALID_DEVICE = 101,
    INVALID_IMAGE = 200,
    INVALID_HANDLE = 400,
    NOT_FOUND = 500,
    NOT_READY = 600,
    INVALID_CONFIGURATION = 9,
    PEER_ACCESS_ALREADY_ENABLED = 704,
};

namespace {

struct Event {
    bool recorded = false;  // queued by cuEventRecord
    bool done = false;      // the stream passed it
    std::chrono::steady_clock::time_point at;
    double virtual_ns = 0;  // the virtual clock when passed (FAKE_CUDA_COPY_GBPS)
};

struct Function {
    const Entry* entry;
};

struct Context {
    int device;
};

// One process-wide state: the driver keeps it too. Guarded by one lock.
struct State {
    std::mutex lock;
    std::map<uintptr_t, size_t> device_allocs;  // base -> bytes
    std::map<uintptr_t, size_t> host_allocs;
    std::deque<std::function<void()>> queue;  // every stream's work in submission order
    Context contexts[16];
    char* context_memory[16] = {};  // FAKE_CUDA_CONTEXT_MIB
    bool peer_enabled[16][16] = {};
    CUcontext current = nullptr;
    double virtual_ns = 0;  // advanced by copies when FAKE_CUDA_COPY_GBPS is set
    CUresult sticky = OK;   // a fault in queued work: every later wait returns it, as the driver's do
    double copy_gbps() {
        const char* s = std::getenv("FAKE_CUDA_COPY_GBPS");
        return s ? std::atof(s) : 0.0;
    }
    // The rate of a copy queued now (`pcie`: between host and device): half for a device FAKE_CUDA_HALF_SPEED
    // lists, and at most 85% of its link where FAKE_NVML_PCIE sets one.
    double copy_gbps_now(bool pcie) {
        double gbps = copy_gbps();
        if (!current) return gbps;
        int device = ((Context*)current)->device;
        const char* links = std::getenv("FAKE_NVML_PCIE");
        for (const char* p = links; pcie && p && *p;) {
            int i = 0, gen = 0, width = 0, used = 0;
            if (std::sscanf(p, "%d:%dx%d%n", &i, &gen, &width, &used) != 3) break;
            if (i == device && gen >= 1 && gen <= 5) {
                const double per_lane[] = {0, 2.0, 4.0, 8.0 * 128 / 130, 16.0 * 128 / 130, 32.0 * 128 / 130};
                double link = 0.85 * per_lane[gen] * width / 8;
                if (gbps > link) gbps = link;
            }
            p += used;
            if (*p == ',') ++p;
        }
        const char* half = std::getenv("FAKE_CUDA_HALF_SPEED");
        if (!half) return gbps;
        for (const char* p = half; *p;) {
            char* end = nullptr;
            long i = std::strtol(p, &end, 10);
            if (end == p) break;
            if (i == device) return gbps / 2;
            p = *end == ',' ? end + 1 : end;
        }
        return gbps;
    }
    int devices() {
        const char* s = std::getenv("FAKE_CUDA_DEVICES");
        int n = s ? std::atoi(s) : 1;
        return n < 0 ? 0 : (n > 16 ? 16 : n);
    }
};

State& state() {
    static State* s = new State();  // never destroyed: atexit order must not matter
    return *s;
}

CUresult fail(CUresult code, const std::string& what) {
    std::fprintf(stderr, "fake-cuda: %s\n", what.c_str());
    return code;
}

// Whether [p, p + n) lies inside one live device allocation.
bool in_device(State& s, CUdeviceptr p, size_t n) {
    auto it = s.device_allocs.upper_bound((uintptr_t)p);
    if (it == s.device_allocs.begin()) return false;
    --it;
    return (uintptr_t)p >= it->first && (uintptr_t)p + n <= it->first + it->second && (n > 0 || it->second > 0);
}

CUresult check_device(State& s, CUdeviceptr p, size_t n, const char* call, const char* which) {
    if (in_device(s, p, n)) return OK;
    char b[256];
    std::snprintf(b, sizeof b, "%s: %s [0x%llx, +%zu) is outside every live device allocation", call, which,
                  (unsigned long long)p, n);
    return fail(INVALID_VALUE, b);
}

// Runs queued work until `until` returns true (or everything, with no condition).
void drain(State& s, const std::function<bool()>& until = nullptr) {
    while (!s.queue.empty() && !(until && until())) {
        auto work = std::move(s.queue.front());
        s.queue.pop_front();
        work();
    }
}

void enqueue_copy(State& s, void* dst, const void* src, size_t n, bool corrupt, bool pcie = false) {
    const double gbps = s.copy_gbps_now(pcie);
    State* st = &s;
    s.queue.push_back([=] {
        if (gbps > 0) st->virtual_ns += (double)n / gbps;
        std::memmove(dst, src, n);
        if (corrupt && n > 0) ((unsigned char*)dst)[n - 1] ^= 0xff;  // the last element's top byte
    });
}

bool corrupt_dtoh() {
    const char* c = std::getenv("FAKE_CUDA_CORRUPT_DTOH");
    return c && std::strcmp(c, "1") == 0;
}

// One line in FAKE_CALL_LOG (read once: the environment a process starts with), appended whole.
void log_call(const char* name) {
    static const char* path = std::getenv("FAKE_CALL_LOG");
    if (!path) return;
    if (FILE* f = std::fopen(path, "a")) {
        std::fprintf(f, "%s\n", name);
        std::fclose(f);
    }
}

// Runs every queued piece of work: what each wait does, logged by its caller.
CUresult sync_all() {
    State& s = state();
    std::lock_guard<std::mutex> g(s.lock);
    drain(s);
    return s.sticky;
}

const char* error_name(CUresult r) {
    switch (r) {
    case OK: return "CUDA_SUCCESS";
    case INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
    case INVALID_IMAGE: return "CUDA_ERROR_INVALID_IMAGE";
    case INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
    case NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case NOT_READY: return "CUDA_ERROR_NOT_READY";
    case INVALID_CONFIGURATION: return "CUDA_ERROR_INVALID_CONFIGURATION";
    case PEER_ACCESS_ALREADY_ENABLED: return "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED";
    default: return "CUDA_ERROR_UNKNOWN";
    }
}

}  // namespace

extern "C" {

// Also for the fake libnccl: queue a copy on the one queue after checking both device ranges.
CUresult fake_cuda_copy(CUdeviceptr dst, CUdeviceptr src, size_t n, const char* call) {
    State& s = state();
    std::lock_guard<std::mutex> g(s.lock);
    if (CUresult r = check_device(s, src, n, call, "source")) return r;
    if (CUresult r = check_device(s, dst, n, call, "destination")) return r;
    enqueue_copy(s, (void*)dst, (const void*)src, n, false);
    return OK;
}

// Also for the fake libnccl: queue `fn(arg)` on the one queue, to run when the host waits for it (as a
// collective's wait for its peers runs on the stream, not in the call that launched it).
CUresult fake_cuda_enqueue(void (*fn)(void*), void* arg) {
    State& s = state();
    std::lock_guard<std::mutex> g(s.lock);
    s.queue.push_back([=] { fn(arg); });
    return OK;
}

// Also for the fake libnccl: whether [p, p + n) lies in one live device allocation (an error naming `call`
// if not), checked when a transfer is queued, as the copies' ranges are.
CUresult fake_cuda_check(CUdeviceptr p, size_t n, const char* call) {
    State& s = state();
    std::lock_guard<std::mutex> g(s.lock);
    return check_device(s, p, n, call, "buffer");
}

// Also for the fake libnccl: queue `fn(arg)`, which returns the nanoseconds the work took on the virtual clock
// (FAKE_CUDA_COPY_GBPS; ignored without it), or a negative number for a fault, which every later wait then
// returns (CUDA_ERROR_UNKNOWN), as a kernel's fault is sticky on a real device.
CUresult fake_cuda_enqueue_timed(double (*fn)(void*), void* arg) {
    State& s = state();
    std::lock_guard<std::mutex> g(s.lock);
    State* st = &s;
    s.queue.push_back([=] {
        double ns = fn(arg);
        if (ns < 0)
            st->sticky = 999;
        else if (st->copy_gbps() > 0)
            st->virtual_ns += ns;
    });
    return OK;
}

// The rate FAKE_CUDA_COPY_GBPS gives (0: unset), for the fake libnccl's transfers.
double fake_cuda_copy_gbps() { return state().copy_gbps(); }

CUresult cuGetErrorName(CUresult r, const char** s) {
    *s = error_name(r);
    return OK;
}
CUresult cuGetErrorString(CUresult r, const char** s) {
    *s = error_name(r);
    return OK;
}
CUresult cuInit(unsigned) { return OK; }
CUresult cuDriverGetVersion(int* v) {
    *v = 13000;
    return OK;
}
CUresult cuDeviceGetCount(int* n) {
    *n = state().devices();
    return OK;
}
CUresult cuDeviceGet(CUdevice* d, int ordinal) {
    if (ordinal < 0 || ordinal >= state().devices()) return fail(INVALID_DEVICE, "cuDeviceGet: no such ordinal");
    *d = ordinal;
    return OK;
}
CUresult cuDeviceGetName(char* name, int len, CUdevice d) {
    if (d < 0 || d >= state().devices()) return INVALID_DEVICE;
    std::snprintf(name, (size_t)len, "collbench fake CUDA driver (host memory)");
    return OK;
}
CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice) {
    *bytes = (size_t)8 << 30;
    return OK;
}
CUresult cuDeviceGetAttribute(int* v, int attr, CUdevice d) {
    if (d < 0 || d >= state().devices()) return INVALID_DEVICE;
    switch (attr) {
    case 1: *v = 1024; break;    // max threads per block
    case 2: *v = 1024; break;    // max block dim x
    case 5: *v = 1 << 30; break; // max grid dim x
    case 10: *v = 32; break;     // warp size
    case 16: *v = 4; break;      // multiprocessors
    case 33: *v = 0x10 + d; break;  // PCI bus
    case 34: *v = 0; break;      // PCI device
    case 50: *v = 0; break;      // PCI domain
    case 75: *v = 9; break;      // compute capability
    case 76: *v = 0; break;
    default: *v = 0; break;      // memory pools (115) among them: plain cuMemAlloc
    }
    return OK;
}
CUresult cuDeviceGetUuid(void* uuid, CUdevice d) {
    std::memset(uuid, 0, 16);
    ((unsigned char*)uuid)[0] = (unsigned char)d;
    return OK;
}
CUresult cuDeviceGetUuid_v2(void* uuid, CUdevice d) { return cuDeviceGetUuid(uuid, d); }

CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice d) {
    if (d < 0 || d >= state().devices()) return INVALID_DEVICE;
    log_call("cuDevicePrimaryCtxRetain");
    // A real context holds a few hundred MiB of the host's memory from its making to the process's end.
    static bool made[16] = {};
    const char* mib = std::getenv("FAKE_CUDA_CONTEXT_MIB");
    if (mib && !made[d]) {
        size_t n = (size_t)std::atol(mib) << 20;
        // Kept where the state is, so the memory is neither elided nor freed: resident to the end.
        state().context_memory[d] = (char*)std::malloc(n);
        if (state().context_memory[d]) std::memset(state().context_memory[d], 1, n);
    }
    made[d] = true;
    state().contexts[d].device = d;
    *ctx = &state().contexts[d];
    return OK;
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice) { return OK; }
CUresult cuCtxSetCurrent(CUcontext c) {
    log_call("cuCtxSetCurrent");
    state().current = c;
    return OK;
}
CUresult cuCtxGetCurrent(CUcontext* c) {
    log_call("cuCtxGetCurrent");
    *c = state().current;
    return OK;
}
CUresult cuCtxGetDevice(CUdevice* d) {
    if (!state().current) return fail(INVALID_HANDLE, "cuCtxGetDevice: no current context");
    *d = ((Context*)state().current)->device;
    return OK;
}
CUresult cuCtxSynchronize() {
    log_call("cuCtxSynchronize");
    return sync_all();
}
CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned flags) {
    State& s = state();
    if (flags != 0 || !peer || !s.current) return fail(INVALID_VALUE, "cuCtxEnablePeerAccess: bad arguments");
    int from = ((Context*)s.current)->device, to = ((Context*)peer)->device;
    if (from == to) return fail(INVALID_DEVICE, "cuCtxEnablePeerAccess: a context is its own peer");
    if (s.peer_enabled[from][to]) return PEER_ACCESS_ALREADY_ENABLED;
    s.peer_enabled[from][to] = true;
    return OK;
}
CUresult cuDeviceCanAccessPeer(int* can, CUdevice a, CUdevice b) {
    *can = a != b;
    return OK;
}

CUresult cuStreamCreate(CUstream* st, unsigned) {
    *st = new int(0);
    return OK;
}
CUresult cuStreamCreateWithPriority(CUstream* st, unsigned f, int) { return cuStreamCreate(st, f); }
CUresult cuStreamDestroy_v2(CUstream st) {
    delete (int*)st;
    return OK;
}
CUresult cuStreamSynchronize(CUstream) {
    log_call("cuStreamSynchronize");
    return sync_all();
}
CUresult cuStreamWaitEvent(CUstream, CUevent e, unsigned) {
    // One queue in submission order already runs the event's work first.
    return e ? OK : INVALID_HANDLE;
}

CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t n) {
    log_call("cuMemAlloc");
    if (n == 0) return fail(INVALID_VALUE, "cuMemAlloc: 0 bytes");
    void* m = std::aligned_alloc(256, (n + 255) / 256 * 256);
    if (!m) return OUT_OF_MEMORY;
    std::memset(m, 0xa5, n);  // not zero: a buffer read before it was written shows
    State& s = state();
    std::lock_guard<std::mutex> g(s.lock);
    s.device_allocs[(uintptr_t)m] = n;
    *p = (CUdeviceptr)m;
    return OK;
}
CUresult cuMemAllocAsync(CUdeviceptr* p, size_t n, CUstream) { return cuMemAlloc_v2(p, n); }
CUresult cuMemFree_v2(CUdeviceptr p) {
    log_call("cuMemFree");
    State& s = state();
    std::lock_guard<std::mutex> g(s.lock);
    drain(s);  // the driver waits for work on it too
    auto it = s.device_allocs.find((uintptr_t)p);
    if (it == s.device_allocs.end()) return fail(INVALID_VALUE, "cuMemFree: not an allocation's base");
    s.device_allocs.erase(it);
    std::free((void*)p);
    return OK;
}
CUresult cuMemFreeAsync(CUdeviceptr p, CUstream) { return cuMemFree_v2(p); }
CUresult cuMemHostAlloc(void** p, size_t n, unsigned) {
    log_call("cuMemHostAlloc");
    void* m = std::aligned_alloc(4096, (n + 4095) / 4096 * 4096 + 4096);
    if (!m) return OUT_OF_MEMORY;
    State& s = state();
    std::lock_guard<std::mutex> g(s.lock);
    s.host_allocs[(uintptr_t)m] = n;
    *p = m;
    return OK;
}
CUresult cuMemAllocHost_v2(void** p, size_t n) { return cuMemHostAlloc(p, n, 0); }
CUresult cuMemFreeHost(void* p) {
    State& s = state();
    std::lock_guard<std::mutex> g(s.lock);
    drain(s);
    if (!s.host_allocs.erase((uintptr_t)p)) return fail(INVALID_VALUE, "cuMemFreeHost: not pinned memory");
    std::free(p);
    return OK;
}
CUresult cuMemGetInfo_v2(size_t* free_, size_t* total) {
    *free_ = (size_t)7 << 30;
    *total = (size_t)8 << 30;
    return OK;
}

CUresult cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream) {
    State& s = state();
    std::lock_guard<std::mutex> g(s.lock);
    if (CUresult r = check_device(s, p, n, "cuMemsetD8Async", "buffer")) return r;
    s.queue.push_back([=] { std::memset((void*)p, v, n); });
    return OK;
}
CUresult cuMemsetD8_v2(CUdeviceptr p, unsigned char v, size_t n) {
    if (CUresult r = cuMemsetD8Async(p, v, n, nullptr)) return r;
    return cuCtxSynchronize();
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, CUstream) {
    log_call("cuMemcpyHtoDAsync");
    State& s = state();
    std::lock_guard<std::mutex> g(s.lock);
    if (CUresult r = check_device(s, dst, n, "cuMemcpyHtoDAsync", "destination")) return r;
    enqueue_copy(s, (void*)dst, src, n, false, true);
    return OK;
}
CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream) {
    log_call("cuMemcpyDtoHAsync");
    State& s = state();
    std::lock_guard<std::mutex> g(s.lock);
    if (CUresult r = check_device(s, src, n, "cuMemcpyDtoHAsync", "source")) return r;
    enqueue_copy(s, dst, (const void*)src, n, corrupt_dtoh(), true);
    return OK;
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream) {
    log_call("cuMemcpyDtoDAsync");
    return fake_cuda_copy(dst, src, n, "cuMemcpyDtoDAsync");
}
CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext, CUdeviceptr src, CUcontext, size_t n, CUstream) {
    return fake_cuda_copy(dst, src, n, "cuMemcpyPeerAsync");
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
    if (CUresult r = cuMemcpyHtoDAsync_v2(dst, src, n, nullptr)) return r;
    return cuCtxSynchronize();
}
CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
    if (CUresult r = cuMemcpyDtoHAsync_v2(dst, src, n, nullptr)) return r;
    return cuCtxSynchronize();
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    if (CUresult r = cuMemcpyDtoDAsync_v2(dst, src, n, nullptr)) return r;
    return cuCtxSynchronize();
}

CUresult cuEventCreate(CUevent* e, unsigned) {
    *e = new Event();
    return OK;
}
CUresult cuEventDestroy_v2(CUevent e) {
    State& s = state();
    std::lock_guard<std::mutex> g(s.lock);
    drain(s);  // queued records may still point at it
    delete (Event*)e;
    return OK;
}
CUresult cuEventRecord(CUevent e, CUstream) {
    log_call("cuEventRecord");
    if (!e) return INVALID_HANDLE;
    State& s = state();
    std::lock_guard<std::mutex> g(s.lock);
    Event* ev = (Event*)e;
    ev->recorded = true;
    ev->done = false;
    State* st = &s;
    s.queue.push_back([ev, st] {
        ev->at = std::chrono::steady_clock::now();
        ev->virtual_ns = st->virtual_ns;
        ev->done = true;
    });
    return OK;
}
CUresult cuEventSynchronize(CUevent e) {
    log_call("cuEventSynchronize");
    State& s = state();
    std::lock_guard<std::mutex> g(s.lock);
    Event* ev = (Event*)e;
    if (ev->recorded) drain(s, [ev] { return ev->done; });
    return s.sticky;
}
CUresult cuEventQuery(CUevent e) {
    log_call("cuEventQuery");
    State& s = state();
    std::lock_guard<std::mutex> g(s.lock);
    Event* ev = (Event*)e;
    if (!ev->recorded || ev->done) return OK;
    // One step of progress per query, so a host polling an event gets there.
    drain(s, [&, steps = 0]() mutable { return steps++ == 1; });
    return ev->done ? OK : NOT_READY;
}
CUresult cuEventElapsedTime(float* ms, CUevent a, CUevent b) {
    State& s = state();
    std::lock_guard<std::mutex> g(s.lock);
    Event *x = (Event*)a, *y = (Event*)b;
    if (!x->recorded || !y->recorded) return fail(INVALID_HANDLE, "cuEventElapsedTime: an event never recorded");
    if (!x->done || !y->done) return fail(NOT_READY, "cuEventElapsedTime: an event the stream has not passed");
    if (s.copy_gbps() > 0)
        *ms = (float)((y->virtual_ns - x->virtual_ns) / 1e6);
    else
        *ms = std::chrono::duration<float, std::milli>(y->at - x->at).count();
    return OK;
}
CUresult cuEventElapsedTime_v2(float* ms, CUevent a, CUevent b) { return cuEventElapsedTime(ms, a, b); }

CUresult cuModuleLoadData(CUmodule* m, const void* image) {
    // The fake NVRTC's "PTX" is a marker line followed by the source it was given.
    const char* text = (const char*)image;
    if (!text || std::strncmp(text, "// fake-nvrtc ", 14) != 0)
        return fail(INVALID_IMAGE, "cuModuleLoadData: not an image from the fake libnvrtc");
    *m = new std::string(text);
    return OK;
}
CUresult cuModuleUnload(CUmodule m) {
    delete (std::string*)m;
    return OK;
}
CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
    if (!m) return INVALID_HANDLE;
    for (const Entry& e : TABLE) {
        if (std::strcmp(e.name, name) == 0) {
            *f = new Function{&e};
            return OK;
        }
    }
    return fail(NOT_FOUND, std::string("cuModuleGetFunction: no kernel ") + name);
}
CUresult cuFuncGetAttribute(int* v, int, CUfunction) {
    *v = 0;
    return OK;
}

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shmem, CUstream, void** params, void** extra) {
    if (!f) return INVALID_HANDLE;
    const Entry* e = ((Function*)f)->entry;
    std::string call = std::string("cuLaunchKernel(") + e->name + ")";
    if (gx == 0 || gy != 1 || gz != 1 || bx == 0 || bx > 1024 || by != 1 || bz != 1 || shmem != 0 || extra)
        return fail(INVALID_CONFIGURATION, call + ": a grid or block the kernels are not written for");
    if (!params) return fail(INVALID_VALUE, call + ": no arguments");
    State& s = state();
    std::lock_guard<std::mutex> g(s.lock);
    auto ptr = [&](int i) { return *(CUdeviceptr*)params[i]; };
    auto num = [&](int i) { return *(u64*)params[i]; };
    const size_t size = (size_t)e->size;
    std::string name = e->name;
    // Argument layouts, as kernels/reduce.cu declares them; every buffer range checked at launch.
    if (name.rfind("reduce_", 0) == 0) {
        CUdeviceptr d = ptr(0), a = ptr(1), b = ptr(2);
        u64 n = num(3);
        const std::pair<CUdeviceptr, const char*> bufs[] = {{d, "dst"}, {a, "a"}, {b, "b"}};
        for (const auto& [p, which] : bufs)
            if (CUresult r = check_device(s, p, n * size, call.c_str(), which)) return r;
        s.queue.push_back([=] {
            launch(gx, [&] { ((ReduceFn)e->fn)((void*)d, (const void*)a, (const void*)b, n); });
        });
    } else if (name.rfind("finalize_", 0) == 0) {
        CUdeviceptr buf = ptr(0);
        u64 n = num(1), nranks = num(2);
        if (nranks == 0) return fail(INVALID_VALUE, call + ": nranks 0");
        if (CUresult r = check_device(s, buf, n * size, call.c_str(), "buf")) return r;
        s.queue.push_back([=] { launch(gx, [&] { ((FinalizeFn)e->fn)((void*)buf, n, nranks); }); });
    } else {
        CUdeviceptr got = ptr(0), want = ptr(3), wrong = ptr(4);
        u64 n = num(1), first = num(2);
        if (CUresult r = check_device(s, got, n * size, call.c_str(), "got")) return r;
        if (CUresult r = check_device(s, want, 8 * size, call.c_str(), "want")) return r;
        if (CUresult r = check_device(s, wrong, 8, call.c_str(), "wrong")) return r;
        s.queue.push_back([=] {
            launch(gx, [&] { ((VerifyFn)e->fn)((const void*)got, n, first, (const void*)want, (u64*)wrong); });
        });
    }
    return OK;
}

}  // extern "C"
