// A fake libnvidia-ml.so.1 for tests (see cuda.cpp beside it): the GPUs of the fake libcuda (same count,
// FAKE_CUDA_DEVICES, and the same PCI bus ids, 0000:1N:00.0), each on a PCIe gen5 x16 link, compute
// capability 9.0, with FAKE_NVML_NVLINKS active NVLinks 4.0 (NVML's version value 6) from each even GPU to
// the odd one after it, and the pairs' common ancestor at NVML's NODE level.
#include <cstdio>
#include <cstdlib>
#include <cstring>

typedef int nvmlReturn_t;
enum { OK = 0, INVALID_ARGUMENT = 2, NOT_SUPPORTED = 3 };
struct PciInfo {
    char bus_id_legacy[16];
    unsigned domain, bus, device, pci_device_id, pci_sub_system_id;
    char bus_id[32];
};

namespace {
int env(const char* name, int fallback) {
    const char* s = std::getenv(name);
    return s ? std::atoi(s) : fallback;
}
int devices() { return env("FAKE_CUDA_DEVICES", 1); }
int nvlinks() { return env("FAKE_NVML_NVLINKS", 0); }
long index(void* d) { return (long)(size_t)d - 1; }  // handles are index + 1, never null
bool valid(void* d) { return d && index(d) >= 0 && index(d) < devices(); }
// The GPU an NVLink of `i` reaches: the other of its pair, if there is one.
int peer(int i) { return (i ^ 1) < devices() ? (i ^ 1) : -1; }
void fill(PciInfo* p, int i) {
    std::memset(p, 0, sizeof *p);
    p->bus = 0x10 + (unsigned)i;
    p->pci_device_id = 0x233510de;
    std::snprintf(p->bus_id, sizeof p->bus_id, "00000000:%02X:00.0", p->bus);
    std::snprintf(p->bus_id_legacy, sizeof p->bus_id_legacy, "0000:%02X:00.0", p->bus);
}
}  // namespace

extern "C" {

nvmlReturn_t nvmlInit_v2() { return OK; }
nvmlReturn_t nvmlShutdown() { return OK; }
nvmlReturn_t nvmlSystemGetNVMLVersion(char* v, unsigned len) {
    std::snprintf(v, len, "13.580.00-fake");
    return OK;
}
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* n) {
    *n = (unsigned)devices();
    return OK;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, void** d) {
    if ((int)i >= devices()) return INVALID_ARGUMENT;
    *d = (void*)(size_t)(i + 1);
    return OK;
}
nvmlReturn_t nvmlDeviceGetName(void* d, char* name, unsigned len) {
    if (!valid(d)) return INVALID_ARGUMENT;
    std::snprintf(name, len, "collbench fake CUDA driver (host memory)");
    return OK;
}
nvmlReturn_t nvmlDeviceGetPciInfo_v3(void* d, PciInfo* p) {
    if (!valid(d)) return INVALID_ARGUMENT;
    fill(p, (int)index(d));
    return OK;
}
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(void* d, int* major, int* minor) {
    if (!valid(d)) return INVALID_ARGUMENT;
    *major = 9;
    *minor = 0;
    return OK;
}
nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(void* d, unsigned* g) {
    if (!valid(d)) return INVALID_ARGUMENT;
    *g = 5;
    return OK;
}
nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(void* d, unsigned* w) {
    if (!valid(d)) return INVALID_ARGUMENT;
    *w = 16;
    return OK;
}
nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(void* a, void* b, int* level) {
    if (!valid(a) || !valid(b)) return INVALID_ARGUMENT;
    *level = index(a) == index(b) ? 0 : 40;
    return OK;
}
// Links 0..FAKE_NVML_NVLINKS-1 exist (and are active) on GPUs that have a pair; no others.
nvmlReturn_t nvmlDeviceGetNvLinkState(void* d, unsigned link, int* active) {
    if (!valid(d)) return INVALID_ARGUMENT;
    if ((int)link >= nvlinks() || peer((int)index(d)) < 0) return NOT_SUPPORTED;
    *active = 1;
    return OK;
}
nvmlReturn_t nvmlDeviceGetNvLinkVersion(void* d, unsigned link, unsigned* v) {
    int active = 0;
    if (nvmlReturn_t r = nvmlDeviceGetNvLinkState(d, link, &active)) return r;
    *v = 6;  // NVML_NVLINK_VERSION_4_0
    return OK;
}
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(void* d, unsigned link, PciInfo* p) {
    int active = 0;
    if (nvmlReturn_t r = nvmlDeviceGetNvLinkState(d, link, &active)) return r;
    fill(p, peer((int)index(d)));
    return OK;
}
nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(void* d, unsigned link, int* t) {
    int active = 0;
    if (nvmlReturn_t r = nvmlDeviceGetNvLinkState(d, link, &active)) return r;
    *t = 0;  // NVML_NVLINK_DEVICE_TYPE_GPU
    return OK;
}

}  // extern "C"
