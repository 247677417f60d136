/* fuzz_agent_line.c: tprun reading an agent's channel, during the launch ("ready", "error") and while the job runs
 * ("o"/"e" output, "s", "x", "bye", stdin acknowledgements): launcher/ssh/launch.c and ssh/run.c,
 * compiled in here since their line handlers are static. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_util.h"

/* Ranks' output forwarded by tprun goes nowhere; the process's own stdout and stderr stay as they are. */
static int fuzz_null_fd = -1;
#undef STDOUT_FILENO
#undef STDERR_FILENO
#define STDOUT_FILENO fuzz_null_fd
#define STDERR_FILENO fuzz_null_fd

#include "../../launcher/ssh/launch.c"
#include "../../launcher/ssh/run.c"

#define MAX_RANKS 8

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_quiet_logs();
    fuzz_null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    return 0;
}

/*
 * Byte 0: ranks (1 + b % 8), dealt round-robin over two agents, the input coming from agent 0; bit 3 of byte 1
 * picks the launch (else the running job), bit 4 makes agent 0 the one forwarding stdin. The rest is what agent 0
 * writes on its channel.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    int np = 1 + data[0] % MAX_RANKS, launch = data[1] & 8, stdin_fwd = data[1] & 16;
    data += 2, size -= 2;
    int fds[2];
    if (fuzz_socketpair(fds) != 0) return 0;
    static tprun_rank_t ranks[MAX_RANKS];
    static tprun_agent_t agent[2];
    memset(ranks, 0, sizeof(ranks));
    memset(agent, 0, sizeof(agent));
    tprun_plan_t plan = {.np = np, .grace_s = 1};
    tprun_job_t job = {.plan = &plan,
                       .np = np,
                       .world_size = np,
                       .ranks = ranks,
                       .boot_index = -1,
                       .stdin_index = -1,
                       .keeper = {.fd = -1}};
    tprun_agents_t agents = {
        .a = agent, .n = 2, .stdin_agent = stdin_fwd ? 0 : -1, .stdin_state = stdin_fwd ? 1 : 0, .stdin_unacked = 1000};
    tprun_loop_t L = {.job = &job, .plan = &plan, .agents = &agents, .first_failure = -1, .held_rank = -1};
    agents.L = &L;
    for (int r = 0; r < np; r++) {
        ranks[r].id = r;
        ranks[r].agent = r % 2;
        ranks[r].pid = 1000 + r;
        ranks[r].running = !launch;
        agent[r % 2].running += !launch;
    }
    L.running = launch ? 0 : np;
    for (int i = 0; i < 2; i++) {
        agent[i].name = i ? "fuzzhost1" : "fuzzhost0";
        agent[i].state = launch ? AGENT_CONNECTING : AGENT_RUNNING;
        tprun_link_init(&agent[i].link, NULL, agent[i].name, -1);
        tprun_agent_routes(&agent[i]);
        agent[i].all = &agents;
        tprun_stream_init(&agent[i].out, i ? -1 : fds[0], -1);
        tprun_stream_init(&agent[i].err, -1, -1);
    }
    tprun_agent_t *a = &agent[0];
    size_t off = 0;
    if (launch) {
        a->out.on_line = on_agent_launch_line;
        a->out.ctx = a;
        int r;
        do {
            fuzz_feed(fds[1], data, size, &off);
            r = tprun_stream_pump(&a->out, &(tprun_prefix_t){"", 0});
            FUZZ_ASSERT(r != 1 || off < size, "the channel waits for bytes after the agent closed");
        } while (r != 0);
        tprun_stream_close(&a->out, &(tprun_prefix_t){"", 0});
        FUZZ_ASSERT(a->state != AGENT_READY || (a->ready_ip[0] != '\0' && a->client_ip[0] != '\0'),
                    "an agent ready without its addresses");
    } else {
        while (a->state != AGENT_GONE) {
            fuzz_feed(fds[1], data, size, &off);
            tprun_agent_on_channel(a, EPOLLIN);
        }
        /* Its ranks still running count as ended, whatever it said before its channel closed ("bye" included). */
        for (int r = 0; r < np; r++)
            FUZZ_ASSERT(ranks[r].agent != 0 || !ranks[r].running, "agent 0 is gone but a rank of it still runs");
    }
    for (int i = 0; i < 2; i++) {
        tprun_stream_free(&agent[i].out);
        tprun_stream_free(&agent[i].err);
        tprun_link_free(&agent[i].link);
    }
    close(fds[1]);
    return 0;
}
