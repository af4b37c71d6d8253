#include "common.h"
#include <strings.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <time.h>
#include <unistd.h>
/* libcuda.so.1 stand-in. FAKE_CUDA_INIT: cuInit's result; FAKE_CUDA_COUNT: devices (2);
 * FAKE_CUDA_BUSIDS: their bus ids; FAKE_CUDA_GDR, FAKE_CUDA_DMABUF: attributes 116 and 124 (1);
 * FAKE_CUDA_EXPORT: cuMemGetHandleForAddressRange's result (0); FAKE_CUDA_VERSION (12080);
 * FAKE_CUDA_LOG: a file each cuInit and each primary-context retain appends a line to (with the
 * process id and CUDA_VISIBLE_DEVICES), to count how often CUDA is started.
 *
 * A real driver starts GPUs one after another, and a process killed inside it is not gone until
 * the driver lets go (issue 24: up to 460 ms on a 4-GPU H100 node). FAKE_CUDA_INIT_ORDER names a
 * file through which the processes that call cuInit count themselves: the first sleeps
 * FAKE_CUDA_INIT_MS in cuInit, every later one FAKE_CUDA_INIT_LATER_MS. FAKE_CUDA_EXIT_HOLD_MS
 * makes the process slow to go: a helper traces it (PTRACE_SEIZE), and a traced process that
 * dies stays unreaped by its parent until the tracer lets go, that many ms after cuInit. */
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
#define BUSIDS "0000:00:06.0,0000:00:07.0"

static const char *names(CUresult r) {
    switch (r) {
    case 0: return "CUDA_SUCCESS";
    case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
    case 3: return "CUDA_ERROR_NOT_INITIALIZED";
    case 100: return "CUDA_ERROR_NO_DEVICE";
    case 801: return "CUDA_ERROR_NOT_SUPPORTED";
    case 803: return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case 999: return "CUDA_ERROR_UNKNOWN";
    default: return 0;
    }
}

