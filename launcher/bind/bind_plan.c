/* bind_plan.c: each local rank's GPU and binding, computed before fork: GPUs by local rank, then the NUMA node
 * nearest the rank's GPU (else its HCA) from sysfs, its CPUs and memory from hwloc's topology. */
#include "bind/bind.h"

#include <errno.h>
#include <hwloc.h>
#include <hwloc/glibc-sched.h>
#include <linux/mempolicy.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime_log.h"
#include "topo_sysfs.h"

#define HCA_MAX 64

typedef struct hca {
    char name[64];
    char bus[64]; /* the PCI function its device link ends in, for bus id order */
    int numa;
} hca_t;

static int hca_cmp(const void *a, const void *b)
{
    const hca_t *x = a, *y = b;
    int c = strcmp(x->bus, y->bus);
    return c != 0 ? c : strcmp(x->name, y->name);
}

/* The host's RDMA devices in bus id order, each with its NUMA node (-1: unknown). */
static int list_hcas(hca_t *out, int max)
{
    char path[512], real[512], line[32], **names = NULL;
    if (tp_sysfs_path(path, sizeof(path), "/class/infiniband") != 0) return 0;
    int n = tp_sysfs_list(path, &names), count = 0;
    for (int i = 0; i < n && count < max; i++) {
        hca_t *h = &out[count++];
        snprintf(h->name, sizeof(h->name), "%s", names[i]);
        h->bus[0] = '\0';
        h->numa = -1;
        if (tp_sysfs_path(path, sizeof(path), "/class/infiniband/%s/device", names[i]) == 0 &&
            tp_sysfs_realpath(path, real, sizeof(real)) == 0)
            snprintf(h->bus, sizeof(h->bus), "%s", strrchr(real, '/') + 1);
        if (tp_sysfs_path(path, sizeof(path), "/class/infiniband/%s/device/numa_node", names[i]) == 0 &&
            tp_sysfs_read_line(path, line, sizeof(line)) == 0 && atoi(line) >= 0)
            h->numa = atoi(line);
    }
    free(names);
    qsort(out, (size_t)count, sizeof(*out), hca_cmp);
    return count;
}

/* Whether sysfs lists an RDMA device. */
static int any_hca(void)
{
    char path[512], **names = NULL;
    int n = tp_sysfs_path(path, sizeof(path), "/class/infiniband") == 0 ? tp_sysfs_list(path, &names) : 0;
    free(names);
    return n > 0;
}

/* Ranks take the visible GPUs in order; more ranks than GPUs is refused unless they get none. */
static tp_status_t assign_gpus(int gpus_per_rank, const tp_gpu_env_t *e, int local_size, const char *host,
                               tprun_bind_rank_t *r, char *err, size_t err_len)
{
    tp_gpu_t all[TP_GPU_MAX], vis[TP_GPU_MAX];
    char why[256];
    int nvis;
    if (gpus_per_rank == 0) return TP_OK;
    int n = tp_gpu_list(all, TP_GPU_MAX);
    if (tp_gpu_visible(e, all, n, vis, &nvis, why, sizeof(why), err, err_len) != TP_OK) return TP_ERR_INVALID;
    if (nvis > 0 && local_size > nvis)
        return snprintf(err, err_len,
                        "%s%s%s%d ranks but %d GPUs (%s): start at most %d ranks there, or give --gpus-per-rank 0 "
                        "to start them without a GPU each",
                        host != NULL ? "host " : "", host != NULL ? host : "", host != NULL ? ": " : "", local_size,
                        nvis, why, nvis),
               TP_ERR_INVALID;
    for (int i = 0; i < local_size && nvis > 0; i++) r[i].gpu = vis[i];
    return TP_OK;
}

/* What an unbound rank inherits: tprun's own CPUs. */
static void inherited_cpus(char *out, size_t len)
{
    cpu_set_t set;
    hwloc_bitmap_t b = hwloc_bitmap_alloc();
    snprintf(out, len, "-");
    if (b == NULL || sched_getaffinity(0, sizeof(set), &set) != 0) goto out;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) hwloc_bitmap_set(b, (unsigned)c);
    hwloc_bitmap_list_snprintf(out, len, b);
out:
    hwloc_bitmap_free(b);
}

