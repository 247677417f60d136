/* coll_hier_config.c: the host engine's TP_* table (data: tprun links it to check and list the variables). */
#include <stdio.h>
#include <string.h>

#include "runtime_config_entry.h"

static tp_status_t check_hier(const char *text, char *err, size_t err_len)
{
    if (strcmp(text, "auto") == 0 || strcmp(text, "on") == 0 || strcmp(text, "off") == 0) return TP_OK;
    snprintf(err, err_len, "TP_COLL_HIER: expected auto, on or off, got \"%.64s\"", text);
    return TP_ERR_INVALID;
}

const tp_config_entry_t tp_host_coll_config[] = {
    {"TP_COLL_HIER", "coll_hier", TP_CONFIG_STRING, TP_CONFIG_USER | TP_CONFIG_AGREE, "auto",
     "host collectives on a comm over several hosts, some with several ranks: auto (large all_reduce, all_gather, "
     "reduce_scatter and broadcast go through each host's ranks, then between hosts), on (small calls too), off "
     "(every rank with every rank)",
     check_hier},
    {0},
};