static int initialised;
static void note(const char *what, int dev) {
    const char *path = getenv("FAKE_CUDA_LOG");
    if (!path || !*path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    fprintf(f, "%s pid=%d dev=%d visible=%s\n", what, (int)getpid(), dev, visible ? visible : "-");
    fclose(f);
}
CUresult cuGetErrorName(CUresult r, const char **s) { *s = names(r); return *s ? 0 : 1; }
#ifndef OMIT_cuInit
static void sleep_ms(int ms) {
    struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&t, &t) != 0) {}
}
/* This process's place among those that called cuInit (0 for the first). */
static int init_order(void) {
    const char *path = getenv("FAKE_CUDA_INIT_ORDER");
    if (!path || !*path) return 0;
    int fd = open(path, O_RDWR | O_CREAT | O_APPEND, 0600);
    if (fd < 0) return 0;
    flock(fd, LOCK_EX);
    int n = (int)lseek(fd, 0, SEEK_END);
    if (write(fd, "x", 1) != 1) n = 0;
    flock(fd, LOCK_UN);
    close(fd);
    return n;
}
static void hold_exit(int ms) {
    int sync[2];
    if (ms <= 0 || pipe(sync) != 0) return;
    pid_t me = getpid();
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    pid_t helper = fork();
    if (helper == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0); dup2(null, 1); dup2(null, 2);
        close(sync[0]);
        char ok = ptrace(PTRACE_SEIZE, me, 0, 0) == 0 ? 'y' : 'n';
        if (write(sync[1], &ok, 1) != 1) _exit(1);
        sleep_ms(ms);
        _exit(0);
    }
    close(sync[1]);
    char ok = 'n';
    if (helper > 0 && read(sync[0], &ok, 1) == 1 && ok != 'y')
        fprintf(stderr, "fake libcuda: FAKE_CUDA_EXIT_HOLD_MS: ptrace refused\n");
    close(sync[0]);
}
CUresult cuInit(unsigned flags) {
    (void)flags;
    hold_exit(env_int("FAKE_CUDA_EXIT_HOLD_MS", 0));
    int ms = init_order() == 0 ? env_int("FAKE_CUDA_INIT_MS", 0) : env_int("FAKE_CUDA_INIT_LATER_MS", env_int("FAKE_CUDA_INIT_MS", 0));
    if (ms > 0) sleep_ms(ms);
    int r = env_int("FAKE_CUDA_INIT", 0); initialised = r == 0; note("cuInit", -1); return r;
}
#endif
CUresult cuDriverGetVersion(int *v) { *v = env_int("FAKE_CUDA_VERSION", 12080); return 0; }
CUresult cuDeviceGetCount(int *n) { if (!initialised) return 3; *n = env_int("FAKE_CUDA_COUNT", 2); return 0; }
CUresult cuDeviceGet(CUdevice *d, int ordinal) { *d = ordinal; return 0; }
CUresult cuDeviceGetPCIBusId(char *buf, int len, CUdevice d) {
    return env_item("FAKE_CUDA_BUSIDS", BUSIDS, d, buf, len) ? 101 : 0;
}
CUresult cuDeviceGetName(char *buf, int len, CUdevice d) { snprintf(buf, len, "Fake GPU %d", d); return 0; }
CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
    (void)d;
    if (attr == 116) { *v = env_int("FAKE_CUDA_GDR", 1); return 0; }
    if (attr == 124) { *v = env_int("FAKE_CUDA_DMABUF", 1); return 0; }
    return 1;
}
static int contexts;
CUresult cuDevicePrimaryCtxRetain(void **ctx, CUdevice d) { contexts++; note("retain", d); *ctx = (void *)(long)(d + 1); return 0; }
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) { if (--contexts == 0) note("destroy", d); return 0; }
CUresult cuCtxSetCurrent(void *ctx) { (void)ctx; return 0; }
#ifndef OMIT_cuMemAlloc_v2
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { void *m = aligned_alloc(2 << 20, n); *p = (CUdeviceptr)m; return m ? 0 : 2; }
#endif
CUresult cuMemFree_v2(CUdeviceptr p) { free((void *)p); return 0; }
#ifndef OMIT_cuMemGetHandleForAddressRange
CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr p, size_t n, int type, unsigned long long flags) {
    (void)p; (void)n; (void)flags;
    int r = env_int("FAKE_CUDA_EXPORT", 0);
    if (r) return r;
    if (type != 1) return 1;
    *(int *)handle = fake_dmabuf();
    return 0;
}
#endif

/* For the GDR write test: the device by bus id, copies (device memory is host memory here),
 * and the pointer attribute. */
#ifndef OMIT_cuDeviceGetByPCIBusId
CUresult cuDeviceGetByPCIBusId(CUdevice *d, const char *bus) {
    char id[64];
    for (int i = 0; i < env_int("FAKE_CUDA_COUNT", 2); i++) {
        if (env_item("FAKE_CUDA_BUSIDS", BUSIDS, i, id, sizeof id)) break;
        if (strcasecmp(id, bus) == 0) { *d = i; return 0; }
    }
    return 101; /* CUDA_ERROR_INVALID_DEVICE */
}
#endif
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) { memcpy((void *)dst, src, n); return 0; }
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) { memcpy(dst, (void *)src, n); return 0; }
CUresult cuPointerSetAttribute(const void *value, int attr, CUdeviceptr p) { (void)value; (void)p; return attr == 6 ? 0 : 1; }

/* For nccl verify: streams. Work is synchronous here, so a stream is only a handle. */
CUresult cuStreamCreate(void **stream, unsigned flags) { (void)flags; static int streams; *stream = (void *)(long)(++streams); return 0; }
CUresult cuStreamSynchronize(void *stream) { return stream ? 0 : 400; }
CUresult cuStreamDestroy_v2(void *stream) { return stream ? 0 : 400; }
