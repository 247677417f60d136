/* topo_sysfs.c: the sysfs root and small readers every topology module shares. */
#include "topo_sysfs.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_config.h"

/* TP_SYSFS_ROOT without its trailing slashes, so "/sys/" and "/sys" join alike. */
static size_t sysfs_root(const char **root)
{
    const char *r = tp_config_value("TP_SYSFS_ROOT");
    if (r == NULL || r[0] == '\0') r = "/sys";
    size_t l = strlen(r);
    while (l > 1 && r[l - 1] == '/') l--;
    if (l == 1 && r[0] == '/') l = 0;
    *root = r;
    return l;
}

int tp_sysfs_path(char *out, size_t len, const char *fmt, ...)
{
    const char *root;
    size_t rl = sysfs_root(&root);
    if (len == 0) return -ENAMETOOLONG;
    if (rl >= len) goto err_long;
    memcpy(out, root, rl);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out + rl, len - rl, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= len - rl) goto err_long;
    return 0;
err_long:
    out[0] = '\0';
    return -ENAMETOOLONG;
}

int tp_sysfs_read_line(const char *path, char *out, size_t len)
{
    FILE *f = fopen(path, "re");
    if (f == NULL) return -errno;
    char buf[512];
    errno = 0;
    if (fgets(buf, sizeof(buf), f) == NULL) {
        /* sysfs reports an attribute it cannot give (an empty GID's type) as a read error, EOF as empty. */
        int e = ferror(f) ? (errno != 0 ? errno : EIO) : 0;
        fclose(f);
        if (e != 0) return -e;
        buf[0] = '\0';
    } else {
        fclose(f);
    }
    size_t l = strcspn(buf, "\n");
    while (l > 0 && (buf[l - 1] == ' ' || buf[l - 1] == '\t' || buf[l - 1] == '\r')) l--;
    if (l >= len) return -EOVERFLOW;
    memcpy(out, buf, l);
    out[l] = '\0';
    return 0;
}

static int name_cmp(const void *a, const void *b) { return strverscmp(*(char *const *)a, *(char *const *)b); }

int tp_sysfs_list(const char *path, char ***names)
{
    DIR *d = opendir(path);
    if (d == NULL) return -errno;
    size_t n = 0, bytes = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        n++;
        bytes += strlen(de->d_name) + 1;
    }
    /* One block: the pointer array, then the names, so the caller frees once. */
    char **v = malloc((n + 1) * sizeof(*v) + bytes);
    if (v == NULL) goto err_dir;
    char *s = (char *)(v + n + 1);
    size_t k = 0;
    rewinddir(d);
    while ((de = readdir(d)) != NULL && k < n) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        size_t l = strlen(de->d_name) + 1;
        if ((size_t)(s - (char *)(v + n + 1)) + l > bytes) break; /* the directory grew meanwhile */
        memcpy(s, de->d_name, l);
        v[k++] = s;
        s += l;
    }
    closedir(d);
    v[k] = NULL;
    qsort(v, k, sizeof(*v), name_cmp);
    *names = v;
    return (int)k;
err_dir:
    closedir(d);
    return -ENOMEM;
}

int tp_sysfs_realpath(const char *path, char *out, size_t len)
{
    char real[PATH_MAX], rootreal[PATH_MAX];
    if (realpath(path, real) == NULL) return -errno;
    const char *root;
    size_t rl = sysfs_root(&root);
    char rootcopy[PATH_MAX];
    if (rl >= sizeof(rootcopy)) return -ENAMETOOLONG;
    memcpy(rootcopy, root, rl);
    rootcopy[rl] = '\0';
    const char *rel = real;
    if (rl > 0) {
        if (realpath(rootcopy, rootreal) == NULL) return -errno;
        size_t l = strlen(rootreal);
        /* A link that leaves the root is not the machine's: refuse it rather than read the host's sysfs. */
        if (strncmp(real, rootreal, l) != 0 || (real[l] != '/' && real[l] != '\0')) return -EXDEV;
        rel = real + l;
    }
    if (strlen(rel) >= len) return -ENAMETOOLONG;
    strcpy(out, rel);
    return 0;
}
