/* fuzz_plan.c: an agent reading its plan and the commands behind it from tprun (launcher/agent/agent.c: read_plan,
 * apply_plan and on_command are static, so the file is compiled in here). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_util.h"

/* The agent's stdin is the plan's memfd and its stdout goes nowhere; the process's own fds stay as they are. */
static int fuzz_in_fd = -1, fuzz_out_fd = -1;
#undef STDIN_FILENO
#undef STDOUT_FILENO
#define STDIN_FILENO  fuzz_in_fd
#define STDOUT_FILENO fuzz_out_fd

/* The plan's variables and working directory must not reach the fuzzing process (no rank starts, so no signal goes). */
static int fuzz_setenv(const char *name, const char *value, int overwrite)
{
    FUZZ_ASSERT(name != NULL && value != NULL && strchr(name, '=') == NULL, "a bad variable reached setenv");
    return (void)overwrite, 0;
}
static int fuzz_chdir(const char *path) { return path[0] == '\0' ? (errno = ENOENT, -1) : 0; }
#define setenv fuzz_setenv
#define chdir  fuzz_chdir

#include "../../launcher/agent/agent.c"
#include "pmix/tprun_agent_pmix.h" /* the PMIx service's agent state, reset between inputs */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_quiet_logs();
    fuzz_out_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    return 0;
}

static void agent_free(agent_t *A)
{
    for (size_t i = 0; i < A->nargs; i++) free(A->args[i]);
    free(A->args);
    free(A->plan.program_path);
    free(A->job.ranks);
    free(A->err_prefix);
    free(A->channel.buf);
    free(A->in_buf);
    tprun_subtree_free(&A->tree);
    tprun_agent_pmix_plan("pmix", "0");
    tprun_agent_pmix_stop();
}

/* The bytes tprun sends an agent: the plan up to "end ", then commands ("go ...", "k SIG", "i DATA", "ie"...). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    agent_t *A = &G;
    memset(A, 0, sizeof(*A));
    A->job.keeper.fd = -1;
    fuzz_in_fd = memfd_create("fuzz-plan", MFD_CLOEXEC);
    if (fuzz_in_fd < 0) return 0;
    if (write(fuzz_in_fd, data, size) != (ssize_t)size || lseek(fuzz_in_fd, 0, SEEK_SET) != 0) goto out;
    tprun_stream_init(&A->channel, fuzz_in_fd, -1);
    char *text = NULL;
    if (read_plan(A, &text) != 0) goto out;
    int st = apply_plan(A, text);
    free(text);
    if (st != 0) goto out;
    FUZZ_ASSERT(A->job.np > 0 && A->job.ranks != NULL && A->plan.argv != NULL, "an applied plan without ranks");
    A->job.stdin_pipe[0] = A->job.stdin_pipe[1] = -1; /* no rank 0 was started to take stdin */
    tprun_agent_pmix_plan("pmix", "0");               /* no PMIx server was started to take "p" commands */
    fuzz_quiet_logs();                                /* the plan set the log level */
    char *nl;
    while (A->channel.len > 0 && (nl = memchr(A->channel.buf, '\n', A->channel.len)) != NULL) {
        size_t l = (size_t)(nl - A->channel.buf) + 1;
        on_command(A, A->channel.buf, l);
        memmove(A->channel.buf, A->channel.buf + l, A->channel.len - l);
        A->channel.len -= l;
    }
out:
    agent_free(A);
    close(fuzz_in_fd);
    fuzz_in_fd = -1;
    return 0;
}
