/* runtime_status.c: status strings and scopes. */
#include "tp.h"

const char *tp_status_string(tp_status_t status)
{
    switch (status) {
    case TP_OK: return "success";
    case TP_ERR_INVALID: return "invalid argument";
    case TP_ERR_NO_MEMORY: return "out of memory";
    case TP_ERR_UNSUPPORTED: return "not supported";
    case TP_ERR_STATE: return "called in the wrong state";
    case TP_ERR_SYSTEM: return "system call failed";
    case TP_ERR_NOT_FOUND: return "not found";
    case TP_ERR_PEER_FAILED: return "a peer failed";
    case TP_ERR_PROTOCOL: return "protocol violation by a peer";
    case TP_ERR_BOOTSTRAP: return "bootstrap failed";
    case TP_ERR_MISMATCH: return "settings differ between ranks";
    case TP_ERR_DESYNC: return "ranks called different collectives";
    case TP_ERR_ABORTED: return "job aborted";
    case TP_STOPPED: return "peers called tp_finalize while this rank waited";
    }
    return "unknown status";
}

tp_scope_t tp_status_scope(tp_status_t status)
{
    if (status == TP_OK) return TP_SCOPE_NONE;
    if (status > -100) return TP_SCOPE_CALL;
    if (status > -200) return TP_SCOPE_PEER;
    return TP_SCOPE_JOB;
}

const char *tp_version(void) { return PACKAGE_VERSION; }
