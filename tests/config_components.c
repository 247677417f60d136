/* config_components: a component's table, planted in a registration list of this test's own, reaches every walk of
 * the list: tprun --info's printout, ENVIRONMENT.md's tables, the environment check, the unknown-variable warning,
 * TP_TRANSPORTS's names and the settings agreement. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime_components.h"
#include "runtime_config.h"
#include "unit_check.h"

static tp_status_t check_planted_mode(const char *text, char *err, size_t err_len)
{
    if (strcmp(text, "fast") == 0 || strcmp(text, "safe") == 0) return TP_OK;
    snprintf(err, err_len, "TP_PLANTED_MODE: expected fast or safe, got \"%s\"", text);
    return TP_ERR_INVALID;
}

static const tp_config_entry_t planted_config[] = {
    {"TP_PLANTED_CHUNK", "planted_chunk", TP_CONFIG_SIZE, TP_CONFIG_USER | TP_CONFIG_AGREE, "2K",
     "planted: an agreed size", NULL},
    {"TP_PLANTED_MODE", "planted_mode", TP_CONFIG_STRING, TP_CONFIG_USER, "safe", "planted: a checked string",
     check_planted_mode},
    {0},
};

extern const tp_config_entry_t tp_core_config[];

/* In place of runtime_components.c's list: the core, a transport with a table, a device without one. */
const tp_component_t tp_components[] = {
    {"core", TP_COMPONENT_CORE, tp_core_config, NULL},
    {"planted", TP_COMPONENT_TRANSPORT, planted_config, NULL},
    {"bare", TP_COMPONENT_DEVICE, NULL, NULL},
};
const size_t tp_components_len = sizeof(tp_components) / sizeof(tp_components[0]);

/* What a print function writes to a file descriptor. */
static char *capture(void (*print)(int fd))
{
    static char buf[16384];
    FILE *f = tmpfile();
    if (f == NULL) return strcpy(buf, "");
    print(fileno(f));
    rewind(f);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void test_info(void)
{
    setenv("TP_PLANTED_CHUNK", "4K", 1);
    const char *out = capture(tp_config_print);
    CHECK(strstr(out, "\ncore:\nTP_RANK ") != NULL, "--info has the core's section: %s", out);
    const char *want = "\n\nplanted (transport):\n"
                       "TP_PLANTED_CHUNK       2K       4K         [agreed] planted: an agreed size\n"
                       "TP_PLANTED_MODE        safe     -          planted: a checked string\n";
    CHECK(strstr(out, want) != NULL, "--info has the planted section with its default, current value and agreement: %s",
          out);
    CHECK(strstr(out, "\nbare") == NULL, "a component without a table has no section: %s", out);
    CHECK(strstr(out, "\ncomponents: core (core), planted (transport), bare (device)") != NULL,
          "--info lists every registered component, those without a table too: %s", out);
    unsetenv("TP_PLANTED_CHUNK");
}

static void test_doc(void)
{
    const char *out = capture(tp_config_print_doc);
    CHECK(strncmp(out, "### core\n\n| variable |", 22) == 0, "the doc starts with the core's table: %.80s", out);
    CHECK(strstr(out, "\n\n### planted (transport)\n\n| variable | set by | type | default | agreed | meaning |\n"
                      "|---|---|---|---|---|---|\n"
                      "| `TP_PLANTED_CHUNK` | user | bytes (K, M, G) | 2K | yes | planted: an agreed size |\n"
                      "| `TP_PLANTED_MODE` | user | string | safe |  | planted: a checked string |\n") != NULL,
          "ENVIRONMENT.md's tables hold the planted one: %s", out);
    CHECK(strstr(out, "bare") == NULL, "a component without a table has no table: %s", out);
}

static void test_environ(void)
{
    char err[256], names[256];
    char *bad_size[] = {"TP_PLANTED_CHUNK=lots", NULL};
    CHECK(tp_config_check_environ(bad_size, err, sizeof(err)) == TP_ERR_INVALID &&
              strcmp(err, "TP_PLANTED_CHUNK: expected a byte count such as 4194304 or 4M, got \"lots\"") == 0,
          "a planted size is checked by its kind: %s", err);
    char *bad_mode[] = {"TP_PLANTED_MODE=slow", NULL};
    CHECK(tp_config_check_environ(bad_mode, err, sizeof(err)) == TP_ERR_INVALID &&
              strcmp(err, "TP_PLANTED_MODE: expected fast or safe, got \"slow\"") == 0,
          "a planted entry's own check runs: %s", err);
    char *good[] = {"TP_PLANTED_MODE=fast", "TP_PLANTED_CHUNK=4K", "TP_TRANSPORTS=planted", NULL};
    CHECK(tp_config_check_environ(good, err, sizeof(err)) == TP_OK, "good planted values pass: %s", err);
    char *tcp[] = {"TP_TRANSPORTS=tcp", NULL};
    CHECK(tp_config_check_environ(tcp, err, sizeof(err)) == TP_ERR_INVALID && strstr(err, "(known: planted)") != NULL,
          "TP_TRANSPORTS knows the list's transports only: %s", err);
    char *mixed[] = {"TP_PLANTED_CHUNK=1", "TP_PLANTED_CHUNKS=1", "TP_PART_BYTES=4M", NULL};
    CHECK(tp_config_unknown(mixed, names, sizeof(names)) == 1 && strcmp(names, "TP_PLANTED_CHUNKS") == 0,
          "only the unregistered name is unknown: %s", names);
    CHECK(tp_config_find_env("TP_PLANTED_MODE") == &planted_config[1], "find_env finds a planted entry");
}

static void test_agreement(void)
{
    const tp_config_entry_t *agreed[32];
    int n = tp_config_agreed(agreed, 32);
    CHECK(n == 9 && n == tp_config_agreed(NULL, 0),
          "8 agreed core entries (TP_CONNECT the eighth) and the planted one, got %d", n);
    CHECK(n == 9 && agreed[8] == &planted_config[0], "the planted agreed entry comes last, in list order");
    for (int i = 0; i < n && i < 32; i++)
        CHECK(agreed[i] != &planted_config[1], "an entry not marked agreed is not agreed");
    char v[64];
    tp_config_canonical(&planted_config[0], "4K", v, sizeof(v));
    CHECK(strcmp(v, "4096") == 0, "4K is agreed as 4096, got %s", v);
    tp_config_canonical(&planted_config[0], "4096", v, sizeof(v));
    CHECK(strcmp(v, "4096") == 0, "4096 is agreed as 4096, got %s", v);
    tp_config_canonical(&planted_config[1], NULL, v, sizeof(v));
    CHECK(strcmp(v, "") == 0, "an unset value is agreed as empty, got %s", v);
    const char *names[4];
    CHECK(tp_config_transport_names(names, 4) == 1 && strcmp(names[0], "planted") == 0,
          "the list's one transport is the planted one");
}

int main(void)
{
    unsetenv("TP_PLANTED_MODE");
    test_info();
    test_doc();
    test_environ();
    test_agreement();
    if (failures) return 1;
    printf("config_components: all checks passed\n");
    return 0;
}
