/* topo_sysfs.h: every sysfs read of tprun and libtp goes through one root (TP_SYSFS_ROOT, default /sys), so tests
 * replay captured or generated machines. */
#ifndef TOPO_SYSFS_H
#define TOPO_SYSFS_H

#include <stddef.h>

/* Joins TP_SYSFS_ROOT and the formatted path (which starts with '/', e.g. "/class/infiniband/%s"); returns 0, or
 * -ENAMETOOLONG when it does not fit in len (out then holds "" ). */
int tp_sysfs_path(char *out, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The first line of a file without its newline and trailing blanks; returns 0 or -errno (-EINVAL is what the kernel
 * gives for an empty GID entry's attributes). out is set only on success. */
int tp_sysfs_read_line(const char *path, char *out, size_t len);

/* A directory's entries, "." and ".." excepted, in version order (2 before 10): *names is one malloc'd array of
 * count pointers into the same block (free(*names) frees all). Returns the count, or -errno. */
int tp_sysfs_list(const char *path, char ***names);

/* realpath of a sysfs path, with TP_SYSFS_ROOT removed from its front: "/devices/pci0000:00/0000:00:01.0/...",
 * the same form for a real and a replayed machine. Returns 0 or -errno. */
int tp_sysfs_realpath(const char *path, char *out, size_t len);

#endif
