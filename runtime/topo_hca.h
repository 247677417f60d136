/* topo_hca.h: RoCE HCA ports from sysfs, the TP_HCA filter, and the ports each rank uses toward each peer: those on
 * a /24 the peer also lists (so both ends pick the same rails), nearest the rank's GPU first. */
#ifndef TOPO_HCA_H
#define TOPO_HCA_H

#include <stddef.h>
#include <stdint.h>

#include "tp.h"

#define TP_HCA_GIDS_MAX  32  /* IPv4 RoCE v2 GIDs a rank publishes, over all its ports */
#define TP_HCA_DIST_NONE 999 /* PCI distance when the GPU or the HCA's PCI path is unknown */

/* One usable GID of an active RoCE port: an IPv4-mapped RoCE v2 entry. */
typedef struct tp_hca_gid {
    char hca[32];
    int port;    /* 1-based */
    int gid;     /* 0-based GID table index */
    uint32_t ip; /* the IPv4 address the GID maps (host order) */
    int dist;    /* PCI hops between the HCA and the rank's GPU, TP_HCA_DIST_NONE when unknown */
    char netdev[32];
} tp_hca_gid_t;

/* A port not used, and why (the report's lines). */
typedef struct tp_hca_skip {
    char hca[32];
    int port;
    char why[96];
} tp_hca_skip_t;

/* Checks a TP_HCA value (NCCL_IB_HCA's grammar: "^" excludes, then "=" exact names, else prefixes; name[:port]). */
tp_status_t tp_hca_spec_check(const char *spec, char *err, size_t err_len);
/* Whether port `port` of HCA `name` passes a checked spec; an empty spec passes all. */
int tp_hca_spec_match(const char *spec, const char *name, int port);
/* TP_GID_INDEX: "auto" (-1) or an index 0..255. */
tp_status_t tp_hca_gid_index_parse(const char *text, int *out, char *err, size_t err_len);

/* PCI hops between two sysfs device paths ("/devices/pci0000:00/0000:00:01.0/..."); TP_HCA_DIST_NONE if one is
 * empty. Different root complexes count every component of both. */
int tp_hca_pci_distance(const char *a, const char *b);

/*
 * This host's usable GIDs under TP_SYSFS_ROOT: active Ethernet ports passing spec, each with its IPv4 RoCE v2
 * GIDs (every one with gid_index < 0, only that index otherwise), in HCA, port, index order; dist measured from
 * gpu_pci (a sysfs device path, or "" when no GPU is known). Ports left out go to skip (when not NULL). Returns how
 * many GIDs are in out.
 */
int tp_hca_scan(const char *spec, int gid_index, const char *gpu_pci, tp_hca_gid_t *out, int max, tp_hca_skip_t *skip,
                int *nskip, int max_skip);

/* "name:port:gid:a.b.c.d:dist,..." and back (netdev is not published); parse returns -1 on anything malformed. */
int tp_hca_format(const tp_hca_gid_t *g, int n, char *out, size_t len);
int tp_hca_parse(const char *text, tp_hca_gid_t *out, int max);

/*
 * The GIDs to use toward one peer: for each of mine on a /24 one of the peer's GIDs is on, one per port (its
 * lowest matching index), nearest the GPU first (then in scan order). Writes indexes into mine to pick; returns
 * how many (0: no shared /24).
 */
int tp_hca_pick(const tp_hca_gid_t *mine, int nmine, const tp_hca_gid_t *peer, int npeer, int *pick, int max);
/* Without a shared /24: every port once (its lowest index), nearest the GPU first. */
int tp_hca_fallback(const tp_hca_gid_t *mine, int nmine, int *pick, int max);

#endif
