/* tprun_args.c: the command line into a checked plan (hosts, hostfiles and placement: tprun_hosts.c); pure apart
 * from stat() and what tprun_hosts.c reads. */
#include "tprun_args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime_components.h"
#include "runtime_config.h"
#include "runtime_log.h"

static const char *const torch_vars[] = {"RANK",        "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                         "MASTER_ADDR", "MASTER_PORT"};

int tprun_env_is_launcher_var(const char *name, size_t len, int torch_env)
{
    for (size_t c = 0; c < tp_components_len; c++)
        for (const tp_config_entry_t *e = tp_components[c].config; e != NULL && e->env != NULL; e++)
            if ((e->flags & TP_CONFIG_LAUNCHER) && strlen(e->env) == len && memcmp(e->env, name, len) == 0) return 1;
    if (!torch_env) return 0;
    for (size_t i = 0; i < sizeof(torch_vars) / sizeof(torch_vars[0]); i++)
        if (strlen(torch_vars[i]) == len && memcmp(torch_vars[i], name, len) == 0) return 1;
    return 0;
}

static const char *env_lookup(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (char *const *ep = envp; ep != NULL && *ep != NULL; ep++)
        if (strncmp(*ep, name, n) == 0 && (*ep)[n] == '=') return *ep + n + 1;
    return NULL;
}

static int parse_count(const char *text, long max, long *out)
{
    return tprun_parse_count(text, strlen(text), max, out);
}

static int is_var_name(const char *s, size_t len)
{
    if (len == 0 || (s[0] >= '0' && s[0] <= '9')) return 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return 0;
    }
    return 1;
}

/* -x VAR forwards tprun's value, -x VAR=value sets one; tprun's own per-rank variables cannot be overridden. */
static tp_status_t parse_env_option(tprun_plan_t *plan, const char *arg, char *const *envp, char *err, size_t err_len)
{
    const char *eq = strchr(arg, '=');
    size_t len = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
    if (!is_var_name(arg, len))
        return snprintf(err, err_len, "-x: expected VAR or VAR=value with a variable name, got \"%s\"", arg),
               TP_ERR_INVALID;
    if (tprun_env_is_launcher_var(arg, len, 0)) /* the torchrun names: check_torch_env, after every option */
        return snprintf(err, err_len, "-x %.*s: tprun sets this variable for each rank; it cannot be overridden",
                        (int)len, arg),
               TP_ERR_INVALID;
    char *entry;
    if (eq != NULL) {
        entry = strdup(arg);
    } else {
        char name[256];
        if (len >= sizeof(name))
            return snprintf(err, err_len, "-x: variable name too long: \"%s\"", arg), TP_ERR_INVALID;
        memcpy(name, arg, len);
        name[len] = '\0';
        const char *value = env_lookup(envp, name);
        if (value == NULL)
            return snprintf(err, err_len, "-x %s: not set in tprun's environment (use -x %s=value to set it)", arg,
                            arg),
                   TP_ERR_INVALID;
        entry = malloc(len + strlen(value) + 2);
        if (entry != NULL) sprintf(entry, "%s=%s", name, value);
    }
    char **list = realloc(plan->env_set, (plan->num_env_set + 2) * sizeof(*list));
    if (entry == NULL || list == NULL) {
        free(entry);
        if (list != NULL) plan->env_set = list;
        return snprintf(err, err_len, "out of memory"), TP_ERR_NO_MEMORY;
    }
    plan->env_set = list;
    list[plan->num_env_set++] = entry;
    list[plan->num_env_set] = NULL;
    return TP_OK;
}

static tp_status_t check_candidate(const char *given, const char *path, char *err, size_t err_len)
{
    struct stat st;
    char qg[TP_QUOTE_LEN], qp[TP_QUOTE_LEN];
    if (stat(path, &st) != 0)
        return snprintf(err, err_len, "program \"%s\": %s", tp_quote(given, qg, sizeof(qg)), strerror(errno)),
               TP_ERR_NOT_FOUND;
    if (S_ISDIR(st.st_mode))
        return snprintf(err, err_len, "program \"%s\": %s is a directory", tp_quote(given, qg, sizeof(qg)),
                        tp_quote(path, qp, sizeof(qp))),
               TP_ERR_INVALID;
    if (!S_ISREG(st.st_mode) || access(path, X_OK) != 0)
        return snprintf(err, err_len, "program \"%s\": %s is not executable (%s)", tp_quote(given, qg, sizeof(qg)),
                        tp_quote(path, qp, sizeof(qp)), S_ISREG(st.st_mode) ? strerror(errno) : "not a regular file"),
               TP_ERR_INVALID;
    return TP_OK;
}

