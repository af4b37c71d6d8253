/* Stand-ins for the GPU vendors' libraries, for gdrdoctor's tests: the same exported names and
 * C signatures as the real ones (from their public headers), behaviour set by FAKE_* environment
 * variables, and any symbol can be left out at build time (-DOMIT_<name>) to test an older
 * library. They prove gdrdoctor's plumbing and error paths, not the vendors' behaviour: that is
 * what tests/gpu-machine/ is for. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/mman.h>

static inline int env_int(const char *name, int fallback) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : fallback;
}

/* The i-th comma-separated item of $name (or of fallback), copied into out. */
static inline int env_item(const char *name, const char *fallback, int i, char *out, int len) {
    const char *v = getenv(name);
    if (!v || !*v) v = fallback;
    for (; i > 0 && v; i--) {
        v = strchr(v, ',');
        if (v) v++;
    }
    if (!v) return -1;
    int n = 0;
    while (v[n] && v[n] != ',' && n < len - 1) { out[n] = v[n]; n++; }
    out[n] = 0;
    return 0;
}

/* A dma-buf stand-in: an anonymous memory fd, so the fd is real and must be closed. */
static inline int fake_dmabuf(void) { return memfd_create("fake-dmabuf", MFD_CLOEXEC); }
