/* launcher_slurm_unit.c: the Slurm backend's reading of an allocation: host lists, tasks per node, the placement. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime_iface.h"
#include "slurm.h"
#include "tprun_args.h"

#include "unit_check.h"

/* The expansion of list joined by spaces, or "ERR". */
static void expand(const char *list, char *out, size_t len)
{
    char **names = NULL;
    size_t n = 0, o = 0;
    if (tprun_slurm_hostlist(list, &names, &n) != 0) {
        snprintf(out, len, "ERR");
        return;
    }
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        o += (size_t)snprintf(out + o, len - o, "%s%s", i ? " " : "", names[i]);
        free(names[i]);
    }
    free(names);
}

static void test_hostlist(void)
{
    static const char *const cases[][2] = {
        {"n1", "n1"},
        {"n[1-3]", "n1 n2 n3"},
        {"n[01-03,7],gpu1", "n01 n02 n03 n7 gpu1"},
        {"rack[1-2]-n[8-9]", "rack1-n8 rack1-n9 rack2-n8 rack2-n9"},
        {"a,b[009-011]", "a b009 b010 b011"},
        {"n[1-", "ERR"},
        {"n[]", "ERR"},
        {"n[3-1]", "ERR"},
        {"n[1-2]]", "ERR"},
        {"n[a]", "ERR"},
        {"a,,b", "ERR"},
        {"", "ERR"},
    };
    char out[256];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        expand(cases[i][0], out, sizeof(out));
        CHECK(strcmp(out, cases[i][1]) == 0, "\"%s\": got \"%s\", want \"%s\"", cases[i][0], out, cases[i][1]);
    }
}

static void test_tasks_per_node(void)
{
    int t[4] = {0};
    CHECK(tprun_slurm_tasks_per_node("2(x3),1", t, 4) == 0 && t[0] == 2 && t[1] == 2 && t[2] == 2 && t[3] == 1,
          "2(x3),1: %d %d %d %d", t[0], t[1], t[2], t[3]);
    CHECK(tprun_slurm_tasks_per_node("4", t, 1) == 0 && t[0] == 4, "4");
    static const char *const bad[] = {"2(x3)", "2(x3),1,1", "x", "2(x0),1,1,1", "2(x3,1", "1,", "-1,1,1,1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK(tprun_slurm_tasks_per_node(bad[i], t, 4) != 0, "\"%s\" for 4 nodes is refused", bad[i]);
}

/* tprun_slurm_plan on a parsed command line and a made-up allocation; returns its status. */
static int plan_in(const char *const *args, int nargs, char *const *env, tprun_plan_t *plan)
{
    char err[512], *argv[16];
    for (int i = 0; i < nargs; i++) argv[i] = (char *)args[i];
    argv[nargs] = NULL;
    if (tprun_args_parse(nargs, argv, env, "here", plan, err, sizeof(err)) != TP_OK) {
        fprintf(stderr, "parse: %s\n", err);
        return -1;
    }
    return tprun_slurm_plan(plan, env);
}

static void test_plan(void)
{
    char path[4200];
    snprintf(path, sizeof(path), "PATH=%s", getenv("PATH") ? getenv("PATH") : "/bin");
    char *env[] = {"SLURM_JOB_ID=42", "SLURM_JOB_NODELIST=n[1-2]", "SLURM_TASKS_PER_NODE=2(x2)", path, NULL};
    tprun_plan_t plan;
    /* The allocation's slots, filled in turn; every node is an agent's, none is "this machine". */
    static const char *const four[] = {"tprun", "-n", "4", "true"};
    CHECK(plan_in(four, 4, env, &plan) == 0 && plan.num_hosts == 2 && plan.slurm && plan.remote, "-n 4 on n[1-2]");
    CHECK(plan.rank_host != NULL && plan.rank_host[0] == 0 && plan.rank_host[1] == 0 && plan.rank_host[2] == 1 &&
              plan.rank_host[3] == 1 && !plan.hosts[0].local && !plan.hosts[1].local,
          "-n 4: two ranks per node");
    tprun_plan_free(&plan);
    /* More ranks than tasks: an even share; --map-by node deals them. */
    static const char *const six[] = {"tprun", "-n", "6", "--map-by", "node", "true"};
    CHECK(plan_in(six, 6, env, &plan) == 0 && plan.rank_host[0] == 0 && plan.rank_host[1] == 1 &&
              plan.rank_host[4] == 0 && plan.rank_host[5] == 1 && plan.rank_local[5] == 2,
          "-n 6 --map-by node: dealt over n1, n2");
    tprun_plan_free(&plan);
    /* -H names must be nodes of the allocation. */
    static const char *const named[] = {"tprun", "-n", "2", "-H", "n2:2", "true"};
    CHECK(plan_in(named, 6, env, &plan) == 0 && plan.num_hosts == 1 && strcmp(plan.hosts[0].name, "n2") == 0,
          "-H n2:2");
    tprun_plan_free(&plan);
    static const char *const stranger[] = {"tprun", "-n", "2", "-H", "n3:2", "true"};
    CHECK(plan_in(stranger, 6, env, &plan) == TPRUN_EXIT_USAGE, "-H n3 is not a node of n[1-2]");
    tprun_plan_free(&plan);
    char *bad_env[] = {"SLURM_JOB_ID=42", "SLURM_JOB_NODELIST=n[1-", path, NULL};
    CHECK(plan_in(four, 4, bad_env, &plan) == TPRUN_EXIT_USAGE, "a malformed SLURM_JOB_NODELIST is refused");
    tprun_plan_free(&plan);
}

/* Under srun an agent has no SSH_CONNECTION: other nodes reach it at its first interface, never at loopback. */
static void test_node_ip(void)
{
    char ip[64] = "127.0.0.1";
    tprun_slurm_node_ip(ip, sizeof(ip));
    tp_iface_t ifs[TP_IFACES_MAX];
    int n = tp_iface_list(NULL, ifs, TP_IFACES_MAX, NULL, NULL);
    CHECK(n > 0 ? strcmp(ip, ifs[0].ip) == 0 && strncmp(ip, "127.", 4) != 0 : strcmp(ip, "127.0.0.1") == 0,
          "node ip %s (%d interfaces)", ip, n);
}

int main(void)
{
    test_node_ip();
    test_hostlist();
    test_tasks_per_node();
    test_plan();
    if (failures == 0) printf("launcher_slurm_unit: all checks passed\n");
    return failures == 0 ? 0 : 1;
}
