/* runtime_dl.c: one way to dlopen a library and check that it has every symbol we call. */
#include "runtime_dl.h"

#include <dlfcn.h>
#include <stdio.h>

void *tp_dl_open(const char *soname, const char *fallback_dir, const char *const *names, void **slots, size_t n,
                 const char *what, char *why, size_t why_len)
{
    void *handle = dlopen(soname, RTLD_NOW | RTLD_GLOBAL);
    if (handle == NULL) {
        snprintf(why, why_len, "%s", dlerror());
        if (fallback_dir != NULL && fallback_dir[0] != '\0') {
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", fallback_dir, soname);
            handle = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
        }
        if (handle == NULL) return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if ((slots[i] = dlsym(handle, names[i])) != NULL) continue;
        /* Name the file that was found, through a symbol it does have, so a stray copy is easy to spot. */
        Dl_info info;
        const char *file = soname;
        if (i > 0 && dladdr(slots[0], &info) && info.dli_fname != NULL) file = info.dli_fname;
        snprintf(why, why_len, "%s lacks %s: not a usable %s library", file, names[i], what);
        for (size_t k = 0; k < n; k++) slots[k] = NULL;
        dlclose(handle);
        return NULL;
    }
    return handle;
}
