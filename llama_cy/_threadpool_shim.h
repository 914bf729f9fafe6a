/* A symbol of the shared library that holds a known function: the CPU backend plugin's
 * ggml_threadpool_pause, which it exports but does not hand out through
 * ggml_backend_reg_get_proc_address (only ggml_threadpool_new and _free). The plugin is
 * already loaded; this only looks the symbol up (NULL if it cannot). */
#ifndef LCY_THREADPOOL_SHIM_H
#define LCY_THREADPOOL_SHIM_H

#if defined(_WIN32)
#include <windows.h>

static void *lcy_sibling_symbol(const void *known, const char *name) {
    HMODULE module = NULL;
    if (known == NULL ||
        !GetModuleHandleExA(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS |
                                GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                            (LPCSTR)known, &module)) {
        return NULL;
    }
    return (void *)GetProcAddress(module, name);
}
#else
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr on glibc */
#endif
#include <dlfcn.h>

static void *lcy_sibling_symbol(const void *known, const char *name) {
    Dl_info info;
    void *handle, *symbol;
    if (known == NULL || !dladdr(known, &info) || info.dli_fname == NULL) {
        return NULL;
    }
    handle = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    if (handle == NULL) {
        return NULL;
    }
    symbol = dlsym(handle, name);
    dlclose(handle); /* only the reference RTLD_NOLOAD took: the plugin stays loaded */
    return symbol;
}
#endif

#endif
