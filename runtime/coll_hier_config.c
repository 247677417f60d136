/* coll_hier_config.c: the host engine's TP_* table (data: tprun links it to check and list the variables). */

#include "runtime_config_entry.h"

static tp_status_t check_hier(const char *text, char *err, size_t err_len)
{
    return tp_config_check_word("TP_COLL_HIER", "auto|on|off", text, err, err_len);
}

const tp_config_entry_t tp_host_coll_config[] = {
    {"TP_COLL_HIER", "coll_hier", TP_CONFIG_STRING, TP_CONFIG_USER | TP_CONFIG_AGREE, "auto",
     "host collectives on a comm over several hosts, some with several ranks: auto (large all_reduce, all_gather, "
     "reduce_scatter and broadcast go through each host's ranks, then between hosts), on (small calls too), off "
     "(every rank with every rank)",
     check_hier},
    {0},
};
