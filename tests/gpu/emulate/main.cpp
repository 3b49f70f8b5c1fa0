// Host harness over kernels/reduce.cu (see shim.h). Usage, files of raw little-endian elements:
//   emulate reduce   NAME GRID A B OUT           OUT = NAME(A, B)
//   emulate finalize NAME GRID BUF NRANKS OUT    OUT = NAME(BUF, NRANKS)
//   emulate verify   NAME GRID GOT FIRST WANT    prints the count
#include "shim.h"
#include "table.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

static std::vector<unsigned char> load(const char* path) {
    FILE* f = std::fopen(path, "rb");
    if (!f) {
        std::fprintf(stderr, "emulate: cannot open %s\n", path);
        std::exit(2);
    }
    std::vector<unsigned char> v;
    unsigned char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) v.insert(v.end(), buf, buf + n);
    std::fclose(f);
    return v;
}

static void save(const char* path, const std::vector<unsigned char>& v) {
    FILE* f = std::fopen(path, "wb");
    if (!f || std::fwrite(v.data(), 1, v.size(), f) != v.size()) {
        std::fprintf(stderr, "emulate: cannot write %s\n", path);
        std::exit(2);
    }
    std::fclose(f);
}

// Buffers 16-byte aligned, as device allocations are, so the vector loops run.
struct Aligned {
    std::vector<uint4> v;
    explicit Aligned(const std::vector<unsigned char>& bytes) : v(bytes.size() / 16 + 1) {
        std::memcpy(v.data(), bytes.data(), bytes.size());
    }
    void* ptr() { return v.data(); }
};

int main(int argc, char** argv) {
    if (argc < 4) return 2;
    std::string kind = argv[1], name = argv[2];
    unsigned grid = (unsigned)std::strtoul(argv[3], nullptr, 10);
    const Entry* e = nullptr;
    for (const Entry& t : TABLE)
        if (name == t.name) e = &t;
    if (!e) {
        std::fprintf(stderr, "emulate: no kernel %s\n", name.c_str());
        return 2;
    }
    if (kind == "reduce" && argc == 7) {
        auto a = load(argv[4]), b = load(argv[5]);
        Aligned x(a), y(b), d(std::vector<unsigned char>(a.size(), 0xee));
        u64 n = a.size() / e->size;
        launch(grid, [&] { ((ReduceFn)e->fn)(d.ptr(), x.ptr(), y.ptr(), n); });
        std::vector<unsigned char> out(a.size());
        std::memcpy(out.data(), d.ptr(), out.size());
        save(argv[6], out);
    } else if (kind == "finalize" && argc == 7) {
        auto a = load(argv[4]);
        Aligned d(a);
        u64 n = a.size() / e->size, nranks = std::strtoull(argv[5], nullptr, 10);
        launch(grid, [&] { ((FinalizeFn)e->fn)(d.ptr(), n, nranks); });
        std::vector<unsigned char> out(a.size());
        std::memcpy(out.data(), d.ptr(), out.size());
        save(argv[6], out);
    } else if (kind == "verify" && argc == 7) {
        auto g = load(argv[4]), w = load(argv[6]);
        Aligned x(g), t(w);
        u64 n = g.size() / e->size, first = std::strtoull(argv[5], nullptr, 10), wrong = 0;
        launch(grid, [&] { ((VerifyFn)e->fn)(x.ptr(), n, first, t.ptr(), &wrong); });
        std::printf("%llu\n", wrong);
    } else {
        std::fprintf(stderr, "emulate: bad arguments\n");
        return 2;
    }
    return 0;
}