tp_status_t tprun_find_program(const char *name, const char *path_env, char **out, char *err, size_t err_len)
{
    if (name[0] == '\0') return snprintf(err, err_len, "program \"\": an empty name"), TP_ERR_INVALID;
    if (strchr(name, '/') != NULL) {
        tp_status_t st = check_candidate(name, name, err, err_len);
        if (st != TP_OK) return st == TP_ERR_NOT_FOUND ? TP_ERR_INVALID : st;
        *out = strdup(name);
        return *out != NULL ? TP_OK : TP_ERR_NO_MEMORY;
    }
    /* Like execvp: keep searching past a file that is not executable, but report it if nothing better turns up. */
    if (path_env == NULL) path_env = "/bin:/usr/bin";
    char first_err[512] = "";
    const char *p = path_env;
    for (;;) {
        size_t len = strcspn(p, ":");
        char *cand = malloc(len + strlen(name) + 3);
        if (cand == NULL) return snprintf(err, err_len, "out of memory"), TP_ERR_NO_MEMORY;
        if (len == 0) sprintf(cand, "./%s", name);
        else sprintf(cand, "%.*s/%s", (int)len, p, name);
        char why[512];
        tp_status_t st = check_candidate(name, cand, why, sizeof(why));
        if (st == TP_OK) {
            *out = cand;
            return TP_OK;
        }
        free(cand);
        if (st != TP_ERR_NOT_FOUND && first_err[0] == '\0') snprintf(first_err, sizeof(first_err), "%s", why);
        if (p[len] == '\0') break;
        p += len + 1;
    }
    char q[TP_QUOTE_LEN];
    if (first_err[0] != '\0') snprintf(err, err_len, "%s", first_err);
    else snprintf(err, err_len, "program \"%s\": not found in PATH", tp_quote(name, q, sizeof(q)));
    return TP_ERR_INVALID;
}

/* An option's value: "--opt=value", "-nVALUE" or the next argument. */
static const char *option_value(int argc, char **argv, int *i, const char *attached, const char *opt,
                                const char *expected, char *err, size_t err_len)
{
    if (attached != NULL) return attached;
    if (*i + 1 >= argc) {
        snprintf(err, err_len, "%s: missing value (expected %s)", opt, expected);
        return NULL;
    }
    return argv[++*i];
}

static tp_status_t parse_grace(const char *opt, const char *text, double *out, char *err, size_t err_len)
{
    if (strcmp(text, "0") == 0) return *out = 0, TP_OK;
    if (tp_config_parse_seconds(opt, text, out, err, err_len) == TP_OK) return TP_OK;
    snprintf(err, err_len, "%s: expected a number of seconds (0 kills at once), got \"%s\"", opt, text);
    return TP_ERR_INVALID;
}

void tprun_plan_free(tprun_plan_t *plan)
{
    for (size_t i = 0; i < plan->num_hosts; i++) free(plan->hosts[i].name);
    free(plan->hosts);
    for (size_t i = 0; i < plan->num_env_set; i++) free(plan->env_set[i]);
    free(plan->env_set);
    free(plan->program_path);
    free(plan->rank_host);
    free(plan->rank_local);
    free(plan->ssh);
    free(plan->wdir);
    memset(plan, 0, sizeof(*plan));
}