/* hwloc's view of this machine (restricted to tprun's own CPUs), or of HWLOC_XMLFILE's; NULL with err. */
static hwloc_topology_t load_topology(int *thissystem, char *err, size_t err_len)
{
    hwloc_topology_t t;
    const char *xml = getenv("HWLOC_XMLFILE");
    /* hwloc dlopens every plugin at its first init (libxml2 with ICU, OpenCL, GL: most of its start), none needed
     * here (its own reader reads XML); set only while hwloc reads it, as the ranks' environments come later. */
    int own_blacklist = getenv("HWLOC_PLUGINS_BLACKLIST") == NULL;
    if (own_blacklist) setenv("HWLOC_PLUGINS_BLACKLIST", "hwloc_pci,hwloc_opencl,hwloc_gl,hwloc_xml_libxml", 1);
    int init = hwloc_topology_init(&t);
    if (own_blacklist) unsetenv("HWLOC_PLUGINS_BLACKLIST");
    if (init != 0) {
        snprintf(err, err_len, "hwloc: cannot start a topology: %s", strerror(errno));
        return NULL;
    }
    /* Set here, not left to hwloc's own reading, which falls back to this machine when the file is bad. */
    if ((xml != NULL && hwloc_topology_set_xml(t, xml) != 0) || hwloc_topology_load(t) != 0) {
        if (xml != NULL)
            snprintf(err, err_len, "HWLOC_XMLFILE=%s: hwloc cannot load it as a topology (%s)", xml, strerror(errno));
        else snprintf(err, err_len, "hwloc cannot load this machine's topology: %s", strerror(errno));
        hwloc_topology_destroy(t);
        return NULL;
    }
    *thissystem = hwloc_topology_is_thissystem(t);
    hwloc_bitmap_t own = hwloc_bitmap_alloc();
    /* Binding outside tprun's own CPUs (taskset, a Slurm step) would escape what the user gave the job. */
    if (*thissystem && own != NULL && hwloc_get_cpubind(t, own, HWLOC_CPUBIND_PROCESS) == 0 &&
        !hwloc_bitmap_isincluded(hwloc_topology_get_topology_cpuset(t), own))
        hwloc_topology_restrict(t, own, 0);
    hwloc_bitmap_free(own);
    return t;
}

static hwloc_obj_t numa_by_os(hwloc_topology_t t, int os)
{
    for (hwloc_obj_t o = NULL; (o = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, o)) != NULL;)
        if ((int)o->os_index == os) return o;
    return NULL;
}

/* Where each rank belongs: a NUMA node's os index, -2 for the whole machine (a core, or a share of the cores, by local
 * rank), -3 not bound. */
static int rank_domain(hwloc_topology_t t, int mode, const hca_t *hcas, int nhca, int i, tprun_bind_rank_t *b,
                       char *src, size_t src_len)
{
    int nnodes = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE), node;
    const char *what;
    if (b->gpu.bus_id[0] != '\0') {
        node = b->gpu.numa_node, what = "GPU";
        snprintf(src, src_len, "nearest GPU %s", b->gpu.bus_id);
    } else if (nhca > 0) {
        node = hcas[i % nhca].numa, what = "HCA";
        snprintf(src, src_len, "nearest HCA %s", hcas[i % nhca].name);
    } else if (mode == TPRUN_BIND_NUMA && nnodes > 0) {
        node = (int)hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, (unsigned)(i % nnodes))->os_index;
        snprintf(src, src_len, "NUMA node %d by local rank", node);
        return node;
    } else if (mode == TPRUN_BIND_CORE) {
        snprintf(src, src_len, "by local rank");
        return -2;
    } else if (mode == TPRUN_BIND_GPU) {
        snprintf(src, src_len, "no GPU or HCA to bind near");
        return -2;
    } else {
        snprintf(b->why, sizeof(b->why), "no GPU or HCA to bind near: not bound");
        return -3;
    }
    if (node < 0 && nnodes == 1) node = (int)hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, 0)->os_index;
    if (node < 0) {
        snprintf(b->why, sizeof(b->why), "%s's NUMA node unknown (VM): not bound", what);
        return -3;
    }
    if (numa_by_os(t, node) == NULL || node >= TPRUN_BIND_NODE_WORDS * 64 - 1) {
        snprintf(b->why, sizeof(b->why), "%s: its NUMA node %d is not in the topology: not bound", src, node);
        return -3;
    }
    return node;
}

/* The masks the child applies, and the variables that say what they are. */
static int set_masks(hwloc_topology_t t, tprun_bind_rank_t *b, hwloc_const_cpuset_t cpus, hwloc_const_nodeset_t nodes)
{
    hwloc_bitmap_list_snprintf(b->cpus, sizeof(b->cpus), cpus);
    b->numa = hwloc_bitmap_first(nodes);
    int last = hwloc_bitmap_last(cpus);
    b->cpuset_size = CPU_ALLOC_SIZE(last + 1);
    b->cpuset = CPU_ALLOC(last + 1);
    if (b->cpuset == NULL) return -1;
    hwloc_cpuset_to_glibc_sched_affinity(t, cpus, b->cpuset, b->cpuset_size);
    memset(b->nodemask, 0, sizeof(b->nodemask));
    unsigned n;
    hwloc_bitmap_foreach_begin(n, nodes) if (n < TPRUN_BIND_NODE_WORDS * 64 - 1) b->nodemask[n / 64] |= 1ul << (n % 64);
    hwloc_bitmap_foreach_end();
    return 0;
}

