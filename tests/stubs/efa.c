/* libefa.so.1 stand-in: the two direct verbs gdrdoctor calls, on the stand-in libibverbs'
 * EFA device (ibverbs.c with FAKE_IBV_EFA), checked as rdma-core's libefa checks them
 * (providers/efa/verbs.c) and built against the real <infiniband/efadv.h>. Its SRD QPs' work
 * requests, built through their struct ibv_qp_ex, move the bytes between the regions
 * ibverbs.c registered and complete on its CQ, as the EFA provider's do: an RDMA WRITE's
 * completion with opcode RDMA_WRITE, an RDMA READ's with opcode SEND (efa_process_cqe).
 *
 * FAKE_EFA_CAPS         efadv_query_device's device_caps (0xf: READ, RNR retry, CQ with SGID,
 *                       WRITE); ibverbs.c refuses registrations with remote access it lacks
 * FAKE_EFA_MAX_RDMA     max_rdma_size, the largest RDMA work request (1 GiB); a longer one is
 *                       refused by ibv_wr_complete
 * FAKE_EFA_MAX_SQ_WR    max_sq_wr (4096)
 * FAKE_EFA_QUERY_ERRNO  efadv_query_device returns this errno (EOPNOTSUPP is "not EFA")
 * -DOMIT_<symbol>       leaves a symbol out (efadv_create_qp_ex) */
#include "fake_verbs.h"
#include <infiniband/efadv.h>

static unsigned max_rdma(void) {
    const char *v = getenv("FAKE_EFA_MAX_RDMA");
    return v && *v ? (unsigned)strtoul(v, NULL, 0) : 1u << 30;
}

int efadv_query_device(struct ibv_context *c, struct efadv_device_attr *attr, uint32_t inlen) {
    struct fake_context *f = fake_context(c);
    /* Not an EFA device: the one call that tells, and it says so with EOPNOTSUPP. */
    if (!f || !f->efa) return EOPNOTSUPP;
    if (env_int("FAKE_EFA_QUERY_ERRNO", 0)) return env_int("FAKE_EFA_QUERY_ERRNO", 0);
    /* rdma-core at its newest needs up to inline_buf_size_ex (24 bytes). */
    if (inlen < offsetof(struct efadv_device_attr, device_caps)) return EINVAL;
    memset(attr, 0, inlen);
    attr->max_sq_wr = env_int("FAKE_EFA_MAX_SQ_WR", 4096);
    attr->max_rq_wr = 4096;
    attr->max_sq_sge = 2;
    attr->max_rq_sge = 3;
    attr->inline_buf_size = 32;
    unsigned caps = fake_efa_caps();
    unsigned rdma = FAKE_EFA_CAP_RDMA_READ | FAKE_EFA_CAP_RDMA_WRITE;
    if (inlen >= offsetof(struct efadv_device_attr, max_rdma_size))
        attr->device_caps = caps & ~rdma;
    /* RDMA READ, WRITE and max_rdma_size only when inlen reaches max_rdma_size. */
    if (inlen >= sizeof *attr) {
        attr->device_caps |= caps & rdma;
        attr->max_rdma_size = max_rdma();
    }
    return 0;
}

#ifndef OMIT_efadv_create_qp_ex
/* The builders of the SRD QPs below. */
static struct fake_srd_qp *srd(struct ibv_qp_ex *ex) { return (struct fake_srd_qp *)ex; }

static void wr_start(struct ibv_qp_ex *ex) {
    struct fake_srd_qp *s = srd(ex);
    s->building = 1;
    s->err = 0;
    s->ah = NULL;
    s->len = 0;
}

/* The opcode's builder, where the EFA provider checks the QP's state and the WR's flags
 * (efa_send_wr_alloc -> efa_post_send_validate): unsignaled WRs are not supported. */
static void builder(struct ibv_qp_ex *ex, int read, uint32_t rkey, uint64_t raddr) {
    struct fake_srd_qp *s = srd(ex);
    if (!s->building || ex->qp_base.state != IBV_QPS_RTS || !(ex->wr_flags & IBV_SEND_SIGNALED)) {
        s->err = EINVAL;
        return;
    }
    s->read = read;
    s->rkey = rkey;
    s->raddr = raddr;
    s->wr_id = ex->wr_id;
}
static void wr_rdma_write(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t raddr) { builder(ex, 0, rkey, raddr); }
static void wr_rdma_read(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t raddr) { builder(ex, 1, rkey, raddr); }

static void wr_set_ud_addr(struct ibv_qp_ex *ex, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey) {
    struct fake_srd_qp *s = srd(ex);
    s->ah = (struct fake_ah *)ah;
    s->dest_qpn = qpn;
    s->dest_qkey = qkey;
}

