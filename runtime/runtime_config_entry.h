/* runtime_config_entry.h: what one TP_* variable's table entry is; the registration list and every component's
 * table use it without the walkers of runtime_config.h. */
#ifndef RUNTIME_CONFIG_ENTRY_H
#define RUNTIME_CONFIG_ENTRY_H

#include <stddef.h>

#include "tp.h"

typedef enum tp_config_kind {
    TP_CONFIG_STRING,
    TP_CONFIG_INT,     /* a non-negative integer */
    TP_CONFIG_SIZE,    /* a positive byte count, with an optional K, M or G suffix */
    TP_CONFIG_SECONDS, /* a positive duration in seconds, decimals allowed */
    TP_CONFIG_BOOL,    /* 0/1, yes/no, true/false, on/off */
} tp_config_kind_t;

/* Who sets a variable: the user (a setting), or a launcher for each rank (the world contract). */
enum {
    TP_CONFIG_USER = 1u << 0,
    TP_CONFIG_LAUNCHER = 1u << 1,
    TP_CONFIG_AGREE = 1u << 2,  /* must be equal on every rank: compared by the settings agreement */
    TP_CONFIG_TPRUN = 1u << 3,  /* read by tprun itself; without TP_CONFIG_USER, set by tprun for its ranks */
    TP_CONFIG_SECRET = 1u << 4, /* its value is never printed (tprun --info shows "(set)") */
};

/* The check of a variable that takes one of words ('|' between them, "fatal|return"): else "TP_X: expected fatal or
 * return, got "y"" in err (runtime_config.c). */
tp_status_t tp_config_check_word(const char *env, const char *words, const char *text, char *err, size_t err_len);

/* A component's table is an array of entries ended by one whose env is NULL ({NULL}). */
typedef struct tp_config_entry {
    const char *env;           /* TP_BOOT_TIMEOUT */
    const char *setting;       /* boot_timeout: the name in the settings agreement and messages */
    tp_config_kind_t kind;
    unsigned flags;
    const char *default_value; /* NULL: unset by default */
    const char *help;          /* one line */
    /* A value check beyond the kind's (bounds, names), or NULL; writes a message naming the variable into err. */
    tp_status_t (*check)(const char *text, char *err, size_t err_len);
} tp_config_entry_t;

#endif
