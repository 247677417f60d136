/* runtime_dl.h: opening a vendor library at run time from one symbol list. */
#ifndef RUNTIME_DL_H
#define RUNTIME_DL_H

#include <stddef.h>

/*
 * Opens soname from the loader's path, else from fallback_dir (when not empty), and resolves names[i] into
 * slots[i]. Returns the handle, or NULL with why saying what failed ("<dlerror>", or "<file> lacks <name>: not a
 * usable <what> library"); nothing stays open on failure.
 */
void *tp_dl_open(const char *soname, const char *fallback_dir, const char *const *names, void **slots, size_t n,
                 const char *what, char *why, size_t why_len);

#endif
