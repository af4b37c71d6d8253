#include "common.h"
#include <strings.h>
/* libamdhip64.so stand-in. FAKE_HIP_INIT: hipInit's result; FAKE_HIP_COUNT (4);
 * FAKE_HIP_BUSIDS (the amd-mi300x-roce fixture's GPUs). Device memory is host memory, so the
 * copies are memcpy and a stream is a token (the RCCL stand-in, tests/stubs/rccl.c, sums it).
 * FAKE_HIP_SYNC: hipStreamSynchronize's result (0). */
typedef int hipError_t;
#define BUSIDS "0000:23:00.0,0000:25:00.0,0000:43:00.0,0000:45:00.0"
static int initialised;
const char *hipGetErrorName(hipError_t e) {
    switch (e) {
    case 0: return "hipSuccess";
    case 100: return "hipErrorNoDevice";
    case 2: return "hipErrorOutOfMemory";
    case 101: return "hipErrorInvalidDevice";
    default: return "hipErrorUnknown";
    }
}
hipError_t hipInit(unsigned flags) { (void)flags; int r = env_int("FAKE_HIP_INIT", 0); initialised = r == 0; return r; }
hipError_t hipDriverGetVersion(int *v) { *v = 60342134; return 0; }
hipError_t hipGetDeviceCount(int *n) { if (!initialised) return 3; *n = env_int("FAKE_HIP_COUNT", 4); return 0; }
hipError_t hipDeviceGet(int *d, int ordinal) { *d = ordinal; return 0; }
hipError_t hipDeviceGetName(char *buf, int len, int d) { snprintf(buf, len, "Fake MI300X %d", d); return 0; }
hipError_t hipDeviceGetPCIBusId(char *buf, int len, int d) { return env_item("FAKE_HIP_BUSIDS", BUSIDS, d, buf, len) ? 1 : 0; }
hipError_t hipSetDevice(int d) { (void)d; return 0; }
#ifndef OMIT_hipMalloc
hipError_t hipMalloc(void **p, size_t n) { *p = aligned_alloc(2 << 20, n); return *p ? 0 : 2; }
#endif
hipError_t hipFree(void *p) { free(p); return 0; }
hipError_t hipMemcpy(void *dst, const void *src, size_t n, int kind) { (void)kind; memcpy(dst, src, n); return 0; }
hipError_t hipDeviceGetByPCIBusId(int *d, const char *bus) {
    char item[64];
    for (int i = 0; i < env_int("FAKE_HIP_COUNT", 4); i++)
        if (env_item("FAKE_HIP_BUSIDS", BUSIDS, i, item, sizeof item) == 0 && strcasecmp(item, bus) == 0) { *d = i; return 0; }
    return 101; /* hipErrorInvalidDevice */
}
#ifndef OMIT_hipStreamCreate
hipError_t hipStreamCreate(void **s) { static int token; *s = &token; return 0; }
#endif
hipError_t hipStreamSynchronize(void *s) { (void)s; return env_int("FAKE_HIP_SYNC", 0); }
hipError_t hipStreamDestroy(void *s) { (void)s; return 0; }
