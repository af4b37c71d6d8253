/* Prints the sizes and offsets src/ffi/ibverbs.rs relies on, from the real <infiniband/verbs.h>
 * (libibverbs-dev), one "name value" per line; tests/verbs_layout.rs compares them. */
#include <stddef.h>
#include <stdio.h>
#include <infiniband/verbs.h>

#define SZ(t) printf("sizeof(%s) %zu\n", #t, sizeof(t))
#define OFF(t, f) printf("%s.%s %zu\n", #t, #f, offsetof(struct t, f))

int main(void) {
    /* The Rust struct adds room for newer fields; it compares the header's size without it. */
    SZ(struct ibv_port_attr);
    OFF(ibv_port_attr, state);
    OFF(ibv_port_attr, active_mtu);
    OFF(ibv_port_attr, lid);
    OFF(ibv_port_attr, phys_state);
    OFF(ibv_port_attr, link_layer);
    OFF(ibv_mr, lkey);
    OFF(ibv_mr, rkey);
    OFF(ibv_qp, qp_num);
    SZ(struct ibv_qp_init_attr);
    OFF(ibv_qp_init_attr, cap);
    OFF(ibv_qp_init_attr, qp_type);
    OFF(ibv_qp_init_attr, sq_sig_all);
    /* The one GID type (src/parse/rdma.rs) is what libibverbs reads and writes. */
    SZ(union ibv_gid);
    printf("_Alignof(union ibv_gid) %zu\n", _Alignof(union ibv_gid));
    SZ(struct ibv_ah_attr);
    OFF(ibv_ah_attr, dlid);
    OFF(ibv_ah_attr, is_global);
    OFF(ibv_ah_attr, port_num);
    OFF(ibv_global_route, sgid_index);
    OFF(ibv_global_route, hop_limit);
    SZ(struct ibv_qp_attr);
    OFF(ibv_qp_attr, path_mtu);
    OFF(ibv_qp_attr, dest_qp_num);
    OFF(ibv_qp_attr, qp_access_flags);
    OFF(ibv_qp_attr, ah_attr);
    OFF(ibv_qp_attr, pkey_index);
    OFF(ibv_qp_attr, max_rd_atomic);
    OFF(ibv_qp_attr, min_rnr_timer);
    OFF(ibv_qp_attr, port_num);
    OFF(ibv_qp_attr, rnr_retry);
    OFF(ibv_qp_attr, rate_limit);
    SZ(struct ibv_sge);
    SZ(struct ibv_send_wr);
    OFF(ibv_send_wr, sg_list);
    OFF(ibv_send_wr, num_sge);
    OFF(ibv_send_wr, opcode);
    OFF(ibv_send_wr, send_flags);
    OFF(ibv_send_wr, wr.rdma.remote_addr);
    OFF(ibv_send_wr, wr.rdma.rkey);
    OFF(ibv_send_wr, qp_type.xrc.remote_srqn);
    SZ(struct ibv_wc);
    OFF(ibv_wc, status);
    OFF(ibv_wc, byte_len);
    OFF(ibv_wc, qp_num);
    OFF(ibv_context, ops.poll_cq);
    OFF(ibv_context, ops.post_send);
    SZ(struct ibv_context_ops);
    /* An SRD queue pair (src/ffi/ibverbs/srd.rs): the extended QP's builders, the attributes
     * efadv_create_qp_ex takes, and SRD's QKEY and send PSN. */
    SZ(struct ibv_qp);
    OFF(ibv_qp_ex, wr_id);
    OFF(ibv_qp_ex, wr_flags);
    OFF(ibv_qp_ex, wr_rdma_read);
    OFF(ibv_qp_ex, wr_rdma_write);
    OFF(ibv_qp_ex, wr_set_ud_addr);
    OFF(ibv_qp_ex, wr_set_sge);
    OFF(ibv_qp_ex, wr_start);
    OFF(ibv_qp_ex, wr_complete);
    OFF(ibv_qp_ex, wr_abort);
    SZ(struct ibv_qp_init_attr_ex);
    OFF(ibv_qp_init_attr_ex, comp_mask);
    OFF(ibv_qp_init_attr_ex, pd);
    OFF(ibv_qp_init_attr_ex, max_tso_header);
    OFF(ibv_qp_init_attr_ex, rx_hash_conf);
    OFF(ibv_qp_init_attr_ex, source_qpn);
    OFF(ibv_qp_init_attr_ex, send_ops_flags);
    OFF(ibv_qp_attr, qkey);
    OFF(ibv_qp_attr, sq_psn);
    return 0;
}
