/* launcher_args_test.c: unit tests of tprun's command-line parsing and status messages (pure functions). */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime_log.h"
#include "tprun_args.h"
#include "tprun_exit.h"

#include "unit_check.h"

static char *const base_env[] = {"PATH=/usr/bin:/bin", "HOME=/root", NULL};

/* Parses a command line given as one string (words split on spaces); returns the status, err and plan. */
static tp_status_t parse(const char *line, char *const *envp, tprun_plan_t *plan, char *err, size_t len)
{
    static char buf[4096];
    static char *argv[64];
    int argc = 0;
    snprintf(buf, sizeof(buf), "tprun %s", line);
    for (char *save = NULL, *w = strtok_r(buf, " ", &save); w != NULL && argc < 63; w = strtok_r(NULL, " ", &save))
        argv[argc++] = w;
    argv[argc] = NULL;
    err[0] = '\0';
    return tprun_args_parse(argc, argv, envp ? envp : base_env, "vm.example.org", plan, err, len);
}

static void expect_error(const char *line, const char *message)
{
    tprun_plan_t plan;
    char err[1024];
    tp_status_t st = parse(line, NULL, &plan, err, sizeof(err));
    CHECK(st != TP_OK, "\"%s\" was accepted", line);
    CHECK(strcmp(err, message) == 0, "\"%s\": got \"%s\", expected \"%s\"", line, err, message);
}

static void test_good(void)
{
    tprun_plan_t plan;
    char err[1024];
    CHECK(parse("-n 4 true", NULL, &plan, err, sizeof(err)) == TP_OK, "%s", err);
    CHECK(plan.np == 4 && plan.torch_env && plan.grace_s == 1 && plan.timeout_s == 0 && !plan.tag_output, "defaults");
    CHECK(strcmp(plan.argv[0], "true") == 0 && plan.argv[1] == NULL, "argv");
    CHECK(strstr(plan.program_path, "/true") != NULL, "resolved %s", plan.program_path);
    tprun_plan_free(&plan);

    CHECK(parse("--np=3 -n 5 --tag-output --timeout 2.5 --grace 0 --no-torch-env -x A=1 -x HOME -- true -n 9", NULL,
                &plan, err, sizeof(err)) == TP_OK,
          "%s", err);
    CHECK(plan.np == 5, "last -n wins: %d", plan.np);
    CHECK(plan.tag_output && plan.timeout_s == 2.5 && plan.grace_s == 0 && !plan.torch_env, "flags");
    CHECK(plan.num_env_set == 2 && strcmp(plan.env_set[0], "A=1") == 0 && strcmp(plan.env_set[1], "HOME=/root") == 0,
          "-x");
    CHECK(strcmp(plan.argv[1], "-n") == 0 && strcmp(plan.argv[2], "9") == 0, "program arguments kept");
    tprun_plan_free(&plan);

    /* Hosts: slots add up, -n defaults to them; options after the program belong to it. */
    CHECK(parse("-H localhost:2,127.0.0.3,vm -H vm.example.org:3 true --np x", NULL, &plan, err, sizeof(err)) == TP_OK,
          "%s", err);
    CHECK(plan.num_hosts == 4 && plan.total_slots == 7 && plan.np == 7, "hosts %zu slots %ld np %d", plan.num_hosts,
          plan.total_slots, plan.np);
    tprun_plan_free(&plan);

    char *const env[] = {"PATH=/bin", "TP_TIMEOUT=7", "TP_KILL_GRACE=0.25", "TP_TORCH_ENV=off", NULL};
    CHECK(parse("-n1 true", env, &plan, err, sizeof(err)) == TP_OK, "%s", err);
    CHECK(plan.timeout_s == 7 && plan.grace_s == 0.25 && !plan.torch_env, "defaults from the environment");
    tprun_plan_free(&plan);
    CHECK(parse("-n1 --timeout 3 true", env, &plan, err, sizeof(err)) == TP_OK && plan.timeout_s == 3, "option wins");
    tprun_plan_free(&plan);

    CHECK(parse("--info", NULL, &plan, err, sizeof(err)) == TP_OK && plan.want_info, "--info needs no program");
    tprun_plan_free(&plan);
    CHECK(parse("-h", NULL, &plan, err, sizeof(err)) == TP_OK && plan.want_help, "-h");
    tprun_plan_free(&plan);

    /* --json-summary: the last one wins, in either form; the file itself is checked by tprun_summary_check. */
    CHECK(parse("-n 1 --json-summary a.json --json-summary=out/b.json true", NULL, &plan, err, sizeof(err)) == TP_OK,
          "%s", err);
    CHECK(plan.json_summary != NULL && strcmp(plan.json_summary, "out/b.json") == 0, "--json-summary %s",
          plan.json_summary ? plan.json_summary : "(null)");
    tprun_plan_free(&plan);
    CHECK(parse("-n 1 true", NULL, &plan, err, sizeof(err)) == TP_OK && plan.json_summary == NULL, "no summary");
    tprun_plan_free(&plan);
}

