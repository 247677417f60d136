/* topo_unit: unit tests of the topology readers on small trees made under a temporary TP_SYSFS_ROOT. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime_config.h"
#include "topo_hca.h"
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

/* TP_HCA: NCCL_IB_HCA's grammar; TP_GID_INDEX: auto or an index. */
static void test_hca_grammar(void)
{
    char err[512];
    static const char *const good[] = {"", "mlx5", "=mlx5_0,mlx5_1:2", "^mlx5_1", "^=rocep1s0f0:1,roceP2p1s0f1"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        CHECK(tp_hca_spec_check(good[i], err, sizeof(err)) == TP_OK, "\"%s\": %s", good[i], err);
    static const char *const bad[] = {"mlx5_0:", "mlx5_0:0", "mlx5_0:x", ":1", "=", "^", "a,,b", "a,", "a=b", "a:1:3"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK(tp_hca_spec_check(bad[i], err, sizeof(err)) == TP_ERR_INVALID && strncmp(err, "TP_HCA: ", 8) == 0,
              "\"%s\" refused: %s", bad[i], err);
    tp_hca_spec_check("mlx5_0:x", err, sizeof(err));
    CHECK(strcmp(err,
                 "TP_HCA: bad entry \"mlx5_0:x\" in \"mlx5_0:x\" (expected HCA names or name:port, "
                 "comma-separated, after an optional ^ to exclude and = for exact names, e.g. =mlx5_0:1,mlx5_1)") == 0,
          "%s", err);
    /* Prefixes match mlx5_10 for mlx5_1, as NCCL's do; = does not. */
    CHECK(tp_hca_spec_match("mlx5_1", "mlx5_10", 1), "prefix");
    CHECK(!tp_hca_spec_match("=mlx5_1", "mlx5_10", 1) && tp_hca_spec_match("=mlx5_1", "mlx5_1", 2), "exact");
    CHECK(tp_hca_spec_match("=mlx5_1:2", "mlx5_1", 2) && !tp_hca_spec_match("=mlx5_1:2", "mlx5_1", 1), "port");
    CHECK(!tp_hca_spec_match("^mlx5_1", "mlx5_10", 1) && tp_hca_spec_match("^=mlx5_1", "mlx5_10", 1), "exclude");
    CHECK(!tp_hca_spec_match("^=a:1,b", "b", 3) && tp_hca_spec_match("^=a:1,b", "a", 2), "exclude a port");
    CHECK(tp_hca_spec_match("", "x", 1), "empty passes");
    int v = 7;
    CHECK(tp_hca_gid_index_parse("auto", &v, err, sizeof(err)) == TP_OK && v == -1, "auto");
    CHECK(tp_hca_gid_index_parse("3", &v, err, sizeof(err)) == TP_OK && v == 3, "3");
    static const char *const badg[] = {"", "-1", "256", "3x", " 3", "+3", "Auto"};
    for (size_t i = 0; i < sizeof(badg) / sizeof(badg[0]); i++) {
        v = 7;
        CHECK(tp_hca_gid_index_parse(badg[i], &v, err, sizeof(err)) == TP_ERR_INVALID && v == 7 &&
                  strncmp(err, "TP_GID_INDEX: expected auto or a GID table index 0 to 255, got", 62) == 0,
              "\"%s\": %s", badg[i], err);
    }
    char *env[] = {"TP_HCA=mlx5_0:0", NULL};
    CHECK(tp_config_check_environ(env, err, sizeof(err)) == TP_ERR_INVALID &&
              strncmp(err, "TP_HCA: bad entry", 17) == 0,
          "%s", err);
    char *env2[] = {"TP_GID_INDEX=x", NULL};
    CHECK(tp_config_check_environ(env2, err, sizeof(err)) == TP_ERR_INVALID &&
              strncmp(err, "TP_GID_INDEX: expected", 22) == 0,
          "%s", err);
}

static tp_hca_gid_t G(const char *hca, int port, int gid, const char *ip, int dist)
{
    tp_hca_gid_t g;
    memset(&g, 0, sizeof(g));
    snprintf(g.hca, sizeof(g.hca), "%s", hca);
    g.port = port, g.gid = gid, g.dist = dist;
    unsigned a, b, c, d;
    sscanf(ip, "%u.%u.%u.%u", &a, &b, &c, &d);
    g.ip = a << 24 | b << 16 | c << 8 | d;
    return g;
}

static void test_hca_pick(void)
{
    /* PCI hops: same switch 2, same root complex 4, across root complexes every component. */
    const char *gpu = "/devices/pci0002:00/0002:00:02.0/0002:02:00.0";
    CHECK(tp_hca_pci_distance(gpu, "/devices/pci0002:00/0002:00:02.0/0002:02:00.1") == 2, "same switch");
    CHECK(tp_hca_pci_distance(gpu, "/devices/pci0002:00/0002:00:01.0/0002:01:00.1") == 4, "same root");
    CHECK(tp_hca_pci_distance(gpu, "/devices/pci0000:00/0000:00:01.0/0000:01:00.1") == 6, "other root");
    CHECK(tp_hca_pci_distance("", gpu) == TP_HCA_DIST_NONE, "unknown");

    tp_hca_gid_t mine[5] = {G("rocep1s0f0", 1, 3, "192.168.50.1", 6), G("rocep1s0f1", 1, 3, "10.1.1.1", 6),
                            G("rocep1s0f1", 1, 5, "10.1.7.1", 6), G("roceP2p1s0f1", 1, 3, "10.2.1.1", 4),
                            G("roceP2p1s0f1", 1, 7, "10.2.1.9", 4)};
    tp_hca_gid_t peer[3] = {G("x", 1, 3, "10.1.1.2", 0), G("y", 1, 3, "10.2.1.2", 0), G("z", 1, 3, "10.1.7.2", 0)};
    int pick[8];
    /* Both rails the peer shares, nearest first, one GID per port (its lowest matching index). */
    int n = tp_hca_pick(mine, 5, peer, 3, pick, 8);
    CHECK(n == 2 && pick[0] == 3 && pick[1] == 1, "pick %d: %d %d", n, pick[0], pick[1]);
    /* Only the second GID of rocep1s0f1 is shared: that index. */
    n = tp_hca_pick(mine, 5, peer + 2, 1, pick, 8);
    CHECK(n == 1 && pick[0] == 2 && mine[pick[0]].gid == 5, "vlan gid: %d %d", n, pick[0]);
    tp_hca_gid_t none = G("q", 1, 3, "172.16.0.1", 0);
    CHECK(tp_hca_pick(mine, 5, &none, 1, pick, 8) == 0, "no shared /24");
    n = tp_hca_fallback(mine, 5, pick, 8);
    CHECK(n == 3 && pick[0] == 3 && pick[1] == 0 && pick[2] == 1, "fallback %d: %d %d %d", n, pick[0], pick[1],
          pick[2]);

    char text[512];
    tp_hca_gid_t back[8];
    CHECK(tp_hca_format(mine, 5, text, sizeof(text)) > 0 &&
              strcmp(text, "rocep1s0f0:1:3:192.168.50.1:6,rocep1s0f1:1:3:10.1.1.1:6,rocep1s0f1:1:5:10.1.7.1:6,"
                           "roceP2p1s0f1:1:3:10.2.1.1:4,roceP2p1s0f1:1:7:10.2.1.9:4") == 0,
          "%s", text);
    CHECK(tp_hca_parse(text, back, 8) == 5 && memcmp(&back[4], &mine[4], sizeof(back[4])) == 0, "round trip");
    CHECK(tp_hca_format(mine, 5, text, 40) == -1, "too long");
    static const char *const bad[] = {"a:1:3:10.0.0.1",
                                      "a:0:3:10.0.0.1:1",
                                      "a:1:3:10.0.0:1",
                                      "a:1:3:10.0.0.1:1,",
                                      "a:1:-3:10.0.0.1:1",
                                      "a:1:3:10.0.0.1:1x",
                                      ",",
                                      "a:1:3:10.0.0.256:1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) CHECK(tp_hca_parse(bad[i], back, 8) == -1, "%s", bad[i]);
    CHECK(tp_hca_parse("", back, 8) == 0, "empty");
}

int main(void)
{
    snprintf(root, sizeof(root), "/tmp/topo_unit.XXXXXX");
    if (mkdtemp(root) == NULL) return perror("mkdtemp"), 1;
    test_sysfs();
    test_settings();
    test_hca_grammar();
    test_hca_pick();
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "topo_unit: could not remove %s\n", root);
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    else printf("topo_unit: all checks passed\n");
    return failures ? 1 : 0;
}
