/* librccl.so.1 stand-in: the NCCL stand-in (tests/stubs/nccl.c) as RCCL builds it: RCCL's
 * banner and ROCr lines, its version in NCCL's encoding (FAKE_NCCL_VERSION, 22203 for RCCL
 * 2.22.3), the GPUs of the HIP stand-in (FAKE_HIP_BUSIDS), AMD's vendor id in the topology dump,
 * and its opt-in DMA-BUF line unless NCCL_DMABUF_ENABLE=1. */
#define RCCL 1
#include "nccl.c"
