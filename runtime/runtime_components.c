/* runtime_components.c: every component, one line each. libtp is built with TP_COMPONENT_OPS and links each
 * component's ops; tprun (and tests that link no transport code) build this file without it and get the tables.
 * A component that configure may leave out has its line between #if TP_HAVE_<NAME> and #endif. */
#include "runtime_components.h"

#include "tp_provider.h"

#ifdef TP_COMPONENT_OPS
#define OPS(ops) (&(ops))
#else
#define OPS(ops) NULL
#endif

/* Each component's table, defined in its <name>_config.c beside the code that reads it (listed in TP_CONFIG_TABLES,
 * runtime/local.mk); each component's ops. */
extern const tp_config_entry_t tp_core_config[], tp_tprun_config[], tp_stage_config[], tp_host_coll_config[];
extern const tp_transport_ops_t tp_shm_ops, tp_tcp_ops;
extern const tp_device_ops_t tp_cuda_device_ops, tp_hip_device_ops;
extern const tp_coll_ops_t tp_staged_coll_ops;
extern const tp_config_entry_t tp_nccl_config[], tp_shm_config[];
extern const tp_coll_ops_t tp_nccl_coll_ops;

const tp_component_t tp_components[] = {
    {"core", TP_COMPONENT_CORE, tp_core_config, NULL},
    {"shm", TP_COMPONENT_TRANSPORT, tp_shm_config, OPS(tp_shm_ops)},
    {"tcp", TP_COMPONENT_TRANSPORT, NULL, OPS(tp_tcp_ops)},
    {"cuda", TP_COMPONENT_DEVICE, NULL, OPS(tp_cuda_device_ops)},
    {"hip", TP_COMPONENT_DEVICE, NULL, OPS(tp_hip_device_ops)},
    {"host", TP_COMPONENT_DEVICE, NULL, OPS(tp_host_device_ops)},
    {"nccl", TP_COMPONENT_COLL, tp_nccl_config, OPS(tp_nccl_coll_ops)},
    {"host", TP_COMPONENT_COLL, tp_host_coll_config, OPS(tp_host_coll_ops)},
    /* after host: a comm's providers end in reverse order, so its queued stream calls still have the host engine */
    {"staged", TP_COMPONENT_COLL, tp_stage_config, OPS(tp_staged_coll_ops)},
    {"tprun", TP_COMPONENT_LAUNCHER, tp_tprun_config, NULL},
};
const size_t tp_components_len = sizeof(tp_components) / sizeof(tp_components[0]);