static tp_status_t parse_options(int argc, char **argv, char *const *envp, tprun_plan_t *plan, int *prog_index,
                                 char *err, size_t err_len)
{
    int i;
    for (i = 1; i < argc; i++) {
        char *arg = argv[i];
        if (strcmp(arg, "--") == 0) {
            i++;
            break;
        }
        if (arg[0] != '-' || arg[1] == '\0') break;
        /* Split "--name=value" and "-nVALUE"; the name is what messages show. */
        char name[64];
        const char *attached = NULL;
        if (arg[1] == '-') {
            const char *eq = strchr(arg, '=');
            size_t len = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
            if (len >= sizeof(name)) len = sizeof(name) - 1;
            memcpy(name, arg, len);
            name[len] = '\0';
            if (eq != NULL) attached = eq + 1;
        } else if (strcmp(arg, "-np") == 0) {
            strcpy(name, "-n");
        } else {
            name[0] = '-', name[1] = arg[1], name[2] = '\0';
            if (arg[2] != '\0') attached = arg + 2;
        }
        const char *v;
        char q[TP_QUOTE_LEN];
        tp_status_t st = TP_OK;
        if (strcmp(name, "-n") == 0 || strcmp(name, "--np") == 0) {
            long n;
            if ((v = option_value(argc, argv, &i, attached, name, "a positive integer", err, err_len)) == NULL)
                return TP_ERR_INVALID;
            if (parse_count(v, TPRUN_MAX_RANKS, &n) != 0)
                return snprintf(err, err_len, "%s: expected a positive integer (at most %d), got \"%s\"", name,
                                TPRUN_MAX_RANKS, tp_quote(v, q, sizeof(q))),
                       TP_ERR_INVALID;
            plan->np = (int)n;
        } else if (strcmp(name, "-H") == 0 || strcmp(name, "--host") == 0) {
            if ((v = option_value(argc, argv, &i, attached, name, "host[:slots][,...]", err, err_len)) == NULL)
                return TP_ERR_INVALID;
            st = tprun_hosts_parse_list(plan, name, v, err, err_len);
        } else if (strcmp(name, "--hostfile") == 0) {
            if ((v = option_value(argc, argv, &i, attached, name, "a file name", err, err_len)) == NULL)
                return TP_ERR_INVALID;
            st = tprun_hosts_parse_file(plan, v, err, err_len);
        } else if (strcmp(name, "-x") == 0) {
            if ((v = option_value(argc, argv, &i, attached, name, "VAR or VAR=value", err, err_len)) == NULL)
                return TP_ERR_INVALID;
            st = parse_env_option(plan, v, envp, err, err_len);
        } else if (strcmp(name, "--timeout") == 0) {
            if ((v = option_value(argc, argv, &i, attached, name, "a positive number of seconds", err, err_len)) ==
                NULL)
                return TP_ERR_INVALID;
            st = tp_config_parse_seconds(name, v, &plan->timeout_s, err, err_len);
        } else if (strcmp(name, "--grace") == 0) {
            if ((v = option_value(argc, argv, &i, attached, name, "a number of seconds", err, err_len)) == NULL)
                return TP_ERR_INVALID;
            st = parse_grace(name, v, &plan->grace_s, err, err_len);
        } else if (strcmp(name, "--map-by") == 0) {
            if ((v = option_value(argc, argv, &i, attached, name, "slot or node", err, err_len)) == NULL)
                return TP_ERR_INVALID;
            if (strcmp(v, "slot") == 0) plan->map_by = TPRUN_MAP_SLOT;
            else if (strcmp(v, "node") == 0) plan->map_by = TPRUN_MAP_NODE;
            else
                return snprintf(err, err_len, "%s: expected slot or node, got \"%s\"", name, tp_quote(v, q, sizeof(q))),
                       TP_ERR_INVALID;
        } else if (strcmp(name, "--ssh") == 0) {
            if ((v = option_value(argc, argv, &i, attached, name, "a command such as \"ssh -F file\"", err,
                                  err_len)) == NULL)
                return TP_ERR_INVALID;
            if (v[strspn(v, " \t")] == '\0')
                return snprintf(err, err_len, "%s: expected a command, got \"%s\"", name, v), TP_ERR_INVALID;
            free(plan->ssh);
            if ((plan->ssh = strdup(v)) == NULL) return snprintf(err, err_len, "out of memory"), TP_ERR_NO_MEMORY;
        } else if (strcmp(name, "--launcher") == 0) {
            if ((v = option_value(argc, argv, &i, attached, name, "auto, local or slurm", err, err_len)) == NULL)
                return TP_ERR_INVALID;
            plan->launcher = v;
        } else if (strcmp(name, "--json-summary") == 0) {
            if ((v = option_value(argc, argv, &i, attached, name, "a file name", err, err_len)) == NULL)
                return TP_ERR_INVALID;
            if (v[0] == '\0') return snprintf(err, err_len, "%s: expected a file name, got \"\"", name), TP_ERR_INVALID;
            plan->json_summary = v;
        } else if (strcmp(name, "--bind-to") == 0) {
            if ((v = option_value(argc, argv, &i, attached, name, TPRUN_BIND_MODES_TEXT, err, err_len)) == NULL)
                return TP_ERR_INVALID;
            if ((plan->bind_to = tprun_bind_mode_parse(v)) < 0)
                return snprintf(err, err_len, "%s: expected " TPRUN_BIND_MODES_TEXT ", got \"%s\"", name,
                                tp_quote(v, q, sizeof(q))),
                       TP_ERR_INVALID;
        } else if (strcmp(name, "--gpus-per-rank") == 0) {
            if ((v = option_value(argc, argv, &i, attached, name, "0 or 1", err, err_len)) == NULL)
                return TP_ERR_INVALID;
            if ((plan->gpus_per_rank = tprun_gpus_per_rank_parse(v)) < 0)
                return snprintf(err, err_len, "%s: expected " TPRUN_GPUS_PER_RANK_TEXT ", got \"%s\"", name,
                                tp_quote(v, q, sizeof(q))),
                       TP_ERR_INVALID;
        } else if (strcmp(name, "--wdir") == 0) {
            if ((v = option_value(argc, argv, &i, attached, name, "a directory", err, err_len)) == NULL)
                return TP_ERR_INVALID;
            if (v[0] != '/')
                return snprintf(err, err_len, "%s: expected an absolute directory, got \"%s\"", name, v),
                       TP_ERR_INVALID;
            free(plan->wdir);
            if ((plan->wdir = strdup(v)) == NULL) return snprintf(err, err_len, "out of memory"), TP_ERR_NO_MEMORY;
        } else if (attached != NULL && arg[1] == '-' &&
                   (strcmp(name, "--tag-output") == 0 || strcmp(name, "--report-bindings") == 0 || strcmp(name, "--no-torch-env") == 0 ||
                    strcmp(name, "--pmix") == 0 ||
                    strcmp(name, "--info") == 0 || strcmp(name, "--version") == 0 || strcmp(name, "--help") == 0)) {
            return snprintf(err, err_len, "%s: takes no value, got \"%s\"", name, attached), TP_ERR_INVALID;
        } else if (strcmp(name, "--tag-output") == 0) {
            plan->tag_output = 1;
        } else if (strcmp(name, "--report-bindings") == 0) {
            plan->report_bindings = 1;
        } else if (strcmp(name, "--pmix") == 0) { /* PMIx server hook */
            plan->pmix = 1;
        } else if (strcmp(name, "--no-torch-env") == 0) {
            plan->torch_env = 0;
        } else if (strcmp(name, "--info") == 0) {
            plan->want_info = 1;
        } else if (strcmp(name, "--version") == 0) {
            plan->want_version = 1;
        } else if (strcmp(name, "--help") == 0 || (strcmp(name, "-h") == 0 && attached == NULL)) {
            plan->want_help = 1;
        } else {
            return snprintf(err, err_len, "unknown option \"%s\" (tprun --help lists the options)",
                            tp_quote(arg, q, sizeof(q))),
                   TP_ERR_INVALID;
        }
        if (st != TP_OK) return TP_ERR_INVALID;
    }
    *prog_index = i;
    return TP_OK;
}

