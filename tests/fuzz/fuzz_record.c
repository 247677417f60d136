/* fuzz_record.c: peer records and their settings as rank 0 and every rank parse them (runtime_record.c). */
#include <stdio.h>

#include "fuzz_util.h"
#include "runtime_record.h"

#define MAX_RECORDS 64

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_quiet_logs();
    return 0;
}

/* The same ranks, pids and strings (the strings are in different texts). */
static int same_record(const tp_peer_record_t *a, const tp_peer_record_t *b)
{
    const char *const sa[] = {a->host, a->boot_ip, a->kernel, a->addresses, a->ifaces, a->hcas,
                              a->hca_skip, a->gpu, a->cpus, a->numa, a->bind_why};
    const char *const sb[] = {b->host, b->boot_ip, b->kernel, b->addresses, b->ifaces, b->hcas,
                              b->hca_skip, b->gpu, b->cpus, b->numa, b->bind_why};
    for (size_t i = 0; i < sizeof(sa) / sizeof(sa[0]); i++)
        if (strcmp(sa[i], sb[i]) != 0) return 0;
    return a->rank == b->rank && a->pid == b->pid && a->local_rank == b->local_rank &&
           a->local_size == b->local_size && a->node_rank == b->node_rank;
}

/* A parsed record formats back to text that parses to the same record and settings. */
static void check_round_trip(const tp_checkin_t *c)
{
    static char text[TP_SETTINGS_MAX * (TP_SETTING_KEY_MAX + TP_SETTING_VALUE_MAX + 8) + 8192];
    int n = tp_record_format(&c->record, c->settings, c->num_settings, text, sizeof(text));
    FUZZ_ASSERT(n > 0, "a parsed record does not format");
    char *p = text;
    tp_checkin_t back;
    char why[256];
    FUZZ_ASSERT(tp_record_parse(&p, &back, why, sizeof(why)) == TP_OK, "a formatted record does not parse");
    FUZZ_ASSERT(*p == '\0', "a formatted record leaves bytes behind");
    FUZZ_ASSERT(same_record(&back.record, &c->record),
                "a record changed through format and parse");
    FUZZ_ASSERT(back.num_settings == c->num_settings, "settings lost through format and parse");
    for (int i = 0; i < c->num_settings; i++)
        FUZZ_ASSERT(strcmp(back.settings[i].key, c->settings[i].key) == 0 &&
                        strcmp(back.settings[i].value, c->settings[i].value) == 0,
                    "a setting changed through format and parse");
    tp_checkin_free(&back);
}

/* The input is a table: records one after another, as rank 0 sends it and as each rank checks in. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_strdup(data, size);
    if (text == NULL) return 0;
    static tp_checkin_t checkins[MAX_RECORDS];
    static tp_peer_record_t records[MAX_RECORDS];
    int n = 0;
    char *p = text;
    char why[256];
    while (*p != '\0' && n < MAX_RECORDS && tp_record_parse(&p, &checkins[n], why, sizeof(why)) == TP_OK) {
        check_round_trip(&checkins[n]);
        n++;
    }
    if (n > 0) {
        char msg[4096];
        tp_settings_compare(checkins, n, msg, sizeof(msg));
        for (int i = 0; i < n; i++) records[i] = checkins[i].record;
        tp_records_derive_locality(records, n);
        for (int i = 0; i < n; i++) {
            const tp_peer_record_t *was = &checkins[i].record, *now = &records[i];
            if (was->local_rank >= 0 && was->local_size > 0 && was->node_rank >= 0) continue; /* kept as sent */
            FUZZ_ASSERT(now->local_rank >= 0 && now->local_rank < now->local_size && now->node_rank >= 0 &&
                            now->node_rank < n,
                        "locality derived out of range");
        }
    }
    for (int i = 0; i < n; i++) tp_checkin_free(&checkins[i]);
    free(text);
    return 0;
}
