/* fuzz_env.c: the world as a rank reads it from tprun's, torchrun's or no environment (runtime_env.c). */
#include <stdio.h>

#include "fuzz_util.h"
#include "runtime_env.h"
#include "runtime_log.h"

/* Every variable tp_world_from_env reads: the input may set any of them, and each input starts with none. */
static const char *const names[] = {
    "TP_RANK",       "TP_WORLD_SIZE", "TP_LOCAL_RANK",    "TP_LOCAL_WORLD_SIZE", "TP_NODE_RANK",
    "TP_JOB_KEY",    "TP_BOOT_ADDR",  "TP_JOB_ID",        "TP_BOOT_FD",          "RANK",
    "WORLD_SIZE",    "LOCAL_RANK",    "LOCAL_WORLD_SIZE", "GROUP_RANK",          "TORCHELASTIC_RUN_ID",
    "MASTER_ADDR",   "MASTER_PORT",   "TP_BOOT_TIMEOUT",  "TP_BOOT_REPORT",      "TP_HEARTBEAT_TIMEOUT",
    "TP_PART_BYTES", "TP_SPIN_US",    "TP_TRANSPORTS",    "TP_LOG_LEVEL",        "TP_IFNAME"};
#define NUM_NAMES (sizeof(names) / sizeof(names[0]))

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    for (size_t i = 0; i < NUM_NAMES; i++) unsetenv(names[i]);
    for (char **e = environ; *e != NULL;) { /* any other TP_* (or PMIx's) would make the result depend on the shell */
        if (strncmp(*e, "TP_", 3) == 0 || strncmp(*e, "PMIX_", 5) == 0) {
            char name[256];
            snprintf(name, sizeof(name), "%.*s", (int)strcspn(*e, "="), *e);
            unsetenv(name);
            e = environ;
        } else {
            e++;
        }
    }
    return 0;
}

/* Lines "I=value": I is a letter picking the variable ('a' + its index); the value is the rest. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_strdup(data, size);
    if (text == NULL) return 0;
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l != NULL; l = strtok_r(NULL, "\n", &save)) {
        size_t i = (size_t)(unsigned char)(l[0] - 'a');
        if (i < NUM_NAMES && l[1] == '=') setenv(names[i], l + 2, 1);
    }
    static tp_world_t w;
    if (tp_world_from_env(&w) == TP_OK) {
        FUZZ_ASSERT(w.size >= 1 && w.rank >= 0 && w.rank < w.size, "a world with the rank outside it");
        FUZZ_ASSERT(w.boot_nmore >= 0 && w.boot_nmore <= TP_BOOT_MORE_MAX, "too many boot addresses");
        FUZZ_ASSERT(w.source == TP_WORLD_SINGLETON || (w.boot_port > 0 && w.boot_port <= 65535),
                    "a boot port out of range");
    }
    for (size_t i = 0; i < NUM_NAMES; i++) unsetenv(names[i]);
    fuzz_quiet_logs(); /* TP_LOG_LEVEL in the input changed it */
    tp_log_set_rank(-1);
    free(text);
    return 0;
}