/* -x of a torchrun name (RANK, MASTER_PORT, ...) is refused only if the torch variables are on after every option. */
static tp_status_t check_torch_env(const tprun_plan_t *plan, char *err, size_t err_len)
{
    for (size_t i = 0; plan->torch_env && i < plan->num_env_set; i++) {
        size_t len = strcspn(plan->env_set[i], "=");
        if (tprun_env_is_launcher_var(plan->env_set[i], len, 1))
            return snprintf(err, err_len,
                            "-x %.*s: tprun sets this variable for each rank; it cannot be overridden (unless "
                            "--no-torch-env)",
                            (int)len, plan->env_set[i]),
                   TP_ERR_INVALID;
    }
    return TP_OK;
}

/* --wdir is where every rank starts: on this machine it must be a directory tprun can enter. */
static tp_status_t check_wdir(const tprun_plan_t *plan, char *err, size_t err_len)
{
    int local = plan->hosts == NULL;
    for (size_t h = 0; h < plan->num_hosts; h++) local |= plan->hosts[h].local && plan->hosts[h].nranks > 0;
    struct stat sb;
    if (plan->wdir == NULL || !local) return TP_OK;
    if (stat(plan->wdir, &sb) != 0)
        return snprintf(err, err_len, "--wdir %s: %s", plan->wdir, strerror(errno)), TP_ERR_INVALID;
    if (!S_ISDIR(sb.st_mode)) return snprintf(err, err_len, "--wdir %s: not a directory", plan->wdir), TP_ERR_INVALID;
    if (access(plan->wdir, X_OK) != 0)
        return snprintf(err, err_len, "--wdir %s: cannot enter it (%s)", plan->wdir, strerror(errno)), TP_ERR_INVALID;
    return TP_OK;
}