static void test_hostfile(void)
{
    char path[] = "/tmp/launcher_args_testXXXXXX";
    int fd = mkstemp(path);
    const char *text = "# hosts\nlocalhost slots=2\n\n  vm   # short name\n127.0.0.1 slots=3\n";
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text), "write");
    close(fd);
    tprun_plan_t plan;
    char err[1024], line[256];
    snprintf(line, sizeof(line), "--hostfile %s -n 6 true", path);
    CHECK(parse(line, NULL, &plan, err, sizeof(err)) == TP_OK, "%s", err);
    CHECK(plan.num_hosts == 3 && plan.total_slots == 6, "hostfile hosts %zu slots %ld", plan.num_hosts,
          plan.total_slots);
    tprun_plan_free(&plan);
    char msg[512];
    snprintf(line, sizeof(line), "--hostfile %s -n 7 true", path);
    expect_error(line, "-n 7 needs 7 slots, but -H/--hostfile give only 6");

    fd = open(path, O_WRONLY | O_TRUNC);
    text = "localhost slots=2\nlocalhost cpus=4\n";
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text), "write");
    close(fd);
    snprintf(line, sizeof(line), "--hostfile %s true", path);
    snprintf(msg, sizeof(msg),
             "--hostfile %s: line 2: expected slots=N (a positive count, at most 65536), got \"cpus=4\"", path);
    expect_error(line, msg);
    fd = open(path, O_WRONLY | O_TRUNC);
    text = "# nothing\n";
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text), "write");
    close(fd);
    snprintf(msg, sizeof(msg), "--hostfile %s: no hosts in the file", path);
    expect_error(line, msg);
    unlink(path);
    snprintf(msg, sizeof(msg), "--hostfile %s: No such file or directory", path);
    expect_error(line, msg);
}

static void test_errors(void)
{
    expect_error("-n abc true", "-n: expected a positive integer (at most 65536), got \"abc\"");
    expect_error("-n 0 true", "-n: expected a positive integer (at most 65536), got \"0\"");
    expect_error("-n -3 true", "-n: expected a positive integer (at most 65536), got \"-3\"");
    expect_error("-n 99999999999999999999 true",
                 "-n: expected a positive integer (at most 65536), got \"99999999999999999999\"");
    expect_error("--np=4x true", "--np: expected a positive integer (at most 65536), got \"4x\"");
    expect_error("-n", "-n: missing value (expected a positive integer)");
    expect_error("true", "-n: missing (give the number of ranks, e.g. -n 4)");
    expect_error("-n 2", "missing the program to run (usage: tprun -n N [options] [--] program [args])");
    expect_error("-n 2 --", "missing the program to run (usage: tprun -n N [options] [--] program [args])");
    expect_error("-n 2 --bogus true", "unknown option \"--bogus\" (tprun --help lists the options)");
    expect_error("-n 2 -q true", "unknown option \"-q\" (tprun --help lists the options)");
    expect_error("-n 2 --tag-output=yes true", "--tag-output: takes no value, got \"yes\"");
    expect_error("-n 2 --timeout 0 true", "--timeout: expected a positive number of seconds, got \"0\"");
    expect_error("-n 2 --timeout soon true", "--timeout: expected a positive number of seconds, got \"soon\"");
    expect_error("-n 2 --grace -1 true", "--grace: expected a number of seconds (0 kills at once), got \"-1\"");
    expect_error("-n 2 -H b:2 --map-by core true", "--map-by: expected slot or node, got \"core\"");
    expect_error("-n 2 -H b:2 --wdir tmp true", "--wdir: expected an absolute directory, got \"tmp\"");
    expect_error("-n 2 -H b:2 --ssh= true", "--ssh: expected a command, got \"\"");
    expect_error("-n 2 --json-summary= true", "--json-summary: expected a file name, got \"\"");
    expect_error("-n 2 --json-summary", "--json-summary: missing value (expected a file name)");
    expect_error("-n 2 -H localhost:0 true", "-H: host \"localhost\": expected a positive slot count, got \"0\"");
    expect_error("-n 2 -H localhost,,vm true", "-H: empty host name in \"localhost,,vm\"");
    expect_error("-n 3 -H localhost:2 true", "-n 3 needs 3 slots, but -H/--hostfile give only 2");
    expect_error("-n 2 -x 1A=2 true", "-x: expected VAR or VAR=value with a variable name, got \"1A=2\"");
    expect_error("-n 2 -x TP_RANK=3 true",
                 "-x TP_RANK: tprun sets this variable for each rank; it cannot be overridden");
    expect_error(
        "-n 2 -x MASTER_PORT=3 true",
        "-x MASTER_PORT: tprun sets this variable for each rank; it cannot be overridden (unless --no-torch-env)");
    expect_error("-n 2 --no-torch-env -x TP_RANK=3 true",
                 "-x TP_RANK: tprun sets this variable for each rank; it cannot be overridden");
    expect_error("-n 2 -x NOT_SET_ANYWHERE true",
                 "-x NOT_SET_ANYWHERE: not set in tprun's environment (use -x NOT_SET_ANYWHERE=value to set it)");
    expect_error("-n 2 no-such-program-xyz", "program \"no-such-program-xyz\": not found in PATH");
    expect_error("-n 2 ./no/such/file", "program \"./no/such/file\": No such file or directory");
    expect_error("-n 2 /tmp", "program \"/tmp\": /tmp is a directory");
    char path[] = "/tmp/launcher_args_noexecXXXXXX", line[256], msg[512];
    close(mkstemp(path)); /* mode 0600: not executable, even for root */
    snprintf(line, sizeof(line), "-n 2 %s", path);
    snprintf(msg, sizeof(msg), "program \"%s\": %s is not executable (Permission denied)", path, path);
    expect_error(line, msg);
    unlink(path);
}

