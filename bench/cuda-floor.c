/* The CUDA floor: the least any tool that proves a GPU usable must pay on this node. It starts
 * CUDA and makes a context with a 2 MiB allocation on every GPU, and nothing else, so that
 * `gdrdoctor check` (whose GPU probe does the same and exports a dma-buf of the allocation) can
 * be measured against it in the same run (issue 24: within 1.10x).
 *
 *   cuda-floor            one process: cuInit, then every GPU's primary context and 2 MiB
 *   cuda-floor --parallel one child process per GPU (CUDA_VISIBLE_DEVICES=i), as gdrdoctor's
 *                         workers run; the driver serializes much of it
 *
 * libcuda is loaded with dlopen, as gdrdoctor loads it: no CUDA toolkit is needed to build this
 * (`cc -O2 -o cuda-floor bench/cuda-floor.c -ldl`). Exit 0 when every GPU got its allocation;
 * the error is printed otherwise, so a floor that did not do the work is never a number. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* CUDA_FLOOR_TRACE=1: when the allocations were done, in ms since the start, on stderr (the rest
 * of the wall time is the teardown at exit). */
static double ms_since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) * 1e3 + (t.tv_nsec - t0->tv_nsec) / 1e6;
}
static struct timespec started;

typedef int (*init_t)(unsigned);
typedef int (*count_t)(int *);
typedef int (*get_t)(int *, int);
typedef int (*retain_t)(void **, int);
typedef int (*release_t)(int);
typedef int (*current_t)(void *);
typedef int (*alloc_t)(unsigned long long *, size_t);
typedef int (*free_t)(unsigned long long);

static void *sym(void *lib, const char *name) {
    void *f = dlsym(lib, name);
    if (!f) {
        fprintf(stderr, "cuda-floor: libcuda.so.1 lacks %s\n", name);
        exit(2);
    }
    return f;
}

/* Starts CUDA and allocates 2 MiB on every device it sees; returns how many it did. */
static int floor_run(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "cuda-floor: %s\n", dlerror());
        exit(2);
    }
    init_t init = (init_t)sym(lib, "cuInit");
    count_t count = (count_t)sym(lib, "cuDeviceGetCount");
    get_t get = (get_t)sym(lib, "cuDeviceGet");
    retain_t retain = (retain_t)sym(lib, "cuDevicePrimaryCtxRetain");
    release_t release = (release_t)sym(lib, "cuDevicePrimaryCtxRelease_v2");
    current_t current = (current_t)sym(lib, "cuCtxSetCurrent");
    alloc_t alloc = (alloc_t)sym(lib, "cuMemAlloc_v2");
    free_t release_mem = (free_t)sym(lib, "cuMemFree_v2");
    int r, n = 0;
    if ((r = init(0)) != 0 || (r = count(&n)) != 0) {
        fprintf(stderr, "cuda-floor: cuInit or cuDeviceGetCount failed: %d\n", r);
        exit(1);
    }
    int done = 0;
    for (int i = 0; i < n; i++) {
        int dev;
        void *ctx;
        unsigned long long p;
        if ((r = get(&dev, i)) || (r = retain(&ctx, dev)) || (r = current(ctx)) ||
            (r = alloc(&p, 2 << 20))) {
            fprintf(stderr, "cuda-floor: device %d: CUDA error %d\n", i, r);
            continue;
        }
        release_mem(p);
        release(dev);
        done++;
    }
    if (getenv("CUDA_FLOOR_TRACE"))
        fprintf(stderr, "cuda-floor: trace %8.1f ms %d allocation(s) done (pid %d)\n", ms_since(&started), done, (int)getpid());
    return n > 0 && done == n ? done : -1;
}

int main(int argc, char **argv) {
    clock_gettime(CLOCK_MONOTONIC, &started);
    if (argc < 2) {
        int done = floor_run();
        if (done < 0) return 1;
        printf("cuda-floor: %d GPU(s), one process\n", done);
        return 0;
    }
    if (strcmp(argv[1], "--parallel") != 0) {
        fprintf(stderr, "usage: cuda-floor [--parallel]\n");
        return 2;
    }
    /* How many GPUs: asked in a child, so that this process never starts CUDA itself. */
    int fds[2];
    if (pipe(fds) != 0) return 2;
    pid_t pid = fork();
    if (pid == 0) {
        void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        int n = 0;
        /* Counting is cheaper than a context but still a cuInit: the parallel mode pays it
         * once more than gdrdoctor, whose GPU list comes from sysfs. So the count comes from
         * the environment when the caller knows it (CUDA_FLOOR_GPUS). */
        if (lib && ((init_t)sym(lib, "cuInit"))(0) == 0) ((count_t)sym(lib, "cuDeviceGetCount"))(&n);
        if (write(fds[1], &n, sizeof n) != sizeof n) _exit(2);
        _exit(0);
    }
    int n = 0;
    const char *known = getenv("CUDA_FLOOR_GPUS");
    if (known && *known) {
        n = atoi(known);
        kill(pid, SIGKILL);
    } else if (read(fds[0], &n, sizeof n) != sizeof n) {
        n = 0;
    }
    waitpid(pid, NULL, 0);
    if (n <= 0) {
        fprintf(stderr, "cuda-floor: no GPU\n");
        return 1;
    }
    for (int i = 0; i < n; i++) {
        if (fork() == 0) {
            char v[16];
            snprintf(v, sizeof v, "%d", i);
            setenv("CUDA_VISIBLE_DEVICES", v, 1);
            _exit(floor_run() == 1 ? 0 : 1);
        }
    }
    int failed = 0, status;
    while (wait(&status) > 0) failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (failed) {
        fprintf(stderr, "cuda-floor: %d of %d GPU processes failed\n", failed, n);
        return 1;
    }
    printf("cuda-floor: %d GPU(s), one process each\n", n);
    return 0;
}
