/* tprun_config.h: the values of tprun's settings that both its command line and its TP_* table take, parsed in one
 * place (tprun_config.c, linked into tprun and libtp alike). */
#ifndef TPRUN_CONFIG_H
#define TPRUN_CONFIG_H

/* --bind-to and TP_BIND_TO: gpu (the default) binds only when a GPU or an HCA says where; numa and core always try. */
enum { TPRUN_BIND_GPU = 0, TPRUN_BIND_NONE, TPRUN_BIND_CORE, TPRUN_BIND_NUMA };
#define TPRUN_BIND_MODES_TEXT "gpu, numa, core or none"
/* "gpu", "none", "core" or "numa" to its mode, else -1; and back. */
int tprun_bind_mode_parse(const char *text);
const char *tprun_bind_mode_name(int mode);

/* --gpus-per-rank and TP_GPUS_PER_RANK: 0 or 1, else -1. */
#define TPRUN_GPUS_PER_RANK_TEXT "0 (no GPU per rank) or 1"
int tprun_gpus_per_rank_parse(const char *text);

#endif
