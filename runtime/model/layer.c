/* The layer registry: the built-in kinds and the ones users register, looked up by name,
 * plus the parameter-shape and initialisation helpers of the public layer API.
 * Not here: the built-in kinds themselves (codelets/layers/<kind>.c) or how graphs use them
 * (runtime/model/graph.c). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/util.h"
#include "codelets/layers/layers.h"
#include "runtime/model/graph.h"

/* Built-in kinds: one line each. */
static const np_layer_def *const builtin[] = {
    &np_layer_linear,
    &np_layer_dot,
    &np_layer_concat,
    &np_layer_cross,
    &np_layer_slice,
    &np_layer_hstu,
    &np_layer_nextitem,
};

static np_layer_def registry[NP_MAX_LAYER_KINDS];
static char kind_names[NP_MAX_LAYER_KINDS][32];
/* copies of the strings a definition points to: the caller's may not last */
#define HP_NAME_MAX 24
static char hp_names[NP_MAX_LAYER_KINDS][2][NP_LAYER_MAX_HP][HP_NAME_MAX];
static char help_text[NP_MAX_LAYER_KINDS][160];
static int n_kinds;
static pthread_once_t builtin_once = PTHREAD_ONCE_INIT;

/* Names a kind cannot take: the engine's own codelets are pool_fwd/_bwd and bce_fwd/_bwd,
 * and a model file reads `kind = mlp` as its macro. */
static const char *const reserved[] = {"pool", "bce", "mlp"};

static np_status add_kind(const np_layer_def *def, np_error *err) {
    if (!def || !def->kind || !def->kind[0] || !def->shape || !def->fwd || !def->bwd)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "layer %s: a definition needs kind, shape, fwd and bwd",
                      def && def->kind ? def->kind : "(unnamed)");
    size_t len = strlen(def->kind);
    if (len >= sizeof kind_names[0] || strspn(def->kind, "abcdefghijklmnopqrstuvwxyz0123456789_") != len)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "layer %s: a kind is 1-31 characters of a-z, 0-9 and _", def->kind);
    if (def->min_in < 1 || def->max_in < def->min_in || def->max_in > NP_LAYER_MAX_IN)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "layer %s: inputs [%d, %d] must lie in [1, %d] with min <= max", def->kind,
                      def->min_in, def->max_in, NP_LAYER_MAX_IN);
    for (size_t k = 0; k < sizeof reserved / sizeof *reserved; k++)
        if (!strcmp(reserved[k], def->kind))
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "layer %s: the name is reserved (the engine's pool and bce tasks, a "
                          "model file's mlp macro)",
                          def->kind);
    for (int k = 0; k < n_kinds; k++)
        if (!strcmp(registry[k].kind, def->kind))
            return np_err(err, NP_STATUS_BAD_INPUT, "layer %s: this kind is already registered",
                          def->kind);
    /* hyper-parameter names: a-z, 0-9, - and _, unique over both lists, not a slot name */
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < NP_LAYER_MAX_HP; i++) {
            const char *nm = r ? def->hp_real[i] : def->hp_int[i];
            if (!nm) continue;
            size_t nl = strlen(nm);
            if (!nl || nl >= HP_NAME_MAX ||
                strspn(nm, "abcdefghijklmnopqrstuvwxyz0123456789-_") != nl ||
                ((nm[0] == 'i' || nm[0] == 'f') && nl > 1 && strspn(nm + 1, "0123456789") == nl - 1) ||
                !strcmp(nm, "kind") || !strcmp(nm, "in"))
                return np_err(err, NP_STATUS_BAD_INPUT,
                              "layer %s: hyper-parameter name '%s' (%s slot %d): use 1-%d "
                              "characters of a-z, 0-9, - and _, not kind, in, i<k> or f<k>",
                              def->kind, nm, r ? "real" : "integer", i, HP_NAME_MAX - 1);
            for (int r2 = 0; r2 < 2; r2++)
                for (int j = 0; j < NP_LAYER_MAX_HP; j++) {
                    const char *o = r2 ? def->hp_real[j] : def->hp_int[j];
                    if (o && (r2 != r || j != i) && !strcmp(o, nm))
                        return np_err(err, NP_STATUS_BAD_INPUT,
                                      "layer %s: hyper-parameter name '%s' is given twice",
                                      def->kind, nm);
                }
        }
    if (n_kinds == NP_MAX_LAYER_KINDS)
        return np_err(err, NP_STATUS_UNSUPPORTED, "layer %s: the registry is full (%d kinds)",
                      def->kind, NP_MAX_LAYER_KINDS);
    memcpy(kind_names[n_kinds], def->kind, len + 1);
    registry[n_kinds] = *def;
    registry[n_kinds].kind = kind_names[n_kinds]; /* the caller's strings may not last */
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < NP_LAYER_MAX_HP; i++) {
            const char *nm = r ? def->hp_real[i] : def->hp_int[i];
            const char **dst = r ? &registry[n_kinds].hp_real[i] : &registry[n_kinds].hp_int[i];
            if (!nm) continue;
            snprintf(hp_names[n_kinds][r][i], HP_NAME_MAX, "%s", nm);
            *dst = hp_names[n_kinds][r][i];
        }
    if (def->help) {
        snprintf(help_text[n_kinds], sizeof help_text[0], "%s", def->help);
        registry[n_kinds].help = help_text[n_kinds];
    }
    if (!registry[n_kinds].init) registry[n_kinds].init = np_layer_init_default;
    /* published after it is whole: workers may read the registry meanwhile */
    __atomic_store_n(&n_kinds, n_kinds + 1, __ATOMIC_RELEASE);
    return NP_OK;
}

