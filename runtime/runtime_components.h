/* runtime_components.h: the one registration list of libtp's components (core, transports, devices, collective
 * providers) and tprun's settings, each with its TP_* table. */
#ifndef RUNTIME_COMPONENTS_H
#define RUNTIME_COMPONENTS_H

#include <stddef.h>

#include "runtime_config_entry.h"

typedef enum tp_component_kind {
    TP_COMPONENT_CORE,      /* libtp's core: world contract, bootstrap, fate, logging */
    TP_COMPONENT_TRANSPORT, /* ops: tp_transport_ops_t */
    TP_COMPONENT_DEVICE,    /* ops: the device ops table */
    TP_COMPONENT_COLL,      /* ops: the collective provider ops table */
    TP_COMPONENT_LAUNCHER,  /* tprun's own settings: no ops in libtp */
} tp_component_kind_t;

typedef struct tp_component {
    const char *name;
    tp_component_kind_t kind;
    const tp_config_entry_t *config; /* its TP_* variables, ended by {NULL}; NULL when it has none */
    const void *ops;                 /* its ops table, of kind's type; NULL in tprun, which links only the tables */
} tp_component_t;

/* In order of preference within a kind: the first transport that reaches a peer wins. */
extern const tp_component_t tp_components[];
extern const size_t tp_components_len;

/* "transport", "device", ...: how tprun --info and docs/ENVIRONMENT.md name a kind. */
const char *tp_component_kind_name(tp_component_kind_t kind);

#endif
