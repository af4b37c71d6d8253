/* libibverbs.so.1 stand-in for the GDR write test's fault paths: one device, "fake0", port 1
 * (InfiniBand, LID 1), whose RDMA WRITEs are memcpy between registered regions. Built against
 * the real <infiniband/verbs.h> so that every structure gdrdoctor reads has the real layout.
 *
 * FAKE_IBV_PORT_STATE   ibv_query_port's state (4, ACTIVE)
 * FAKE_IBV_REG_ERRNO    the first ibv_reg_mr (the buffer under test) fails with this errno
 * FAKE_IBV_HOST_ERRNO   every ibv_reg_mr fails with this errno
 * FAKE_IBV_DMABUF_ERRNO ibv_reg_dmabuf_mr fails with this errno (95, EOPNOTSUPP, by default;
 *                       0 registers the iova)
 * FAKE_IBV_WC_STATUS    completions carry this status (0)
 * FAKE_IBV_DROP         completions never arrive
 * FAKE_IBV_CORRUPT      the first WRITE lands with one byte flipped
 * FAKE_IBV_OPEN_ERRNO   ibv_open_device fails with this errno
 * FAKE_IBV_NO_DEVICES   ibv_get_device_list lists nothing
 * FAKE_IBV_EFA          the device is an AWS EFA device, "rdmap79s0", as the efa provider and
 *                       driver show one: no RC queue pair (ibv_create_qp of any type but UD is
 *                       EOPNOTSUPP, providers/efa/verbs.c efa_create_qp), link layer
 *                       unspecified, LID 0, one GID, memory registered only with the remote
 *                       access FAKE_EFA_CAPS allows (efa_verbs.c efa_reg_mr); its SRD QPs come
 *                       from the stand-in libefa (efa.c)
 * FAKE_IBV_NO_RC        fake0 refuses RC queue pairs (EOPNOTSUPP) without being EFA
 * -DOMIT_<symbol>       leaves a symbol out (ibv_reg_dmabuf_mr, ibv_create_qp, ...) */
#include "fake_verbs.h"

#undef ibv_query_port
#undef ibv_reg_mr

/* Only a stand-in libefa (efa.c) may be asked about this device: a real one takes its context
 * for rdma-core's extended one (verbs_get_ctx), which it is not, and crashes. */
static struct { struct ibv_device device; } dev0;
static struct ibv_device *list[2];

static int efa(void) { return env_int("FAKE_IBV_EFA", 0); }

struct ibv_device **ibv_get_device_list(int *n) {
    if (env_int("FAKE_IBV_NO_DEVICES", 0)) { *n = 0; list[0] = NULL; return list; }
    strcpy(dev0.device.name, efa() ? "rdmap79s0" : "fake0");
    list[0] = &dev0.device;
    list[1] = NULL;
    *n = 1;
    return list;
}
void ibv_free_device_list(struct ibv_device **l) { (void)l; }
const char *ibv_get_device_name(struct ibv_device *d) { return d->name; }

#define MAX_MR 16
static struct ibv_mr *mrs[MAX_MR];
static int mr_access[MAX_MR];
static uint32_t next_key = 0x100;

#define MAX_WC 4096
static struct ibv_wc queue[MAX_WC];
static int head, tail;
static int writes;

static int fake_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc) {
    (void)cq;
    int k = 0;
    while (k < n && head != tail) { wc[k++] = queue[head]; head = (head + 1) % MAX_WC; }
    return k;
}

/* The region of `key` (an rkey when remote) holding [addr, addr + len), with `access`. */
static struct ibv_mr *find(uint32_t key, int remote, uint64_t addr, uint32_t len, int access) {
    for (int i = 0; i < MAX_MR; i++) {
        struct ibv_mr *m = mrs[i];
        if (!m) continue;
        if ((remote ? m->rkey : m->lkey) != key) continue;
        if ((mr_access[i] & access) != access) continue;
        uint64_t a = (uint64_t)(uintptr_t)m->addr;
        if (addr >= a && addr + len <= a + m->length) return m;
    }
    return NULL;
}

/* One RDMA WRITE (the local region is the source) or READ (the local region is the
 * destination): the bytes copied, the faults FAKE_IBV_* ask for, the completion queued. */
static void fake_rdma(uint64_t wr_id, uint32_t qp_num, int read, uint32_t lkey, uint64_t laddr,
                      uint32_t len, uint32_t rkey, uint64_t raddr, enum ibv_wc_opcode opcode,
                      enum ibv_wc_status failed) {
    struct ibv_wc c;
    memset(&c, 0, sizeof c);
    c.wr_id = wr_id;
    c.qp_num = qp_num;
    c.opcode = opcode;
    c.status = env_int("FAKE_IBV_WC_STATUS", 0);
    struct ibv_mr *l = find(lkey, 0, laddr, len, read ? IBV_ACCESS_LOCAL_WRITE : 0);
    struct ibv_mr *r = find(rkey, 1, raddr, len, read ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE);
    if (failed) c.status = failed;
    else if (!l) c.status = IBV_WC_LOC_PROT_ERR;
    else if (!r) c.status = IBV_WC_REM_ACCESS_ERR;
    else if (c.status == 0) {
        uint64_t dst = read ? laddr : raddr, src = read ? raddr : laddr;
        memcpy((void *)(uintptr_t)dst, (void *)(uintptr_t)src, len);
        if (writes++ == 0 && env_int("FAKE_IBV_CORRUPT", 0))
            ((unsigned char *)(uintptr_t)dst)[len / 2] ^= 0x5a;
        c.byte_len = len;
    }
    if (env_int("FAKE_IBV_DROP", 0)) return;
    queue[tail] = c;
    tail = (tail + 1) % MAX_WC;
}

