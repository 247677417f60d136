/* shm_config.c: the shm transport's TP_* table (data: tprun links it to check and list the variables). */
#include <stdio.h>

#include <string.h>

#include "runtime_config.h"
#include "runtime_config_entry.h"

static tp_status_t check_cma_bytes(const char *text, char *err, size_t err_len)
{
    uint64_t v;
    return strcmp(text, "0") == 0 ? TP_OK : tp_config_parse_size("TP_SHM_CMA_BYTES", text, &v, err, err_len);
}

const tp_config_entry_t tp_shm_config[] = {
    {"TP_SHM_CMA_BYTES", "shm_cma_bytes", TP_CONFIG_STRING, TP_CONFIG_USER, "0",
     "shm: frames of at least this many bytes (above 1 KiB) are read straight from the sender's buffer with "
     "process_vm_readv, one copy instead of two through the ring, where the kernel allows it; 0 (default): never",
     check_cma_bytes},
    {0},
};