/*
 * Cores [lo, hi) of domain, in order: with no GPU or HCA to bind near, each rank takes its share of the cores. Left
 * free to move, ranks that wait on each other end up taking turns on one CPU while another idles: each wakeup puts
 * the woken rank beside the one that woke it, and a rank that yields stays hot in the scheduler's eyes, so the load
 * balancer leaves it there (2 ranks on 2 vCPUs, when it happens: 18-22 us per 16 B all_reduce, against 0.4-0.7).
 */
static int bind_share(hwloc_topology_t t, hwloc_const_cpuset_t domain, hwloc_obj_type_t unit, int lo, int hi,
                      tprun_bind_rank_t *b, const char *src)
{
    hwloc_bitmap_t cpus = hwloc_bitmap_alloc(), none = hwloc_bitmap_alloc(); /* memory: the kernel's local policy */
    int rc = -1;
    if (cpus == NULL || none == NULL) goto out;
    for (int c = lo; c < hi; c++)
        hwloc_bitmap_or(cpus, cpus, hwloc_get_obj_inside_cpuset_by_type(t, domain, unit, (unsigned)c)->cpuset);
    if ((rc = set_masks(t, b, cpus, none)) != 0) goto out;
    const char *name = unit == HWLOC_OBJ_CORE ? "core" : "PU";
    unsigned first = hwloc_get_obj_inside_cpuset_by_type(t, domain, unit, (unsigned)lo)->logical_index;
    unsigned last = hwloc_get_obj_inside_cpuset_by_type(t, domain, unit, (unsigned)(hi - 1))->logical_index;
    if (hi - lo == 1) snprintf(b->why, sizeof(b->why), "%s: %s L#%u by local rank", src, name, first);
    else snprintf(b->why, sizeof(b->why), "%s: %ss L#%u-L#%u by local rank", src, name, first, last);
out:
    hwloc_bitmap_free(cpus);
    hwloc_bitmap_free(none);
    return rc;
}

