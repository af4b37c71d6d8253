#include "common.h"
/* libnvidia-ml.so.1 stand-in. FAKE_NVML_INIT: nvmlInit_v2's result; FAKE_NVML_COUNT (2);
 * FAKE_NVML_BUSIDS; FAKE_NVML_LOST: index whose handle fails with GPU_IS_LOST (-1);
 * FAKE_NVML_LINKS: the NVLinks each GPU has, all active and to the next GPU, unless
 * FAKE_NVML_LINKS_DOWN lists them as GPU:link items ("1:6,1:7"); higher link numbers answer
 * INVALID_ARGUMENT, and 0 links NOT_SUPPORTED (0); FAKE_NVML_BAR1_MIB (262144);
 * FAKE_NVML_PERSISTENCE: persistence mode per GPU, 1 or 0, one item for all (1);
 * FAKE_NVML_FABRIC: fabric state per GPU (NVML_GPU_FABRIC_STATE_*: 0 not supported, 1 not
 * started, 2 in progress, 3 completed), one item for all; unset: NOT_SUPPORTED, as a GPU outside
 * any NVSwitch fabric answers; FAKE_NVML_FABRIC_STATUS: the registration's nvmlReturn_t (0);
 * FAKE_NVML_FABRIC_VERSION: the newest nvmlGpuFabricInfo_v* the V call takes (3). */
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
/* One model for every GPU: the NVLink check compares a GPU with the others of its model. */
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *buf, unsigned len) { (void)d; snprintf(buf, len, "Fake H200"); return 0; }
#ifndef OMIT_nvmlDeviceGetBAR1MemoryInfo
nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t d, nvmlBAR1Memory_t *m) {
    (void)d;
    m->bar1Total = (unsigned long long)env_int("FAKE_NVML_BAR1_MIB", 262144) << 20;
    m->bar1Used = 1ULL << 20;
    m->bar1Free = m->bar1Total - m->bar1Used;
    return 0;
}
#endif
/* The i-th item of $name, else its first (one value for every GPU), else fallback. */
static int per_gpu(const char *name, int i, int fallback) {
    char item[16];
    if (env_item(name, "", i, item, sizeof item) && env_item(name, "", 0, item, sizeof item)) return fallback;
    return *item ? atoi(item) : fallback;
}
#ifndef OMIT_nvmlDeviceGetPersistenceMode
nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t d, int *mode) {
    *mode = per_gpu("FAKE_NVML_PERSISTENCE", d->index, 1);
    return 0;
}
#endif
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned link, int *on) {
    int n = env_int("FAKE_NVML_LINKS", 0);
    if (n == 0) return 3; /* NVML_ERROR_NOT_SUPPORTED: no NVLink */
    if ((int)link >= n) return 2; /* NVML_ERROR_INVALID_ARGUMENT: no such link */
    *on = 1;
    char item[16];
    for (int i = 0; env_item("FAKE_NVML_LINKS_DOWN", "", i, item, sizeof item) == 0 && *item; i++) {
        int gpu, down;
        if (sscanf(item, "%d:%d", &gpu, &down) == 2 && gpu == d->index && down == (int)link) *on = 0;
    }
    return 0;
}
/* nvml.h's nvmlGpuFabricInfo_t and nvmlGpuFabricInfo_v3_t (v2 is v3 without healthSummary). */
typedef struct {
    unsigned char clusterUuid[16];
    nvmlReturn_t status;
    unsigned int cliqueId;
    unsigned char state;
} nvmlGpuFabricInfo_t;
typedef struct {
    unsigned int version;
    unsigned char clusterUuid[16];
    nvmlReturn_t status;
    unsigned int cliqueId;
    unsigned char state;
    unsigned int healthMask;
    unsigned char healthSummary;
} nvmlGpuFabricInfo_v3_t;
typedef struct {
    unsigned int version;
    unsigned char clusterUuid[16];
    nvmlReturn_t status;
    unsigned int cliqueId;
    unsigned char state;
    unsigned int healthMask;
} nvmlGpuFabricInfo_v2_t;
#define NVML_STRUCT_VERSION(data, ver) (unsigned int)(sizeof(nvml##data##_v##ver##_t) | (ver << 24U))
/* The state and status for GPU i; NOT_SUPPORTED (3) when FAKE_NVML_FABRIC is unset. */
static __attribute__((unused)) int fabric_of(int i, unsigned char *state, nvmlReturn_t *status) {
    int s = per_gpu("FAKE_NVML_FABRIC", i, -1);
    if (s < 0) return 3;
    *state = (unsigned char)s;
    *status = env_int("FAKE_NVML_FABRIC_STATUS", 0);
    return 0;
}
#ifndef OMIT_nvmlDeviceGetGpuFabricInfo
nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t d, nvmlGpuFabricInfo_t *f) {
    memset(f, 0, sizeof *f);
    return fabric_of(d->index, &f->state, &f->status);
}
#endif
#ifndef OMIT_nvmlDeviceGetGpuFabricInfoV
nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t d, nvmlGpuFabricInfo_v3_t *f) {
    unsigned int v3 = NVML_STRUCT_VERSION(GpuFabricInfo, 3), v2 = NVML_STRUCT_VERSION(GpuFabricInfo, 2);
    int newest = env_int("FAKE_NVML_FABRIC_VERSION", 3);
    if (!((f->version == v3 && newest >= 3) || (f->version == v2 && newest >= 2)))
        return 25; /* NVML_ERROR_ARGUMENT_VERSION_MISMATCH */
    unsigned int version = f->version;
    memset(f, 0, version == v3 ? sizeof(nvmlGpuFabricInfo_v3_t) : sizeof(nvmlGpuFabricInfo_v2_t));
    f->version = version;
    return fabric_of(d->index, &f->state, &f->status);
}
#endif
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
