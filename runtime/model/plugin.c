/* Plugins: shared objects whose entry point registers layer kinds (nestpipe/layer.h
 * NP_PLUGIN_DEFINE), loaded once each by path, so a model file can use kinds that
 * nestpipe was not built with. Not here: the registry itself (runtime/model/layer.c). */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/util.h"
#include "runtime/model/graph.h"

#define MAX_PLUGINS 32

/* The plugins loaded so far, by the path dlopen resolved them to (and as given). */
static struct {
    void *handle;
    char path[NP_PATH_MAX];
    np_status st;  /* its entry point's outcome: a failed plugin fails again, the same way */
    np_error err;
} loaded[MAX_PLUGINS];
static int n_loaded;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static np_status load(const char *path, np_error *err) {
    for (int i = 0; i < n_loaded; i++)
        if (!strcmp(loaded[i].path, path)) {
            if (loaded[i].st) *err = loaded[i].err;
            return loaded[i].st;
        }
    if (strlen(path) >= NP_PATH_MAX)
        return np_err(err, NP_STATUS_BAD_INPUT, "plugin %.64s...: the path is too long", path);
    if (n_loaded == MAX_PLUGINS)
        return np_err(err, NP_STATUS_UNSUPPORTED, "plugin %s: at most %d plugins", path,
                      MAX_PLUGINS);
    dlerror();
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        return np_err(err, NP_STATUS_BAD_INPUT, "plugin %s: cannot load it: %s%s", path,
                      why ? why : "unknown error",
                      strchr(path, '/') ? "" : " (a path without '/' is searched like a "
                                               "library: write ./NAME.so for a file here)");
    }
    /* the same object under another name (a symlink, ./x.so and x.so): loaded already */
    for (int i = 0; i < n_loaded; i++)
        if (loaded[i].handle == h) {
            dlclose(h); /* drops the extra reference only */
            if (loaded[i].st) *err = loaded[i].err;
            return loaded[i].st;
        }
    const int *abi = dlsym(h, "np_plugin_abi");
    np_status (*init)(np_error *) = NULL;
    void *sym = dlsym(h, "np_plugin_init");
    memcpy(&init, &sym, sizeof init); /* ISO C has no cast from void * to a function */
    if (!abi || !init) {
        dlclose(h);
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "plugin %s: no %s; a plugin defines its entry point with "
                      "NP_PLUGIN_DEFINE (nestpipe/layer.h)",
                      path, !init ? "np_plugin_init" : "np_plugin_abi");
    }
    int got = *abi; /* read before dlclose unmaps it */
    if (got != NP_PLUGIN_ABI) {
        dlclose(h);
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "plugin %s: built for the layer API %d, this nestpipe has %d; rebuild it "
                      "against this nestpipe's headers",
                      path, got, NP_PLUGIN_ABI);
    }
    /* recorded before its entry point runs: kinds it registers before failing stay (the
     * registry keeps pointers into it), so it must stay loaded and not run twice */
    loaded[n_loaded].handle = h;
    snprintf(loaded[n_loaded].path, sizeof loaded[n_loaded].path, "%s", path);
    n_loaded++;
    np_error e = {{0}};
    np_status st = init(&e);
    if (st) {
        int k = n_loaded - 1;
        loaded[k].st = st < 0 && st >= NP_STATUS_UNSUPPORTED ? st : NP_STATUS_BAD_INPUT;
        np_err(&loaded[k].err, loaded[k].st, "plugin %s: %s", path,
               e.msg[0] ? e.msg : "its entry point failed");
        *err = loaded[k].err;
        return loaded[k].st;
    }
    return NP_OK;
}

np_status np_plugin_load(const char *path, np_error *err) {
    if (!path || !path[0]) return np_err(err, NP_STATUS_BAD_INPUT, "plugin: no path given");
    pthread_mutex_lock(&lock);
    np_status st = load(path, err);
    pthread_mutex_unlock(&lock);
    return st;
}

np_status np_plugins_load_list(const char *list, np_error *err) {
    char path[NP_PATH_MAX];
    for (const char *p = list; p && *p;) {
        size_t n = strcspn(p, ",");
        if (n >= sizeof path) return np_err(err, NP_STATUS_BAD_INPUT, "plugin: a path is too long");
        memcpy(path, p, n);
        path[n] = 0;
        np_status st = np_plugin_load(path, err);
        if (st) return st;
        p += n;
        if (*p == ',') p++;
    }
    return NP_OK;
}
