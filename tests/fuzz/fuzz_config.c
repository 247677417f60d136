/* fuzz_config.c: TP_* values as tprun and libtp read them (runtime_config.c) and interface lists: TP_IFNAME's
 * filter and the "name:ip/prefix" lists records carry (runtime_iface.c). */
#include <stdio.h>

#include "fuzz_util.h"
#include "runtime_config.h"
#include "runtime_iface.h"
#include "runtime_log.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_quiet_logs();
    return 0;
}

static void values(const char *v)
{
    char err[512];
    int64_t i;
    uint64_t u;
    double d;
    int b;
    if (tp_config_parse_int("TP_FUZZ", v, &i, err, sizeof(err)) == TP_OK) FUZZ_ASSERT(i >= 0, "a negative integer");
    if (tp_config_parse_size("TP_FUZZ", v, &u, err, sizeof(err)) == TP_OK) FUZZ_ASSERT(u > 0, "a zero size");
    if (tp_config_parse_seconds("TP_FUZZ", v, &d, err, sizeof(err)) == TP_OK)
        FUZZ_ASSERT(d > 0 && d <= 1e7, "seconds out of range");
    if (tp_config_parse_bool("TP_FUZZ", v, &b, err, sizeof(err)) == TP_OK) FUZZ_ASSERT(b == 0 || b == 1, "a bool");
    (void)tp_log_level_parse(v);
}

/* A list that parses formats back to text that parses to the same interfaces. */
static int ifaces(const char *text, tp_iface_t *out)
{
    int n = tp_iface_parse(text, out, TP_IFACES_MAX);
    if (n < 0) return 0;
    char again[TP_IFACES_MAX * 64];
    tp_iface_t back[TP_IFACES_MAX];
    FUZZ_ASSERT(tp_iface_format(out, n, again, sizeof(again)) >= 0, "a parsed list does not format");
    FUZZ_ASSERT(tp_iface_parse(again, back, TP_IFACES_MAX) == n, "a formatted list does not parse");
    for (int i = 0; i < n; i++)
        FUZZ_ASSERT(strcmp(back[i].name, out[i].name) == 0 && strcmp(back[i].ip, out[i].ip) == 0 &&
                        back[i].prefix == out[i].prefix,
                    "an interface changed through format and parse");
    return n;
}

/* Lines: a value (every parser), a name the value filters as TP_IFNAME, two interface lists, a routed address;
 * every line is also an environment entry for the TP_* check. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_strdup(data, size);
    if (text == NULL) return 0;
    char *env[17] = {NULL}, *line[5] = {"", "", "", "", ""};
    int nenv = 0, nline = 0;
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l != NULL; l = strtok_r(NULL, "\n", &save)) {
        if (nline < 5) line[nline++] = l;
        if (nenv < 16) env[nenv++] = l;
    }
    values(line[0]);
    (void)tp_ifname_match(line[0], line[1]);
    static tp_iface_t mine[TP_IFACES_MAX], peer[TP_IFACES_MAX];
    int nmine = ifaces(line[2], mine), npeer = ifaces(line[3], peer), shared;
    char routed[16], cands[TP_IFACE_CANDIDATES][16], via[TP_IFACE_CANDIDATES][32];
    snprintf(routed, sizeof(routed), "%s", line[4]);
    int n = tp_iface_candidates(mine, nmine, peer, npeer, routed, cands, via, TP_IFACE_CANDIDATES, &shared);
    FUZZ_ASSERT(n >= 0 && n <= TP_IFACE_CANDIDATES && shared <= n, "candidates out of range");
    char err[512];
    (void)tp_config_check_environ(env, err, sizeof(err));
    free(text);
    return 0;
}
