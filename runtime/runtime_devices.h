/* runtime_devices.h: the devices, and which one owns a buffer. */
#ifndef RUNTIME_DEVICES_H
#define RUNTIME_DEVICES_H

#include "tp_provider.h"

#define TP_DEVICES_MAX 8

/* The device that owns ptr (the first whose mem_query claims it; the host device claims the rest). */
const tp_device_ops_t *tp_device_of(const void *ptr, tp_mem_type_t *type);
/* Puts a device ahead of those listed, so it is asked first; refuses a wrong ABI or a full list. */
tp_status_t tp_device_add(const tp_device_ops_t *ops);
const char *tp_mem_type_name(tp_mem_type_t type);
/* 1 when p is host memory for certain without asking a driver (runtime_mem.c): in the brk heap, or in a live
 * tp_mem_alloc allocation that a lock-free look can vouch for; 0 when it is not, or the look cannot tell (other
 * memory, many allocations, one being made or freed): then ask the devices. */
int tp_mem_known(const void *p);
const char *tp_device_kind_name(tp_device_kind_t kind);

#endif
