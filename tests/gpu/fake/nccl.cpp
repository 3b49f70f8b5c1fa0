// A fake libnccl.so.2 for tests (see cuda.cpp beside it): one rank only, where every collective is a copy
// (a reduction over one rank is its input) and a send to itself meets its receive inside a group. Copies go
// through the fake libcuda's queue, which checks both device ranges, so src/nccl/ (the binding, the plan of
// offsets, the engine) runs against buffers whose bounds are enforced.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <vector>

typedef int ncclResult_t;
enum { OK = 0, SYSTEM_ERROR = 2, INTERNAL_ERROR = 3, INVALID_ARGUMENT = 4, INVALID_USAGE = 5 };
typedef struct {
    char internal[128];
} ncclUniqueId;
typedef unsigned long long CUdeviceptr;
typedef int (*CopyFn)(CUdeviceptr, CUdeviceptr, size_t, const char*);

namespace {

struct Comm {
    int nranks;
};
struct P2p {
    const void* buf;
    size_t bytes;
    int peer;
};
struct Group {
    int depth = 0;
    std::vector<P2p> sends, recvs;
};
Group& group() {
    static Group* g = new Group();
    return *g;
}

ncclResult_t fail(ncclResult_t r, const char* what) {
    std::fprintf(stderr, "fake-nccl: %s\n", what);
    return r;
}

// The fake libcuda's checked copy (the same library the process loaded: dlopen returns it again).
CopyFn copy_fn() {
    static CopyFn f = [] {
        void* lib = dlopen("libcuda.so.1", RTLD_NOW);
        return lib ? (CopyFn)dlsym(lib, "fake_cuda_copy") : nullptr;
    }();
    return f;
}

ncclResult_t copy(const void* src, void* dst, size_t bytes, const char* call) {
    CopyFn f = copy_fn();
    if (!f) return fail(SYSTEM_ERROR, "the fake libcuda.so.1 (fake_cuda_copy) is not loadable");
    if (bytes == 0) return OK;
    return f((CUdeviceptr)dst, (CUdeviceptr)src, bytes, call) == 0 ? OK : INVALID_ARGUMENT;
}

// Element sizes of ncclDataType_t 0..9: int8 uint8 int32 uint32 int64 uint64 half float double bfloat16.
size_t size_of(int dtype) {
    static const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
    return dtype >= 0 && dtype < 10 ? sizes[dtype] : 0;
}

ncclResult_t checked(const void* comm, int dtype, int op) {
    if (!comm) return fail(INVALID_ARGUMENT, "a null communicator");
    if (size_of(dtype) == 0) return fail(INVALID_ARGUMENT, "an unknown data type");
    if (op < 0 || op > 4) return fail(INVALID_ARGUMENT, "an unknown reduction (sum prod max min avg are 0-4)");
    return OK;
}

}  // namespace

extern "C" {

const char* ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case OK: return "no error";
    case SYSTEM_ERROR: return "unhandled system error";
    case INTERNAL_ERROR: return "internal error";
    case INVALID_ARGUMENT: return "invalid argument";
    case INVALID_USAGE: return "invalid usage";
    default: return "unknown result code";
    }
}
ncclResult_t ncclGetVersion(int* v) {
    *v = 22703;  // 2.27.3
    return OK;
}
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
    std::memset(id, 0, sizeof *id);
    std::snprintf(id->internal, sizeof id->internal, "fake-nccl");
    return OK;
}
// FAKE_CALL_LOG=FILE: each communicator made appends a line to FILE, so tests can count set-ups per run.
static void log_call(const char* name) {
    if (const char* path = std::getenv("FAKE_CALL_LOG")) {
        if (FILE* f = std::fopen(path, "a")) {
            std::fprintf(f, "%s\n", name);
            std::fclose(f);
        }
    }
}
ncclResult_t ncclCommInitRank(void** comm, int nranks, ncclUniqueId id, int rank) {
    log_call("ncclCommInitRank");
    if (std::strcmp(id.internal, "fake-nccl") != 0) return fail(INVALID_ARGUMENT, "a unique id not from ncclGetUniqueId");
    if (nranks != 1 || rank != 0) return fail(INVALID_USAGE, "one rank only");
    *comm = new Comm{nranks};
    return OK;
}
ncclResult_t ncclCommDestroy(void* comm) {
    delete (Comm*)comm;
    return OK;
}
ncclResult_t ncclAllReduce(const void* s, void* r, size_t count, int dt, int op, void* comm, void*) {
    if (ncclResult_t e = checked(comm, dt, op)) return e;
    return copy(s, r, count * size_of(dt), "ncclAllReduce");
}
ncclResult_t ncclReduceScatter(const void* s, void* r, size_t count, int dt, int op, void* comm, void*) {
    if (ncclResult_t e = checked(comm, dt, op)) return e;
    return copy(s, r, count * size_of(dt), "ncclReduceScatter");
}
ncclResult_t ncclAllGather(const void* s, void* r, size_t count, int dt, void* comm, void*) {
    if (ncclResult_t e = checked(comm, dt, 0)) return e;
    return copy(s, r, count * size_of(dt), "ncclAllGather");
}
ncclResult_t ncclBroadcast(const void* s, void* r, size_t count, int dt, int root, void* comm, void*) {
    if (ncclResult_t e = checked(comm, dt, 0)) return e;
    if (root != 0) return fail(INVALID_ARGUMENT, "ncclBroadcast: root outside the one rank");
    return copy(s, r, count * size_of(dt), "ncclBroadcast");
}
ncclResult_t ncclReduce(const void* s, void* r, size_t count, int dt, int op, int root, void* comm, void*) {
    if (ncclResult_t e = checked(comm, dt, op)) return e;
    if (root != 0) return fail(INVALID_ARGUMENT, "ncclReduce: root outside the one rank");
    return copy(s, r, count * size_of(dt), "ncclReduce");
}
ncclResult_t ncclGroupStart() {
    group().depth++;
    return OK;
}
ncclResult_t ncclSend(const void* buf, size_t count, int dt, int peer, void* comm, void*) {
    if (ncclResult_t e = checked(comm, dt, 0)) return e;
    if (group().depth == 0) return fail(INVALID_USAGE, "ncclSend to itself outside a group would never complete");
    group().sends.push_back({buf, count * size_of(dt), peer});
    return OK;
}
ncclResult_t ncclRecv(void* buf, size_t count, int dt, int peer, void* comm, void*) {
    if (ncclResult_t e = checked(comm, dt, 0)) return e;
    if (group().depth == 0) return fail(INVALID_USAGE, "ncclRecv from itself outside a group would never complete");
    group().recvs.push_back({buf, count * size_of(dt), peer});
    return OK;
}
ncclResult_t ncclGroupEnd() {
    Group& g = group();
    if (g.depth == 0) return fail(INVALID_USAGE, "ncclGroupEnd without ncclGroupStart");
    if (--g.depth > 0) return OK;
    ncclResult_t r = OK;
    if (g.sends.size() != g.recvs.size()) r = fail(INVALID_USAGE, "a group's sends and receives do not pair up");
    for (size_t i = 0; r == OK && i < g.sends.size(); i++) {
        if (g.sends[i].peer != 0 || g.recvs[i].peer != 0 || g.sends[i].bytes != g.recvs[i].bytes)
            r = fail(INVALID_USAGE, "a send and its receive differ in peer or size");
        else
            r = copy(g.sends[i].buf, (void*)g.recvs[i].buf, g.sends[i].bytes, "ncclSend/ncclRecv");
    }
    g.sends.clear();
    g.recvs.clear();
    return r;
}

}  // extern "C"