/* Everything after the options: counts, hosts, slots and the program. */
static tp_status_t check_plan(tprun_plan_t *plan, char *const *envp, const char *hostname, int have_np, char *err,
                              size_t err_len)
{
    if (plan->argv[0] == NULL)
        return snprintf(err, err_len, "missing the program to run (usage: tprun -n N [options] [--] program [args])"),
               TP_ERR_INVALID;
    if (!have_np) {
        if (plan->hosts == NULL)
            return snprintf(err, err_len, "-n: missing (give the number of ranks, e.g. -n 4)"), TP_ERR_INVALID;
        if (plan->total_slots > TPRUN_MAX_RANKS)
            return snprintf(err, err_len, "-H/--hostfile: %ld slots, more than %d ranks", plan->total_slots,
                            TPRUN_MAX_RANKS),
                   TP_ERR_INVALID;
        plan->np = (int)plan->total_slots;
    }
    int any_given = 0;
    for (size_t h = 0; h < plan->num_hosts; h++) {
        plan->hosts[h].local = tprun_host_is_local(plan->hosts[h].name, hostname);
        any_given |= plan->hosts[h].slots_given;
    }
    /* -n 6 -H a,b,c: hosts named without slot counts share the ranks evenly. */
    if (plan->hosts != NULL && plan->total_slots < plan->np && !any_given) {
        int each = (int)((plan->np + (long)plan->num_hosts - 1) / (long)plan->num_hosts);
        plan->total_slots = 0;
        for (size_t h = 0; h < plan->num_hosts; h++) plan->hosts[h].slots = each, plan->total_slots += each;
    }
    if (plan->hosts != NULL && plan->total_slots < plan->np)
        return snprintf(err, err_len, "-n %d needs %d slots, but -H/--hostfile give only %ld", plan->np, plan->np,
                        plan->total_slots),
               TP_ERR_INVALID;
    tp_status_t st = plan->hosts != NULL ? tprun_plan_place(plan, err, err_len) : TP_OK;
    /* Under Slurm every host's agent starts the ranks: tprun holds only srun's pipes. */
    const char *how = plan->launcher;
    int srun = (how != NULL && strcmp(how, "slurm") == 0) ||
               ((how == NULL || strcmp(how, "local") != 0) && env_lookup(envp, "SLURM_JOB_ID") != NULL);
    if (st == TP_OK && !srun) st = tprun_plan_check_fds(plan, err, err_len);
    if (st == TP_OK)
        st = tprun_find_program(plan->argv[0], env_lookup(envp, "PATH"), &plan->program_path, err, err_len);
    if (st == TP_OK) st = check_wdir(plan, err, err_len);
    if (st != TP_OK || (!plan->remote && !srun && plan->wdir == NULL)) return st;
    /* Ranks in another directory (remote, or --wdir) run the same path: both are made absolute here. */
    char cwd[4096];
    if (getcwd(cwd, sizeof(cwd)) == NULL)
        return snprintf(err, err_len, "cannot read the current directory: %s", strerror(errno)), TP_ERR_INVALID;
    if (plan->wdir == NULL && (plan->wdir = strdup(cwd)) == NULL)
        return snprintf(err, err_len, "out of memory"), TP_ERR_NO_MEMORY;
    if (plan->program_path[0] != '/') {
        char *abs = malloc(strlen(cwd) + strlen(plan->program_path) + 2);
        if (abs == NULL) return snprintf(err, err_len, "out of memory"), TP_ERR_NO_MEMORY;
        sprintf(abs, "%s/%s", cwd, plan->program_path[0] == '.' && plan->program_path[1] == '/'
                                       ? plan->program_path + 2 : plan->program_path);
        free(plan->program_path);
        plan->program_path = abs;
    }
    return TP_OK;
}

