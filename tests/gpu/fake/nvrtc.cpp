// A fake libnvrtc for tests (see cuda.cpp beside it): "compiles" by checking the options collbench must
// pass (an architecture, no FMA contraction) and returns a marker line plus the source as the "PTX", which
// only the fake libcuda loads (its kernels are kernels/reduce.cu compiled as host C++).
#include <cstdio>
#include <cstring>
#include <string>

typedef int nvrtcResult;
enum { OK = 0, INVALID_INPUT = 3, INVALID_PROGRAM = 4, COMPILATION = 6 };

namespace {
struct Program {
    std::string source, name, ptx, log;
};
}  // namespace

extern "C" {

const char* nvrtcGetErrorString(nvrtcResult r) {
    switch (r) {
    case OK: return "NVRTC_SUCCESS";
    case INVALID_INPUT: return "NVRTC_ERROR_INVALID_INPUT";
    case INVALID_PROGRAM: return "NVRTC_ERROR_INVALID_PROGRAM";
    case COMPILATION: return "NVRTC_ERROR_COMPILATION";
    default: return "NVRTC_ERROR_UNKNOWN";
    }
}
nvrtcResult nvrtcVersion(int* major, int* minor) {
    *major = 13;
    *minor = 0;
    return OK;
}
nvrtcResult nvrtcCreateProgram(void** prog, const char* src, const char* name, int headers, const char* const*,
                               const char* const*) {
    if (!prog || !src || headers != 0) return INVALID_INPUT;  // the kernels need no headers
    *prog = new Program{src, name ? name : "", "", ""};
    return OK;
}
nvrtcResult nvrtcDestroyProgram(void** prog) {
    if (!prog || !*prog) return INVALID_PROGRAM;
    delete (Program*)*prog;
    *prog = nullptr;
    return OK;
}
nvrtcResult nvrtcCompileProgram(void* prog, int n, const char* const* options) {
    Program* p = (Program*)prog;
    if (!p) return INVALID_PROGRAM;
    std::string arch;
    bool no_fma = false;
    for (int i = 0; i < n; i++) {
        if (std::strncmp(options[i], "--gpu-architecture=compute_", 27) == 0) arch = options[i] + 19;
        if (std::strcmp(options[i], "--fmad=false") == 0) no_fma = true;
    }
    if (arch.empty() || !no_fma) {
        p->log = "fake-nvrtc: expected --gpu-architecture=compute_XY and --fmad=false among the options";
        return COMPILATION;
    }
    p->ptx = "// fake-nvrtc " + arch + " " + p->name + "\n" + p->source;
    return OK;
}
nvrtcResult nvrtcGetPTXSize(void* prog, size_t* size) {
    *size = ((Program*)prog)->ptx.size() + 1;
    return OK;
}
nvrtcResult nvrtcGetPTX(void* prog, char* out) {
    const std::string& s = ((Program*)prog)->ptx;
    std::memcpy(out, s.c_str(), s.size() + 1);
    return OK;
}
nvrtcResult nvrtcGetProgramLogSize(void* prog, size_t* size) {
    *size = ((Program*)prog)->log.size() + 1;
    return OK;
}
nvrtcResult nvrtcGetProgramLog(void* prog, char* out) {
    const std::string& s = ((Program*)prog)->log;
    std::memcpy(out, s.c_str(), s.size() + 1);
    return OK;
}

}  // extern "C"
