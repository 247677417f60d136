/* runtime_unit: unit tests of the runtime's pure functions and the handshake over a socket pair. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime_components.h"
#include "runtime_config.h"
#include "runtime_env.h"
#include "runtime_iface.h"
#include "runtime_log.h"
#include "runtime_record.h"
#include "runtime_stop.h"
#include "runtime_transports.h"
#include "runtime_wire.h"

#include "unit_check.h"

static void test_siphash(void)
{
    uint8_t key[16], out8[8], out16[16];
    for (int i = 0; i < 16; i++) key[i] = (uint8_t)i;
    /* The reference implementation's first vectors (empty message, key 00..0f). */
    static const uint8_t want8[8] = {0x31, 0x0e, 0x0e, 0xdd, 0x47, 0xdb, 0x6f, 0x72};
    static const uint8_t want16[16] = {0xa3, 0x81, 0x7f, 0x04, 0xba, 0x25, 0xa8, 0xe6,
                                       0x6d, 0xf6, 0x72, 0x14, 0xc7, 0x55, 0x02, 0x93};
    tp_siphash64(key, "", 0, out8);
    tp_siphash128(key, "", 0, out16);
    CHECK(memcmp(out8, want8, 8) == 0, "siphash-2-4-64 of the empty message");
    CHECK(memcmp(out16, want16, 16) == 0, "siphash-2-4-128 of the empty message");
    /* 15 bytes 00..0e: the reference's vector 15 for the 64-bit output. */
    uint8_t msg[15];
    for (int i = 0; i < 15; i++) msg[i] = (uint8_t)i;
    static const uint8_t want8_15[8] = {0xe5, 0x45, 0xbe, 0x49, 0x61, 0xca, 0x29, 0xa1};
    tp_siphash64(key, msg, 15, out8);
    CHECK(memcmp(out8, want8_15, 8) == 0, "siphash-2-4-64 of 15 bytes");
}

static void test_config(void)
{
    char err[256];
    int64_t i;
    uint64_t u;
    double d;
    int b;
    CHECK(tp_config_parse_int("X", "12", &i, err, sizeof(err)) == TP_OK && i == 12, "int 12");
    CHECK(tp_config_parse_int("X", "-1", &i, err, sizeof(err)) != TP_OK, "int -1 refused");
    CHECK(tp_config_parse_int("X", "abc", &i, err, sizeof(err)) != TP_OK && strstr(err, "\"abc\"") &&
              strncmp(err, "X:", 2) == 0, "int abc refused naming the variable: %s", err);
    CHECK(tp_config_parse_size("X", "4M", &u, err, sizeof(err)) == TP_OK && u == 4194304, "size 4M");
    CHECK(tp_config_parse_size("X", "0", &u, err, sizeof(err)) != TP_OK, "size 0 refused");
    CHECK(tp_config_parse_size("X", "4Q", &u, err, sizeof(err)) != TP_OK, "size 4Q refused");
    CHECK(tp_config_parse_seconds("X", "0.25", &d, err, sizeof(err)) == TP_OK && d == 0.25, "seconds 0.25");
    CHECK(tp_config_parse_seconds("X", "0", &d, err, sizeof(err)) != TP_OK, "seconds 0 refused");
    CHECK(tp_config_parse_seconds("X", "nan", &d, err, sizeof(err)) != TP_OK, "seconds nan refused");
    CHECK(tp_config_parse_bool("X", "off", &b, err, sizeof(err)) == TP_OK && b == 0, "bool off");
    CHECK(tp_config_parse_bool("X", "maybe", &b, err, sizeof(err)) != TP_OK, "bool maybe refused");
    char *env_bad[] = {"TP_PART_BYTES=lots", NULL};
    CHECK(tp_config_check_environ(env_bad, err, sizeof(err)) == TP_ERR_INVALID && strstr(err, "TP_PART_BYTES"),
          "bad TP_PART_BYTES refused: %s", err);
    char *env_unknown[] = {"TP_NO_SUCH_THING=1", "PATH=/bin", NULL};
    CHECK(tp_config_check_environ(env_unknown, err, sizeof(err)) == TP_OK, "unknown TP_ variable only warns");
    for (size_t c = 0; c < tp_components_len; c++)
        for (const tp_config_entry_t *e = tp_components[c].config; e != NULL && e->env != NULL; e++)
            CHECK(e->help[0] != '\0' && strncmp(e->env, "TP_", 3) == 0, "%s's table entry %s has a TP_ name and help",
                  tp_components[c].name, e->env);
}

