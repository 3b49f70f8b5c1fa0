// A fake libnccl.so.2 for tests (see cuda.cpp beside it): one rank, where every collective is a copy
// (a reduction over one rank is its input) and a send to itself meets its receive inside a group. Copies go
// through the fake libcuda's queue, which checks both device ranges, so src/nccl/ (the binding, the plan of
// offsets, the engine) runs against buffers whose bounds are enforced.
//
// With FAKE_NCCL_DIR=DIR (a folder every rank can write), a communicator may have several ranks, each its own
// process: the collectives (all_reduce, reduce_scatter, all_gather, broadcast, reduce) still copy this rank's
// input only (run them with the data check off), but they meet as NCCL's do: each call is the rank's next in
// sequence, the call marks it launched (DIR/RANK holds the count), and the stream then waits, when the host
// synchronises it, until every rank has launched it. FAKE_NCCL_HANG_RANK=R (with FAKE_NCCL_HANG_AT=N, the
// Nth collective, 1 by default) makes rank R's call hang inside itself, never launching, as a rank whose
// host thread is stuck in the library does: the other ranks wait on their streams for it without end.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <string>
#include <unistd.h>
#include <vector>

typedef int ncclResult_t;
enum { OK = 0, SYSTEM_ERROR = 2, INTERNAL_ERROR = 3, INVALID_ARGUMENT = 4, INVALID_USAGE = 5 };
typedef struct {
    char internal[128];
} ncclUniqueId;
typedef unsigned long long CUdeviceptr;
typedef int (*CopyFn)(CUdeviceptr, CUdeviceptr, size_t, const char*);
typedef int (*EnqueueFn)(void (*)(void*), void*);

