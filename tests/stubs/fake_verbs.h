/* What the stand-in libibverbs (ibverbs.c) and the stand-in libefa (efa.c) share. The context
 * ibverbs.c hands out carries a hook that moves bytes between the regions it registered and
 * queues the completion, and the SRD queue pairs efa.c creates: so that an SRD QP's work
 * requests, built through its struct ibv_qp_ex, move real bytes and complete on the CQ
 * gdrdoctor polls, as the EFA provider's do. */
#include "common.h"
#include <errno.h>
#include <stddef.h>
#include <infiniband/verbs.h>

#define FAKE_MAGIC 0x66616b65u
#define FAKE_MAX_SRD 8

/* EFADV_DEVICE_ATTR_CAPS_* (rdma-core providers/efa/efadv.h): libefa's bits. Debian 12's
 * header predates RDMA_WRITE (added in 2023), so they are spelled out here. */
#define FAKE_EFA_CAP_RDMA_READ (1u << 0)
#define FAKE_EFA_CAP_RDMA_WRITE (1u << 3)

/* The EFA device's capabilities: FAKE_EFA_CAPS (RDMA READ, RNR retry, CQ with SGID and RDMA
 * WRITE, 0xf, by default). Both stand-ins read it: efadv_query_device reports it, and
 * ibv_reg_mr refuses the remote access it lacks, as the efa driver's efa_reg_mr does. */
static inline unsigned fake_efa_caps(void) {
    const char *v = getenv("FAKE_EFA_CAPS");
    return v && *v ? (unsigned)strtoul(v, NULL, 0) : 0xfu;
}

/* The EFA device's one GID (its address), index 0. */
static inline void fake_efa_gid(union ibv_gid *g) {
    memset(g, 0, sizeof *g);
    g->raw[0] = 0xfe; g->raw[1] = 0x80; g->raw[8] = 0x0e; g->raw[9] = 0xfa; g->raw[15] = 0x4f;
}

struct fake_context;

/* Moves len bytes between the local region (lkey, laddr) and the remote one (rkey, raddr) as
 * an RDMA WRITE (read = 0: the local region is the source) or READ (read = 1: the local region
 * is the destination), and queues a completion with wr_id, qp_num and opcode; with `failed`
 * set, moves nothing and completes with that status. */
typedef void (*fake_rdma_fn)(uint64_t wr_id, uint32_t qp_num, int read, uint32_t lkey,
                             uint64_t laddr, uint32_t len, uint32_t rkey, uint64_t raddr,
                             enum ibv_wc_opcode opcode, enum ibv_wc_status failed);

struct fake_context {
    struct ibv_context ctx;
    uint32_t magic;
    /* An EFA device (FAKE_IBV_EFA): no RC queue pair, link layer unspecified, one GID. */
    int efa;
    fake_rdma_fn rdma;
    /* The SRD QPs efa.c created on it, by number; ibv_destroy_qp takes them out. */
    struct ibv_qp *srd[FAKE_MAX_SRD];
};

/* The context ibverbs.c made, or NULL for any other. */
static inline struct fake_context *fake_context(struct ibv_context *c) {
    struct fake_context *f = (struct fake_context *)c;
    return c && f->magic == FAKE_MAGIC ? f : NULL;
}

/* An address handle: where it points. */
struct fake_ah {
    struct ibv_ah ah;
    union ibv_gid dgid;
    uint8_t is_global;
};

/* An SRD QP as efa.c makes it: the extended QP first (its qp_base is the struct ibv_qp that
 * ibv_modify_qp and ibv_destroy_qp are given), then its QKEY and the work request being built. */
struct fake_srd_qp {
    struct ibv_qp_ex ex;
    uint64_t send_ops;
    uint32_t qkey;
    int building, err, read;
    uint64_t wr_id;
    uint32_t rkey, lkey, len, dest_qpn, dest_qkey;
    uint64_t raddr, laddr;
    struct fake_ah *ah;
};