static void wr_set_sge(struct ibv_qp_ex *ex, uint32_t lkey, uint64_t addr, uint32_t len) {
    struct fake_srd_qp *s = srd(ex);
    s->lkey = lkey;
    s->laddr = addr;
    s->len = len;
}

/* The SRD QP a work request names, if it is one of this device's, ready to receive (RTR or
 * later) and of the QKEY the request carries. */
static int reachable(struct fake_srd_qp *s) {
    struct fake_context *f = fake_context(s->ex.qp_base.context);
    for (int i = 0; f && i < FAKE_MAX_SRD; i++) {
        struct ibv_qp *q = f->srd[i];
        if (q && q->qp_num == s->dest_qpn)
            return q->state >= IBV_QPS_RTR && ((struct fake_srd_qp *)q)->qkey == s->dest_qkey;
    }
    return 0;
}

static int wr_complete(struct ibv_qp_ex *ex) {
    struct fake_srd_qp *s = srd(ex);
    struct fake_context *f = fake_context(ex->qp_base.context);
    int err = s->err;
    s->building = 0;
    if (!err && (!s->ah || !s->len)) err = EINVAL;
    if (!err && s->len > max_rdma()) err = EINVAL;
    if (err) return err;
    /* A destination that is not there, or of another QKEY, drops the packets: the sender's
     * completion fails (the stand-in's choice of status). */
    enum ibv_wc_status failed = reachable(s) ? IBV_WC_SUCCESS : IBV_WC_REM_INV_REQ_ERR;
    f->rdma(s->wr_id, ex->qp_base.qp_num, s->read, s->lkey, s->laddr, s->len, s->rkey, s->raddr,
            s->read ? IBV_WC_SEND : IBV_WC_RDMA_WRITE, failed);
    return 0;
}

static void wr_abort(struct ibv_qp_ex *ex) { srd(ex)->building = 0; }

struct ibv_qp *efadv_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *attr,
                                  struct efadv_qp_init_attr *efa_attr, uint32_t inlen) {
    struct fake_context *f = fake_context(c);
    if (!f || !f->efa) { errno = EOPNOTSUPP; return NULL; }
    /* The checks of efadv_create_qp_ex and efa_check_qp_attr. */
    if (attr->qp_type != IBV_QPT_DRIVER || inlen < 12 || efa_attr->comp_mask ||
        efa_attr->driver_qp_type != EFADV_QP_DRIVER_TYPE_SRD) { errno = EINVAL; return NULL; }
    if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) ||
        (attr->comp_mask & ~(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) ||
        !attr->send_cq || !attr->recv_cq || attr->srq) { errno = EINVAL; return NULL; }
    unsigned caps = fake_efa_caps();
    uint64_t ops = attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS ? attr->send_ops_flags : 0;
    uint64_t allowed = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM
        | (caps & FAKE_EFA_CAP_RDMA_READ ? IBV_QP_EX_WITH_RDMA_READ : 0)
        | (caps & FAKE_EFA_CAP_RDMA_WRITE ? IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM : 0);
    if (ops & ~allowed) { errno = EOPNOTSUPP; return NULL; }
    if (attr->cap.max_send_wr > (uint32_t)env_int("FAKE_EFA_MAX_SQ_WR", 4096)) { errno = EINVAL; return NULL; }
    int slot = -1;
    for (int i = 0; i < FAKE_MAX_SRD && slot < 0; i++) if (!f->srd[i]) slot = i;
    if (slot < 0) { errno = ENOMEM; return NULL; }
    struct fake_srd_qp *s = calloc(1, sizeof *s);
    struct ibv_qp *qp = &s->ex.qp_base;
    qp->context = c;
    qp->pd = attr->pd;
    qp->send_cq = attr->send_cq;
    qp->recv_cq = attr->recv_cq;
    qp->qp_num = 0x20 + slot;
    qp->qp_type = IBV_QPT_DRIVER;
    qp->state = IBV_QPS_RESET;
    s->send_ops = ops;
    /* Always filled; an RDMA builder only when send_ops_flags asked for it (efa_qp_fill_wr_pfns). */
    s->ex.wr_start = wr_start;
    s->ex.wr_complete = wr_complete;
    s->ex.wr_abort = wr_abort;
    s->ex.wr_set_ud_addr = wr_set_ud_addr;
    s->ex.wr_set_sge = wr_set_sge;
    if (ops & IBV_QP_EX_WITH_RDMA_WRITE) s->ex.wr_rdma_write = wr_rdma_write;
    if (ops & IBV_QP_EX_WITH_RDMA_READ) s->ex.wr_rdma_read = wr_rdma_read;
    f->srd[slot] = qp;
    return qp;
}
#endif
