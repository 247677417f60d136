/* shm_config.c: the shm transport's TP_* table (data: tprun links it to check and list the variables). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_config_entry.h"
#include "shm.h"

int shm_parse_bytes(const char *text, uint64_t *out)
{
    char *end;
    if (text == NULL || text[0] < '0' || text[0] > '9') return -1;
    unsigned long long v = strtoull(text, &end, 10);
    int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
    if (shift != 0) end++;
    if (*end != '\0' || v > (UINT64_MAX >> shift)) return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

uint64_t shm_min_frame(const char *name, const char *dflt)
{
    uint64_t min = 0;
    if (shm_parse_bytes(getenv(name), &min) != 0) shm_parse_bytes(dflt, &min);
    return min == 0 || min > SHM_INLINE_MAX ? min : SHM_INLINE_MAX + 1;
}

int shm_write_setting(const char *text)
{
    if (text == NULL || strcmp(text, "auto") == 0) return SHM_WRITE_AUTO;
    if (strcmp(text, "cached") == 0) return SHM_WRITE_CACHED;
    if (strcmp(text, "streaming") == 0) return SHM_WRITE_STREAMING;
    return -1;
}

int shm_cma_auto(const char *text) { return strcmp(text != NULL ? text : SHM_CMA_BYTES_TEXT, "auto") == 0; }

int shm_walk_setting(const char *text)
{
    if (text == NULL || strcmp(text, "auto") == 0) return SHM_WALK_AUTO;
    if (strcmp(text, "always") == 0) return SHM_WALK_ALWAYS;
    if (strcmp(text, "never") == 0) return SHM_WALK_NEVER;
    return -1;
}

static tp_status_t check_bytes(const char *name, const char *text, char *err, size_t err_len)
{
    uint64_t v;
    if (shm_parse_bytes(text, &v) == 0) return TP_OK;
    snprintf(err, err_len, "%s: expected a byte count such as 0, 4096, 64K or 1M, got \"%.64s\"", name, text);
    return TP_ERR_INVALID;
}

static tp_status_t check_cma_bytes(const char *text, char *err, size_t err_len)
{
    uint64_t v;
    if (shm_cma_auto(text) || shm_parse_bytes(text, &v) == 0) return TP_OK;
    snprintf(err, err_len, "TP_SHM_CMA_BYTES: expected auto or a byte count such as 0, 64K or 1M, got \"%.64s\"",
             text);
    return TP_ERR_INVALID;
}

static tp_status_t check_map_bytes(const char *text, char *err, size_t err_len)
{
    return check_bytes("TP_SHM_MAP_BYTES", text, err, err_len);
}

static tp_status_t check_write(const char *text, char *err, size_t err_len)
{
    if (shm_write_setting(text) >= 0) return TP_OK;
    snprintf(err, err_len, "TP_SHM_WRITE: expected auto, cached or streaming, got \"%.64s\"", text);
    return TP_ERR_INVALID;
}

static tp_status_t check_walk(const char *text, char *err, size_t err_len)
{
    if (shm_walk_setting(text) >= 0) return TP_OK;
    snprintf(err, err_len, "TP_SHM_RING_WALK: expected auto, always or never, got \"%.64s\"", text);
    return TP_ERR_INVALID;
}

const tp_config_entry_t tp_shm_config[] = {
    {"TP_SHM_CMA_BYTES", "shm_cma_bytes", TP_CONFIG_STRING, TP_CONFIG_USER, SHM_CMA_BYTES_TEXT,
     "shm: frames of at least this many bytes (above 1 KiB) are read straight from the sender's buffer with "
     "process_vm_readv, one copy instead of two through the ring, where the kernel allows it; 0: never; auto "
     "(default): sends of 256 KiB and more that meet a receive from the same peer (an exchange) go whichever way "
     "timed exchanges show faster, unless this kernel's ranks outnumber their CPUs (see ENGINE.md); a 2-rank "
     "all_reduce or reduce_scatter of 512 KiB and more may go by CMA (lent) unless 0",
     check_cma_bytes},
    {"TP_SHM_MAP_BYTES", "shm_map_bytes", TP_CONFIG_STRING, TP_CONFIG_USER, SHM_MAP_BYTES_TEXT,
     "shm: frames of at least this many bytes (above 1 KiB) whose bytes lie in memory from tp_mem_alloc are read by "
     "the peer where they lie, through its mapping of that memory, one copy instead of two through the ring; 0: never",
     check_map_bytes},
    {"TP_SHM_WRITE", "shm_write", TP_CONFIG_STRING, TP_CONFIG_USER, "auto",
     "shm: how payloads of over 240 bytes are written into a peer's ring: cached (through this CPU's cache, which "
     "the peer reads them from), streaming (x86-64 streaming stores, to memory) or auto (default: cached, and "
     "streaming for chunks of 32 KiB and more while timed cached writes show the peer's CPU far from this one's "
     "cache; see ENGINE.md)",
     check_write},
    {"TP_SHM_RING_WALK", "shm_ring_walk", TP_CONFIG_STRING, TP_CONFIG_USER, "auto",
     "shm: where ring frames of 64 KiB and more, and the frames of a transfer of several, go: always on where the "
     "last one ended, through the whole ring; "
     "never (back at the ring's start whenever they fit there, rewriting the lines the peer has just read); or auto "
     "(default: always, but never while this kernel's ranks outnumber the CPUs they may run on; see ENGINE.md)",
     check_walk},
    {0},
};
