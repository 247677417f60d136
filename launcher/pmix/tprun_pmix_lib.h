/* tprun_pmix_lib.h: libpmix's server calls through the dlopen'd table, and the server state (tprun_pmix*.c only). */
#ifndef TPRUN_PMIX_LIB_H
#define TPRUN_PMIX_LIB_H

#include <pmix.h>
#include <pmix_server.h>

#include "runtime_pmix_compat.h"

#define TPRUN_PMIX_SYMBOLS(X)                                                                                          \
    X(PMIx_server_init)                                                                                                \
    X(PMIx_server_finalize) X(PMIx_server_register_nspace) X(PMIx_server_register_client) X(PMIx_server_setup_fork)    \
        X(PMIx_server_dmodex_request) X(PMIx_generate_regex) X(PMIx_generate_ppn) X(PMIx_Notify_event)                 \
            X(PMIx_Error_string) X(PMIx_Info_load) X(PMIx_Value_destruct)
#define TPRUN_PMIX_FIELD(name) __typeof__(name) *p_##name;
typedef struct tprun_pmix_lib {
    void *handle;
    TPRUN_PMIX_SYMBOLS(TPRUN_PMIX_FIELD)
} tprun_pmix_lib_t;
extern tprun_pmix_lib_t tprun_pmix_lib;

/* From here on, every PMIx call (the header's macros included) goes through the loaded table. */
#define PMIx_server_init            (*tprun_pmix_lib.p_PMIx_server_init)
#define PMIx_server_finalize        (*tprun_pmix_lib.p_PMIx_server_finalize)
#define PMIx_server_register_nspace (*tprun_pmix_lib.p_PMIx_server_register_nspace)
#define PMIx_server_register_client (*tprun_pmix_lib.p_PMIx_server_register_client)
#define PMIx_server_setup_fork      (*tprun_pmix_lib.p_PMIx_server_setup_fork)
#define PMIx_server_dmodex_request  (*tprun_pmix_lib.p_PMIx_server_dmodex_request)
#define PMIx_generate_regex         (*tprun_pmix_lib.p_PMIx_generate_regex)
#define PMIx_generate_ppn           (*tprun_pmix_lib.p_PMIx_generate_ppn)
#define PMIx_Notify_event           (*tprun_pmix_lib.p_PMIx_Notify_event)
#define PMIx_Error_string           (*tprun_pmix_lib.p_PMIx_Error_string)
#define PMIx_Info_load              (*tprun_pmix_lib.p_PMIx_Info_load)
#define PMIx_Value_destruct         (*tprun_pmix_lib.p_PMIx_Value_destruct)

/* The one server of this process (libpmix allows one). */
typedef struct tprun_pmix_server {
    int up; /* PMIx_server_init succeeded */
    pmix_nspace_t nspace;
    int world_size;
} tprun_pmix_server_t;
extern tprun_pmix_server_t tprun_pmix_srv;

/* The upcalls of tprun_pmix_ops.c that PMIx_server_init registers. */
extern pmix_server_module_t tprun_pmix_module;
/* tprun_pmix_ops.c: creates the event fds (before the server starts) and frees what is pending (after it ends). */
int tprun_pmix_ops_open(void);
void tprun_pmix_ops_close(void);

#endif