tp_status_t tprun_args_parse(int argc, char **argv, char *const *envp, const char *hostname, tprun_plan_t *plan,
                             char *err, size_t err_len)
{
    memset(plan, 0, sizeof(*plan));
    plan->torch_env = 1;
    plan->grace_s = 1;
    /* Defaults from the environment; a bad value there is refused by tp_config_check_environ, not here. */
    char ignore[256];
    const char *v;
    int b;
    if ((v = env_lookup(envp, "TP_TIMEOUT")) != NULL)
        tp_config_parse_seconds("TP_TIMEOUT", v, &plan->timeout_s, ignore, sizeof(ignore));
    if ((v = env_lookup(envp, "TP_KILL_GRACE")) != NULL)
        parse_grace("TP_KILL_GRACE", v, &plan->grace_s, ignore, sizeof(ignore));
    plan->ssh_timeout_s = 10;
    if ((v = env_lookup(envp, "TP_SSH_TIMEOUT")) != NULL)
        tp_config_parse_seconds("TP_SSH_TIMEOUT", v, &plan->ssh_timeout_s, ignore, sizeof(ignore));
    if ((v = env_lookup(envp, "TP_SSH")) != NULL && v[strspn(v, " \t")] != '\0') plan->ssh = strdup(v);
    int64_t fanout = 32; /* TPRUN_LAUNCH_FANOUT */
    if ((v = env_lookup(envp, "TP_LAUNCH_FANOUT")) != NULL)
        tp_config_parse_int("TP_LAUNCH_FANOUT", v, &fanout, ignore, sizeof(ignore));
    plan->launch_fanout = fanout > 100000 ? 100000 : (int)fanout;
    if ((v = env_lookup(envp, "TP_TORCH_ENV")) != NULL &&
        tp_config_parse_bool("TP_TORCH_ENV", v, &b, ignore, sizeof(ignore)) == TP_OK)
        plan->torch_env = b;
    plan->gpus_per_rank = 1;
    if ((v = env_lookup(envp, "TP_GPUS_PER_RANK")) != NULL && tprun_gpus_per_rank_parse(v) >= 0)
        plan->gpus_per_rank = tprun_gpus_per_rank_parse(v);
    if ((v = env_lookup(envp, "TP_BIND_TO")) != NULL && tprun_bind_mode_parse(v) >= 0)
        plan->bind_to = tprun_bind_mode_parse(v);
    plan->launcher = env_lookup(envp, "TP_LAUNCHER");
    const char *launcher_from = plan->launcher ? "TP_LAUNCHER" : NULL;
    if ((v = env_lookup(envp, "TP_PMIX")) != NULL && /* PMIx server hook */
        tp_config_parse_bool("TP_PMIX", v, &b, ignore, sizeof(ignore)) == TP_OK)
        plan->pmix = b;

    int prog = argc;
    tp_status_t st = parse_options(argc, argv, envp, plan, &prog, err, err_len);
    if (st == TP_OK && plan->launcher != NULL && strcmp(plan->launcher, "auto") != 0 &&
        strcmp(plan->launcher, "local") != 0 && strcmp(plan->launcher, "slurm") != 0) {
        int from_env = launcher_from != NULL && plan->launcher == env_lookup(envp, "TP_LAUNCHER");
        char q[TP_QUOTE_LEN];
        snprintf(err, err_len, "%s: expected auto, local or slurm, got \"%s\"", from_env ? "TP_LAUNCHER" : "--launcher",
                 tp_quote(plan->launcher, q, sizeof(q)));
        st = TP_ERR_INVALID;
    }
    if (st == TP_OK) st = check_torch_env(plan, err, err_len);
    int have_np = plan->np > 0;
    if (st == TP_OK) st = tprun_hosts_merge(plan, err, err_len);
    if (st == TP_OK) {
        plan->argv = argv + prog;
        if (!plan->want_help && !plan->want_version && !plan->want_info)
            st = check_plan(plan, envp, hostname, have_np, err, err_len);
    }
    if (st != TP_OK) {
        /* Whatever a message echoes from argv, the environment or a file, it stays one printable line. */
        char *raw = strdup(err);
        if (raw != NULL) tp_quote(raw, err, err_len);
        free(raw);
        tprun_plan_free(plan);
        return TP_ERR_INVALID;
    }
    return TP_OK;
}

