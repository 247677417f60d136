/* topo_gpu.c: GPUs by PCI from sysfs, the variables that choose among them, and each local rank's GPU. */
#include "topo_gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_log.h"
#include "topo_sysfs.h"

void tp_gpu_env_from(tp_gpu_env_t *e, char *const *envp)
{
    static const char *const names[] = {
        "TP_GPUS=", "CUDA_VISIBLE_DEVICES=", "HIP_VISIBLE_DEVICES=", "ROCR_VISIBLE_DEVICES="};
    const char **slots[] = {&e->tp_gpus, &e->cuda, &e->hip, &e->rocr};
    memset(e, 0, sizeof(*e));
    for (char *const *ep = envp; ep != NULL && *ep != NULL; ep++)
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
            if (strncmp(*ep, names[i], strlen(names[i])) == 0) *slots[i] = *ep + strlen(names[i]);
}

/* "0000:3b:00.0", "00000000:3B:00.0" (nvidia-smi) or "3b:00.0" into the lower-case 4-digit-domain form. */
static int parse_bus_id(const char *text, size_t len, char *out, size_t out_len)
{
    char buf[32];
    unsigned dom = 0, bus, dev, fn;
    int end = 0;
    if (len == 0 || len >= sizeof(buf)) return -1;
    memcpy(buf, text, len);
    buf[len] = '\0';
    size_t colons = 0;
    for (size_t i = 0; i < len; i++) {
        if (buf[i] == ':') colons++;
        else if (buf[i] != '.' &&
                 !((buf[i] >= '0' && buf[i] <= '9') || ((buf[i] | 0x20) >= 'a' && (buf[i] | 0x20) <= 'f')))
            return -1;
    }
    if (colons == 2 ? sscanf(buf, "%8x:%2x:%2x.%1x%n", &dom, &bus, &dev, &fn, &end) != 4
                    : colons != 1 || sscanf(buf, "%2x:%2x.%1x%n", &bus, &dev, &fn, &end) != 3)
        return -1;
    if ((size_t)end != len || dom > 0xffff || dev > 0x1f || fn > 7) return -1;
    snprintf(out, out_len, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
    return 0;
}

static int gpu_cmp(const void *a, const void *b)
{
    return strcmp(((const tp_gpu_t *)a)->bus_id, ((const tp_gpu_t *)b)->bus_id);
}

/* A GPU's PCI function: NVIDIA or AMD, class display (0x03), or processing accelerator (0x12). */
static int read_gpu(const char *name, tp_gpu_t *g)
{
    char path[512], line[64];
    if (tp_sysfs_path(path, sizeof(path), "/bus/pci/devices/%s/vendor", name) != 0 ||
        tp_sysfs_read_line(path, line, sizeof(line)) != 0)
        return 0;
    unsigned long vendor = strtoul(line, NULL, 16);
    if (vendor != TP_GPU_VENDOR_NVIDIA && vendor != TP_GPU_VENDOR_AMD) return 0;
    if (tp_sysfs_path(path, sizeof(path), "/bus/pci/devices/%s/class", name) != 0 ||
        tp_sysfs_read_line(path, line, sizeof(line)) != 0)
        return 0;
    unsigned long cls = strtoul(line, NULL, 16) >> 16;
    if (cls != 0x03 && cls != 0x12) return 0;
    if (parse_bus_id(name, strlen(name), g->bus_id, sizeof(g->bus_id)) != 0) return 0;
    g->vendor = (unsigned)vendor;
    g->numa_node = -1;
    if (tp_sysfs_path(path, sizeof(path), "/bus/pci/devices/%s/numa_node", name) == 0 &&
        tp_sysfs_read_line(path, line, sizeof(line)) == 0)
        g->numa_node = atoi(line) >= 0 ? atoi(line) : -1;
    return 1;
}

int tp_gpu_list(tp_gpu_t *out, int max)
{
    char path[512], **names = NULL;
    if (tp_sysfs_path(path, sizeof(path), "/bus/pci/devices") != 0) return 0;
    int n = tp_sysfs_list(path, &names), count = 0;
    for (int i = 0; i < n && count < max; i++) count += read_gpu(names[i], &out[count]);
    free(names);
    qsort(out, (size_t)count, sizeof(*out), gpu_cmp);
    int per_vendor[2] = {0, 0};
    for (int i = 0; i < count; i++) {
        out[i].index = i;
        out[i].vendor_index = per_vendor[out[i].vendor == TP_GPU_VENDOR_AMD]++;
    }
    return count;
}

/* The GPUs a list of indexes into pool picks, in its order: "" and "-1" pick none (CUDA's and ROCm's idiom). */
static tp_status_t pick_indexes(const char *var, const char *text, const tp_gpu_t *const *pool, int npool,
                                const char *what, const tp_gpu_t **out, int *nout, char *err, size_t err_len)
{
    char q[TP_QUOTE_LEN];
    *nout = 0;
    if (text[0] == '\0' || strcmp(text, "-1") == 0) return TP_OK;
    if (strncmp(text, "GPU-", 4) == 0 || strncmp(text, "MIG-", 4) == 0 || strstr(text, ",GPU-") != NULL)
        return snprintf(err, err_len,
                        "%s=\"%s\": tprun chooses GPUs by PCI bus id and cannot map UUIDs to them; give indexes, or "
                        "TP_GPUS=bus ids, or --gpus-per-rank 0 to pass it to the ranks as it is",
                        var, tp_quote(text, q, sizeof(q))),
               TP_ERR_INVALID;
    int n = 0;
    for (const char *p = text;;) {
        size_t l = strspn(p, "0123456789");
        if (l == 0 || l > 6 || (p[l] != ',' && p[l] != '\0'))
            return snprintf(err, err_len, "%s=\"%s\": expected comma-separated GPU indexes such as 0,1", var,
                            tp_quote(text, q, sizeof(q))),
                   TP_ERR_INVALID;
        int k = atoi(p);
        if (k >= npool)
            return snprintf(err, err_len, "%s=\"%s\": index %d, but this host has %d %s", var,
                            tp_quote(text, q, sizeof(q)), k, npool, what),
                   TP_ERR_INVALID;
        for (int j = 0; j < n; j++)
            if (out[j] == pool[k])
                return snprintf(err, err_len, "%s=\"%s\": index %d is given twice", var, tp_quote(text, q, sizeof(q)),
                                k),
                       TP_ERR_INVALID;
        out[n++] = pool[k];
        if (p[l] == '\0') break;
        p += l + 1;
    }
    *nout = n;
    return TP_OK;
}

/* TP_GPUS: bus ids (this host's) or indexes into all GPUs, in the order given. */
static tp_status_t pick_tp_gpus(const char *text, const tp_gpu_t *const *all, int n, const tp_gpu_t **out, int *nout,
                                char *err, size_t err_len)
{
    char q[TP_QUOTE_LEN];
    int k = 0;
    for (const char *p = text;;) {
        size_t l = strcspn(p, ",");
        char bus[16];
        const tp_gpu_t *g = NULL;
        if (l > 0 && strspn(p, "0123456789") == l && l <= 6) {
            int i = atoi(p);
            if (i >= n)
                return snprintf(err, err_len, "TP_GPUS=\"%s\": index %d, but this host has %d GPUs%s",
                                tp_quote(text, q, sizeof(q)), i, n, n > 0 ? " (indexes from 0, in bus id order)" : ""),
                       TP_ERR_INVALID;
            g = all[i];
        } else if (parse_bus_id(p, l, bus, sizeof(bus)) == 0) {
            for (int i = 0; i < n && g == NULL; i++)
                if (strcmp(all[i]->bus_id, bus) == 0) g = all[i];
            if (g == NULL)
                return snprintf(err, err_len, "TP_GPUS=\"%s\": no GPU %s on this host (%d GPUs%s%s)",
                                tp_quote(text, q, sizeof(q)), bus, n, n > 0 ? ", the first " : "",
                                n > 0 ? all[0]->bus_id : ""),
                       TP_ERR_INVALID;
        } else {
            return snprintf(err, err_len,
                            "TP_GPUS=\"%s\": expected comma-separated PCI bus ids (0000:3b:00.0) or GPU "
                            "indexes",
                            tp_quote(text, q, sizeof(q))),
                   TP_ERR_INVALID;
        }
        for (int j = 0; j < k; j++)
            if (out[j] == g)
                return snprintf(err, err_len, "TP_GPUS=\"%s\": GPU %s is given twice", tp_quote(text, q, sizeof(q)),
                                g->bus_id),
                       TP_ERR_INVALID;
        out[k++] = g;
        if (p[l] == '\0') break;
        p += l + 1;
    }
    *nout = k;
    return TP_OK;
}

static void append_why(char *why, size_t len, const char *var, const char *value)
{
    size_t o = strlen(why);
    if (o < len) snprintf(why + o, len - o, "%s%s=%s", o > 0 ? ", " : "", var, value);
}

tp_status_t tp_gpu_visible(const tp_gpu_env_t *e, const tp_gpu_t *all, int n, tp_gpu_t *out, int *nout, char *why,
                           size_t why_len, char *err, size_t err_len)
{
    const tp_gpu_t *ptr[TP_GPU_MAX], *nv[TP_GPU_MAX], *amd[TP_GPU_MAX], *picked[TP_GPU_MAX], *tmp[TP_GPU_MAX];
    int nnv = 0, namd = 0, k = 0, m;
    if (n > TP_GPU_MAX) n = TP_GPU_MAX;
    for (int i = 0; i < n; i++) {
        ptr[i] = &all[i];
        if (all[i].vendor == TP_GPU_VENDOR_AMD) amd[namd++] = &all[i];
        else nv[nnv++] = &all[i];
    }
    int nv_all = nnv;
    why[0] = '\0';
    if (e->tp_gpus != NULL && e->tp_gpus[0] != '\0') {
        if (pick_tp_gpus(e->tp_gpus, ptr, n, picked, &k, err, err_len) != TP_OK) return TP_ERR_INVALID;
        append_why(why, why_len, "TP_GPUS", e->tp_gpus);
    } else {
        /* A vendor's variable counts only where the host has its GPUs: a CPU host's leftover one changes nothing. */
        if (e->cuda != NULL && nv_all > 0) {
            if (pick_indexes("CUDA_VISIBLE_DEVICES", e->cuda, nv, nnv, "NVIDIA GPUs", tmp, &m, err, err_len) != TP_OK)
                return TP_ERR_INVALID;
            memcpy(nv, tmp, sizeof(*tmp) * (size_t)m), nnv = m;
            append_why(why, why_len, "CUDA_VISIBLE_DEVICES", e->cuda);
        }
        /* ROCm applies ROCR_VISIBLE_DEVICES first; HIP's indexes count what it left. */
        if (e->rocr != NULL && namd > 0) {
            if (pick_indexes("ROCR_VISIBLE_DEVICES", e->rocr, amd, namd, "AMD GPUs", tmp, &m, err, err_len) != TP_OK)
                return TP_ERR_INVALID;
            memcpy(amd, tmp, sizeof(*tmp) * (size_t)m), namd = m;
            append_why(why, why_len, "ROCR_VISIBLE_DEVICES", e->rocr);
        }
        /* HIP reads CUDA_VISIBLE_DEVICES when HIP_VISIBLE_DEVICES is unset: on a host of AMD GPUs only, so does this. */
        const char *hip = e->hip, *hip_var = "HIP_VISIBLE_DEVICES";
        if (hip == NULL && e->cuda != NULL && nv_all == 0 && namd > 0) hip = e->cuda, hip_var = "CUDA_VISIBLE_DEVICES";
        if (hip != NULL && namd > 0) {
            if (pick_indexes(hip_var, hip, amd, namd,
                             e->rocr != NULL ? "AMD GPUs left by ROCR_VISIBLE_DEVICES" : "AMD GPUs", tmp, &m, err,
                             err_len) != TP_OK)
                return TP_ERR_INVALID;
            memcpy(amd, tmp, sizeof(*tmp) * (size_t)m), namd = m;
            append_why(why, why_len, hip_var, hip);
        }
        for (int i = 0; i < nnv; i++) picked[k++] = nv[i];
        for (int i = 0; i < namd; i++) picked[k++] = amd[i];
        if (why[0] == '\0') snprintf(why, why_len, "all GPUs");
    }
    for (int i = 0; i < k; i++) out[i] = *picked[i];
    *nout = k;
    return TP_OK;
}

tp_status_t tp_gpu_of_local_rank(int local_rank, int local_size, char *const *envp, tp_gpu_t *gpu, char *err,
                                 size_t err_len)
{
    tp_gpu_t all[TP_GPU_MAX], vis[TP_GPU_MAX];
    tp_gpu_env_t e;
    char why[256];
    int nvis;
    tp_gpu_env_from(&e, envp);
    int n = tp_gpu_list(all, TP_GPU_MAX);
    if (tp_gpu_visible(&e, all, n, vis, &nvis, why, sizeof(why), err, err_len) != TP_OK) return TP_ERR_INVALID;
    if (nvis == 0) {
        memset(gpu, 0, sizeof(*gpu));
        return TP_OK;
    }
    if (nvis == 1) return *gpu = vis[0], TP_OK;
    if (local_rank < 0 || local_size > nvis || local_rank >= nvis)
        return snprintf(err, err_len,
                        "local rank %d of %d ranks on this host, but %d GPUs (%s): give each rank its "
                        "own with TP_GPUS or CUDA_VISIBLE_DEVICES",
                        local_rank, local_size, nvis, why),
               TP_ERR_INVALID;
    *gpu = vis[local_rank];
    return TP_OK;
}