static int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
    for (; wr; wr = wr->next) {
        if (wr->opcode != IBV_WR_RDMA_WRITE || wr->num_sge != 1) { *bad = wr; return EINVAL; }
        struct ibv_sge *s = wr->sg_list;
        fake_rdma(wr->wr_id, qp->qp_num, 0, s->lkey, s->addr, s->length, wr->wr.rdma.rkey,
                  wr->wr.rdma.remote_addr, IBV_WC_RDMA_WRITE, IBV_WC_SUCCESS);
    }
    return 0;
}

struct ibv_context *ibv_open_device(struct ibv_device *d) {
    int e = env_int("FAKE_IBV_OPEN_ERRNO", 0);
    if (e) { errno = e; return NULL; }
    struct fake_context *f = calloc(1, sizeof *f);
    f->ctx.device = d;
    f->ctx.ops.poll_cq = fake_poll_cq;
    f->ctx.ops.post_send = fake_post_send;
    f->magic = FAKE_MAGIC;
    f->efa = efa();
    f->rdma = fake_rdma;
    return &f->ctx;
}
int ibv_close_device(struct ibv_context *c) { free(c); return 0; }

int ibv_query_port(struct ibv_context *c, uint8_t port, struct _compat_ibv_port_attr *compat) {
    struct ibv_port_attr *a = (struct ibv_port_attr *)compat;
    struct fake_context *f = fake_context(c);
    if (port != 1) return EINVAL;
    memset(a, 0, offsetof(struct ibv_port_attr, flags));
    a->state = env_int("FAKE_IBV_PORT_STATE", IBV_PORT_ACTIVE);
    a->max_mtu = a->active_mtu = IBV_MTU_4096;
    a->lid = f && f->efa ? 0 : 1;
    a->phys_state = 5;
    a->link_layer = f && f->efa ? IBV_LINK_LAYER_UNSPECIFIED : IBV_LINK_LAYER_INFINIBAND;
    a->gid_tbl_len = 1;
    return 0;
}
int ibv_query_gid(struct ibv_context *c, uint8_t port, int index, union ibv_gid *gid) {
    struct fake_context *f = fake_context(c);
    (void)port;
    if (f && f->efa) {
        /* EFA: one GID, the device's address (the efa driver's gid_tbl_len 1). */
        if (index != 0) return EINVAL;
        fake_efa_gid(gid);
        return 0;
    }
    memset(gid, 0, sizeof *gid);
    gid->raw[0] = 0xfe; gid->raw[1] = 0x80; gid->raw[15] = 1;
    return 0;
}

struct ibv_pd *ibv_alloc_pd(struct ibv_context *c) {
    struct ibv_pd *pd = calloc(1, sizeof *pd);
    pd->context = c;
    return pd;
}
int ibv_dealloc_pd(struct ibv_pd *pd) { free(pd); return 0; }

/* EFA registers only the remote access its RDMA operations allow; any other flag is
 * EOPNOTSUPP (efa_verbs.c efa_reg_mr, supp_access_flags). */
static int refused_access(struct ibv_pd *pd, int access) {
    struct fake_context *f = fake_context(pd->context);
    if (!f || !f->efa) return 0;
    unsigned caps = fake_efa_caps();
    int supported = IBV_ACCESS_LOCAL_WRITE
        | (caps & FAKE_EFA_CAP_RDMA_READ ? IBV_ACCESS_REMOTE_READ : 0)
        | (caps & FAKE_EFA_CAP_RDMA_WRITE ? IBV_ACCESS_REMOTE_WRITE : 0);
    return access & ~supported;
}

static struct ibv_mr *add_mr(struct ibv_pd *pd, void *addr, size_t len, int access) {
    if (refused_access(pd, access)) { errno = EOPNOTSUPP; return NULL; }
    for (int i = 0; i < MAX_MR; i++) {
        if (mrs[i]) continue;
        struct ibv_mr *m = calloc(1, sizeof *m);
        m->context = pd->context;
        m->pd = pd;
        m->addr = addr;
        m->length = len;
        m->lkey = next_key++;
        m->rkey = next_key++;
        mrs[i] = m;
        mr_access[i] = access;
        return m;
    }
    errno = ENOMEM;
    return NULL;
}

