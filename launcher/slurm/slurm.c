/* slurm.c: the Slurm backend: the plan becomes one agent per node of the allocation, each started by its own srun
 * step (`srun --nodes=1 --ntasks=1 --nodelist=HOST --overlap ... tprun --agent`); the ssh path's channel, keeper,
 * stdin forwarding and services then work unchanged. */
#include "slurm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_iface.h"
#include "runtime_log.h"
#include "tprun_exit.h"

static const char *env_get(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (char *const *ep = envp; ep != NULL && *ep != NULL; ep++)
        if (strncmp(*ep, name, n) == 0 && (*ep)[n] == '=') return *ep + n + 1;
    return NULL;
}

int tprun_slurm_wanted(const char *how, char *const *envp)
{
    if (how != NULL && strcmp(how, "slurm") == 0) return 1;
    if (how != NULL && strcmp(how, "local") == 0) return 0;
    return env_get(envp, "SLURM_JOB_ID") != NULL;
}

int tprun_slurm_check(const tprun_plan_t *plan, char *const *envp)
{
    const char *how = plan->launcher != NULL && plan->launcher == env_get(envp, "TP_LAUNCHER") ? "TP_LAUNCHER=slurm"
                                                                                               : "--launcher slurm";
    if (env_get(envp, "SLURM_JOB_ID") == NULL) {
        tprun_say("%s: not inside a Slurm allocation (SLURM_JOB_ID is not set); run tprun under salloc or sbatch, or "
                  "use --launcher local",
                  how);
        return TPRUN_EXIT_USAGE;
    }
    char *path = NULL, err[600];
    if (tprun_find_program("srun", env_get(envp, "PATH"), &path, err, sizeof(err)) != TP_OK) {
        tprun_say("Slurm allocation %s: cannot start srun: %s (set TP_LAUNCHER=local to start the ranks here)",
                  env_get(envp, "SLURM_JOB_ID"), err);
        return TPRUN_EXIT_LAUNCH;
    }
    free(path);
    return 0;
}

/* ---- the allocation's nodes ---- */

static int push_name(char ***names, size_t *count, size_t *cap, char *name)
{
    if (name == NULL) return -1;
    if (*count == *cap) {
        size_t c = *cap ? *cap * 2 : 8;
        char **g = realloc(*names, c * sizeof(char *));
        if (g == NULL) return free(name), -1;
        *names = g, *cap = c;
    }
    (*names)[(*count)++] = name;
    return 0;
}

/* One item "pre[a-b,c]rest": each number of the first bracket (zero-padded as written), then rest expanded. */
static int expand_item(const char *pre, size_t pre_len, const char *item, char ***names, size_t *count, size_t *cap)
{
    const char *open = strchr(item, '[');
    if (open == NULL) {
        char *name = malloc(pre_len + strlen(item) + 1);
        if (name != NULL) sprintf(name, "%.*s%s", (int)pre_len, pre, item);
        return push_name(names, count, cap, name);
    }
    const char *close = strchr(open, ']');
    if (close == NULL || close == open + 1) return -1;
    size_t head = pre_len + (size_t)(open - item);
    char *buf = malloc(head + 24);
    if (buf == NULL) return -1;
    memcpy(buf, pre, pre_len);
    memcpy(buf + pre_len, item, (size_t)(open - item));
    int rc = 0;
    for (const char *r = open + 1; rc == 0 && r < close;) {
        char *end;
        unsigned long lo = strtoul(r, &end, 10), hi = lo;
        int width = (int)(end - r);
        if (end == r || width > 18) rc = -1;
        else if (*end == '-') {
            const char *h = end + 1;
            hi = strtoul(h, &end, 10);
            if (end == h || hi < lo || hi - lo > 1000000) rc = -1;
        }
        if (rc == 0 && *end != ',' && end != close) rc = -1;
        for (unsigned long v = lo; rc == 0 && v <= hi; v++) {
            size_t n = head + (size_t)sprintf(buf + head, "%0*lu", width, v);
            rc = expand_item(buf, n, close + 1, names, count, cap);
        }
        r = end + (*end == ',');
    }
    free(buf);
    return rc;
}

int tprun_slurm_hostlist(const char *list, char ***names, size_t *count)
{
    char **v = NULL, item[1024];
    size_t n = 0, cap = 0;
    int rc = 0;
    for (const char *p = list; rc == 0 && *p != '\0';) {
        size_t len = 0;
        int depth = 0;
        while (p[len] != '\0' && (p[len] != ',' || depth > 0)) depth += (p[len] == '[') - (p[len] == ']'), len++;
        if (len == 0 || len >= sizeof(item) || depth != 0) rc = -1;
        else {
            memcpy(item, p, len);
            item[len] = '\0';
            rc = expand_item("", 0, item, &v, &n, &cap);
        }
        p += len + (p[len] == ',');
    }
    if (rc != 0 || n == 0) {
        for (size_t i = 0; i < n; i++) free(v[i]);
        free(v);
        return -1;
    }
    *names = v, *count = n;
    return 0;
}

int tprun_slurm_tasks_per_node(const char *spec, int *out, size_t count)
{
    size_t k = 0;
    for (const char *p = spec; *p != '\0';) {
        char *end;
        long tasks = strtol(p, &end, 10), times = 1;
        if (end == p || tasks < 0 || tasks > TPRUN_MAX_RANKS) return -1;
        if (strncmp(end, "(x", 2) == 0) {
            const char *t = end + 2;
            times = strtol(t, &end, 10);
            if (end == t || *end != ')' || times < 1) return -1;
            end++;
        }
        for (long i = 0; i < times; i++) {
            if (k == count) return -1;
            out[k++] = (int)tasks;
        }
        if (*end != ',' && *end != '\0') return -1;
        p = end + (*end == ',');
    }
    return k == count ? 0 : -1;
}

