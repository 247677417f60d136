/* nccl_config.c: the NCCL collective provider's TP_* table (data: tprun links it to check and list the variables). */

#include "runtime_config_entry.h"

static tp_status_t check_order(const char *text, char *err, size_t err_len)
{
    return tp_config_check_word("TP_NCCL_ORDER", "exact|nccl", text, err, err_len);
}

const tp_config_entry_t tp_nccl_config[] = {
    {"TP_NCCL_ORDER", "nccl_order", TP_CONFIG_STRING, TP_CONFIG_USER | TP_CONFIG_AGREE, "exact",
     "float reductions of CUDA buffers: exact (libtp's bits at any size: sums at 3+ ranks and max/min in rank order, "
     "by send/recv, a fold on the GPU, all-gather) or nccl (NCCL's own order and NaN rules, faster)",
     check_order},
    {"TP_NCCL_LIBRARY", "nccl_library", TP_CONFIG_STRING, TP_CONFIG_USER, "",
     "the NCCL library to load for CUDA buffers (a path or soname); empty: libnccl.so.2 from the loader's path", NULL},
    {0},
};
