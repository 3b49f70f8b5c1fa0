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
//
// Point-to-point between ranks (FAKE_NCCL_DIR): ncclSend and ncclRecv to another rank carry the real bytes. A
// group's transfers run on the stream when the host waits for it, together, as NCCL's do: each send writes
// the device buffer's bytes to DIR/p2p-FROM-TO-SEQ (the SEQth send from FROM to TO, written whole, then
// renamed in place); each receive waits for its file, checks that the sizes match (a mismatch is a fault every
// later wait returns, as NCCL's truncation is an asynchronous error), copies the bytes into its buffer and
// removes the file. A send or receive outside a group is a group of its own. On the fake libcuda's virtual
// clock (FAKE_CUDA_COPY_GBPS=R) a transfer takes FAKE_NCCL_P2P_LATENCY_NS (2000 by default) plus its bytes
// at R GB/s divided by the slower end's FAKE_NCCL_P2P_SLOW factor (a rank whose GPU-to-GPU path is slow:
// a link trained down, a NIC off the GPU's PCIe switch; `F` slows the process it is set in, `F@I[,J]` the
// ranks on devices I and J; each rank's factor is in DIR/p2p-slow-RANK), and a group takes as long as its
// slowest transfer.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <map>
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
typedef int (*TimedFn)(double (*)(void*), void*);
typedef int (*CheckFn)(CUdeviceptr, size_t, const char*);
typedef double (*GbpsFn)();

