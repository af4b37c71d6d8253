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
 * -DOMIT_<symbol>       leaves a symbol out (ibv_reg_dmabuf_mr, ibv_create_qp, ...) */
#include "common.h"
#include <errno.h>
#include <infiniband/verbs.h>

#undef ibv_query_port
#undef ibv_reg_mr

struct fake_device { char name[16]; };
static struct fake_device dev0 = { "fake0" };
static struct ibv_device *list[2];

struct ibv_device **ibv_get_device_list(int *n) {
    if (env_int("FAKE_IBV_NO_DEVICES", 0)) { *n = 0; list[0] = NULL; return list; }
    list[0] = (struct ibv_device *)&dev0;
    list[1] = NULL;
    *n = 1;
    return list;
}
void ibv_free_device_list(struct ibv_device **l) { (void)l; }
const char *ibv_get_device_name(struct ibv_device *d) { return ((struct fake_device *)d)->name; }

#define MAX_MR 16
static struct ibv_mr *mrs[MAX_MR];
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

static struct ibv_mr *find(uint32_t key, int remote, uint64_t addr, uint32_t len) {
    for (int i = 0; i < MAX_MR; i++) {
        struct ibv_mr *m = mrs[i];
        if (!m) continue;
        if ((remote ? m->rkey : m->lkey) != key) continue;
        uint64_t a = (uint64_t)(uintptr_t)m->addr;
        if (addr >= a && addr + len <= a + m->length) return m;
    }
    return NULL;
}

static int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
    for (; wr; wr = wr->next) {
        struct ibv_wc c;
        memset(&c, 0, sizeof c);
        c.wr_id = wr->wr_id;
        c.qp_num = qp->qp_num;
        c.opcode = IBV_WC_RDMA_WRITE;
        c.status = env_int("FAKE_IBV_WC_STATUS", 0);
        if (wr->opcode != IBV_WR_RDMA_WRITE || wr->num_sge != 1) { *bad = wr; return EINVAL; }
        struct ibv_sge *s = wr->sg_list;
        struct ibv_mr *l = find(s->lkey, 0, s->addr, s->length);
        struct ibv_mr *r = find(wr->wr.rdma.rkey, 1, wr->wr.rdma.remote_addr, s->length);
        if (!l) c.status = IBV_WC_LOC_PROT_ERR;
        else if (!r) c.status = IBV_WC_REM_ACCESS_ERR;
        else if (c.status == 0) {
            memcpy((void *)(uintptr_t)wr->wr.rdma.remote_addr, (void *)(uintptr_t)s->addr, s->length);
            if (writes++ == 0 && env_int("FAKE_IBV_CORRUPT", 0))
                ((unsigned char *)(uintptr_t)wr->wr.rdma.remote_addr)[s->length / 2] ^= 0x5a;
            c.byte_len = s->length;
        }
        if (env_int("FAKE_IBV_DROP", 0)) continue;
        queue[tail] = c;
        tail = (tail + 1) % MAX_WC;
    }
    return 0;
}

struct ibv_context *ibv_open_device(struct ibv_device *d) {
    int e = env_int("FAKE_IBV_OPEN_ERRNO", 0);
    if (e) { errno = e; return NULL; }
    struct ibv_context *c = calloc(1, sizeof *c);
    c->device = d;
    c->ops.poll_cq = fake_poll_cq;
    c->ops.post_send = fake_post_send;
    return c;
}
int ibv_close_device(struct ibv_context *c) { free(c); return 0; }

int ibv_query_port(struct ibv_context *c, uint8_t port, struct _compat_ibv_port_attr *compat) {
    struct ibv_port_attr *a = (struct ibv_port_attr *)compat;
    (void)c;
    if (port != 1) return EINVAL;
    memset(a, 0, offsetof(struct ibv_port_attr, flags));
    a->state = env_int("FAKE_IBV_PORT_STATE", IBV_PORT_ACTIVE);
    a->max_mtu = a->active_mtu = IBV_MTU_4096;
    a->lid = 1;
    a->phys_state = 5;
    a->link_layer = IBV_LINK_LAYER_INFINIBAND;
    return 0;
}
int ibv_query_gid(struct ibv_context *c, uint8_t port, int index, union ibv_gid *gid) {
    (void)c; (void)port; (void)index;
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

static struct ibv_mr *add_mr(struct ibv_pd *pd, void *addr, size_t len) {
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
        return m;
    }
    errno = ENOMEM;
    return NULL;
}

static int reg_calls;
struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access) {
    (void)access;
    int e = env_int("FAKE_IBV_HOST_ERRNO", 0);
    if (reg_calls++ == 0 && env_int("FAKE_IBV_REG_ERRNO", 0)) e = env_int("FAKE_IBV_REG_ERRNO", 0);
    if (e) { errno = e; return NULL; }
    return add_mr(pd, addr, len);
}

#ifndef OMIT_ibv_reg_dmabuf_mr
struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t len, uint64_t iova, int fd, int access) {
    (void)offset; (void)fd; (void)access;
    int e = env_int("FAKE_IBV_DMABUF_ERRNO", EOPNOTSUPP);
    if (e) { errno = e; return NULL; }
    return add_mr(pd, (void *)(uintptr_t)iova, len);
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
    (void)attr;
    struct ibv_qp *qp = calloc(1, sizeof *qp);
    qp->context = pd->context;
    qp->pd = pd;
    qp->qp_num = 0x11;
    return qp;
}
#endif
int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask) {
    (void)mask;
    /* The loopback must point at the QP itself. */
    if (attr->qp_state == IBV_QPS_RTR && attr->dest_qp_num != qp->qp_num) return EINVAL;
    qp->state = attr->qp_state;
    return 0;
}
int ibv_destroy_qp(struct ibv_qp *qp) { free(qp); return 0; }
