#include "common.h"
/* libnvidia-ml.so.1 stand-in. FAKE_NVML_INIT: nvmlInit_v2's result; FAKE_NVML_COUNT (2);
 * FAKE_NVML_BUSIDS; FAKE_NVML_LOST: index whose handle fails with GPU_IS_LOST (-1);
 * FAKE_NVML_LINKS: active NVLinks per GPU, all to the next GPU (0); FAKE_NVML_BAR1_MIB (262144). */
typedef int nvmlReturn_t;
typedef struct { int index; } *nvmlDevice_t;
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;
typedef struct { unsigned long long bar1Total, bar1Free, bar1Used; } nvmlBAR1Memory_t;
#define BUSIDS "00000000:00:06.0,00000000:00:07.0"
static struct { int index; } devices[8];

#ifndef OMIT_nvmlInit_v2
nvmlReturn_t nvmlInit_v2(void) { return env_int("FAKE_NVML_INIT", 0); }
#endif
nvmlReturn_t nvmlShutdown(void) { return 0; }
nvmlReturn_t nvmlSystemGetDriverVersion(char *buf, unsigned len) { snprintf(buf, len, "580.159.04"); return 0; }
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { *v = 13000; return 0; }
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *n) { *n = env_int("FAKE_NVML_COUNT", 2); return 0; }
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t *d) {
    if ((int)i == env_int("FAKE_NVML_LOST", -1)) return 15; /* NVML_ERROR_GPU_IS_LOST */
    if (i >= 8) return 2;
    devices[i].index = i;
    *d = (nvmlDevice_t)&devices[i];
    return 0;
}
static int fill_pci(int i, nvmlPciInfo_t *p) {
    memset(p, 0, sizeof *p);
    if (env_item("FAKE_NVML_BUSIDS", BUSIDS, i, p->busId, sizeof p->busId)) return 2;
    strncpy(p->busIdLegacy, p->busId + 4, sizeof p->busIdLegacy - 1);
    p->pciDeviceId = 0x233510de;
    return 0;
}
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p) { return fill_pci(d->index, p); }
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *buf, unsigned len) { snprintf(buf, len, "Fake H200 %d", d->index); return 0; }
#ifndef OMIT_nvmlDeviceGetBAR1MemoryInfo
nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t d, nvmlBAR1Memory_t *m) {
    (void)d;
    m->bar1Total = (unsigned long long)env_int("FAKE_NVML_BAR1_MIB", 262144) << 20;
    m->bar1Used = 1ULL << 20;
    m->bar1Free = m->bar1Total - m->bar1Used;
    return 0;
}
#endif
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned link, int *on) {
    (void)d;
    int n = env_int("FAKE_NVML_LINKS", 0);
    if (n == 0) return 3; /* NVML_ERROR_NOT_SUPPORTED: no NVLink */
    *on = (int)link < n;
    return 0;
}
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned link, nvmlPciInfo_t *p) {
    (void)link;
    int count = env_int("FAKE_NVML_COUNT", 2);
    return fill_pci((d->index + 1) % count, p);
}
nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t d, unsigned link, unsigned *t) {
    (void)d; (void)link;
    *t = env_int("FAKE_NVML_SWITCH", 0) ? 2 : 0;
    return 0;
}