/* Fills the stack below the caller with non-zero bytes: a value read before it is set then shows as garbage. */
static __attribute__((noinline)) void dirty_stack(void)
{
    volatile unsigned char junk[16384];
    memset((void *)junk, 0x7f, sizeof(junk));
}

/* tp_world_from_env with only the given variables of the world set; 1 when it succeeded. */
static int world_with(tp_world_t *w, const char *const *vars)
{
    static const char *const names[] = {"TP_RANK",    "TP_WORLD_SIZE", "TP_JOB_KEY",  "TP_BOOT_ADDR", "RANK",
                                        "WORLD_SIZE", "MASTER_ADDR",   "MASTER_PORT", "TP_BOOT_FD"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) unsetenv(names[i]);
    for (size_t i = 0; vars[i] != NULL; i += 2) setenv(vars[i], vars[i + 1], 1);
    dirty_stack();
    return tp_world_from_env(w) == TP_OK;
}

static void test_world_env(void)
{
    tp_world_t w;
    const char *const rank_abc[] = {"RANK",      "abc",         "WORLD_SIZE", "2", "MASTER_ADDR",
                                    "127.0.0.1", "MASTER_PORT", "29500",      NULL};
    CHECK(!world_with(&w, rank_abc) && strstr(tp_last_error(), "RANK: expected a non-negative integer, got \"abc\""),
          "RANK=abc named as not an integer: %s", tp_last_error());
    const char *const rank_big[] = {"RANK", "99999999999", "WORLD_SIZE", "2", "MASTER_ADDR",
                                    "h",    "MASTER_PORT", "1",          NULL};
    CHECK(!world_with(&w, rank_big) && strstr(tp_last_error(), "RANK: expected at most 16777216"), "RANK too large: %s",
          tp_last_error());
    const char *const port_plus[] = {"RANK", "1", "WORLD_SIZE", "2", "MASTER_ADDR", "h", "MASTER_PORT", "+5", NULL};
    CHECK(!world_with(&w, port_plus) && strstr(tp_last_error(), "MASTER_PORT: expected a non-negative integer"),
          "MASTER_PORT=+5 refused: %s", tp_last_error());
    const char *const port_zero[] = {"RANK", "1", "WORLD_SIZE", "2", "MASTER_ADDR", "h", "MASTER_PORT", "0", NULL};
    CHECK(!world_with(&w, port_zero) && strstr(tp_last_error(), "MASTER_PORT: expected a port from 1 to 65535"),
          "MASTER_PORT=0 refused: %s", tp_last_error());
    /* TP_BOOT_ADDR: entries are host:port with a 1-65535 port of digits only, none empty. */
    static const char *const bad[][2] = {
        {"a:1,", "entry 2 is empty"},
        {"a:+1", "entry 1 has a port that is not digits"},
        {"a:1,b:2,", "entry 3 is empty"},
        {",a:1", "entry 1 is empty"},
        {"a:1,,b:2", "entry 2 is empty"},
        {"a:0", "entry 1 has a port outside 1-65535"},
        {"a:65536", "outside 1-65535"},
        {"a:", "entry 1 has no port after the colon"},
        {"a", "entry 1 has no :port"},
        {":5", "entry 1 has no host"},
        {"a: 1", "not digits"},
        {"a:1,b:-2", "entry 2 has a port that is not digits"},
        {"a:000000001", "outside 1-65535"},
        {"", "entry 1 is empty"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *const vars[] = {
            "TP_RANK", "1", "TP_WORLD_SIZE", "2", "TP_JOB_KEY", "00112233445566778899aabbccddeeff", "TP_BOOT_ADDR",
            bad[i][0], NULL};
        CHECK(!world_with(&w, vars) && strncmp(tp_last_error(), "TP_BOOT_ADDR: expected host:port", 32) == 0 &&
                  strstr(tp_last_error(), bad[i][1]),
              "TP_BOOT_ADDR=\"%s\" refused with \"%s\": %s", bad[i][0], bad[i][1], tp_last_error());
    }
    const char *const good[] = {"TP_RANK",
                                "1",
                                "TP_WORLD_SIZE",
                                "2",
                                "TP_JOB_KEY",
                                "00112233445566778899aabbccddeeff",
                                "TP_BOOT_ADDR",
                                "[::1]:65535,b:02,c:1",
                                NULL};
    CHECK(world_with(&w, good) && strcmp(w.boot_host, "[::1]") == 0 && w.boot_port == 65535 && w.boot_nmore == 2 &&
              strcmp(w.boot_more_host[0], "b") == 0 && w.boot_more_port[0] == 2 && w.boot_more_port[1] == 1,
          "TP_BOOT_ADDR with three entries: %s", tp_last_error());
    const char *const none[] = {NULL};
    world_with(&w, none); /* leaves the environment without a world for the tests after this one */
}

/* TP_PART_BYTES has bounds; TP_TRANSPORTS names only transports that exist, as runtime_transports.c lists them. */
static void test_config_values(void)
{
    char err[256];
    uint64_t u;
    CHECK(tp_config_parse_part_bytes("63", &u, err, sizeof(err)) != TP_OK && strstr(err, "from 64 to 1G"),
          "TP_PART_BYTES=63 refused naming the minimum: %s", err);
    CHECK(tp_config_parse_part_bytes("1", &u, err, sizeof(err)) != TP_OK, "TP_PART_BYTES=1 refused");
    CHECK(tp_config_parse_part_bytes("64", &u, err, sizeof(err)) == TP_OK && u == 64, "TP_PART_BYTES=64");
    CHECK(tp_config_parse_part_bytes("1G", &u, err, sizeof(err)) == TP_OK && u == 1u << 30, "TP_PART_BYTES=1G");
    CHECK(tp_config_parse_part_bytes("1025M", &u, err, sizeof(err)) != TP_OK, "TP_PART_BYTES=1025M refused");
    char *env_small[] = {"TP_PART_BYTES=3", NULL};
    CHECK(tp_config_check_environ(env_small, err, sizeof(err)) == TP_ERR_INVALID && strstr(err, "TP_PART_BYTES") &&
              strstr(err, "64"),
          "the environment check refuses TP_PART_BYTES=3: %s", err);
    static const char *const ok[] = {"", "tcp", "^tcp", "tcp,^tcp", "tcp,", NULL};
    for (int i = 0; ok[i] != NULL; i++) {
        char var[64];
        snprintf(var, sizeof(var), "TP_TRANSPORTS=%s", ok[i]);
        char *env[] = {var, NULL};
        CHECK(tp_config_check_environ(env, err, sizeof(err)) == TP_OK, "TP_TRANSPORTS=%s accepted: %s", ok[i], err);
    }
    static const char *const bad[][2] = {
        {"verbs", "\"verbs\""}, {"tcp,^verbs", "\"verbs\""}, {"tc", "\"tc\""}, {"tcpx", "\"tcpx\""}, {"^", NULL}};
    for (int i = 0; bad[i][1] != NULL; i++) {
        char var[64];
        snprintf(var, sizeof(var), "TP_TRANSPORTS=%s", bad[i][0]);
        char *env[] = {var, NULL};
        CHECK(tp_config_check_environ(env, err, sizeof(err)) == TP_ERR_INVALID &&
                  strstr(err, "TP_TRANSPORTS: unknown transport") && strstr(err, bad[i][1]) &&
                  strstr(err, "(known: shm, tcp)"),
              "TP_TRANSPORTS=%s refused naming %s: %s", bad[i][0], bad[i][1], err);
    }
    const char *names[TP_TRANSPORTS_MAX], *config_names[TP_TRANSPORTS_MAX];
    int n = tp_transports_names(names, TP_TRANSPORTS_MAX);
    int config_n = tp_config_transport_names(config_names, TP_TRANSPORTS_MAX);
    CHECK(n == config_n, "the config knows %d transports, the runtime has %d", config_n, n);
    for (int i = 0; i < n && i < config_n; i++)
        CHECK(strcmp(names[i], config_names[i]) == 0, "transport %d: %s in the runtime, %s in the config", i, names[i],
              config_names[i]);
}

static void test_records(void)
{
    tp_peer_record_t r = {.rank = 3, .local_rank = 1, .local_size = 2, .node_rank = 1, .pid = 4711};
    static tp_record_room_t room;
    tp_record_room_point(&room, &r);
    strcpy(room.host, "hostb");
    strcpy(room.boot_ip, "198.18.1.2");
    strcpy(room.addresses, "tcp=198.18.1.2:4000;shm=x");
    tp_setting_t set[2] = {{"part_bytes", "4194304"}, {"model", "abc"}};
    char buf[4096], why[256];
    int n = tp_record_format(&r, set, 2, buf, sizeof(buf));
    CHECK(n > 0, "record formats");
    char *p = buf;
    tp_checkin_t c;
    CHECK(tp_record_parse(&p, &c, why, sizeof(why)) == TP_OK, "record parses: %s", why);
    CHECK(c.record.rank == 3 && c.record.pid == 4711 && strcmp(c.record.host, "hostb") == 0 &&
              c.num_settings == 2 && strcmp(c.settings[1].value, "abc") == 0 && *p == '\0',
          "record round trip");
    char addr[64];
    CHECK(tp_peer_address(&c.record, "shm", addr, sizeof(addr)) && strcmp(addr, "x") == 0, "shm address");
    CHECK(tp_peer_address(&c.record, "tcp", addr, sizeof(addr)) && strcmp(addr, "198.18.1.2:4000") == 0, "tcp");
    CHECK(!tp_peer_address(&c.record, "tc", addr, sizeof(addr)), "no prefix match");
    tp_checkin_free(&c);
    static const char *const bad[] = {
        "rank=1\nend\n",                                                      /* fields missing */
        "rank=x\npid=1\nhost=h\nlocal_rank=0\nlocal_size=1\nnode_rank=0\nboot_ip=\naddresses=\nkernel=\nend\n",
        "rank=1\npid=1\nhost=h\nlocal_rank=0\nlocal_size=1\nnode_rank=0\nboot_ip=\naddresses=\nkernel=\nbogus=1\nend\n",
        "rank=1\nrank=1\npid=1\nhost=h\nlocal_rank=0\nlocal_size=1\nnode_rank=0\nboot_ip=\naddresses=\nkernel=\nend\n",
        "rank=1\npid=1\nhost=h\nlocal_rank=0\nlocal_size=1\nnode_rank=0\nboot_ip=\naddresses=\nkernel=\n",
        "rank=1\npid=1\nhost=h\nlocal_rank=0\nlocal_size=1\nnode_rank=0\nboot_ip=\naddresses=\nkernel=\nset.a b=1\nend\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(buf, sizeof(buf), "%s", bad[i]); /* parsed in place */
        p = buf;
        CHECK(tp_record_parse(&p, &c, why, sizeof(why)) == TP_ERR_PROTOCOL, "bad record %zu refused", i);
    }
    /* The topology fields travel, and a malformed GID list is refused like any bad field. */
    strcpy(room.hcas, "rocep1s0f1:1:3:10.1.1.1:6");
    strcpy(room.hca_skip, "roceP2p1s0f0:1 not active (state 1: DOWN)");
    strcpy(room.gpu, "0000:3b:00.0");
    strcpy(room.cpus, "0-15,32-47");
    strcpy(room.numa, "0");
    strcpy(room.bind_why, "nearest GPU 0000:3b:00.0");
    n = tp_record_format(&r, set, 0, buf, sizeof(buf));
    char sent[4096];
    memcpy(sent, buf, sizeof(sent)); /* the parse below ends buf's lines */
    p = buf;
    CHECK(n > 0 && tp_record_parse(&p, &c, why, sizeof(why)) == TP_OK && strcmp(c.record.hcas, r.hcas) == 0 &&
              strcmp(c.record.hca_skip, r.hca_skip) == 0 && strcmp(c.record.gpu, r.gpu) == 0 &&
              strcmp(c.record.cpus, r.cpus) == 0 && strcmp(c.record.numa, "0") == 0 &&
              strcmp(c.record.bind_why, r.bind_why) == 0,
          "topology fields round trip: %s", why);
    tp_checkin_free(&c);
    char *h = strstr(sent, "hcas=");
    CHECK(h != NULL, "hcas line");
    if (h != NULL) {
        memcpy(h + 5, "rocep1s0f1:0", 12); /* port 0 */
        p = sent;
        CHECK(tp_record_parse(&p, &c, why, sizeof(why)) == TP_ERR_PROTOCOL && strstr(why, "hcas") != NULL,
              "bad hcas refused: %s", why);
    }
}

/* A field past its bound is refused (a record's strings are read into fixed rooms and buffers elsewhere); a table is
 * the world's records in rank order and nothing after. */
/* A table's "key^" lines: the previous record's value, never in a first record or a rank's own. */
static void test_table_same(const tp_peer_record_t *base)
{
    char text[16384], copy[sizeof(text)], why[256];
    tp_peer_record_t a = *base, b = *base, c = *base;
    a.rank = 0, b.rank = 1, c.rank = 2;
    a.host = "ha", b.host = "ha", c.host = "hc";
    a.cpus = "0-1", b.cpus = "2-3", c.cpus = "2-3";
    size_t used = 0;
    used += (size_t)tp_record_format_after(&a, NULL, NULL, 0, text + used, sizeof(text) - used);
    used += (size_t)tp_record_format_after(&b, &a, NULL, 0, text + used, sizeof(text) - used);
    used += (size_t)tp_record_format_after(&c, &b, NULL, 0, text + used, sizeof(text) - used);
    CHECK(strstr(text, "host^\nboot_ip^") != NULL && strstr(text, "cpus^") != NULL && strstr(text, "host=hc") != NULL,
          "equal fields are written as the previous record's, others in full");
    tp_world_t w = {.size = 3};
    CHECK(tp_table_adopt(&w, strdup(text), why, sizeof(why)) == TP_OK && strcmp(w.peers[1].host, "ha") == 0 &&
              strcmp(w.peers[2].host, "hc") == 0 && strcmp(w.peers[2].cpus, "2-3") == 0 &&
              strcmp(w.peers[1].cpus, "2-3") == 0 && strcmp(w.peers[2].kernel, a.kernel) == 0,
          "a table with the previous records' values: %s", why);
    free(w.peers), free(w.peer_text);
    static const struct {
        const char *from, *to, *why;
    } bad[] = {{"rank=0\npid=4711\nlocal_rank=-1\nlocal_size=-1\nnode_rank=-1\nhost=ha",
                "rank=0\npid=4711\nlocal_rank=-1\nlocal_size=-1\nnode_rank=-1\nhost^", "where there is none"},
               {"rank=1\npid=4711\nlocal_rank=-1\nlocal_size=-1\nnode_rank=-1\nhost^",
                "rank=1\npid=4711\nlocal_rank=-1\nlocal_size=-1\nnode_rank=-1\nrank^", "no string field"},
               {"node_rank=-1\nhost=hc", "node_rank=-1\ncpus^", "appears twice"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memcpy(copy, text, sizeof(copy));
        char *at = strstr(copy, bad[i].from);
        CHECK(at != NULL, "case %zu applies", i);
        if (at == NULL) continue;
        memmove(at + strlen(bad[i].to), at + strlen(bad[i].from), strlen(at + strlen(bad[i].from)) + 1);
        memcpy(at, bad[i].to, strlen(bad[i].to));
        w = (tp_world_t){.size = 3};
        CHECK(tp_table_adopt(&w, strdup(copy), why, sizeof(why)) == TP_ERR_PROTOCOL && strstr(why, bad[i].why) != NULL,
              "table case %zu refused: %s", i, why);
        free(w.peers), free(w.peer_text);
    }
    /* a rank's own record (a check-in) may not take another's value */
    int n = tp_record_format_after(&b, &a, NULL, 0, text, sizeof(text));
    tp_checkin_t ci;
    char *p = text;
    CHECK(n > 0 && tp_record_parse(&p, &ci, why, sizeof(why)) == TP_ERR_PROTOCOL && strstr(why, "none") != NULL,
          "a check-in's \"host^\" refused: %s", why);
}

static void test_table(void)
{
    static tp_record_room_t room;
    tp_peer_record_t r = {.local_rank = -1, .local_size = -1, .node_rank = -1, .pid = 4711};
    tp_record_room_point(&room, &r);
    strcpy(room.host, "h");
    char text[16384], why[256];
    size_t used = 0;
    for (int i = 0; i < 2; i++) {
        r.rank = i;
        used += (size_t)tp_record_format(&r, NULL, 0, text + used, sizeof(text) - used);
    }
    char copy[sizeof(text)];
    tp_world_t w = {.size = 2};
    CHECK(tp_table_adopt(&w, strdup(text), why, sizeof(why)) == TP_OK && strcmp(w.peers[1].host, "h") == 0 &&
              w.peers[1].rank == 1,
          "a table of two: %s", why);
    free(w.peers), free(w.peer_text);
    w = (tp_world_t){.size = 3};
    CHECK(tp_table_adopt(&w, strdup(text), why, sizeof(why)) == TP_ERR_PROTOCOL && strstr(why, "at rank 2") != NULL,
          "a record short: %s", why);
    free(w.peers), free(w.peer_text);
    w = (tp_world_t){.size = 1};
    CHECK(tp_table_adopt(&w, strdup(text), why, sizeof(why)) == TP_ERR_PROTOCOL && strstr(why, "bytes after") != NULL,
          "a record too many: %s", why);
    free(w.peers), free(w.peer_text);
    memcpy(copy, text, sizeof(copy));
    *strstr(copy, "rank=0") = 'x'; /* "xank=0": the first record refused */
    w = (tp_world_t){.size = 2};
    CHECK(tp_table_adopt(&w, strdup(copy), why, sizeof(why)) == TP_ERR_PROTOCOL && strstr(why, "at rank 0") != NULL,
          "a bad first record: %s", why);
    free(w.peers), free(w.peer_text);
    test_table_same(&r);
    /* every string field one byte under its bound and at it (no room for the NUL) */
#define FIELD(name) #name, offsetof(tp_peer_record_t, name), sizeof(room.name)
    static const struct {
        const char *key;
        size_t at, bound;
    } fields[] = {{FIELD(host)}, {FIELD(boot_ip)}, {FIELD(kernel)}, {FIELD(addresses)}, {FIELD(hca_skip)},
                  {FIELD(gpu)},  {FIELD(cpus)},    {FIELD(numa)},   {FIELD(bind_why)}};
#undef FIELD
    for (size_t f = 0; f < sizeof(fields) / sizeof(fields[0]); f++) {
        for (size_t len = fields[f].bound - 1; len <= fields[f].bound; len++) {
            char *value = malloc(len + 1);
            memset(value, 'a', len);
            value[len] = '\0';
            tp_peer_record_t b = r;
            b.rank = 0;
            *(const char **)((char *)&b + fields[f].at) = value;
            int n = tp_record_format(&b, NULL, 0, text, sizeof(text));
            w = (tp_world_t){.size = 1};
            tp_status_t st = n > 0 ? tp_table_adopt(&w, strdup(text), why, sizeof(why)) : TP_ERR_INVALID;
            if (len < fields[f].bound)
                CHECK(st == TP_OK, "%s of %zu bytes (bound %zu) taken: %s", fields[f].key, len, fields[f].bound, why);
            else
                CHECK(st == TP_ERR_PROTOCOL && strstr(why, fields[f].key) != NULL,
                      "%s of %zu bytes (bound %zu) refused: %s", fields[f].key, len, fields[f].bound, why);
            free(w.peers), free(w.peer_text), free(value);
        }
    }
}

static void test_settings(void)
{
    tp_checkin_t c[4];
    memset(c, 0, sizeof(c));
    tp_setting_t s4m = {"part_bytes", "4194304"}, s1m = {"part_bytes", "1048576"};
    tp_setting_t ma = {"model", "a"};
    tp_setting_t set0[2] = {s4m, ma}, set3[1] = {s1m};
    for (int r = 0; r < 4; r++) c[r].record.rank = r;
    c[0].settings = set0, c[0].num_settings = 2;
    c[1].settings = set0, c[1].num_settings = 2;
    c[2].settings = set0, c[2].num_settings = 2;
    c[3].settings = set3, c[3].num_settings = 1;
    char msg[1024];
    CHECK(tp_settings_compare(c, 3, msg, sizeof(msg)) == TP_OK, "equal settings agree");
    CHECK(tp_settings_compare(c, 4, msg, sizeof(msg)) == TP_ERR_MISMATCH, "mismatch found");
    CHECK(strcmp(msg, "setting part_bytes differs: 4194304 on ranks 0-2, 1048576 on rank 3; setting model differs: "
                      "a on ranks 0-2, (unset) on rank 3") == 0,
          "mismatch message: %s", msg);
    int ranks[] = {0, 1, 2, 5, 7, 8, 9};
    char list[64];
    tp_format_ranks(ranks, 7, list, sizeof(list));
    CHECK(strcmp(list, "0-2,5,7-9") == 0, "rank list %s", list);
}

static void test_locality(void)
{
    tp_peer_record_t r[5];
    memset(r, 0, sizeof(r));
    const char *hosts[] = {"a", "b", "a", "c", "b"};
    for (int i = 0; i < 5; i++) {
        r[i].host = hosts[i];
        r[i].local_rank = r[i].local_size = r[i].node_rank = -1;
    }
    tp_records_derive_locality(r, 5);
    CHECK(r[0].node_rank == 0 && r[1].node_rank == 1 && r[2].node_rank == 0 && r[3].node_rank == 2 &&
              r[4].node_rank == 1,
          "node ranks by first appearance");
    CHECK(r[2].local_rank == 1 && r[2].local_size == 2 && r[3].local_rank == 0 && r[3].local_size == 1,
          "local ranks by host");
}

/* Runs the server side of a handshake against a client in a child process. */
static tp_auth_result_t handshake(const uint8_t *server_key, const uint8_t *client_key, const void *garbage,
                                  size_t garbage_len, char *why, size_t why_len, int *rank)
{
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    pid_t pid = fork();
    if (pid == 0) {
        close(sv[0]);
        if (garbage) {
            ssize_t w = write(sv[1], garbage, garbage_len);
            _exit(w < 0);
        }
        tp_status_t s = tp_auth_connect(sv[1], client_key, TP_CONN_BOOT, 5, tp_now_ns() + 2000000000, "server");
        _exit(s == TP_OK ? 0 : 1);
    }
    close(sv[1]);
    tp_auth_accept_t st;
    tp_auth_accept_init(&st);
    tp_auth_result_t r;
    tp_fd_set_nonblocking(sv[0]);
    int64_t deadline = tp_now_ns() + 2000000000;
    do {
        r = tp_auth_accept_step(&st, sv[0], server_key, TP_CONN_BOOT, why, why_len);
        if (r == TP_AUTH_MORE) usleep(1000);
    } while (r == TP_AUTH_MORE && tp_now_ns() < deadline);
    close(sv[0]);
    int status;
    waitpid(pid, &status, 0);
    *rank = st.rank;
    return r;
}

static void test_auth(void)
{
    uint8_t k1[16] = {1}, k2[16] = {2};
    char why[256] = "";
    int rank;
    CHECK(handshake(k1, k1, NULL, 0, why, sizeof(why), &rank) == TP_AUTH_DONE && rank == 5, "same key: %s", why);
    CHECK(handshake(k1, k2, NULL, 0, why, sizeof(why), &rank) == TP_AUTH_REFUSED && strstr(why, "key"),
          "another job's key refused: %s", why);
    CHECK(handshake(k1, k1, "GET / HTTP/1.0\r\n\r\n", 18, why, sizeof(why), &rank) == TP_AUTH_REFUSED &&
              strstr(why, "not the tp protocol"), "garbage refused: %s", why);
}

static void test_iface(void)
{
    /* NCCL_SOCKET_IFNAME's grammar: prefixes, =exact, ^exclude, ^=exclude exact. */
    CHECK(tp_ifname_match("", "eth0") && tp_ifname_match(NULL, "eth0"), "empty filter passes");
    CHECK(tp_ifname_match("eth,ib", "eth1") && tp_ifname_match("eth,ib", "ib0") && !tp_ifname_match("eth,ib", "lo"),
          "prefixes");
    CHECK(tp_ifname_match("=eth0", "eth0") && !tp_ifname_match("=eth0", "eth01"), "exact");
    CHECK(!tp_ifname_match("^docker,lo", "docker0") && tp_ifname_match("^docker,lo", "rail0"), "exclude prefixes");
    CHECK(!tp_ifname_match("^=docker0", "docker0") && tp_ifname_match("^=docker0", "docker01"), "exclude exact");
    tp_iface_t ifs[4], back[4];
    memset(ifs, 0, sizeof(ifs));
    strcpy(ifs[0].name, "rail0"), strcpy(ifs[0].ip, "198.18.2.1"), ifs[0].prefix = 24;
    strcpy(ifs[1].name, "rail1"), strcpy(ifs[1].ip, "198.18.3.1"), ifs[1].prefix = 24;
    char text[256];
    CHECK(tp_iface_format(ifs, 2, text, sizeof(text)) > 0 && strcmp(text, "rail0:198.18.2.1/24,rail1:198.18.3.1/24") == 0,
          "format: %s", text);
    CHECK(tp_iface_parse(text, back, 4) == 2 && strcmp(back[1].name, "rail1") == 0 &&
              strcmp(back[1].ip, "198.18.3.1") == 0 && back[1].prefix == 24, "parse round trip");
    CHECK(tp_iface_parse("", back, 4) == 0, "no interfaces");
    static const char *const bad[] = {"rail0", "rail0:198.18.2.1", "rail0:300.1.1.1/24", "rail0:198.18.2.1/33",
                                      "rail0:198.18.2.1/24,", ":198.18.2.1/24", "rail0:198.18.2.1/x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK(tp_iface_parse(bad[i], back, 4) == -1, "malformed interface list \"%s\" refused", bad[i]);
    /* A peer sharing rail1 only, plus a decoy on a /24 nobody else has: rail1 first, then the routed address. */
    tp_iface_t peer[2];
    memset(peer, 0, sizeof(peer));
    strcpy(peer[0].name, "decoy0"), strcpy(peer[0].ip, "198.18.101.2"), peer[0].prefix = 24;
    strcpy(peer[1].name, "rail1"), strcpy(peer[1].ip, "198.18.3.2"), peer[1].prefix = 24;
    char cands[TP_IFACE_CANDIDATES][16], via[TP_IFACE_CANDIDATES][32];
    int shared = -1;
    int n = tp_iface_candidates(ifs, 2, peer, 2, "198.18.1.2", cands, via, TP_IFACE_CANDIDATES, &shared);
    CHECK(n == 2 && shared == 1 && strcmp(cands[0], "198.18.3.2") == 0 && strcmp(via[0], "rail1") == 0 &&
              strcmp(cands[1], "198.18.1.2") == 0 && via[1][0] == '\0', "candidates: n=%d shared=%d %s", n, shared,
          n > 0 ? cands[0] : "");
    n = tp_iface_candidates(ifs, 2, peer, 1, "198.18.1.2", cands, via, TP_IFACE_CANDIDATES, &shared);
    CHECK(n == 1 && shared == 0 && strcmp(cands[0], "198.18.1.2") == 0, "no shared /24: routed only");
}

/* The stop word's news and check: who finalized after how many calls, against where a call waits. */
static void test_stop(void)
{
    CHECK(tp_stop_open() == TP_OK, "stop: the wake fd opens");
    CHECK(tp_stop_news("r 9\n", 4) == -1, "stop: news naming a rank the job does not have is refused");
    CHECK(tp_stop_news("r 1\nc 0 5", 4) == -1, "stop: news without its last newline is refused");
    CHECK(tp_stop_news("r x\n", 4) == -1, "stop: a rank that is not a number is refused");
    uint64_t gen = tp_stop_gen();
    /* rank 1 made 5 calls on comm 0 and sent rank 0 three messages; rank 2 made 6 calls on comm 0 */
    CHECK(tp_stop_news("r 1\nc 0 5\np 0 0 3 1\nr 2\nc 0 6\n", 4) == 0, "stop: news of two ranks is taken");
    CHECK(tp_stop_gen() != gen, "stop: news changes the generation");
    int ranks[4] = {0, 1, 2, 3};
    tp_comm_t comm = {.rank = 0, .size = 4, .world_ranks = ranks, .comm_id = 0};
    tp_stop_call_t c5 = {.name = "all_reduce", .index = 5, .peer = -1};
    CHECK(tp_stop_check(&comm, &c5) == TP_STOPPED, "stop: call 5 waits for rank 1, which stopped after 5 calls");
    CHECK(strcmp(tp_last_error(), "rank 1 called tp_finalize while this rank waits in all_reduce call 5 on comm 0") == 0,
          "stop: the message names who and where: %s", tp_last_error());
    tp_stop_call_t c4 = {.name = "all_reduce", .index = 4, .peer = -1};
    CHECK(tp_stop_check(&comm, &c4) == TP_OK, "stop: call 4 can still complete (every finalized rank made it)");
    tp_stop_call_t c6 = {.name = "barrier", .index = 6, .peer = -1};
    CHECK(tp_stop_check(&comm, &c6) == TP_STOPPED && strstr(tp_last_error(), "rank 1 and 1 other called") != NULL,
          "stop: both finalized ranks named at call 6: %s", tp_last_error());
    tp_stop_call_t r2 = {.name = "recv", .index = 2, .peer = 1, .recvs = 1, .recv_index = 2};
    CHECK(tp_stop_check(&comm, &r2) == TP_OK, "stop: rank 1's third message to this rank is on its way");
    tp_stop_call_t r3 = {.name = "recv", .index = 3, .peer = 1, .recvs = 1, .recv_index = 3};
    CHECK(tp_stop_check(&comm, &r3) == TP_STOPPED, "stop: a fourth message from rank 1 never comes");
    tp_stop_call_t s1 = {.name = "send", .index = 1, .peer = 1, .sends = 1, .send_index = 1};
    CHECK(tp_stop_check(&comm, &s1) == TP_STOPPED, "stop: rank 1 received one message: a second send waits forever");
    tp_stop_call_t other = {.name = "all_reduce", .index = 0, .peer = -1};
    tp_comm_t sub = {.rank = 0, .size = 2, .world_ranks = (int[]){0, 3}, .comm_id = 7};
    CHECK(tp_stop_check(&sub, &other) == TP_OK, "stop: a comm without a finalized member goes on");
    tp_stop_close();
}

int main(void)
{
    test_siphash();
    test_config();
    test_config_values();
    test_world_env();
    test_records();
    test_table();
    test_settings();
    test_locality();
    test_auth();
    test_iface();
    test_stop();
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    else printf("runtime_unit: all checks passed\n");
    return failures ? 1 : 0;
}
