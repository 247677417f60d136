/* forkn: fork+exec+wait of N copies of a program, with no wire-up: the floor under any launcher. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    char *end;
    long n = argc >= 3 ? strtol(argv[1], &end, 10) : 0;
    if (argc < 3 || *end != '\0' || n < 1 || n > 65536) {
        fprintf(stderr, "usage: forkn N program [args...]\n");
        return 2;
    }
    for (long i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "forkn: fork: %s\n", strerror(errno));
            return 1;
        }
        if (pid == 0) {
            execvp(argv[2], argv + 2);
            fprintf(stderr, "forkn: %s: %s\n", argv[2], strerror(errno));
            _exit(127);
        }
    }
    int failed = 0, status;
    while (wait(&status) > 0)
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed++;
    return failed ? 1 : 0;
}
