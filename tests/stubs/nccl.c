#include "common.h"
#include <stdarg.h>
#include <strings.h>
#include <stdint.h>
#include <unistd.h>
#include <dlfcn.h>
/* libnccl.so.2 stand-in for `gdrdoctor nccl verify`. It prints what NCCL 2.28 prints at
 * NCCL_DEBUG=INFO (the lines of the one-GPU machine and of NVIDIA/nccl's sources, src/init.cc,
 * src/transport/net_ib.cc, src/graph/paths.cc) to NCCL_DEBUG_FILE, dumps a topology in the form
 * of src/graph/xml.cc to NCCL_TOPO_DUMP_FILE, and sums int32 buffers of the CUDA stand-in (whose
 * device memory is host memory). It refuses to start a communicator unless gdrdoctor set what it
 * must: NCCL_DEBUG=INFO, NCCL_NVLS_ENABLE=0, and for several ranks NCCL_P2P_DISABLE=1 and
 * NCCL_SHM_DISABLE=1.
 *
 * FAKE_NCCL_VERSION (22809); FAKE_NCCL_NET: Socket (default) or IB; FAKE_NCCL_NICS: the RDMA
 * NICs as name@busid (mlx5_0@0000:04:00.0), comma-separated; FAKE_NCCL_NO_MODULE=1: no NIC can
 * reach GPU memory ("(no module)"); FAKE_NCCL_GDR: 1 (default) or 0,
 * NCCL's GDR decision for every IB NIC; FAKE_NCCL_PATH: the GPU -> NET path type printed (PIX
 * for IB, PHB for sockets); FAKE_NCCL_FLAT=1: the dump puts every device straight under the CPU
 * (PHB), not under one switch; FAKE_NCCL_INIT: the ncclResult_t of communicator init (0), with
 * a WARN; FAKE_NCCL_HANG=1: init never returns; FAKE_NCCL_CRASH=1: init dies of SIGSEGV;
 * FAKE_NCCL_WRONG=1: one element of rank 0's sum is off by one. GPU bus ids as the CUDA stand-in
 * has them (FAKE_CUDA_BUSIDS).
 *
 * Built with RCCL defined (tests/stubs/rccl.c), it is RCCL's stand-in: RCCL's lines where they
 * differ (ROCm/rccl src/init.cc showVersion, src/misc/rocmwrap.cc), the HIP stand-in's GPUs
 * (FAKE_HIP_BUSIDS), AMD GPUs and Broadcom NICs in the dump, and with several ranks it also
 * wants RCCL_MSCCL_ENABLE=0 and RCCL_MSCCLPP_ENABLE=0. */
#ifdef RCCL
#define BUSIDS "0000:23:00.0,0000:25:00.0,0000:43:00.0,0000:45:00.0"
#define GPU_BUSIDS "FAKE_HIP_BUSIDS"
#define GPU_ID "vendor=\"0x1002\" device=\"0x74a1\""
#define GPU_ATTRS "gcn=\"gfx942\" arch=\"942\""
#define NIC_ID "vendor=\"0x14e4\" device=\"0x1760\""
#define TOPO_VERSION 2
#else
#define BUSIDS "0000:00:06.0,0000:00:07.0"
#define GPU_BUSIDS "FAKE_CUDA_BUSIDS"
#define GPU_ID "vendor=\"0x10de\" device=\"0x2330\""
#define GPU_ATTRS "sm=\"90\""
#define NIC_ID "vendor=\"0x15b3\" device=\"0x1021\""
#define TOPO_VERSION 1
#endif

typedef int ncclResult_t;
typedef struct { char internal[128]; } ncclUniqueId;
struct comm { int rank, nranks, dev; };
typedef struct comm *ncclComm_t;

static FILE *logf;
static char last_error[512];