static void test_hosts_and_formats(void)
{
    const char *host = "vm.example.org";
    CHECK(tprun_host_is_local("localhost", host) && tprun_host_is_local("LOCALHOST", host), "localhost");
    CHECK(tprun_host_is_local("127.0.0.1", host) && tprun_host_is_local("127.8.9.10", host), "127/8");
    CHECK(tprun_host_is_local("vm", host) && tprun_host_is_local("vm.example.org", host), "own names");
    CHECK(!tprun_host_is_local("vm2", host) && !tprun_host_is_local("v", host) &&
              !tprun_host_is_local("128.0.0.1", host),
          "others");
    char buf[128];
    int ranks[] = {0, 1, 2, 3, 5, 7, 8};
    tp_format_ranks(ranks, 7, buf, sizeof(buf));
    CHECK(strcmp(buf, "0-3,5,7-8") == 0, "%s", buf);
    tp_format_ranks(ranks, 0, buf, sizeof(buf));
    CHECK(strcmp(buf, "") == 0, "%s", buf);
    tprun_status_describe(3 << 8, 0, buf, sizeof(buf));
    CHECK(strcmp(buf, "exited with status 3") == 0, "%s", buf);
    tprun_status_describe(SIGKILL, 0, buf, sizeof(buf));
    CHECK(strcmp(buf, "killed by signal 9 (SIGKILL)") == 0, "%s", buf);
    tprun_status_describe(SIGKILL, 1, buf, sizeof(buf));
    CHECK(strcmp(buf, "killed by the kernel's OOM killer (SIGKILL)") == 0, "%s", buf);
    tprun_status_describe(SIGSEGV | 0x80, 1, buf, sizeof(buf));
    CHECK(strcmp(buf, "killed by signal 11 (SIGSEGV)") == 0, "%s", buf);
    CHECK(tprun_status_code(SIGTERM) == 143 && tprun_status_code(255 << 8) == 255 && tprun_status_code(0) == 0,
          "codes");
    CHECK(!tprun_status_failed(0) && tprun_status_failed(1 << 8) && tprun_status_failed(SIGINT), "failed");
}

