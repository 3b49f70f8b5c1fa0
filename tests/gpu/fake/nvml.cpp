// A fake libnvidia-ml.so.1 for tests (see cuda.cpp beside it): the GPUs of the fake libcuda (same count,
// FAKE_CUDA_DEVICES, and the same PCI bus ids, 0000:1N:00.0), each on a PCIe gen5 x16 link, compute
// capability 9.0, with FAKE_NVML_NVLINKS active NVLinks 4.0 (NVML's version value 6) from each even GPU to
// the odd one after it, and the pairs' common ancestor at NVML's NODE level.
//
// Health faults for preflight's GPU checks, each a list of GPU:VALUE entries (`1:3,4:1`):
//   FAKE_NVML_ECC            uncorrectable ECC errors of the GPU, volatile and aggregate (`1:3`)
//   FAKE_NVML_REMAPPED       `pending` or `failed` row remapping (`2:pending`)
//   FAKE_NVML_RETIRED        retired pages pending (`2:1`)
//   FAKE_NVML_CLOCK_EVENTS   clock event reasons, NVML's bits (`1:0x80` power brake, `5:0x4` sw power cap)
//   FAKE_NVML_PCIE           the link now, GENxWIDTH (`1:4x8`; at most gen5 x16)
//   FAKE_NVML_NVLINK_DOWN    a link of the GPU that is down (`3:2`)
//   FAKE_NVML_PERSISTENCE    `off` (`4:off`; on otherwise)
// and for the host: FAKE_NVML_DRIVER, FAKE_NVML_CUDA (NVML's 13000 for 13.0), FAKE_NVML_INIT_ERROR (nvmlInit
// fails with it, as without the kernel driver). Built with -DFAKE_NVML_OLD it lacks the health calls, as an
// old driver does.
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
// GPU i's value in the GPU:VALUE list of variable `name`, or null.
const char* of_gpu(const char* name, long i) {
    static thread_local char value[64];
    const char* s = std::getenv(name);
    while (s && *s) {
        char* end = nullptr;
        long g = std::strtol(s, &end, 10);
        const char* next = std::strchr(s, ',');
        if (end && *end == ':') {
            size_t n = (size_t)((next ? next : s + std::strlen(s)) - (end + 1));
            if (g == i && n < sizeof value) {
                std::memcpy(value, end + 1, n);
                value[n] = 0;
                return value;
            }
        }
        s = next ? next + 1 : nullptr;
    }
    return nullptr;
}
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

nvmlReturn_t nvmlInit_v2() { return env("FAKE_NVML_INIT_ERROR", OK); }
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
    const char* down = of_gpu("FAKE_NVML_NVLINK_DOWN", index(d));
    *active = !(down && std::atoi(down) == (int)link);
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

#ifndef FAKE_NVML_OLD
nvmlReturn_t nvmlSystemGetDriverVersion(char* v, unsigned len) {
    const char* s = std::getenv("FAKE_NVML_DRIVER");
    std::snprintf(v, len, "%s", s ? s : "580.00");
    return OK;
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* v) {
    *v = env("FAKE_NVML_CUDA", 13000);
    return OK;
}
// errorType 1 is NVML_MEMORY_ERROR_TYPE_UNCORRECTED; both counters (volatile, aggregate) give the same count.
nvmlReturn_t nvmlDeviceGetTotalEccErrors(void* d, int errorType, int counter, unsigned long long* n) {
    if (!valid(d) || counter < 0 || counter > 1) return INVALID_ARGUMENT;
    const char* v = of_gpu("FAKE_NVML_ECC", index(d));
    *n = errorType == 1 && v ? std::strtoull(v, nullptr, 10) : 0;
    return OK;
}
nvmlReturn_t nvmlDeviceGetRemappedRows(void* d, unsigned* corr, unsigned* unc, unsigned* pending, unsigned* failed) {
    if (!valid(d)) return INVALID_ARGUMENT;
    const char* v = of_gpu("FAKE_NVML_REMAPPED", index(d));
    *corr = 0;
    *unc = v ? 1 : 0;
    *pending = v && std::strcmp(v, "pending") == 0;
    *failed = v && std::strcmp(v, "failed") == 0;
    return OK;
}
nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(void* d, int* pending) {
    if (!valid(d)) return INVALID_ARGUMENT;
    const char* v = of_gpu("FAKE_NVML_RETIRED", index(d));
    *pending = v && std::atoi(v) != 0;
    return OK;
}
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(void* d, unsigned long long* reasons) {
    if (!valid(d)) return INVALID_ARGUMENT;
    const char* v = of_gpu("FAKE_NVML_CLOCK_EVENTS", index(d));
    *reasons = v ? std::strtoull(v, nullptr, 0) : 0;
    return OK;
}
nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(void* d, unsigned* g) {
    if (!valid(d)) return INVALID_ARGUMENT;
    const char* v = of_gpu("FAKE_NVML_PCIE", index(d));
    *g = v ? (unsigned)std::atoi(v) : 5;
    return OK;
}
nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(void* d, unsigned* w) {
    if (!valid(d)) return INVALID_ARGUMENT;
    const char* v = of_gpu("FAKE_NVML_PCIE", index(d));
    const char* x = v ? std::strchr(v, 'x') : nullptr;
    *w = x ? (unsigned)std::atoi(x + 1) : 16;
    return OK;
}
nvmlReturn_t nvmlDeviceGetPersistenceMode(void* d, int* on) {
    if (!valid(d)) return INVALID_ARGUMENT;
    const char* v = of_gpu("FAKE_NVML_PERSISTENCE", index(d));
    *on = !(v && std::strcmp(v, "off") == 0);
    return OK;
}
#endif  // FAKE_NVML_OLD

}  // extern "C"