/* Without -H/--hostfile: the allocation's nodes, each with its tasks as slots (an even share when -n needs more). */
static int hosts_from_allocation(tprun_plan_t *plan, char **nodes, size_t nn, const char *tasks)
{
    plan->hosts = calloc(nn, sizeof(*plan->hosts));
    int *slots = calloc(nn, sizeof(int));
    if (plan->hosts == NULL || slots == NULL) return free(slots), -1;
    if (tasks == NULL || tprun_slurm_tasks_per_node(tasks, slots, nn) != 0)
        for (size_t h = 0; h < nn; h++) slots[h] = 1;
    plan->total_slots = 0;
    for (size_t h = 0; h < nn; h++) plan->total_slots += slots[h];
    int each = (int)((plan->np + (long)nn - 1) / (long)nn);
    for (size_t h = 0; h < nn; h++) {
        plan->hosts[h].name = nodes[h];
        nodes[h] = NULL;
        plan->hosts[h].slots = plan->total_slots >= plan->np ? slots[h] : each;
        plan->hosts[h].slots_given = 1;
    }
    plan->num_hosts = nn;
    free(slots);
    return 0;
}

int tprun_slurm_plan(tprun_plan_t *plan, char *const *envp)
{
    const char *job = env_get(envp, "SLURM_JOB_ID"), *list = env_get(envp, "SLURM_JOB_NODELIST");
    if (list == NULL) list = env_get(envp, "SLURM_NODELIST");
    char **nodes = NULL, err[600];
    size_t nn = 0;
    int status = TPRUN_EXIT_USAGE;
    if (list == NULL || tprun_slurm_hostlist(list, &nodes, &nn) != 0) {
        char q[TP_QUOTE_LEN];
        tprun_say("Slurm allocation %s: cannot read its nodes from SLURM_JOB_NODELIST=\"%s\" (run tprun inside salloc "
                  "or sbatch, or use --launcher local)",
                  job, list != NULL ? tp_quote(list, q, sizeof(q)) : "");
        return TPRUN_EXIT_USAGE;
    }
    if (plan->hosts != NULL) {
        /* -H/--hostfile inside an allocation: tprun's own placement, on the allocation's nodes only. */
        for (size_t h = 0; h < plan->num_hosts; h++) {
            size_t i = 0;
            while (i < nn && strcmp(nodes[i], plan->hosts[h].name) != 0) i++;
            if (i == nn) {
                char q[TP_QUOTE_LEN];
                tprun_say("-H/--hostfile: host %s is not a node of Slurm allocation %s (its nodes: %s)",
                          plan->hosts[h].name, job, tp_quote(list, q, sizeof(q)));
                goto out;
            }
        }
    } else if (hosts_from_allocation(plan, nodes, nn, env_get(envp, "SLURM_TASKS_PER_NODE")) != 0) {
        tprun_say("out of memory placing %d ranks on Slurm allocation %s", plan->np, job);
        status = TPRUN_EXIT_LAUNCH;
        goto out;
    }
    /* Every node gets an agent, this one included: the ranks live in Slurm steps, which Slurm accounts and ends. */
    for (size_t h = 0; h < plan->num_hosts; h++) plan->hosts[h].local = 0;
    if (tprun_plan_place(plan, err, sizeof(err)) != TP_OK) {
        tprun_say("%s", err);
        goto out;
    }
    plan->remote = 1;
    plan->slurm = 1;
    status = 0;
out:
    for (size_t i = 0; i < nn; i++) free(nodes[i]);
    free(nodes);
    return status;
}

char **tprun_slurm_agent_argv(const tprun_plan_t *plan, const char *exe, const char *host)
{
    enum { MAX_ARGS = 16 };
    (void)plan;
    size_t room = strlen("--nodelist=") + strlen(host) + 1 + strlen(exe) + 1;
    char **argv = malloc(sizeof(char *) * MAX_ARGS + room);
    if (argv == NULL) return NULL;
    char *nodelist = (char *)(argv + MAX_ARGS), *self = nodelist + strlen("--nodelist=") + strlen(host) + 1;
    sprintf(nodelist, "--nodelist=%s", host);
    strcpy(self, exe);
    int k = 0;
    argv[k++] = "srun";
    argv[k++] = "--nodes=1";
    argv[k++] = "--ntasks=1";
    argv[k++] = nodelist;
    argv[k++] = "--overlap";       /* beside the job's other steps, its agents' included */
    argv[k++] = "--mpi=none";      /* the agent is no PMIx client; its ranks get tprun's contract or --pmix */
    argv[k++] = "--cpu-bind=none"; /* the agent's ranks use the node's CPUs of the allocation, not one task's */
    argv[k++] = "--kill-on-bad-exit=1";
    argv[k++] = "--";
    argv[k++] = self;
    argv[k++] = "--agent";
    argv[k] = NULL;
    return argv;
}

void tprun_slurm_node_ip(char *ip, size_t len)
{
    tp_iface_t ifs[TP_IFACES_MAX];
    if (tp_iface_list(NULL, ifs, TP_IFACES_MAX, NULL, NULL) > 0) snprintf(ip, len, "%s", ifs[0].ip);
}