/* Placement over slots: by slot fills each host in turn, by node deals round-robin; a host named twice adds up. */
static void test_placement(void)
{
    tprun_plan_t plan;
    char err[512];
    CHECK(parse("-n 3 -H a:2,b:2 /bin/true", NULL, &plan, err, sizeof(err)) == TP_OK, "slot: %s", err);
    CHECK(plan.remote && plan.rank_host[0] == 0 && plan.rank_host[1] == 0 && plan.rank_host[2] == 1, "slot hosts");
    CHECK(plan.rank_local[0] == 0 && plan.rank_local[1] == 1 && plan.rank_local[2] == 0, "slot local ranks");
    CHECK(plan.hosts[0].node == 0 && plan.hosts[1].node == 1, "slot nodes");
    CHECK(plan.wdir != NULL && plan.wdir[0] == '/' && strcmp(plan.program_path, "/bin/true") == 0, "remote paths");
    tprun_plan_free(&plan);
    CHECK(parse("-n 5 -H a:2,b:2,c:2 --map-by node /bin/true", NULL, &plan, err, sizeof(err)) == TP_OK, "node: %s",
          err);
    static const int host[] = {0, 1, 2, 0, 1}, local[] = {0, 0, 0, 1, 1};
    for (int r = 0; r < 5; r++)
        CHECK(plan.rank_host[r] == host[r] && plan.rank_local[r] == local[r], "node: rank %d on %d/%d", r,
              plan.rank_host[r], plan.rank_local[r]);
    tprun_plan_free(&plan);
    CHECK(parse("-n 4 -H a:1,b:2,a:2 --map-by node /bin/true", NULL, &plan, err, sizeof(err)) == TP_OK, "dup: %s", err);
    CHECK(plan.num_hosts == 2 && plan.hosts[0].slots == 3 && plan.total_slots == 5, "a host named twice adds up");
    CHECK(plan.rank_host[0] == 0 && plan.rank_host[1] == 1 && plan.rank_host[2] == 0 && plan.rank_host[3] == 1,
          "node with duplicates");
    tprun_plan_free(&plan);
    /* A host with no rank placed gets no node index: TP_NODE_RANK counts the hosts that run ranks. */
    CHECK(parse("-n 2 -H localhost:2,b:2 /bin/true", NULL, &plan, err, sizeof(err)) == TP_OK, "unused: %s", err);
    CHECK(!plan.remote && plan.hosts[1].node == -1, "ranks only on this machine: no ssh");
    tprun_plan_free(&plan);
}

/* Writes len bytes of text into a fresh file; returns its path (static). */
static const char *hostfile_of(const char *text, size_t len)
{
    static char path[64];
    snprintf(path, sizeof(path), "/tmp/launcher_args_hostsXXXXXX");
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, text, len) == (ssize_t)len, "write %s", path);
    close(fd);
    return path;
}

#define HOST_NAME_EXPECTED "expected a host name (letters, digits, '-', '.', '_', ':', '@', at most 255), got "

/* A hostfile of len bytes of text is refused with "--hostfile PATH: " and message. */
static void expect_hostfile_error(const char *text, size_t len, const char *message)
{
    char line[256], msg[1024];
    const char *path = hostfile_of(text, len);
    snprintf(line, sizeof(line), "-n 1 --hostfile %s true", path);
    snprintf(msg, sizeof(msg), "--hostfile %s: %s", path, message);
    expect_error(line, msg);
    unlink(path);
}

