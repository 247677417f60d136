/* fuzz_args.c: tprun's command line and hostfile, parsed and placed (launcher/tprun_args.c). */
#include <stdio.h>
#include <sys/mman.h>

#include "fuzz_util.h"
#include "tprun_args.h"

#define MAX_ARGS 64

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_quiet_logs();
    return 0;
}

/*
 * The hostfile's text, a line "%%", then tprun's arguments one per line: "@HOSTFILE" stands for the hostfile's
 * path and "E:NAME=value" puts a variable into tprun's environment. Arguments naming other paths are dropped:
 * the harness reads no file but its own.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_strdup(data, size);
    if (text == NULL) return 0;
    char *args = strstr(text, "\n%%\n"), *hostfile = text;
    if (args != NULL) *args = '\0', args += 4;
    else if (strncmp(text, "%%\n", 3) == 0) hostfile = "", args = text + 3;
    else args = "";
    int fd = memfd_create("fuzz-hostfile", MFD_CLOEXEC);
    if (fd < 0) goto out;
    size_t hlen = strlen(hostfile);
    if (write(fd, hostfile, hlen) != (ssize_t)hlen) goto out_fd;
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    char *argv[MAX_ARGS + 2] = {"tprun"}, *envp[MAX_ARGS + 2] = {"PATH=/usr/bin:/bin"};
    int argc = 1, envc = 1;
    for (char *save = NULL, *a = strtok_r(args, "\n", &save); a != NULL && argc < MAX_ARGS;
         a = strtok_r(NULL, "\n", &save)) {
        if (strcmp(a, "@HOSTFILE") == 0) argv[argc++] = path;
        else if (strncmp(a, "E:", 2) == 0) envp[envc++] = a + 2;
        else if (strchr(a, '/') == NULL) argv[argc++] = a;
    }
    argv[argc] = NULL;
    envp[envc] = NULL;
    tprun_plan_t plan;
    char err[1024] = "";
    tp_status_t st = tprun_args_parse(argc, argv, envp, "fuzzhost.example", &plan, err, sizeof(err));
    if (st == TP_OK) {
        FUZZ_ASSERT(plan.want_help || plan.want_version || plan.want_info || plan.np > 0, "a plan without ranks");
        if (plan.rank_host != NULL) {
            for (int r = 0; r < plan.np; r++)
                FUZZ_ASSERT(plan.rank_host[r] >= 0 && (size_t)plan.rank_host[r] < plan.num_hosts,
                            "a rank placed on no host");
            for (size_t h = 0; h < plan.num_hosts; h++)
                FUZZ_ASSERT(!plan.hosts[h].slots_given || plan.hosts[h].nranks <= plan.hosts[h].slots,
                            "a host given more ranks than its slots");
        }
        tprun_plan_free(&plan);
    } else {
        FUZZ_ASSERT(err[0] != '\0' && strchr(err, '\n') == NULL, "a refusal that is not one line");
    }
out_fd:
    close(fd);
out:
    free(text);
    return 0;
}
