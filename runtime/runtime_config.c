/* runtime_config.c: value parsing, and the walks over every registered component's TP_* table (find, check the
 * environment, print). */
#include "runtime_config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "runtime_components.h"
#include "runtime_log.h"

const tp_config_entry_t *tp_config_find_env(const char *env)
{
    for (size_t c = 0; c < tp_components_len; c++)
        for (const tp_config_entry_t *e = tp_components[c].config; e != NULL && e->env != NULL; e++)
            if (strcmp(e->env, env) == 0) return e;
    return NULL;
}

const char *tp_config_value(const char *env)
{
    const char *v = getenv(env);
    if (v != NULL) return v;
    const tp_config_entry_t *e = tp_config_find_env(env);
    return e != NULL ? e->default_value : NULL;
}

double tp_config_seconds(const char *env)
{
    const char *text = tp_config_value(env);
    double s = 0;
    char err[128];
    if (text != NULL && tp_config_parse_seconds(env, text, &s, err, sizeof(err)) != TP_OK) s = 0;
    return s;
}

static tp_status_t bad_value(const char *name, const char *text, const char *expected, char *err, size_t len)
{
    char q[TP_QUOTE_LEN];
    snprintf(err, len, "%s: expected %s, got \"%s\"", name, expected, tp_quote(text, q, sizeof(q)));
    return TP_ERR_INVALID;
}

tp_status_t tp_config_parse_int(const char *name, const char *text, int64_t *out, char *err, size_t err_len)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (text[0] == '\0' || *end != '\0' || errno != 0 || v < 0 || text[0] == '-' || text[0] == '+' || text[0] == ' ')
        return bad_value(name, text, "a non-negative integer", err, err_len);
    *out = v;
    return TP_OK;
}

tp_status_t tp_config_parse_size(const char *name, const char *text, uint64_t *out, char *err, size_t err_len)
{
    char *end;
    errno = 0;
    if (text[0] < '0' || text[0] > '9')
        return bad_value(name, text, "a byte count such as 4194304 or 4M", err, err_len);
    unsigned long long v = strtoull(text, &end, 10);
    unsigned shift = 0;
    if (*end == 'K' || *end == 'k') shift = 10, end++;
    else if (*end == 'M' || *end == 'm') shift = 20, end++;
    else if (*end == 'G' || *end == 'g') shift = 30, end++;
    if (*end != '\0' || errno != 0 || v == 0 || v > (UINT64_MAX >> 34))
        return bad_value(name, text, "a positive byte count such as 4194304 or 4M", err, err_len);
    *out = (uint64_t)v << shift;
    return TP_OK;
}

tp_status_t tp_config_parse_seconds(const char *name, const char *text, double *out, char *err, size_t err_len)
{
    char *end;
    errno = 0;
    if ((text[0] < '0' || text[0] > '9') && text[0] != '.')
        return bad_value(name, text, "a positive number of seconds", err, err_len);
    double v = strtod(text, &end);
    if (*end != '\0' || errno != 0 || !(v > 0) || !isfinite(v) || v > 1e7)
        return bad_value(name, text, "a positive number of seconds", err, err_len);
    *out = v;
    return TP_OK;
}

tp_status_t tp_config_parse_bool(const char *name, const char *text, int *out, char *err, size_t err_len)
{
    static const char *const yes[] = {"1", "yes", "true", "on"};
    static const char *const no[] = {"0", "no", "false", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(text, yes[i]) == 0) return *out = 1, TP_OK;
        if (strcasecmp(text, no[i]) == 0) return *out = 0, TP_OK;
    }
    return bad_value(name, text, "1, 0, yes, no, true, false, on or off", err, err_len);
}

tp_status_t tp_config_parse_part_bytes(const char *text, uint64_t *out, char *err, size_t err_len)
{
    uint64_t v;
    if (tp_config_parse_size("TP_PART_BYTES", text, &v, err, err_len) != TP_OK) return TP_ERR_INVALID;
    if (v < TP_PART_BYTES_MIN || v > TP_PART_BYTES_MAX)
        return bad_value("TP_PART_BYTES", text, "a byte count from 64 to 1G (a part holds at least one element)", err,
                         err_len);
    *out = v;
    return TP_OK;
}

int tp_config_transport_names(const char **names, int max)
{
    int n = 0;
    for (size_t c = 0; c < tp_components_len; c++) {
        if (tp_components[c].kind != TP_COMPONENT_TRANSPORT) continue;
        if (n < max) names[n] = tp_components[c].name;
        n++;
    }
    return n;
}