/* Hostfile lines of any length are read whole: a long comment stays a comment, line numbers stay right. */
static void test_hostfile_hostile(void)
{
    tprun_plan_t plan;
    char err[1024], line[256], msg[1024];
    size_t big = 1 << 20;
    char *text = malloc(big + 64);
    /* A comment longer than any line buffer: its tail must not become a host (it once ran "ssh evilhost"). */
    int n = sprintf(text, "# ");
    memset(text + n, 'c', 5000);
    n += 5000;
    n += sprintf(text + n, "evilhost\nlocalhost slots=2\nbad slots=x\n");
    const char *path = hostfile_of(text, (size_t)n);
    snprintf(line, sizeof(line), "--hostfile %s true", path);
    snprintf(msg, sizeof(msg),
             "--hostfile %s: line 3: expected slots=N (a positive count, at most 65536), got \"slots=x\"", path);
    expect_error(line, msg);
    unlink(path);
    path = hostfile_of(text, (size_t)n - strlen("bad slots=x\n"));
    snprintf(line, sizeof(line), "--hostfile %s true", path);
    CHECK(parse(line, NULL, &plan, err, sizeof(err)) == TP_OK, "%s", err);
    CHECK(plan.num_hosts == 1 && strcmp(plan.hosts[0].name, "localhost") == 0 && plan.np == 2, "only localhost: %zu",
          plan.num_hosts);
    tprun_plan_free(&plan);
    unlink(path);
    /* One word of a megabyte is one bad host name, not many hosts. */
    memset(text, 'x', big);
    text[big] = '\n';
    path = hostfile_of(text, big + 1);
    snprintf(line, sizeof(line), "-n 1 --hostfile %s true", path);
    CHECK(parse(line, NULL, &plan, err, sizeof(err)) != TP_OK, "a 1 MB host name was accepted");
    snprintf(msg, sizeof(msg), "--hostfile %s: line 1: " HOST_NAME_EXPECTED "\"xxxx", path);
    CHECK(strncmp(err, msg, strlen(msg)) == 0 && strlen(err) < 600 && strcmp(err + strlen(err) - 4, "...\"") == 0, "%s",
          err);
    unlink(path);
    /* A NUL byte used to cut the line silently ("localhost" with 99999 slots dropped). */
    expect_hostfile_error("a\nlocalhost\0garbage slots=99999\n", 32, "line 2: a NUL byte (a hostfile is text)");
    /* A host name that ssh would read as an option, or with bytes no host name has. */
    expect_hostfile_error("a\n-oProxyCommand=x slots=2\n", 26, "line 2: " HOST_NAME_EXPECTED "\"-oProxyCommand=x\"");
    expect_hostfile_error("a\x1b[2Jb\n", 7, "line 1: " HOST_NAME_EXPECTED "\"a\\x1b[2Jb\"");
    free(text);
}

/* Slot counts add up in 64 bits: 32769 x 65536 slots once overflowed an int and spun --map-by node forever. */
static void test_hostfile_slots(void)
{
    size_t lines = 32769, one = strlen("localhost slots=65536\n");
    char *text = malloc(lines * one + 1);
    for (size_t i = 0; i < lines; i++) memcpy(text + i * one, "localhost slots=65536\n", one);
    const char *path = hostfile_of(text, lines * one);
    tprun_plan_t plan;
    char err[1024], line[256];
    snprintf(line, sizeof(line), "-n 2 --map-by node --hostfile %s true", path);
    CHECK(parse(line, NULL, &plan, err, sizeof(err)) == TP_OK, "%s", err);
    CHECK(plan.num_hosts == 1 && plan.hosts[0].slots == TPRUN_MAX_RANKS && plan.total_slots == TPRUN_MAX_RANKS,
          "slots %d total %ld", plan.num_hosts ? plan.hosts[0].slots : -1, plan.total_slots);
    tprun_plan_free(&plan);
    unlink(path);
    free(text);
    /* Placement ends for any input: slots short of -n are refused, not looped over. */
    tprun_host_t hosts[2] = {{.name = "a", .slots = 1}, {.name = "b", .slots = 2}};
    tprun_plan_t p = {.np = 4, .hosts = hosts, .num_hosts = 2, .map_by = TPRUN_MAP_NODE};
    CHECK(tprun_plan_place(&p, err, sizeof(err)) != TP_OK, "4 ranks placed on 3 slots");
    CHECK(strcmp(err, "-n 4 needs 4 slots, but -H/--hostfile give only 3") == 0, "%s", err);
    p.np = 3;
    CHECK(tprun_plan_place(&p, err, sizeof(err)) == TP_OK, "%s", err);
    CHECK(p.rank_host[0] == 0 && p.rank_host[1] == 1 && p.rank_host[2] == 1, "node: %d %d %d", p.rank_host[0],
          p.rank_host[1], p.rank_host[2]);
    free(p.rank_host);
    free(p.rank_local);
}

/* 80000 distinct hosts: merging duplicates is sorted, not pairwise (it took 23 s), and keeps the order. */
static void test_many_hosts(void)
{
    size_t n = 80000;
    char *text = malloc(n * 16 + 32), *w = text;
    for (size_t i = 0; i < n; i++) w += sprintf(w, "h%zu\n", i);
    w += sprintf(w, "h7 slots=4\nh3\n");
    const char *path = hostfile_of(text, (size_t)(w - text));
    tprun_plan_t plan;
    char err[1024], line[256];
    snprintf(line, sizeof(line), "-n 3 --hostfile %s /bin/true", path);
    clock_t t0 = clock();
    CHECK(parse(line, NULL, &plan, err, sizeof(err)) == TP_OK, "%s", err);
    double cpu = (double)(clock() - t0) / CLOCKS_PER_SEC;
    CHECK(cpu < 5, "80000 hosts took %.1f s of CPU", cpu);
    CHECK(plan.num_hosts == n && strcmp(plan.hosts[n - 1].name, "h79999") == 0 && strcmp(plan.hosts[7].name, "h7") == 0,
          "hosts %zu", plan.num_hosts);
    CHECK(plan.hosts[7].slots == 5 && plan.hosts[7].slots_given && plan.hosts[3].slots == 2, "h7 %d h3 %d",
          plan.hosts[7].slots, plan.hosts[3].slots);
    tprun_plan_free(&plan);
    unlink(path);
    free(text);
}