void tprun_usage(int fd)
{
    dprintf(fd, "usage: tprun -n N [options] [--] program [args...]\n"
                "Starts N ranks of program on this machine or, over ssh, on the hosts given, each with the tprun\n"
                "environment (docs/USAGE.md).\n"
                "\n"
                "  -n, --np N            number of ranks (default with -H/--hostfile: their total slots)\n"
                "  -H, --host LIST       hosts as host[:slots][,host[:slots]...] (1 slot by default)\n"
                "      --hostfile FILE   hosts, one \"host [slots=N]\" per line, '#' comments\n"
                "                        (-H and --hostfile add up; a host that is not this machine is\n"
                "                        reached over ssh, where tprun and the program have the same paths)\n"
                "      --map-by slot|node  fill each host's slots in turn (slot, the default) or deal ranks\n"
                "                        round-robin over the hosts (node)\n"
                "      --ssh CMD         the ssh command for remote hosts, split on blanks (default: TP_SSH, ssh);\n"
                "                        tprun adds -T -o BatchMode=yes -o ConnectTimeout=TP_SSH_TIMEOUT\n"
                "      --wdir DIR        every rank starts in DIR (default: the current directory)\n"
                "      --report-bindings rank 0 prints a table of every rank's CPUs, GPU, HCA ports and interface, and why\n"
                "      --bind-to HOW     bind each rank's CPUs and memory: gpu (the NUMA node nearest its GPU, else\n"
                "                        its HCA; without either, a share of the cores by local rank, or one core\n"
                "                        each in turn when ranks outnumber cores), numa (also by local rank without\n"
                "                        them), core (one core each, within that node) or none (default:\n"
                "                        TP_BIND_TO, gpu)\n"
                "      --gpus-per-rank N 1: each rank gets its own GPU by local rank (CUDA_VISIBLE_DEVICES); 0: none\n"
                "                        (default: TP_GPUS_PER_RANK, 1)\n"
                "      --launcher HOW    auto (srun starts the agents inside a Slurm allocation, else fork and ssh), local\n"
                "                        or slurm\n"
                "                        (default: TP_LAUNCHER, auto)\n"
                "      --pmix            host a PMIx server for the ranks (in each host's agent too), so plain PMIx\n"
                "                        programs run, libtp ranks bootstrap through it; also TP_PMIX=1\n"
                "  -x VAR                check that VAR is set and pass it to every rank\n"
                "  -x VAR=value          set VAR for every rank (repeatable; a later one wins)\n"
                "      --tag-output      prefix each line of output with \"[rank] \"\n"
                "      --timeout SEC     end the job after SEC seconds, exit status 124 (default: TP_TIMEOUT)\n"
                "      --grace SEC       seconds from SIGTERM to SIGKILL when the job is ended, 0 for at once\n"
                "                        (default: TP_KILL_GRACE, 1)\n"
                "      --no-torch-env    do not set RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,\n"
                "                        MASTER_PORT (also TP_TORCH_ENV=0)\n"
                "      --json-summary FILE  when the job ends, write FILE (atomically): one JSON object with the\n"
                "                        job's and every rank's host, pid, status, times and cause\n"
                "      --info            print the TP_* variables with their defaults and values, then exit\n"
                "      --version         print the version and exit\n"
                "  -h, --help            print this help and exit\n"
                "  --                    end of options\n"
                "\n"
                "An option given twice takes its last value (-n, --timeout, --grace); -H, --hostfile and -x add up.\n"
                "Exit status: 0 when every rank exits 0; else the first failing rank's exit status, or 128+signal\n"
                "when it was killed (under --pmix, a PMIx_Abort's status); 127 when the program could not be\n"
                "executed; 124 on --timeout; 2 for a bad command line or TP_* variable (nothing started); 125\n"
                "when tprun itself fails to start the job (or a host fails the launch, or srun cannot start);\n"
                "128+signal when a signal interrupts the launch on other hosts.\n");
}