static int reg_calls;
struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access) {
    int e = env_int("FAKE_IBV_HOST_ERRNO", 0);
    if (reg_calls++ == 0 && env_int("FAKE_IBV_REG_ERRNO", 0)) e = env_int("FAKE_IBV_REG_ERRNO", 0);
    if (e) { errno = e; return NULL; }
    return add_mr(pd, addr, len, access);
}

#ifndef OMIT_ibv_reg_dmabuf_mr
struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t len, uint64_t iova, int fd, int access) {
    (void)offset; (void)fd;
    int e = env_int("FAKE_IBV_DMABUF_ERRNO", EOPNOTSUPP);
    if (e) { errno = e; return NULL; }
    return add_mr(pd, (void *)(uintptr_t)iova, len, access);
}
#endif

int ibv_dereg_mr(struct ibv_mr *m) {
    for (int i = 0; i < MAX_MR; i++) if (mrs[i] == m) mrs[i] = NULL;
    free(m);
    return 0;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *c, int cqe, void *ctx, struct ibv_comp_channel *ch, int vec) {
    (void)cqe; (void)ctx; (void)ch; (void)vec;
    struct ibv_cq *cq = calloc(1, sizeof *cq);
    cq->context = c;
    return cq;
}
int ibv_destroy_cq(struct ibv_cq *cq) { free(cq); return 0; }

#ifndef OMIT_ibv_create_qp
struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr) {
    struct fake_context *f = fake_context(pd->context);
    if (attr->qp_type != IBV_QPT_UD && ((f && f->efa) || env_int("FAKE_IBV_NO_RC", 0))) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    struct ibv_qp *qp = calloc(1, sizeof *qp);
    qp->context = pd->context;
    qp->pd = pd;
    qp->qp_num = 0x11;
    qp->qp_type = attr->qp_type;
    return qp;
}
#endif

/* An SRD QP's transitions as the efa kernel driver allows them (efa_verbs.c
 * srd_qp_state_table, efa_modify_qp_validate): RESET -> INIT with exactly P_Key index 0,
 * port 1 and a QKEY; INIT -> RTR with nothing more; RTR -> RTS with an SQ PSN; any attribute
 * outside the supported set is EOPNOTSUPP. */
static int modify_srd(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask) {
    struct fake_srd_qp *s = (struct fake_srd_qp *)qp;
    const int supported = IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY |
        IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY | IBV_QP_SQ_PSN | IBV_QP_RNR_RETRY;
    if (mask & ~supported) return EOPNOTSUPP;
    if (!(mask & IBV_QP_STATE)) return EINVAL;
    switch (attr->qp_state) {
    case IBV_QPS_INIT:
        if (qp->state != IBV_QPS_RESET) return EINVAL;
        if ((mask & (IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)) !=
            (IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)) return EINVAL;
        if (attr->port_num != 1 || attr->pkey_index != 0) return EINVAL;
        s->qkey = attr->qkey;
        break;
    case IBV_QPS_RTR:
        if (qp->state != IBV_QPS_INIT || (mask & ~(IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_QKEY)))
            return EINVAL;
        break;
    case IBV_QPS_RTS:
        if (qp->state != IBV_QPS_RTR || !(mask & IBV_QP_SQ_PSN)) return EINVAL;
        break;
    default:
        return EINVAL;
    }
    qp->state = attr->qp_state;
    return 0;
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask) {
    if (qp->qp_type == IBV_QPT_DRIVER) return modify_srd(qp, attr, mask);
    /* The loopback must point at the QP itself. */
    if (attr->qp_state == IBV_QPS_RTR && attr->dest_qp_num != qp->qp_num) return EINVAL;
    qp->state = attr->qp_state;
    return 0;
}
int ibv_destroy_qp(struct ibv_qp *qp) {
    struct fake_context *f = fake_context(qp->context);
    for (int i = 0; f && i < FAKE_MAX_SRD; i++) if (f->srd[i] == qp) f->srd[i] = NULL;
    free(qp);
    return 0;
}

/* The builders of a QP created with send_ops_flags (libibverbs/verbs.c ibv_qp_to_qp_ex): here,
 * the SRD QPs of the stand-in libefa. */
struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp) {
    if (qp->qp_type != IBV_QPT_DRIVER || !((struct fake_srd_qp *)qp)->send_ops) return NULL;
    return (struct ibv_qp_ex *)qp;
}

/* An address handle; on EFA only to the device's own GID, which is all the stand-in reaches
 * (the efa driver builds one from the GRH's dgid, copied only when is_global is set). */
struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr) {
    struct fake_context *f = fake_context(pd->context);
    union ibv_gid own;
    fake_efa_gid(&own);
    if (f && f->efa && (!attr->is_global || memcmp(&attr->grh.dgid, &own, sizeof own) ||
                        attr->port_num != 1)) {
        errno = EINVAL;
        return NULL;
    }
    struct fake_ah *ah = calloc(1, sizeof *ah);
    ah->ah.context = pd->context;
    ah->ah.pd = pd;
    ah->dgid = attr->grh.dgid;
    ah->is_global = attr->is_global;
    return &ah->ah;
}
int ibv_destroy_ah(struct ibv_ah *ah) { free(ah); return 0; }