static void add_builtins(void) {
    for (size_t i = 0; i < sizeof builtin / sizeof *builtin; i++) {
        np_error e;
        if (add_kind(builtin[i], &e)) fprintf(stderr, "nestpipe: built-in %s\n", e.msg);
    }
}

static pthread_mutex_t register_lock = PTHREAD_MUTEX_INITIALIZER;

np_status np_layer_register(const np_layer_def *def, np_error *err) {
    pthread_once(&builtin_once, add_builtins);
    pthread_mutex_lock(&register_lock);
    np_status st = add_kind(def, err);
    pthread_mutex_unlock(&register_lock);
    return st;
}

int np_layer_index(const char *kind) {
    pthread_once(&builtin_once, add_builtins);
    if (!kind) return -1;
    int n = __atomic_load_n(&n_kinds, __ATOMIC_ACQUIRE);
    for (int k = 0; k < n; k++)
        if (!strcmp(registry[k].kind, kind)) return k;
    return -1;
}

const np_layer_def *np_layer_get(int index) {
    pthread_once(&builtin_once, add_builtins);
    return index >= 0 && index < __atomic_load_n(&n_kinds, __ATOMIC_ACQUIRE) ? &registry[index]
                                                                           : NULL;
}

int np_layer_count(void) {
    pthread_once(&builtin_once, add_builtins);
    return __atomic_load_n(&n_kinds, __ATOMIC_ACQUIRE);
}

const np_layer_def *np_layer_find(const char *kind) {
    return np_layer_get(np_layer_index(kind));
}

const char *np_layer_kind_at(int i) {
    const np_layer_def *d = np_layer_get(i);
    return d ? d->kind : NULL;
}

np_status np_layer_hp_set(const char *kind, np_layer_hp *hp, const char *name, const char *value,
                          np_error *err) {
    const np_layer_def *d = np_layer_find(kind);
    if (!d) return np_err(err, NP_STATUS_BAD_INPUT, "unknown layer kind '%s'", kind ? kind : "");
    int real = -1, slot = -1;
    for (int r = 0; r < 2 && slot < 0; r++)
        for (int i = 0; i < NP_LAYER_MAX_HP; i++) {
            const char *nm = r ? d->hp_real[i] : d->hp_int[i];
            if (nm && !strcmp(nm, name)) {
                real = r;
                slot = i;
                break;
            }
        }
    if (slot < 0 && (name[0] == 'i' || name[0] == 'f') && name[1] >= '0' && name[1] <= '9' &&
        (!name[2] || (name[2] >= '0' && name[2] <= '9' && !name[3]))) {
        slot = atoi(name + 1);
        real = name[0] == 'f';
        if (slot >= NP_LAYER_MAX_HP) slot = -1;
    }
    if (slot < 0) {
        char known[256] = "";
        size_t at = 0;
        for (int r = 0; r < 2; r++)
            for (int i = 0; i < NP_LAYER_MAX_HP && at < sizeof known; i++) {
                const char *nm = r ? d->hp_real[i] : d->hp_int[i];
                if (nm) at += (size_t)snprintf(known + at, sizeof known - at, "%s%s", at ? ", " : "", nm);
            }
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "%s: no hyper-parameter '%s' (%s%si0-i%d, f0-f%d)", kind, name, known,
                      at ? "; or the slots " : "slots ", NP_LAYER_MAX_HP - 1, NP_LAYER_MAX_HP - 1);
    }
    char *end;
    errno = 0;
    if (real) {
        double v = strtod(value, &end);
        if (!value[0] || *end || errno || !isfinite(v))
            return np_err(err, NP_STATUS_BAD_INPUT, "%s: %s = '%s': expected a number", kind, name,
                          value);
        hp->f[slot] = v;
    } else {
        long v = strtol(value, &end, 10);
        if (!value[0] || *end || errno || v < INT_MIN || v > INT_MAX)
            return np_err(err, NP_STATUS_BAD_INPUT, "%s: %s = '%s': expected an integer", kind,
                          name, value);
        hp->i[slot] = (int)v;
    }
    return NP_OK;
}

float np_init_normal(uint64_t seed, uint64_t stream, uint64_t e, double sd) {
    return (float)(sd * np_rng_normal(seed, stream, e));
}

float np_init_uniform(uint64_t seed, uint64_t stream, uint64_t e, double lo, double hi) {
    return (float)(lo + (hi - lo) * np_rng_uniform(seed, stream, e));
}

/* After DLRM's reference code: W ~ N(0, sqrt(2/(in+out))), b ~ N(0, sqrt(1/out)). */
float np_layer_init_default(const np_layer_hp *hp, const np_layer_shape *s, int p, uint64_t seed,
                            uint64_t stream, uint64_t e) {
    (void)hp;
    const np_param_shape *ps = &s->param[p];
    double sd = ps->fan_in > 0 ? sqrt(2.0 / (ps->fan_in + ps->fan_out)) : sqrt(1.0 / ps->fan_out);
    return np_init_normal(seed, stream, e, sd);
}

size_t np_param_count(const np_param_shape *p) {
    return (size_t)p->dims[0] * (size_t)(p->ndim == 2 ? p->dims[1] : 1);
}