static tp_status_t bind_ranks(int mode, int local_size, tprun_bind_rank_t *r, char *err, size_t err_len)
{
    int thissystem = 0;
    hwloc_topology_t t = load_topology(&thissystem, err, err_len);
    if (t == NULL) return TP_ERR_SYSTEM;
    hca_t hcas[HCA_MAX];
    int nhca = list_hcas(hcas, HCA_MAX);
    int *dom = calloc((size_t)local_size, sizeof(int));
    char(*src)[96] = calloc((size_t)local_size, sizeof(*src));
    tp_status_t st = TP_ERR_NO_MEMORY;
    if (dom == NULL || src == NULL) goto err_mem;
    for (int i = 0; i < local_size; i++) dom[i] = rank_domain(t, mode, hcas, nhca, i, &r[i], src[i], sizeof(src[i]));
    for (int i = 0; i < local_size; i++) {
        if (dom[i] == -3) continue;
        int sharing = 0, k = 0;
        for (int j = 0; j < local_size; j++) sharing += dom[j] == dom[i], k += j < i && dom[j] == dom[i];
        hwloc_obj_t node = dom[i] >= 0 ? numa_by_os(t, dom[i]) : NULL;
        hwloc_const_cpuset_t domain = node != NULL ? node->cpuset : hwloc_topology_get_topology_cpuset(t);
        hwloc_obj_type_t unit =
            hwloc_get_nbobjs_inside_cpuset_by_type(t, domain, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
        int ncores = hwloc_get_nbobjs_inside_cpuset_by_type(t, domain, unit);
        if (ncores == 0) { /* a node outside tprun's CPUs (taskset) keeps its memory, not its cores */
            snprintf(r[i].why, sizeof(r[i].why), "%s: NUMA node %d has none of tprun's CPUs: not bound", src[i],
                     dom[i]);
            continue;
        }
        int turn = sharing > ncores; /* oversubscribed: cores in turn, so no core has two ranks more than another */
        if (turn && mode != TPRUN_BIND_CORE && dom[i] != -2) {
            snprintf(r[i].why, sizeof(r[i].why), "oversubscribed: not bound (%d ranks for %d cores, %s)", sharing,
                     ncores, src[i]);
            continue;
        }
        if (mode == TPRUN_BIND_CORE || turn) { /* one core; memory as without the turns: none when sharing cores */
            hwloc_obj_t core = hwloc_get_obj_inside_cpuset_by_type(t, domain, unit, (unsigned)(k % ncores));
            hwloc_bitmap_t none = hwloc_bitmap_alloc();
            int bad =
                none == NULL || set_masks(t, &r[i], core->cpuset, mode == TPRUN_BIND_CORE ? core->nodeset : none) != 0;
            hwloc_bitmap_free(none);
            if (bad) goto err_mem;
            char over[64] = "";
            if (turn) snprintf(over, sizeof(over), " (oversubscribed: %d ranks for %d cores)", sharing, ncores);
            const char *in_turn = turn ? " in turn" : "";
            if (dom[i] != -2)
                snprintf(r[i].why, sizeof(r[i].why), "%s, core L#%u%s%s", src[i], core->logical_index, in_turn, over);
            else if (mode == TPRUN_BIND_CORE)
                snprintf(r[i].why, sizeof(r[i].why), "core L#%u%s by local rank%s", core->logical_index, in_turn, over);
            else
                snprintf(r[i].why, sizeof(r[i].why), "%s: core L#%u%s by local rank%s", src[i], core->logical_index,
                         in_turn, over);
        } else if (dom[i] == -2) {
            if (bind_share(t, domain, unit, k * ncores / sharing, (k + 1) * ncores / sharing, &r[i], src[i]) != 0)
                goto err_mem;
        } else {
            if (set_masks(t, &r[i], node->cpuset, node->nodeset) != 0) goto err_mem;
            snprintf(r[i].why, sizeof(r[i].why), "%s", src[i]);
        }
        r[i].apply = thissystem;
        size_t l = strlen(r[i].why);
        if (!thissystem)
            snprintf(r[i].why + l, sizeof(r[i].why) - l, " (not applied: the topology is not this machine's)");
    }
    st = TP_OK;
err_mem:
    if (st != TP_OK) snprintf(err, err_len, "out of memory for %d ranks' bindings", local_size);
    free(dom);
    free(src);
    hwloc_topology_destroy(t);
    return st;
}

tp_status_t tprun_bind_compute(int mode, int gpus_per_rank, const tp_gpu_env_t *e, int local_size, const char *host,
                               tprun_bind_rank_t **out, char *err, size_t err_len)
{
    tprun_bind_rank_t *r = calloc((size_t)(local_size > 0 ? local_size : 1), sizeof(*r));
    if (r == NULL) return snprintf(err, err_len, "out of memory for %d ranks' bindings", local_size), TP_ERR_NO_MEMORY;
    tp_status_t st = assign_gpus(gpus_per_rank, e, local_size, host, r, err, err_len);
    if (st != TP_OK) goto err_free;
    for (int i = 0; i < local_size; i++) {
        r[i].numa = -1;
        if (mode == TPRUN_BIND_NONE) snprintf(r[i].why, sizeof(r[i].why), "--bind-to none");
    }
    /* hwloc only when something could bind: one rank on a CPU-only host starts without it (~3 ms here). Several
     * ranks always bind (bind_ranks lists the HCAs itself), so sysfs is read here only for one rank. */
    if (local_size > 0 && mode != TPRUN_BIND_NONE &&
        (local_size > 1 || mode != TPRUN_BIND_GPU || r[0].gpu.bus_id[0] != '\0' || any_hca())) {
        if ((st = bind_ranks(mode, local_size, r, err, err_len)) != TP_OK) goto err_free;
    } else if (mode == TPRUN_BIND_GPU) {
        for (int i = 0; i < local_size; i++)
            snprintf(r[i].why, sizeof(r[i].why), "no GPU or HCA to bind near: not bound");
    }
    for (int i = 0; i < local_size; i++)
        if (r[i].cpuset == NULL) inherited_cpus(r[i].cpus, sizeof(r[i].cpus));
    *out = r;
    return TP_OK;
err_free:
    tprun_bind_free(r, local_size);
    return st;
}

void tprun_bind_free(tprun_bind_rank_t *ranks, int n)
{
    for (int i = 0; ranks != NULL && i < n; i++) CPU_FREE(ranks[i].cpuset);
    free(ranks);
}

void tprun_bind_apply(const tprun_bind_rank_t *b)
{
    if (!b->apply) return;
    /* Both come from the topology of tprun's own CPUs and nodes: they do not fail short of a race with a hotplug. */
    sched_setaffinity(0, b->cpuset_size, b->cpuset);
    if (b->numa >= 0) syscall(SYS_set_mempolicy, MPOL_BIND, b->nodemask, (unsigned long)TPRUN_BIND_NODE_WORDS * 64);
}
