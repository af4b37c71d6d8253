/* Prints the sizes and offsets src/ffi/efa.rs relies on, from the real <infiniband/efadv.h>
 * (libibverbs-dev), one "name value" per line; tests/verbs_layout.rs compares them. */
#include <stddef.h>
#include <stdio.h>
#include <infiniband/efadv.h>

#define SZ(t) printf("sizeof(%s) %zu\n", #t, sizeof(t))
#define OFF(t, f) printf("%s.%s %zu\n", #t, #f, offsetof(struct t, f))

int main(void) {
    SZ(struct efadv_device_attr);
    OFF(efadv_device_attr, max_sq_wr);
    OFF(efadv_device_attr, max_sq_sge);
    OFF(efadv_device_attr, inline_buf_size);
    OFF(efadv_device_attr, device_caps);
    OFF(efadv_device_attr, max_rdma_size);
    /* Newer headers append wr_flags (24 bytes); gdrdoctor passes the first 16, which every
     * libefa with efadv_create_qp_ex accepts: the header's struct must have at least those. */
    printf("sizeof(struct efadv_qp_init_attr), up to 16 %zu\n",
           sizeof(struct efadv_qp_init_attr) < 16 ? sizeof(struct efadv_qp_init_attr) : 16);
    OFF(efadv_qp_init_attr, driver_qp_type);
    return 0;
}
