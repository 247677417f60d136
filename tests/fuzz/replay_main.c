/* replay_main.c: runs a fuzz harness over its committed corpus without libFuzzer, as a make check test. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/* Open file descriptors: a harness or the code under it that leaks one per input fails the replay. */
static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (d == NULL) return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;) n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory's own */
}

static int fds_before;

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Feeds one file to the harness; returns 0, or 1 when it cannot be read or leaves a descriptor open. */
static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return 1;
    }
    size_t cap = 4096, len = 0;
    uint8_t *buf = malloc(cap);
    for (size_t n; buf != NULL && (n = fread(buf + len, 1, cap - len, f)) > 0;) {
        len += n;
        if (len == cap) {
            uint8_t *grown = realloc(buf, cap *= 2);
            if (grown == NULL) free(buf);
            buf = grown;
        }
    }
    int bad = buf == NULL || ferror(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "replay: %s: cannot read it\n", path);
        free(buf);
        return 1;
    }
    /* An exact-size copy, so that a harness reading one byte too far trips the sanitizers and valgrind. */
    uint8_t *exact = malloc(len ? len : 1);
    if (exact == NULL) {
        free(buf);
        return 1;
    }
    memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    int fds = count_fds();
    if (fds != fds_before) {
        fprintf(stderr, "replay: %s: %d file descriptors open after it, %d before\n", path, fds, fds_before);
        fds_before = fds;
        return 1;
    }
    return 0;
}

/* Every regular file of dir, in name order; returns how many could not be read, or -1 for no directory. */
static int replay_dir(const char *dir, int *count)
{
    DIR *d = opendir(dir);
    if (d == NULL) return -1;
    char **names = NULL;
    size_t n = 0, cap = 0;
    int failed = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            char **grown = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof(*names));
            if (grown == NULL) break;
            names = grown;
        }
        size_t l = strlen(dir) + strlen(e->d_name) + 2;
        if ((names[n] = malloc(l)) == NULL) break;
        snprintf(names[n++], l, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (names != NULL) qsort(names, n, sizeof(*names), by_name);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
            failed += replay_file(names[i]);
            (*count)++;
        }
        free(names[i]);
    }
    free(names);
    return failed;
}

/* With arguments: replays those files or directories. Without: $srcdir/tests/fuzz/corpus/NAME for fuzz_NAME. */
int main(int argc, char **argv)
{
    if (LLVMFuzzerInitialize != NULL) LLVMFuzzerInitialize(&argc, &argv);
    char dflt[4096];
    char *paths[] = {dflt};
    char **list = argv + 1;
    int nlist = argc - 1;
    if (nlist == 0) {
        const char *base = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
        const char *srcdir = getenv("srcdir") ? getenv("srcdir") : ".";
        if (strncmp(base, "fuzz_", 5) != 0) {
            fprintf(stderr, "replay: cannot tell the corpus from the program name %s; give it as an argument\n", base);
            return 2;
        }
        snprintf(dflt, sizeof(dflt), "%s/tests/fuzz/corpus/%s", srcdir, base + 5);
        list = paths;
        nlist = 1;
    }
    int failed = 0, count = 0;
    fds_before = count_fds();
    for (int i = 0; i < nlist; i++) {
        int f = replay_dir(list[i], &count);
        if (f < 0) f = replay_file(list[i]), count++;
        failed += f;
    }
    if (count == 0) {
        fprintf(stderr, "replay: no inputs in %s (the committed corpus is missing)\n", list[0]);
        return 1;
    }
    printf("replay: %d inputs, %d failed (unreadable or leaving a descriptor open)\n", count, failed);
    return failed != 0;
}
