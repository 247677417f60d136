/* runtime_record.h: the bootstrap's data: peer records as text, the table, settings comparison. */
#ifndef RUNTIME_RECORD_H
#define RUNTIME_RECORD_H

#include <stddef.h>

#include "runtime_world.h"

#define TP_SETTINGS_MAX 256
#define TP_SETTING_KEY_MAX 64
#define TP_SETTING_VALUE_MAX 1024

/* A record with the settings its rank holds, as parsed from one rank's check-in. */
typedef struct tp_checkin {
    tp_peer_record_t record;
    tp_setting_t *settings;
    int num_settings;
} tp_checkin_t;

/* The world's table of n zeroed peer records (about 6 KB each), its pages made in one system call: touched one by one
 * they cost a page fault each, tens of microseconds in a VM, N * 1.5 faults on every rank. NULL when out of memory. */
tp_peer_record_t *tp_peers_alloc(int n);
void tp_peers_free(tp_peer_record_t *peers, int n);

/* Checks a setting's key and value: a reason in why when refused. */
int tp_setting_valid(const char *key, const char *value, char *why, size_t why_len);

/* This process's kernel and pid namespace ("boot_id/pidns inode"), or "" when unknown. */
void tp_kernel_identity(char *out, size_t len);

/* Appends a record and its settings as "key=value" lines ending with "end\n"; returns bytes or -1 if too long. */
int tp_record_format(const tp_peer_record_t *r, const tp_setting_t *settings, int num_settings, char *out,
                     size_t out_len);
/* Parses one record at *text (advanced past it); strict: unknown keys and bad values are refused. */
tp_status_t tp_record_parse(const char **text, tp_checkin_t *out, char *why, size_t why_len);
void tp_checkin_free(tp_checkin_t *c);

/*
 * Compares every rank's settings: a key whose value differs (or is missing on some ranks) is a mismatch, named
 * with the values and which ranks hold which ("setting part_bytes differs: 4194304 on ranks 0-2, 1048576 on
 * rank 3"). Every differing key is listed, separated by "; ".
 */
tp_status_t tp_settings_compare(const tp_checkin_t *checkins, int n, char *msg, size_t msg_len);

/* Looks up a transport's address ("tcp") in a record's address list; copies it into out. */
int tp_peer_address(const tp_peer_record_t *peer, const char *transport, char *out, size_t out_len);

/* Fills local_rank, local_size and node_rank of records that lack them, grouping ranks by host name. */
void tp_records_derive_locality(tp_peer_record_t *records, int n);

#endif