int tp_config_agreed(const tp_config_entry_t **out, int max)
{
    int n = 0;
    for (size_t c = 0; c < tp_components_len; c++)
        for (const tp_config_entry_t *e = tp_components[c].config; e != NULL && e->env != NULL; e++) {
            if (!(e->flags & TP_CONFIG_AGREE)) continue;
            if (n < max) out[n] = e;
            n++;
        }
    return n;
}

void tp_config_canonical(const tp_config_entry_t *e, const char *text, char *out, size_t len)
{
    char err[TP_QUOTE_LEN + 128];
    int64_t i;
    uint64_t u;
    double d;
    int b;
    if (text == NULL) text = "";
    if (e->kind == TP_CONFIG_INT && tp_config_parse_int(e->env, text, &i, err, sizeof(err)) == TP_OK)
        snprintf(out, len, "%lld", (long long)i);
    else if (e->kind == TP_CONFIG_SIZE && tp_config_parse_size(e->env, text, &u, err, sizeof(err)) == TP_OK)
        snprintf(out, len, "%llu", (unsigned long long)u);
    else if (e->kind == TP_CONFIG_SECONDS && tp_config_parse_seconds(e->env, text, &d, err, sizeof(err)) == TP_OK)
        snprintf(out, len, "%g", d);
    else if (e->kind == TP_CONFIG_BOOL && tp_config_parse_bool(e->env, text, &b, err, sizeof(err)) == TP_OK)
        snprintf(out, len, "%d", b);
    else snprintf(out, len, "%s", text);
}

tp_status_t tp_config_check_word(const char *env, const char *words, const char *text, char *err, size_t err_len)
{
    size_t n = strlen(text), o = 0;
    for (const char *w = words; *w != '\0';) {
        size_t l = strcspn(w, "|");
        if (l == n && strncmp(w, text, n) == 0) return TP_OK;
        w += l + (w[l] == '|');
    }
    char list[256] = "", q[TP_QUOTE_LEN];
    for (const char *w = words; *w != '\0' && o < sizeof(list);) { /* "a, b or c" */
        size_t l = strcspn(w, "|");
        o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%.*s",
                              o == 0         ? ""
                              : w[l] == '\0' ? " or "
                                             : ", ",
                              (int)l, w);
        w += l + (w[l] == '|');
    }
    snprintf(err, err_len, "%s: expected %s, got \"%s\"", env, list, tp_quote(text, q, sizeof(q)));
    return TP_ERR_INVALID;
}

static tp_status_t check_value(const tp_config_entry_t *e, const char *text, char *err, size_t err_len)
{
    int64_t i;
    uint64_t u;
    double d;
    int b;
    if (e->check != NULL) return e->check(text, err, err_len);
    switch (e->kind) {
    case TP_CONFIG_INT: return tp_config_parse_int(e->env, text, &i, err, err_len);
    case TP_CONFIG_SIZE: return tp_config_parse_size(e->env, text, &u, err, err_len);
    case TP_CONFIG_SECONDS: return tp_config_parse_seconds(e->env, text, &d, err, err_len);
    case TP_CONFIG_BOOL: return tp_config_parse_bool(e->env, text, &b, err, err_len);
    case TP_CONFIG_STRING: return TP_OK;
    }
    return TP_OK;
}

/* The name of a TP_* entry of environ, or 0 when it is not one. */
static int env_name(const char *entry, char *name, size_t len)
{
    const char *eq = strchr(entry, '=');
    if (strncmp(entry, "TP_", 3) != 0 || eq == NULL) return 0;
    size_t n = (size_t)(eq - entry);
    if (n >= len) n = len - 1;
    memcpy(name, entry, n);
    name[n] = '\0';
    return 1;
}

tp_status_t tp_config_check_environ(char *const *environ_, char *err, size_t err_len)
{
    tp_status_t first = TP_OK;
    char name[128];
    for (char *const *ep = environ_; ep != NULL && *ep != NULL && first == TP_OK; ep++) {
        const tp_config_entry_t *e = env_name(*ep, name, sizeof(name)) ? tp_config_find_env(name) : NULL;
        if (e != NULL) first = check_value(e, strchr(*ep, '=') + 1, err, err_len);
    }
    return first;
}