namespace {

struct Comm {
    int nranks;
    int rank;
    std::string dir;     // FAKE_NCCL_DIR, where ranks meet (several ranks only)
    unsigned long seq;   // collectives this rank has launched
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

EnqueueFn enqueue_fn() {
    static EnqueueFn f = [] {
        void* lib = dlopen("libcuda.so.1", RTLD_NOW);
        return lib ? (EnqueueFn)dlsym(lib, "fake_cuda_enqueue") : nullptr;
    }();
    return f;
}

// The count rank `r` has written to DIR/r (0 before its first).
unsigned long launched(const std::string& dir, int r) {
    unsigned long n = 0;
    if (FILE* f = std::fopen((dir + "/" + std::to_string(r)).c_str(), "r")) {
        if (std::fscanf(f, "%lu", &n) != 1) n = 0;
        std::fclose(f);
    }
    return n;
}

struct Meeting {
    std::string dir;
    int nranks;
    unsigned long seq;
};

// Runs on the stream: waits until every rank has launched collective `seq`.
void wait_for_peers(void* arg) {
    Meeting* m = (Meeting*)arg;
    for (int r = 0; r < m->nranks; r++) {
        while (launched(m->dir, r) < m->seq) usleep(1000);
    }
    delete m;
}

// A collective of several ranks: hangs here if this is the rank and call FAKE_NCCL_HANG_* name, else marks it
// launched (written whole, then renamed in place) and queues the wait for the other ranks on the stream.
ncclResult_t meet(void* comm) {
    Comm* c = (Comm*)comm;
    if (c->nranks == 1) return OK;
    c->seq++;
    const char* hang = std::getenv("FAKE_NCCL_HANG_RANK");
    const char* at = std::getenv("FAKE_NCCL_HANG_AT");
    if (hang && std::atoi(hang) == c->rank && c->seq >= (unsigned long)(at ? std::atol(at) : 1)) {
        for (;;) pause();
    }
    std::string path = c->dir + "/" + std::to_string(c->rank);
    std::string tmp = path + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (!f) return fail(SYSTEM_ERROR, "FAKE_NCCL_DIR is not writable");
    std::fprintf(f, "%lu\n", c->seq);
    std::fclose(f);
    if (std::rename(tmp.c_str(), path.c_str()) != 0) return fail(SYSTEM_ERROR, "FAKE_NCCL_DIR: rename failed");
    EnqueueFn q = enqueue_fn();
    if (!q) return fail(SYSTEM_ERROR, "the fake libcuda.so.1 (fake_cuda_enqueue) is not loadable");
    q(wait_for_peers, new Meeting{c->dir, c->nranks, c->seq});
    return OK;
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
// FAKE_CALL_LOG=FILE (read once): each communicator made, collective, send, receive and group call appends
// a line naming it to FILE, between the fake libcuda's lines, so tests can count set-ups and what the host
// queues and waits for between two collectives.
static void log_call(const char* name) {
    static const char* path = std::getenv("FAKE_CALL_LOG");
    if (!path) return;
    if (FILE* f = std::fopen(path, "a")) {
        std::fprintf(f, "%s\n", name);
        std::fclose(f);
    }
}
ncclResult_t ncclCommInitRank(void** comm, int nranks, ncclUniqueId id, int rank) {
    log_call("ncclCommInitRank");
    if (std::strcmp(id.internal, "fake-nccl") != 0) return fail(INVALID_ARGUMENT, "a unique id not from ncclGetUniqueId");
    const char* dir = std::getenv("FAKE_NCCL_DIR");
    if ((nranks != 1 && !dir) || rank < 0 || rank >= nranks)
        return fail(INVALID_USAGE, "one rank only (several with FAKE_NCCL_DIR set)");
    *comm = new Comm{nranks, rank, dir ? dir : "", 0};
    return OK;
}
ncclResult_t ncclCommDestroy(void* comm) {
    delete (Comm*)comm;
    return OK;
}
ncclResult_t ncclAllReduce(const void* s, void* r, size_t count, int dt, int op, void* comm, void*) {
    log_call("ncclAllReduce");
    if (ncclResult_t e = checked(comm, dt, op)) return e;
    if (ncclResult_t e = meet(comm)) return e;
    return copy(s, r, count * size_of(dt), "ncclAllReduce");
}
ncclResult_t ncclReduceScatter(const void* s, void* r, size_t count, int dt, int op, void* comm, void*) {
    log_call("ncclReduceScatter");
    if (ncclResult_t e = checked(comm, dt, op)) return e;
    if (ncclResult_t e = meet(comm)) return e;
    return copy(s, r, count * size_of(dt), "ncclReduceScatter");
}
ncclResult_t ncclAllGather(const void* s, void* r, size_t count, int dt, void* comm, void*) {
    log_call("ncclAllGather");
    if (ncclResult_t e = checked(comm, dt, 0)) return e;
    if (ncclResult_t e = meet(comm)) return e;
    return copy(s, r, count * size_of(dt), "ncclAllGather");
}
ncclResult_t ncclBroadcast(const void* s, void* r, size_t count, int dt, int root, void* comm, void*) {
    log_call("ncclBroadcast");
    if (ncclResult_t e = checked(comm, dt, 0)) return e;
    if (root < 0 || root >= ((Comm*)comm)->nranks) return fail(INVALID_ARGUMENT, "ncclBroadcast: root outside the ranks");
    if (ncclResult_t e = meet(comm)) return e;
    return copy(s, r, count * size_of(dt), "ncclBroadcast");
}
ncclResult_t ncclReduce(const void* s, void* r, size_t count, int dt, int op, int root, void* comm, void*) {
    log_call("ncclReduce");
    if (ncclResult_t e = checked(comm, dt, op)) return e;
    if (root < 0 || root >= ((Comm*)comm)->nranks) return fail(INVALID_ARGUMENT, "ncclReduce: root outside the ranks");
    if (ncclResult_t e = meet(comm)) return e;
    return copy(s, r, count * size_of(dt), "ncclReduce");
}
ncclResult_t ncclGroupStart() {
    log_call("ncclGroupStart");
    group().depth++;
    return OK;
}
ncclResult_t ncclSend(const void* buf, size_t count, int dt, int peer, void* comm, void*) {
    log_call("ncclSend");
    if (ncclResult_t e = checked(comm, dt, 0)) return e;
    if (group().depth == 0) return fail(INVALID_USAGE, "ncclSend to itself outside a group would never complete");
    group().sends.push_back({buf, count * size_of(dt), peer});
    return OK;
}
ncclResult_t ncclRecv(void* buf, size_t count, int dt, int peer, void* comm, void*) {
    log_call("ncclRecv");
    if (ncclResult_t e = checked(comm, dt, 0)) return e;
    if (group().depth == 0) return fail(INVALID_USAGE, "ncclRecv from itself outside a group would never complete");
    group().recvs.push_back({buf, count * size_of(dt), peer});
    return OK;
}
ncclResult_t ncclGroupEnd() {
    log_call("ncclGroupEnd");
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
