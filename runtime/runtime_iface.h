/* runtime_iface.h: which IPv4 interface reaches each peer: a shared /24, confirmed by the TCP connect, else routed. */
#ifndef RUNTIME_IFACE_H
#define RUNTIME_IFACE_H

#include <stddef.h>

#include "tp.h"

#define TP_IFACES_MAX 32
#define TP_IFACE_CANDIDATES 8

typedef struct tp_iface {
    char name[32];
    char ip[16];
    int prefix; /* the netmask's length */
} tp_iface_t;

/*
 * Whether an interface name passes a filter with NCCL_SOCKET_IFNAME's grammar: comma-separated prefixes
 * ("eth,ib"), "=" before the list for exact names ("=eth0,eth1"), "^" before it to exclude ("^docker,lo",
 * "^=docker0"). An empty filter passes everything.
 */
int tp_ifname_match(const char *spec, const char *name);

/* This host's IPv4 interfaces that are up, loopback excluded, in kernel order; those the filter rejects go to
 * rejected (when not NULL). Returns how many are in out. */
int tp_iface_list(const char *spec, tp_iface_t *out, int max, tp_iface_t *rejected, int *num_rejected);

/* Where rank 0's bootstrap may be reached, best first, comma-separated: every interface the filter passes, or
 * without a filter preferred (the address ssh reached) and then this host's other interfaces. TP_ERR_NOT_FOUND
 * when a filter passes none. */
tp_status_t tp_iface_boot_ips(const char *spec, const char *preferred, char *out, size_t len);

/* "name:ip/prefix,..." and back; parse refuses anything malformed (returns -1). */
int tp_iface_format(const tp_iface_t *ifs, int n, char *out, size_t len);
int tp_iface_parse(const char *text, tp_iface_t *out, int max);

/*
 * The addresses to try for one peer, best first: the peer's address on each /24 it shares with one of mine (in
 * my interfaces' order), then its routed address (where its bootstrap connection came from) if not already
 * listed. Writes "ip" strings into cands and, for each, the local interface name ("" for the routed one).
 * Returns the count; *shared says how many came from a shared /24.
 */
int tp_iface_candidates(const tp_iface_t *mine, int nmine, const tp_iface_t *peer, int npeer, const char *routed_ip,
                        char cands[][16], char via[][32], int max, int *shared);

/* ---- the world's use of them (runtime_init.c, runtime_transports.c, runtime_bootstrap.c) ---- */

struct tp_world;

/* This rank's interfaces as its record publishes them (TP_IFNAME applied). */
void tp_iface_publish(char *out, size_t len);
/* The TCP addresses to dial for peer p, best first, rewritten in place from its published "ip:port" as
 * "ip:port,ip:port,...": its address on each /24 both share (in this rank's interface order), then its routed one
 * (warned about when it is the only one). A job on loopback keeps the published address. */
void tp_iface_choose(struct tp_world *w, int p, char *addr, size_t len);
/* A transport's connection to peer as made ("ip:port" at each end; ctx is the world): what the report and
 * NCCL_SOCKET_IFNAME describe. */
void tp_iface_connected(void *ctx, int peer, const char *local, const char *remote);
/* On demand, for a peer that dials this rank (a higher rank): the connection it will make, from its own choice of
 * our addresses (its interfaces against ours), stands in the report and NCCL_SOCKET_IFNAME until it is made. */
void tp_iface_predict_inbound(struct tp_world *w, int p);
/* After the mesh is up (every TCP connect on a chosen address succeeded): prints the decision with
 * TP_REPORT_BINDINGS, and exports NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME (unless already set).
 * transport_of names the transport that reaches a peer and whether it runs over IP (the report's line for a peer on
 * the same host). */
void tp_iface_finish(struct tp_world *w,
                     const char *(*transport_of)(const struct tp_world *w, int peer, int *ip_endpoints));
/* The report's TCP column: for this rank, the interfaces it uses toward its peers ("mgmt0 198.18.1.1"); for a
 * peer, the interface at its end of its connection with this rank; "same host" or "-" (one host). */
void tp_iface_describe(const struct tp_world *w, int p, char *out, size_t len);
void tp_iface_free(struct tp_world *w);

#endif
