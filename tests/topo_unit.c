/* topo_unit: unit tests of the topology readers on small trees made under a temporary TP_SYSFS_ROOT. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime_config.h"
#include "topo_sysfs.h"

#include "unit_check.h"

static char root[64];

/* Writes text to root/rel, making its directories. */
static void put(const char *rel, const char *text)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", root, rel);
    for (char *s = p + strlen(root) + 1; (s = strchr(s, '/')) != NULL; s++) {
        *s = '\0';
        mkdir(p, 0755);
        *s = '/';
    }
    FILE *f = fopen(p, "w");
    if (f == NULL) return;
    fputs(text, f);
    fclose(f);
}

static void test_sysfs(void)
{
    char p[256], line[64];
    setenv("TP_SYSFS_ROOT", root, 1);
    CHECK(tp_sysfs_path(p, sizeof(p), "/class/infiniband/%s/ports", "mlx5_0") == 0, "join");
    char want[256];
    snprintf(want, sizeof(want), "%s/class/infiniband/mlx5_0/ports", root);
    CHECK(strcmp(p, want) == 0, "joined %s", p);
    /* A trailing slash on the root joins alike; "/" is the real root. */
    char slashed[80];
    snprintf(slashed, sizeof(slashed), "%s//", root);
    setenv("TP_SYSFS_ROOT", slashed, 1);
    CHECK(tp_sysfs_path(p, sizeof(p), "/class/net") == 0 && strcmp(p + strlen(root), "/class/net") == 0, "%s", p);
    setenv("TP_SYSFS_ROOT", "/", 1);
    CHECK(tp_sysfs_path(p, sizeof(p), "/class/net") == 0 && strcmp(p, "/class/net") == 0, "root /: %s", p);
    unsetenv("TP_SYSFS_ROOT");
    CHECK(tp_sysfs_path(p, sizeof(p), "/class/net") == 0 && strcmp(p, "/sys/class/net") == 0, "default: %s", p);
    setenv("TP_SYSFS_ROOT", root, 1);
    CHECK(tp_sysfs_path(p, 12, "/class/infiniband") == -ENAMETOOLONG && p[0] == '\0', "too long: \"%s\"", p);

    put("a/state", "4: ACTIVE\n");
    put("a/empty", "");
    put("a/spaces", "Ethernet  \n");
    put("a/long", "0123456789012345678901234567890123456789\n");
    tp_sysfs_path(p, sizeof(p), "/a/state");
    CHECK(tp_sysfs_read_line(p, line, sizeof(line)) == 0 && strcmp(line, "4: ACTIVE") == 0, "%s", line);
    tp_sysfs_path(p, sizeof(p), "/a/empty");
    CHECK(tp_sysfs_read_line(p, line, sizeof(line)) == 0 && line[0] == '\0', "empty: %s", line);
    tp_sysfs_path(p, sizeof(p), "/a/spaces");
    CHECK(tp_sysfs_read_line(p, line, sizeof(line)) == 0 && strcmp(line, "Ethernet") == 0, "%s", line);
    tp_sysfs_path(p, sizeof(p), "/a/long");
    strcpy(line, "kept");
    CHECK(tp_sysfs_read_line(p, line, 16) == -EOVERFLOW && strcmp(line, "kept") == 0, "overflow: %s", line);
    tp_sysfs_path(p, sizeof(p), "/a/missing");
    CHECK(tp_sysfs_read_line(p, line, sizeof(line)) == -ENOENT, "missing");
    /* A directory read gives EISDIR, as an unreadable sysfs attribute gives its errno. */
    tp_sysfs_path(p, sizeof(p), "/a");
    CHECK(tp_sysfs_read_line(p, line, sizeof(line)) == -EISDIR, "directory");

    put("gids/10", "x");
    put("gids/2", "x");
    put("gids/0", "x");
    put("gids/1", "x");
    char **names = NULL;
    tp_sysfs_path(p, sizeof(p), "/gids");
    int n = tp_sysfs_list(p, &names);
    CHECK(n == 4 && strcmp(names[0], "0") == 0 && strcmp(names[1], "1") == 0 && strcmp(names[2], "2") == 0 &&
              strcmp(names[3], "10") == 0 && names[4] == NULL,
          "version order: %d", n);
    free(names);
    tp_sysfs_path(p, sizeof(p), "/nothere");
    CHECK(tp_sysfs_list(p, &names) == -ENOENT, "missing directory");

    /* realpath: the root is removed, and a link that leaves the root is refused. */
    put("devices/pci0000:00/0000:00:01.0/0000:01:00.0/vendor", "0x15b3\n");
    put("class/infiniband/mlx5_0/x", "");
    char link[512], out[256];
    snprintf(link, sizeof(link), "%s/class/infiniband/mlx5_0/device", root);
    CHECK(symlink("../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0", link) == 0, "symlink");
    CHECK(tp_sysfs_realpath(link, out, sizeof(out)) == 0 &&
              strcmp(out, "/devices/pci0000:00/0000:00:01.0/0000:01:00.0") == 0,
          "realpath %s", out);
    snprintf(link, sizeof(link), "%s/class/infiniband/mlx5_0/outside", root);
    CHECK(symlink("/tmp", link) == 0, "symlink");
    CHECK(tp_sysfs_realpath(link, out, sizeof(out)) == -EXDEV, "a link out of the root");
}

/* Bad settings are refused by name. */
static void test_settings(void)
{
    char err[256];
    char *env[] = {"TP_SYSFS_ROOT=sys", NULL};
    CHECK(tp_config_check_environ(env, err, sizeof(err)) == TP_ERR_INVALID &&
              strcmp(err, "TP_SYSFS_ROOT: expected an absolute directory path such as /sys, got \"sys\"") == 0,
          "%s", err);
    char *good[] = {"TP_SYSFS_ROOT=/tmp/x", NULL};
    CHECK(tp_config_check_environ(good, err, sizeof(err)) == TP_OK, "%s", err);
}

int main(void)
{
    snprintf(root, sizeof(root), "/tmp/topo_unit.XXXXXX");
    if (mkdtemp(root) == NULL) return perror("mkdtemp"), 1;
    test_sysfs();
    test_settings();
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "topo_unit: could not remove %s\n", root);
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    else printf("topo_unit: all checks passed\n");
    return failures ? 1 : 0;
}
