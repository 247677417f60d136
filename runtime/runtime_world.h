/* runtime_world.h: the job as the bootstrap leaves it, shared by every comm of this process. */
#ifndef RUNTIME_WORLD_H
#define RUNTIME_WORLD_H

#include <stdint.h>
#include <sys/types.h>

#include "tp.h"
#include "tp_provider.h"

#define TP_HOST_MAX 256
#define TP_BOOT_MORE_MAX 15 /* rank 0's other bootstrap addresses kept from TP_BOOT_ADDR */
#define TP_ADDRS_MAX 1024 /* a rank's interfaces; TP_BOOT_ADDR */
#define TP_PUBLISHED_MAX                                                                                               \
    2048 /* "name=address;..." of every transport a rank opened (kept small: every rank holds and copies every record) */
#define TP_JOB_ID_MAX 128

/* One rank as it checked in. Its strings point into the world's table text (peer_text): every rank holds every
 * rank's record, so a record stays small (about 100 bytes) whatever its fields hold; the bounds each field is
 * held to are tp_record_room_t's (runtime_record.h). */
typedef struct tp_peer_record {
    int rank;
    int local_rank;
    int local_size;
    int node_rank;
    pid_t pid;
    const char *host;
    const char *boot_ip;   /* the address it reached rank 0 from: where peers can reach it */
    const char *kernel;    /* boot id and pid namespace: equal means its pid is valid here */
    const char *addresses; /* transport addresses: "tcp=127.0.0.1:40123;shm=..." */
    const char *ifaces;    /* its IPv4 interfaces (TP_IFNAME applied): "eth0:10.0.0.2/24,ib0:..." */
    /* Topology (runtime/topo_report.c): its RoCE GIDs "hca:port:gid:ip:dist,...", the ports left out and why, and
     * its binding as tprun set it, for the per-peer HCA pick and rank 0's report. */
    const char *hcas;
    const char *hca_skip;
    const char *gpu; /* PCI bus id, "-" when none is known */
    const char *cpus;
    const char *numa;
    const char *bind_why;
} tp_peer_record_t;

/* A key/value that must match on every rank. */
typedef struct tp_setting {
    char *key;
    char *value;
} tp_setting_t;

/* How this process learned its place in the job. */
typedef enum tp_world_source {
    TP_WORLD_SINGLETON = 0,
    TP_WORLD_TPRUN = 1,
    TP_WORLD_TORCHRUN = 2,
    TP_WORLD_PMIX = 3,
} tp_world_source_t;

typedef struct tp_world {
    tp_world_source_t source;
    int rank;
    int size;
    int local_rank; /* -1 until known: then derived from the table by host */
    int local_size;
    int node_rank;
    char job_id[TP_JOB_ID_MAX];
    uint8_t job_key[TP_JOB_KEY_BYTES];
    char boot_host[TP_HOST_MAX]; /* rank 0's bootstrap listener (TP_BOOT_ADDR's first address) */
    int boot_port;
    /* TP_BOOT_ADDR's other addresses, tried in turn after the first (the first TP_BOOT_MORE_MAX of them) */
    char boot_more_host[TP_BOOT_MORE_MAX][TP_HOST_MAX];
    int boot_more_port[TP_BOOT_MORE_MAX];
    int boot_nmore;
    int boot_listen_fd; /* rank 0: the listener (inherited from tprun, or bound); -1 elsewhere */
    int boot_fd;        /* other ranks: the authenticated connection to rank 0 (kept for fate) */
    char advertise_ip[64]; /* this rank's address as peers reach it (the bootstrap connection's local end) */

    /* settings (agreed ones are compared at init) */
    double boot_timeout_s;
    double boot_report_s;
    double heartbeat_timeout_s;
    uint64_t part_bytes;
    int spin_us;
    int errors_return; /* TP_ERRORS=return: peer and job errors come back from calls instead of ending the rank */
    char transports[256];
    tp_setting_t *settings; /* every agreed setting, built-in and engine-added, in a fixed order */
    int num_settings;

    tp_peer_record_t *peers; /* size records, by rank, after the bootstrap */
    char *peer_text;         /* the table as rank 0 sent it: the records' strings */
    char my_addresses[TP_PUBLISHED_MAX];

    /* fate: rank 0 keeps one connection to every rank; the others one to rank 0 */
    int *fate_fds; /* rank 0: fate_fds[r] for r >= 1; others: fate_fds[0] */

    void *transport_state; /* owned by runtime_transports.c */
    void *iface_state;     /* owned by runtime_iface.c: the interface each peer is reached on */
} tp_world_t;

/* A communicator: a subset of the world's ranks. */
struct tp_comm {
    tp_world_t *world;
    int rank;
    int size;
    int *world_ranks; /* comm rank -> world rank */
    int local_rank;
    int local_size;
    int node_rank;
    uint32_t comm_id; /* the same on every member; frames carry it */
    uint64_t seq;     /* collectives called on this comm so far */
    void *coll_state; /* owned by the collectives layer */
};

/* The collectives layer: per-comm state. */
tp_status_t tp_coll_comm_init(tp_comm_t *comm);
void tp_coll_comm_fini(tp_comm_t *comm);

#endif
