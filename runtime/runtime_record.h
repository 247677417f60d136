/* runtime_record.h: the bootstrap's data: peer records as text, the table, settings comparison. */
#ifndef RUNTIME_RECORD_H
#define RUNTIME_RECORD_H

#include <stddef.h>

#include "runtime_world.h"

#define TP_SETTINGS_MAX 256
#define TP_SETTING_KEY_MAX 64
#define TP_SETTING_VALUE_MAX 1024

/* Room for this rank's own record while it is built: each field's size is the bound a parsed record's field is held
 * to, so a record that parses also fits here. */
typedef struct tp_record_room {
    char host[TP_HOST_MAX];
    char boot_ip[64];
    char kernel[80];
    char addresses[TP_PUBLISHED_MAX];
    char ifaces[TP_ADDRS_MAX];
    char hcas[TP_ADDRS_MAX];
    char hca_skip[TP_ADDRS_MAX];
    char gpu[32];
    char cpus[256];
    char numa[16];
    char bind_why[128];
} tp_record_room_t;

/* The longest record text without settings: every field at its bound, with its key and newline. */
#define TP_RECORD_TEXT_MAX (sizeof(tp_record_room_t) + 512)

/* Points r's strings at room's (all empty in a zeroed room). */
void tp_record_room_point(tp_record_room_t *room, tp_peer_record_t *r);

/* A record with the settings its rank holds, as parsed from one rank's check-in. */
typedef struct tp_checkin {
    tp_peer_record_t record;
    tp_setting_t *settings;
    int num_settings;
    char *text; /* the check-in's text when it owns it: the record's strings (freed with it) */
} tp_checkin_t;

/* Parses the table rank 0 sends (w->size records in rank order) into w->peers; w keeps text, whose lines the
 * records' strings now are, even when it fails (why says where). */
tp_status_t tp_table_adopt(tp_world_t *w, char *text, char *why, size_t why_len);

/* Checks a setting's key and value: a reason in why when refused. */
int tp_setting_valid(const char *key, const char *value, char *why, size_t why_len);

/* This process's kernel and pid namespace ("boot_id/pidns inode"), or "" when unknown. */
void tp_kernel_identity(char *out, size_t len);

/* Appends a record and its settings as "key=value" lines ending with "end\n"; returns bytes or -1 if too long. */
int tp_record_format(const tp_peer_record_t *r, const tp_setting_t *settings, int num_settings, char *out,
                     size_t out_len);
/* The same for a table, after the record prev: a string field equal to prev's is a "key^" line (a host's ranks
 * share most fields, and the table goes to every rank: N^2 bytes out of rank 0). */
int tp_record_format_after(const tp_peer_record_t *r, const tp_peer_record_t *prev, const tp_setting_t *settings,
                           int num_settings, char *out, size_t out_len);
/* Parses one record at *text (advanced past it) in place: its lines end in NULs and the record's strings point into
 * them. Strict: unknown keys, bad values and fields past their bound are refused, and so is "key^" (only a table's
 * records, read by tp_table_adopt, may take the previous record's value). */
tp_status_t tp_record_parse(char **text, tp_checkin_t *out, char *why, size_t why_len);
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