static void say(int dev, const char *level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(int dev, const char *level, const char *fmt, ...) {
    if (!logf) {
        const char *path = getenv("NCCL_DEBUG_FILE");
        logf = path && *path ? fopen(path, "w") : stdout;
        if (!logf) logf = stdout;
    }
    char text[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    fprintf(logf, "stubnode:%d:%d [%d] NCCL %s %s\n", (int)getpid(), (int)getpid() + 7, dev, level, text);
    fflush(logf);
    if (strcmp(level, "WARN") == 0) snprintf(last_error, sizeof last_error, "%s", text);
}

static int version(void) { return env_int("FAKE_NCCL_VERSION", 22809); }

/* Whether the NICs can reach GPU memory at all (src/transport/net_ib.cc, ncclIbGetProperties):
 * FAKE_NCCL_NO_MODULE=1 says not, "(no module)". RCCL's stand-in stands for the MI300X node,
 * which has no AMD peer-memory module: its only way is RCCL's DMA-BUF path, opt-in
 * (NCCL_DMABUF_ENABLE=1). Without support there is no per-GPU GDR line (paths.cc returns
 * before it), and no connection is /GDRDMA. */
static int gdr_support(void) {
    if (env_int("FAKE_NCCL_NO_MODULE", 0)) return 0;
#ifdef RCCL
    const char *d = getenv("NCCL_DMABUF_ENABLE");
    return d && strcmp(d, "1") == 0;
#else
    return 1;
#endif
}
static int gdr(void) { return gdr_support() && env_int("FAKE_NCCL_GDR", 1); }
static int is_ib(void) { const char *n = getenv("FAKE_NCCL_NET"); return n && strcmp(n, "IB") == 0; }

/* NCCL's number for a bus id: 0000:03:00.0 -> 3000 (busIdToInt64). */
static unsigned long bus_number(const char *bus) {
    unsigned dom = 0, b = 0, d = 0, f = 0;
    if (sscanf(bus, "%x:%x:%x.%x", &dom, &b, &d, &f) != 4) return 0;
    return ((unsigned long)dom << 20) | (b << 12) | (d << 4) | f;
}

/* The i-th NIC of FAKE_NCCL_NICS: its name and bus id. */
static int nic(int i, char *name, char *bus) {
    char item[60];
    if (env_item("FAKE_NCCL_NICS", "mlx5_0@0000:04:00.0", i, item, sizeof item)) return -1;
    char *at = strchr(item, '@');
    if (!at) return -1;
    *at = 0;
    snprintf(name, 64, "%s", item);
    snprintf(bus, 64, "%s", at + 1);
    return 0;
}
static int nics(void) { char n[64], b[64]; int i = 0; while (nic(i, n, b) == 0) i++; return i; }

static void dump(int ndev, const int *devs) {
    const char *path = getenv("NCCL_TOPO_DUMP_FILE");
    if (!path || !*path) return;
    FILE *f = fopen(path, "w");
    if (!f) return;
    int flat = env_int("FAKE_NCCL_FLAT", 0);
    fprintf(f, "<system version=\"%d\">\n  <cpu host_hash=\"0x1234\" numaid=\"0\" affinity=\"ffffffff\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"143\">\n", TOPO_VERSION);
    if (!flat) fprintf(f, "    <pci busid=\"0000:02:00.0\" class=\"0x060400\" vendor=\"0x1000\" device=\"0xc030\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">\n");
    for (int r = 0; r < ndev; r++) {
        char bus[64];
        if (env_item(GPU_BUSIDS, BUSIDS, devs[r], bus, sizeof bus)) continue;
        fprintf(f, "      <pci busid=\"%s\" class=\"0x030200\" " GPU_ID " link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">\n"
                   "        <gpu dev=\"%d\" " GPU_ATTRS " rank=\"%d\" gdr=\"1\"/>\n      </pci>\n", bus, devs[r], r);
    }
    if (is_ib()) {
        char name[64], bus[64];
        for (int i = 0; nic(i, name, bus) == 0; i++)
            fprintf(f, "      <pci busid=\"%s\" class=\"0x020000\" " NIC_ID " link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">\n"
                       "        <nic>\n          <net name=\"%s\" dev=\"%d\" speed=\"400000\" port=\"1\" latency=\"0.000000\" guid=\"0x%x\" maxconn=\"131072\" gdr=\"%d\"/>\n        </nic>\n      </pci>\n",
                    bus, name, i, 0xa0 + i, gdr());
    }
    if (!flat) fprintf(f, "    </pci>\n");
    if (!is_ib())
        fprintf(f, "    <nic>\n      <net name=\"eth0\" dev=\"0\" speed=\"10000\" port=\"0\" latency=\"0.000000\" maxconn=\"65536\" gdr=\"0\"/>\n    </nic>\n");
    fprintf(f, "  </cpu>\n</system>\n");
    fclose(f);
}

/* What NCCL prints while it makes a communicator, then the stand-in's faults. */
static ncclResult_t init(struct comm *comms, int ndev, const int *devs) {
    const char *debug = getenv("NCCL_DEBUG");
    const char *nvls = getenv("NCCL_NVLS_ENABLE");
    int d0 = devs[0];
    int v = version();
#ifdef RCCL
    say(d0, "INFO", "ROCr version 1.14");
    const char *dmabuf = getenv("NCCL_DMABUF_ENABLE");
    if (dmabuf && *dmabuf) say(d0, "INFO", "NCCL_DMABUF_ENABLE set by environment to %s.", dmabuf);
    if (!dmabuf || strcmp(dmabuf, "1") != 0) say(d0, "INFO", "Dmabuf feature disabled without NCCL_DMABUF_ENABLE=1");
    Dl_info self;
    const char *lib = dladdr((void *)version, &self) && self.dli_fname ? self.dli_fname : "Unknown";
    say(d0, "INFO", "RCCL version : %d.%d.%d-HEAD:7d8d67c", v / 10000, v % 10000 / 100, v % 100);
    fprintf(logf, "HIP version  : 6.4.43484-123eb5128\nROCm version : 6.4.2.0-120-e7d83f5\nHostname     : stubnode\nLibrccl path : %s\n", lib);
#else
    say(d0, "INFO", "NCCL version %d.%d.%d+cuda12.9", v / 10000, v % 10000 / 100, v % 100);
#endif
    if (!debug || strcasecmp(debug, "INFO") != 0) {
        say(d0, "WARN", "stub: NCCL_DEBUG is %s, not INFO", debug ? debug : "unset");
        return 5;
    }
    if (!nvls || strcmp(nvls, "0") != 0) {
        say(d0, "WARN", "stub: NCCL_NVLS_ENABLE is %s, not 0", nvls ? nvls : "unset");
        return 5;
    }
    say(d0, "INFO", "NCCL_NVLS_ENABLE set by environment to 0.");
    if (ndev > 1) {
        const char *p2p = getenv("NCCL_P2P_DISABLE"), *shm = getenv("NCCL_SHM_DISABLE");
        if (!p2p || strcmp(p2p, "1") || !shm || strcmp(shm, "1")) {
            say(d0, "WARN", "stub: several ranks without NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1");
            return 5;
        }
        say(d0, "INFO", "NCCL_P2P_DISABLE set by environment to 1.");
        say(d0, "INFO", "NCCL_SHM_DISABLE set by environment to 1.");
#ifdef RCCL
        const char *msccl = getenv("RCCL_MSCCL_ENABLE"), *mscclpp = getenv("RCCL_MSCCLPP_ENABLE");
        if (!msccl || strcmp(msccl, "0") || !mscclpp || strcmp(mscclpp, "0")) {
            say(d0, "WARN", "stub: several ranks without RCCL_MSCCL_ENABLE=0 and RCCL_MSCCLPP_ENABLE=0");
            return 5;
        }
        say(d0, "INFO", "RCCL_MSCCL_ENABLE set by environment to 0.");
#endif
    }
    int ib = is_ib(), support = gdr_support(), on = gdr();
    char name[64], bus[64];
    if (ib) {
        char list[512] = "";
        for (int i = 0; nic(i, name, bus) == 0; i++) {
            size_t l = strlen(list);
            snprintf(list + l, sizeof list - l, "[%d]%s:1/RoCE ", i, name);
        }
        say(d0, "INFO", "NET/IB : Using %s[RO]; OOB eth0:10.0.0.5<0>", list);
        say(d0, "INFO", "Using network IB");
        for (int i = 0; nic(i, name, bus) == 0; i++)
            if (support)
                say(d0, "INFO", "NET/IB : GPU Direct RDMA %s for HCA %d '%s'", on ? "Enabled" : "Disabled", i, name);
            else
                say(d0, "INFO", "NET/IB : GPU Direct RDMA Disabled for HCA %d '%s' (no module)", i, name);
    } else {
        say(d0, "INFO", "NET/IB : No device found.");
        say(d0, "INFO", "Failed to initialize NET plugin IB");
        say(d0, "INFO", "NET/Socket : Using [0]eth0:10.0.0.5<0>");
        say(d0, "INFO", "Using network Socket");
        say(d0, "INFO", "NET/Socket : GPU Direct RDMA Disabled for HCA 0 'eth0'");
    }
    const char *path = getenv("FAKE_NCCL_PATH");
    if (!path || !*path) path = ib ? "PIX" : "PHB";
    /* Without GDR support NCCL routes every GPU-NET path through the CPU (paths.cc). */
    if (ib && !support) path = "PHB";
    for (int r = 0; r < ndev; r++) {
        char gbus[64];
        if (env_item(GPU_BUSIDS, BUSIDS, devs[r], gbus, sizeof gbus)) gbus[0] = 0;
        unsigned long g = bus_number(gbus);
#ifdef RCCL
        say(devs[r], "INFO", "comm 0x%lx rank %d nranks %d cudaDev %d busId %lx commId 0x5eed - Init START",
            0x5000UL + r, r, ndev, devs[r], g);
#else
        say(devs[r], "INFO", "comm 0x%lx rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x5eed - Init START",
            0x5000UL + r, r, ndev, devs[r], devs[r], g);
#endif
        char line[1024];
        int n = snprintf(line, sizeof line, "GPU/0-%lx :GPU/0-%lx (0/5000.0/LOC) CPU/0-ffffffffffffff (1/48.0/PHB)", g, g);
        int nets = ib ? nics() : 1;
        for (int i = 0; i < nets && n < (int)sizeof line; i++)
            n += snprintf(line + n, sizeof line - n, " NET/0-%x (%d/%s/%s)", i, ib ? 2 : 3, ib ? "24.0" : "1.2", path);
        say(devs[r], "INFO", "%s", line);
        if (ib && support)
            for (int i = 0; i < nets; i++)
                say(devs[r], "INFO", "GPU Direct RDMA %s for GPU %d / HCA %d (distance 4 %s 5), read 1 mode Default",
                    on ? "Enabled" : "Disabled", r, i, on ? "<=" : ">");
    }
    for (int r = 0; r < ndev && ndev > 1; r++) {
        int peer = (r + 1) % ndev;
        const char *via = ib ? (on ? "IB/0/GDRDMA" : "IB/0") : "Socket/0";
        say(devs[r], "INFO", "Channel 00/0 : %d[%d] -> %d[%d] [send] via NET/%s", r, devs[r], peer, devs[peer], via);
        say(devs[r], "INFO", "Channel 00/0 : %d[%d] -> %d[%d] [receive] via NET/%s", peer, devs[peer], r, devs[r], via);
    }
    dump(ndev, devs);
    if (env_int("FAKE_NCCL_HANG", 0)) {
        say(d0, "INFO", "stub: hanging in init");
        for (;;) pause();
    }
    if (env_int("FAKE_NCCL_CRASH", 0)) {
        say(d0, "INFO", "stub: crashing in init");
        /* A real fault, not raise(): Rust's runtime handles SIGSEGV for its stack guard and
         * returns from a raised one. */
        *(volatile int *)0 = 1;
    }
    int r = env_int("FAKE_NCCL_INIT", 0);
    if (r) {
        say(d0, "WARN", "NET/IB : Got async event : port error");
        return r;
    }
    for (int i = 0; i < ndev; i++) {
        comms[i].rank = i;
        comms[i].nranks = ndev;
        comms[i].dev = devs[i];
    }
    for (int i = 0; i < ndev; i++) say(devs[i], "INFO", "ncclCommInitRank comm 0x%lx rank %d nranks %d - Init COMPLETE", 0x5000UL + i, i, ndev);
    return 0;
}

ncclResult_t ncclGetVersion(int *v) { *v = version(); return 0; }
ncclResult_t ncclGetUniqueId(ncclUniqueId *id) { memset(id, 0x5e, sizeof *id); return 0; }
#ifndef OMIT_ncclCommInitRank
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
    (void)id;
    if (nranks != 1 || rank != 0) return 4; /* the stand-in has no bootstrap network */
    static struct comm one;
    int dev = 0; /* the current device: the only one a one-rank test gives */
    ncclResult_t r = init(&one, 1, &dev);
    if (r == 0) *comm = &one;
    return r;
}
#endif
ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devs) {
    static struct comm all[64];
    if (ndev < 1 || ndev > 64) return 4;
    ncclResult_t r = init(all, ndev, devs);
    if (r == 0)
        for (int i = 0; i < ndev; i++) comms[i] = &all[i];
    return r;
}

/* The all-reduces of one group, summed at ncclGroupEnd. */
static struct { const int32_t *send; int32_t *recv; size_t count; } queued[64];
static int nqueued, grouped;
static void reduce(void) {
    for (int q = 0; q < nqueued; q++)
        for (size_t i = 0; i < queued[q].count; i++) {
            int64_t s = 0;
            for (int p = 0; p < nqueued; p++) s += queued[p].send[i];
            queued[q].recv[i] = (int32_t)s;
        }
    if (nqueued && env_int("FAKE_NCCL_WRONG", 0)) queued[0].recv[queued[0].count / 2] += 1;
    nqueued = 0;
}
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, int type, int op, ncclComm_t comm, void *stream) {
    (void)stream;
    if (type != 2 || op != 0 || !comm || nqueued >= 64) return 4;
    queued[nqueued].send = send;
    queued[nqueued].recv = recv;
    queued[nqueued].count = count;
    nqueued++;
    if (!grouped) reduce();
    return 0;
}
ncclResult_t ncclGroupStart(void) { grouped++; return 0; }
ncclResult_t ncclGroupEnd(void) { if (grouped && --grouped == 0) reduce(); return 0; }
ncclResult_t ncclCommDestroy(ncclComm_t comm) { return comm ? 0 : 4; }
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *e) { (void)comm; *e = 0; return 0; }
const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case 0: return "no error";
    case 1: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case 2: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case 3: return "internal error - please report this issue to the NCCL developers";
    case 4: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case 5: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case 6: return "remote process exited or there was a network error";
    default: return "unknown result code";
    }
}
const char *ncclGetLastError(ncclComm_t comm) { (void)comm; return last_error; }
