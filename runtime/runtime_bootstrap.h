/* runtime_bootstrap.h: every rank checks in with rank 0 and gets the table of all ranks back. */
#ifndef RUNTIME_BOOTSTRAP_H
#define RUNTIME_BOOTSTRAP_H

#include "runtime_world.h"

/*
 * First step: rank 0 takes (or binds) its listener; the others connect to it and authenticate. Either way,
 * w->advertise_ip is set to the address peers can reach this rank at.
 */
tp_status_t tp_boot_connect(tp_world_t *w);

/*
 * Second step: sends this rank's record (with w->my_addresses and w->settings) and waits for the table.
 * Rank 0 collects every record, names missing ranks while it waits, compares the settings, and sends the table
 * or the error to everyone (a world of one makes its table alone). On success w->peers holds every rank's record
 * (its strings in w->peer_text) and w->settings the agreed values.
 */
tp_status_t tp_boot_exchange(tp_world_t *w);

#endif