namespace {

struct Comm {
    int nranks;
    int rank;
    std::string dir;     // FAKE_NCCL_DIR, where ranks meet (several ranks only)
    unsigned long seq;   // collectives this rank has launched
    std::map<int, unsigned long> sent, received;  // point-to-point transfers per peer, in order
    double slow;  // FAKE_NCCL_P2P_SLOW as it applies to this rank
};
struct P2p {
    const void* buf;
    size_t bytes;
    int peer;
    Comm* comm;
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

template <typename F>
F libcuda_fn(const char* name) {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW);
    return lib ? (F)dlsym(lib, name) : nullptr;
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

// A point-to-point transfer with another rank, as the stream runs it.
struct Transfer {
    bool send;
    void* buf;
    size_t bytes;
    int me, peer;
    unsigned long seq;
    std::string dir;
    double slow;  // this rank's FAKE_NCCL_P2P_SLOW
};

std::string p2p_file(const std::string& dir, int from, int to, unsigned long seq) {
    return dir + "/p2p-" + std::to_string(from) + "-" + std::to_string(to) + "-" + std::to_string(seq);
}

// FAKE_NCCL_P2P_SLOW of this rank, whose context is current: `F` (a factor above 1) slows this process's
// transfers; `F@I[,J...]` only those of the ranks on devices I, J (local ranks, each on its own device).
double own_slowness() {
    const char* s = std::getenv("FAKE_NCCL_P2P_SLOW");
    if (!s) return 1.0;
    char* end = nullptr;
    double f = std::strtod(s, &end);
    if (!(f > 1.0)) return 1.0;
    if (*end != '@') return f;
    typedef int (*DeviceFn)(int*);
    static DeviceFn current = libcuda_fn<DeviceFn>("cuCtxGetDevice");
    int device = -1;
    if (!current || current(&device) != 0) return 1.0;
    for (const char* p = end + 1; *p;) {
        long i = std::strtol(p, &end, 10);
        if (end == p) break;
        if (i == device) return f;
        p = *end == ',' ? end + 1 : end;
    }
    return 1.0;
}

// The factor rank `r` wrote at its ncclCommInitRank, waited for (a peer that has not joined yet will).
double slowness_of(const std::string& dir, int r) {
    std::string path = dir + "/p2p-slow-" + std::to_string(r);
    for (;;) {
        if (FILE* f = std::fopen(path.c_str(), "r")) {
            double v = 1.0;
            int got = std::fscanf(f, "%lf", &v);
            std::fclose(f);
            if (got == 1) return v;
        }
        usleep(200);
    }
}

// Writes `head` then `body` to `path` whole: to a name of its own first, then renamed in place.
bool write_whole(const std::string& path, const void* head, size_t head_len, const void* body, size_t len) {
    std::string tmp = path + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) return false;
    bool ok = std::fwrite(head, 1, head_len, f) == head_len && (len == 0 || std::fwrite(body, 1, len, f) == len);
    ok = std::fclose(f) == 0 && ok;
    return ok && std::rename(tmp.c_str(), path.c_str()) == 0;
}

// One transfer on the stream: the nanoseconds it takes on the virtual clock, or -1 for a fault.
double run_transfer(const Transfer& t) {
    static const double latency_ns = [] {
        const char* s = std::getenv("FAKE_NCCL_P2P_LATENCY_NS");
        return s ? std::atof(s) : 2000.0;
    }();
    static GbpsFn gbps_fn = libcuda_fn<GbpsFn>("fake_cuda_copy_gbps");
    double slow = std::max(t.slow, slowness_of(t.dir, t.peer));
    double gbps = gbps_fn ? gbps_fn() : 0.0;
    double ns = latency_ns + (gbps > 0 ? (double)t.bytes / (gbps / slow) : 0.0);
    if (t.send) {
        unsigned long long len = t.bytes;
        if (!write_whole(p2p_file(t.dir, t.me, t.peer, t.seq), &len, sizeof len, t.buf, t.bytes)) {
            std::fprintf(stderr, "fake-nccl: ncclSend to rank %d: FAKE_NCCL_DIR is not writable\n", t.peer);
            return -1;
        }
        return ns;
    }
    std::string path = p2p_file(t.dir, t.peer, t.me, t.seq);
    FILE* f = nullptr;
    while (!(f = std::fopen(path.c_str(), "rb"))) usleep(100);
    unsigned long long len = 0;
    bool ok = std::fread(&len, sizeof len, 1, f) == 1;
    if (ok && len != t.bytes) {
        std::fprintf(stderr, "fake-nccl: ncclRecv from rank %d: %llu bytes sent, %zu expected (message truncated)\n",
                     t.peer, len, t.bytes);
        ok = false;
    } else if (ok && t.bytes > 0) {
        ok = std::fread(t.buf, 1, t.bytes, f) == t.bytes;
    }
    std::fclose(f);
    std::remove(path.c_str());
    return ok ? ns : -1;
}

// A group's transfers with other ranks: the sends first (they never wait), then the receives; the group
// takes as long as its slowest transfer.
double run_group(void* arg) {
    std::vector<Transfer>* ts = (std::vector<Transfer>*)arg;
    double longest = 0;
    for (const Transfer& t : *ts) {
        double ns = run_transfer(t);
        if (ns < 0) {
            longest = -1;
            break;
        }
        longest = std::max(longest, ns);
    }
    delete ts;
    return longest;
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
    double slow = own_slowness();
    if (dir && nranks > 1) {
        char text[64];
        int len = std::snprintf(text, sizeof text, "%g\n", slow);
        if (!write_whole(std::string(dir) + "/p2p-slow-" + std::to_string(rank), text, (size_t)len, nullptr, 0))
            return fail(SYSTEM_ERROR, "FAKE_NCCL_DIR is not writable");
    }
    *comm = new Comm{nranks, rank, dir ? dir : "", 0, {}, {}, slow};
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
ncclResult_t ncclGroupEnd();

// A send or receive: into the open group, or (to another rank) a group of its own.
ncclResult_t p2p(bool send, const void* buf, size_t count, int dt, int peer, void* comm) {
    const char* call = send ? "ncclSend" : "ncclRecv";
    log_call(call);
    if (ncclResult_t e = checked(comm, dt, 0)) return e;
    Comm* c = (Comm*)comm;
    if (peer < 0 || peer >= c->nranks)
        return fail(INVALID_ARGUMENT, send ? "ncclSend: peer outside the ranks" : "ncclRecv: peer outside the ranks");
    bool alone = group().depth == 0;
    if (alone && peer == c->rank)
        return fail(INVALID_USAGE, send ? "ncclSend to itself outside a group would never complete"
                                        : "ncclRecv from itself outside a group would never complete");
    if (alone) ncclGroupStart();
    (send ? group().sends : group().recvs).push_back({buf, count * size_of(dt), peer, c});
    return alone ? ncclGroupEnd() : OK;
}
ncclResult_t ncclSend(const void* buf, size_t count, int dt, int peer, void* comm, void*) {
    return p2p(true, buf, count, dt, peer, comm);
}
ncclResult_t ncclRecv(void* buf, size_t count, int dt, int peer, void* comm, void*) {
    return p2p(false, buf, count, dt, peer, comm);
}
ncclResult_t ncclGroupEnd() {
    log_call("ncclGroupEnd");
    Group& g = group();
    if (g.depth == 0) return fail(INVALID_USAGE, "ncclGroupEnd without ncclGroupStart");
    if (--g.depth > 0) return OK;
    // Transfers with itself pair up here, in order; those with other ranks meet theirs on the stream.
    std::vector<P2p> self_sends, self_recvs;
    std::vector<Transfer>* others = new std::vector<Transfer>();
    static CheckFn check = libcuda_fn<CheckFn>("fake_cuda_check");
    ncclResult_t r = check ? OK : fail(SYSTEM_ERROR, "the fake libcuda.so.1 (fake_cuda_check) is not loadable");
    for (int send = 1; r == OK && send >= 0; send--) {
        for (const P2p& p : send ? g.sends : g.recvs) {
            if (p.peer == p.comm->rank) {
                (send ? self_sends : self_recvs).push_back(p);
                continue;
            }
            if (check((CUdeviceptr)p.buf, p.bytes, send ? "ncclSend" : "ncclRecv") != 0) {
                r = INVALID_ARGUMENT;
                break;
            }
            unsigned long seq = ++(send ? p.comm->sent : p.comm->received)[p.peer];
            others->push_back({send == 1, (void*)p.buf, p.bytes, p.comm->rank, p.peer, seq, p.comm->dir, p.comm->slow});
        }
    }
    if (r == OK && self_sends.size() != self_recvs.size())
        r = fail(INVALID_USAGE, "a group's sends and receives to itself do not pair up");
    for (size_t i = 0; r == OK && i < self_sends.size(); i++) {
        if (self_sends[i].bytes != self_recvs[i].bytes)
            r = fail(INVALID_USAGE, "a send to itself and its receive differ in size");
        else
            r = copy(self_sends[i].buf, (void*)self_recvs[i].buf, self_sends[i].bytes, "ncclSend/ncclRecv");
    }
    static TimedFn timed = libcuda_fn<TimedFn>("fake_cuda_enqueue_timed");
    if (r == OK && !others->empty() && !timed)
        r = fail(SYSTEM_ERROR, "the fake libcuda.so.1 (fake_cuda_enqueue_timed) is not loadable");
    if (r == OK && !others->empty()) {
        timed(run_group, others);
    } else {
        delete others;
    }
    g.sends.clear();
    g.recvs.clear();
    return r;
}

}  // extern "C"
