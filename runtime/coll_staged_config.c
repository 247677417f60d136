/* coll_staged_config.c: the staging provider's TP_* table, data that tprun links without libtp. */
#include "runtime_config_entry.h"

const tp_config_entry_t tp_stage_config[] = {
    {"TP_STAGE_TIMEOUT", "stage_timeout", TP_CONFIG_SECONDS, TP_CONFIG_USER, "30",
     "staged calls: how long the proxy waits for one of its copies, and tp_comm_destroy/tp_finalize for queued calls "
     "whose streams have not reached them, before failing or cancelling them",
     NULL},
    {0},
};
