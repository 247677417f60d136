/* topo_report.h: the world's use of the topology: what a rank publishes about its HCAs and binding, the HCA ports
 * it uses toward its peers (exported to NCCL), and rank 0's --report-bindings table. */
#ifndef TOPO_REPORT_H
#define TOPO_REPORT_H

#include "runtime_record.h"
#include "topo_hca.h"

/* Fills the record's topology fields (local_rank of local_size: -1 when unknown): this rank's RoCE GIDs (TP_HCA, TP_GID_INDEX, distance from TP_GPU_BUS_ID's
 * GPU), the ports left out, and the binding tprun made (TP_BIND_*), else this process's affinity. */
void tp_topo_publish(int local_rank, int local_size, tp_record_room_t *me);

/* The ports rank r uses toward the ranks on other hosts, from the records alone (so rank 0 can tell every rank's):
 * the union of the per-peer /24 picks, nearest its GPU first; a peer with ports but no shared /24 adds rank r's
 * ports in PCI-nearest order and is named in *fallback_peer (else -1). Returns the count written into out. */
int tp_topo_hca_choice(const tp_world_t *w, int r, tp_hca_gid_t *out, int max, int *fallback_peer);

/* After the mesh is up: warns about a fallback, exports NCCL_IB_HCA and NCCL_IB_GID_INDEX (unless set), and with
 * TP_REPORT_BINDINGS rank 0 prints the table and the why lines. */
void tp_topo_finish(tp_world_t *w);

#endif