int tp_config_unknown(char *const *environ_, char *out, size_t len)
{
    int count = 0;
    size_t off = 0;
    char name[128], q[TP_QUOTE_LEN];
    if (len > 0) out[0] = '\0';
    for (char *const *ep = environ_; ep != NULL && *ep != NULL; ep++) {
        if (!env_name(*ep, name, sizeof(name)) || tp_config_find_env(name) != NULL) continue;
        count++;
        /* A name is any bytes up to '=': quoted, so a warning stays one line of text. */
        if (off < len)
            off += (size_t)snprintf(out + off, len - off, "%s%s", off > 0 ? ", " : "", tp_quote(name, q, sizeof(q)));
    }
    return count;
}

void tp_config_warn_unknown(char *const *environ_)
{
    char names[512];
    int n = tp_config_unknown(environ_, names, sizeof(names));
    if (n > 0)
        tp_log(TP_LOG_WARN, "config", "unknown variable%s %s ignored (tprun --info lists them all)", n > 1 ? "s" : "",
               names);
}

void tp_config_print(int fd)
{
    dprintf(fd, "%-22s %-8s %-10s %s\n", "variable", "default", "current", "meaning");
    for (size_t c = 0; c < tp_components_len; c++) {
        const tp_component_t *comp = &tp_components[c];
        if (comp->config == NULL || comp->config->env == NULL) continue;
        const char *kind = tp_component_kind_name(comp->kind);
        dprintf(fd, strcmp(kind, comp->name) == 0 ? "\n%s:\n" : "\n%s (%s):\n", comp->name, kind);
        for (const tp_config_entry_t *e = comp->config; e->env != NULL; e++) {
            const char *cur = getenv(e->env);
            if (cur != NULL && (e->flags & TP_CONFIG_SECRET)) cur = "(set)";
            dprintf(fd, "%-22s %-8s %-10s %s%s\n", e->env,
                    e->default_value ? (e->default_value[0] ? e->default_value : "\"\"") : "-", cur ? cur : "-",
                    (e->flags & TP_CONFIG_AGREE) ? "[agreed] " : "", e->help);
        }
    }
    dprintf(fd, "\ncomponents:");
    for (size_t c = 0; c < tp_components_len; c++)
        dprintf(fd, "%s %s (%s)", c ? "," : "", tp_components[c].name, tp_component_kind_name(tp_components[c].kind));
    dprintf(fd, "\n");
    char names[1024];
    if (tp_config_unknown(environ, names, sizeof(names)) > 0)
        dprintf(fd, "\nunknown, set in this environment and ignored: %s\n", names);
}

const char *tp_component_kind_name(tp_component_kind_t kind)
{
    switch (kind) {
    case TP_COMPONENT_CORE: return "core";
    case TP_COMPONENT_TRANSPORT: return "transport";
    case TP_COMPONENT_DEVICE: return "device";
    case TP_COMPONENT_COLL: return "collectives";
    case TP_COMPONENT_LAUNCHER: return "launcher";
    }
    return "?";
}

static const char *kind_name(tp_config_kind_t k)
{
    switch (k) {
    case TP_CONFIG_STRING: return "string";
    case TP_CONFIG_INT: return "integer";
    case TP_CONFIG_SIZE: return "bytes (K, M, G)";
    case TP_CONFIG_SECONDS: return "seconds";
    case TP_CONFIG_BOOL: return "boolean";
    }
    return "?";
}

void tp_config_print_doc(int fd)
{
    const char *sep = "";
    for (size_t c = 0; c < tp_components_len; c++) {
        const tp_component_t *comp = &tp_components[c];
        if (comp->config == NULL || comp->config->env == NULL) continue;
        const char *kind = tp_component_kind_name(comp->kind);
        dprintf(fd, strcmp(kind, comp->name) == 0 ? "%s### %s\n\n" : "%s### %s (%s)\n\n", sep, comp->name, kind);
        sep = "\n";
        dprintf(fd, "| variable | set by | type | default | agreed | meaning |\n|---|---|---|---|---|---|\n");
        for (const tp_config_entry_t *e = comp->config; e->env != NULL; e++) {
            const char *who = (e->flags & TP_CONFIG_LAUNCHER) ? "launcher"
                              : !(e->flags & TP_CONFIG_USER)  ? "tprun"
                              : (e->flags & TP_CONFIG_TPRUN)  ? "user (tprun)"
                                                              : "user";
            const char *def = e->default_value == NULL ? "unset" : e->default_value[0] ? e->default_value : "empty";
            dprintf(fd, "| `%s` | %s | %s | %s | %s | %s |\n", e->env, who, kind_name(e->kind), def,
                    (e->flags & TP_CONFIG_AGREE) ? "yes" : "", e->help);
        }
    }
}
