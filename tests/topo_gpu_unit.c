/* topo_gpu_unit.c: a rank's GPU as libtp finds it without tprun (tp_gpu_of_local_rank) on a fake sysfs tree: PCI
 * functions that are and are not GPUs, bus id order, the vendors' variables and TP_GPUS, and its refusals. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "topo_gpu.h"
#include "unit_check.h"

static char root[64];

/* A PCI function with its vendor, class and NUMA node files (plain directories: sysfs's links are not needed). */
static void pci(const char *bdf, const char *vendor, const char *cls, const char *numa)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/bus", root), mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/bus/pci", root), mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/bus/pci/devices", root), mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/bus/pci/devices/%s", root, bdf), mkdir(path, 0755);
    const char *names[] = {"vendor", "class", "numa_node"}, *values[] = {vendor, cls, numa};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s/bus/pci/devices/%s/%s", root, bdf, names[i]);
        FILE *f = fopen(path, "w");
        if (f != NULL) fprintf(f, "%s\n", values[i]), fclose(f);
    }
}

/* The GPU of local rank lr of n under the environment env (NULL-ended "NAME=value"s); its bus id, or "ERR: ...". */
static const char *gpu_of(int lr, int n, char **env)
{
    static char out[600];
    tp_gpu_t g;
    char err[512];
    if (tp_gpu_of_local_rank(lr, n, env, &g, err, sizeof(err)) != TP_OK) snprintf(out, sizeof(out), "ERR: %s", err);
    else snprintf(out, sizeof(out), "%s", g.bus_id);
    return out;
}

#define EXPECT(got, want) CHECK(strcmp((got), (want)) == 0, "got \"%s\", want \"%s\"", (got), (want))

int main(void)
{
    snprintf(root, sizeof(root), "/tmp/topo_gpu_unit.XXXXXX");
    if (mkdtemp(root) == NULL) return perror("mkdtemp"), 99;
    setenv("TP_SYSFS_ROOT", root, 1);
    char *none[] = {NULL};
    EXPECT(gpu_of(0, 1, none), ""); /* no PCI tree: no GPU, no error */
    pci("0000:b1:00.0", "0x10de", "0x030000", "1");
    pci("0000:1b:00.0", "0x10de", "0x030200", "0");
    pci("0000:1b:00.1", "0x10de", "0x040300", "0");  /* its audio function */
    pci("0000:86:00.0", "0x10de", "0x068000", "1");  /* a switch */
    pci("0000:5e:00.0", "0x8086", "0x030000", "0");  /* another vendor's display */
    pci("0000:8a:00.0", "0x10de", "0x030200", "-1"); /* a VM's */
    pci("0000:3b:00.0", "0x10de", "0x030200", "0");

    tp_gpu_t all[TP_GPU_MAX];
    int n = tp_gpu_list(all, TP_GPU_MAX);
    CHECK(n == 4, "%d GPUs", n);
    EXPECT(all[0].bus_id, "0000:1b:00.0");
    EXPECT(all[3].bus_id, "0000:b1:00.0");
    CHECK(all[2].numa_node == -1 && all[3].numa_node == 1, "numa %d %d", all[2].numa_node, all[3].numa_node);
    CHECK(all[3].vendor_index == 3 && all[3].vendor == TP_GPU_VENDOR_NVIDIA, "vendor index %d", all[3].vendor_index);

    EXPECT(gpu_of(2, 4, none), "0000:8a:00.0");
    char *cuda[] = {"CUDA_VISIBLE_DEVICES=3,0", NULL};
    EXPECT(gpu_of(0, 2, cuda), "0000:b1:00.0");
    EXPECT(gpu_of(1, 2, cuda), "0000:1b:00.0");
    /* srun --gpus-per-task: each rank sees its own one GPU, whatever its local rank. */
    char *one[] = {"CUDA_VISIBLE_DEVICES=2", NULL};
    EXPECT(gpu_of(3, 4, one), "0000:8a:00.0");
    char *hidden[] = {"CUDA_VISIBLE_DEVICES=", NULL};
    EXPECT(gpu_of(0, 2, hidden), "");
    char *tp_gpus[] = {"CUDA_VISIBLE_DEVICES=0", "TP_GPUS=00000000:B1:00.0,3b:00.0", NULL};
    EXPECT(gpu_of(1, 2, tp_gpus), "0000:3b:00.0");
    char *three[] = {"CUDA_VISIBLE_DEVICES=0,1,2", NULL};
    EXPECT(gpu_of(3, 4, three), "ERR: local rank 3 of 4 ranks on this host, but 3 GPUs (CUDA_VISIBLE_DEVICES=0,1,2): "
                                "give each rank its own with TP_GPUS or CUDA_VISIBLE_DEVICES");
    char *bad[] = {"TP_GPUS=0000:3b:00.8", NULL};
    EXPECT(gpu_of(0, 1, bad), "ERR: TP_GPUS=\"0000:3b:00.8\": expected comma-separated PCI bus ids (0000:3b:00.0) "
                              "or GPU indexes");
    char *amd_vars[] = {"HIP_VISIBLE_DEVICES=7", "ROCR_VISIBLE_DEVICES=GPU-1", NULL};
    EXPECT(gpu_of(0, 1, amd_vars), "0000:1b:00.0"); /* no AMD GPU here: their variables change nothing */

    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
    return failures == 0 ? 0 : 1;
}
