/* runtime_config.h: TP_* environment variables as tables each component owns, with defaults and help text; the
 * walkers over every registered component's table (runtime_components.c lists them). */
#ifndef RUNTIME_CONFIG_H
#define RUNTIME_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "runtime_config_entry.h"
#include "tp.h"


/* The entry of a TP_* name in any registered component's table, else NULL. */
const tp_config_entry_t *tp_config_find_env(const char *env);

/* Parses a value of an entry's kind; on error writes a message naming the variable into err. */
tp_status_t tp_config_parse_int(const char *name, const char *text, int64_t *out, char *err, size_t err_len);
tp_status_t tp_config_parse_size(const char *name, const char *text, uint64_t *out, char *err, size_t err_len);
tp_status_t tp_config_parse_seconds(const char *name, const char *text, double *out, char *err, size_t err_len);
tp_status_t tp_config_parse_bool(const char *name, const char *text, int *out, char *err, size_t err_len);

/* TP_PART_BYTES: a size with bounds: a part holds an element of any type (8 bytes) and its length fits a frame's
 * 32-bit field. */
#define TP_PART_BYTES_MIN 64
#define TP_PART_BYTES_MAX (1ull << 30)
tp_status_t tp_config_parse_part_bytes(const char *text, uint64_t *out, char *err, size_t err_len);

/* The registered transports' names, in order of preference (at most max); returns how many are registered. */
int tp_config_transport_names(const char **names, int max);

/* The entries marked TP_CONFIG_AGREE of every registered component, in list order (at most max into out, which may
 * be NULL); returns how many there are. */
int tp_config_agreed(const tp_config_entry_t **out, int max);

/* An entry's value as the settings agreement states it: parsed and printed back, so 4M and 4194304 agree. text
 * must have passed the entry's check; NULL (unset) gives "". */
void tp_config_canonical(const tp_config_entry_t *e, const char *text, char *out, size_t len);

/* The environment's value of an entry, else its default (NULL when neither). */
const char *tp_config_value(const char *env);
/* A seconds entry's value that tp_init has checked already (the test hooks): 0 when unset. */
double tp_config_seconds(const char *env);

/* Checks every known TP_* variable in environ: the first bad value is the error written into err. */
tp_status_t tp_config_check_environ(char *const *environ_, char *err, size_t err_len);
/* Writes the TP_* names in environ that the table does not hold into out, comma-separated; returns how many. */
int tp_config_unknown(char *const *environ_, char *out, size_t len);
/* One warning naming every unknown TP_* variable in environ, so a typo does not go unnoticed. */
void tp_config_warn_unknown(char *const *environ_);

/* Writes every component's table (variable, default, current value, help) under the component's name, then any
 * unknown TP_* names set, to fd (tprun --info). */
void tp_config_print(int fd);
/* Writes every component's table as the markdown docs/ENVIRONMENT.md holds between its markers (tests/config_doc). */
void tp_config_print_doc(int fd);

#endif