/* -H slot counts are read whole; every message stays one printable line whatever the argument holds. */
static void test_hostile_args(void)
{
    tprun_plan_t plan;
    char err[1024];
    expect_error("-n 1 -H localhost:0000000000000000000000000000001junk true",
                 "-H: host \"localhost\": expected a positive slot count, got \"0000000000000000000000000000001junk\"");
    CHECK(parse("-H localhost:00000000000000000000000000000000000000002 true", NULL, &plan, err, sizeof(err)) ==
                  TP_OK &&
              plan.np == 2,
          "leading zeros: %s", err);
    tprun_plan_free(&plan);
    expect_error("-n 1 -H localhost:65537 true",
                 "-H: host \"localhost\": expected a positive slot count, got \"65537\"");
    expect_error(
        "-n 1 -H -oProxyCommand=x true",
        "-H: expected a host name (letters, digits, '-', '.', '_', '@', at most 255), got \"-oProxyCommand=x\"");
    expect_error("-n 1 --bo\ngus\x1b[31m true",
                 "unknown option \"--bo\\x0agus\\x1b[31m\" (tprun --help lists the options)");
    expect_error("-n 1 -x A\nB=1 true", "-x: expected VAR or VAR=value with a variable name, got \"A\\x0aB=1\"");
    expect_error("-n 1 no\rsuch", "program \"no\\x0dsuch\": not found in PATH");
    expect_error("-n 1 --map-by \x7f true", "--map-by: expected slot or node, got \"\\x7f\"");
    static char longarg[3000];
    memset(longarg, 'z', sizeof(longarg) - 1);
    memcpy(longarg, "--", 2);
    char *argv[] = {"tprun", longarg, "true", NULL};
    CHECK(tprun_args_parse(3, argv, base_env, "vm", &plan, err, sizeof(err)) != TP_OK, "long option accepted");
    CHECK(strncmp(err, "unknown option \"--zzz", 21) == 0 &&
              strstr(err, "...\" (tprun --help lists the options)") != NULL,
          "%s", err);
}

/* -n beyond what the descriptor limit allows is refused before anything starts; the soft limit is raised first. */
static void test_fd_limit(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = {100, 300};
        tprun_plan_t plan;
        char err[1024] = "";
        int bad = setrlimit(RLIMIT_NOFILE, &rl) != 0;
        bad |= parse("-n 100 true", NULL, &plan, err, sizeof(err)) != TP_OK;
        bad |= getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur != 300;
        if (bad) fprintf(stderr, "fd limit, raised: %s\n", err);
        rl.rlim_cur = rl.rlim_max = 200;
        bad |= setrlimit(RLIMIT_NOFILE, &rl) != 0;
        bad |= parse("-n 100 true", NULL, &plan, err, sizeof(err)) == TP_OK;
        bad |= strcmp(err, "-n 100: 100 ranks here need 264 file descriptors, but the limit is 200 (raise ulimit -n, "
                           "or run fewer ranks on this host)") != 0;
        bad |= parse("-n 60 true", NULL, &plan, err, sizeof(err)) != TP_OK;
        /* Ranks on other hosts hold no pipes here, an agent's ssh three. */
        bad |= parse("-n 100 -H a:100 /bin/true", NULL, &plan, err, sizeof(err)) != TP_OK;
        bad |= parse("-n 100 --launcher slurm true", NULL, &plan, err, sizeof(err)) != TP_OK;
        if (bad) fprintf(stderr, "fd limit: %s\n", err);
        _exit(bad);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "fd limit checks failed");
}

int main(void)
{
    test_good();
    test_hostfile();
    test_errors();
    test_hosts_and_formats();
    test_placement();
    test_hostfile_hostile();
    test_hostfile_slots();
    test_many_hosts();
    test_hostile_args();
    test_fd_limit();
    if (failures) fprintf(stderr, "launcher_args_test: %d checks failed\n", failures);
    return failures ? 1 : 0;
}
