#include "common.h"
#include <stdint.h>
#include <unistd.h>
/* libhsa-runtime64.so.1 stand-in. FAKE_HSA_EXPORT: hsa_amd_portable_export_dmabuf's result. */
typedef int hsa_status_t;
hsa_status_t hsa_init(void) { return 0; }
hsa_status_t hsa_status_string(hsa_status_t s, const char **out) {
    *out = s == 0 ? "HSA_STATUS_SUCCESS" : "HSA_STATUS_ERROR_INVALID_ARGUMENT";
    return 0;
}
#ifndef OMIT_hsa_amd_portable_export_dmabuf
hsa_status_t hsa_amd_portable_export_dmabuf(const void *p, size_t n, int *fd, uint64_t *offset) {
    (void)p; (void)n;
    int r = env_int("FAKE_HSA_EXPORT", 0);
    if (r) return r;
    *fd = fake_dmabuf();
    *offset = 0;
    return 0;
}
#endif
hsa_status_t hsa_amd_portable_close_dmabuf(int fd) { return close(fd) == 0 ? 0 : 1; }
