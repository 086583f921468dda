/* Configuration internals shared by runtime/core/config_*.c: how a key's value is stored (the key
 * table's rows), the value parsers, and the named values of the enumerated keys.
 * Not in the library's API: np_config_set / np_config_get are the only way in. */
#ifndef NP_CORE_CONFIG_IMPL_H
#define NP_CORE_CONFIG_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "nestpipe/nestpipe.h"

/* How a key's value is stored in np_config. */
typedef enum field {
    F_INT,    /* a signed integer of `size` bytes (an enum is an int) */
    F_SEED,   /* uint64_t */
    F_REAL,   /* double */
    F_BOOL,   /* int 0|1 */
    F_ENUM,   /* int: the index of the value in `names` */
    F_PATH,   /* char[NP_PATH_MAX] */
    F_CUSTOM, /* `parse` and `show` */
} field;

typedef struct key_def {
    np_config_key k;
    field f;
    size_t off, size;
    long long ilo, ihi;        /* F_INT: the range */
    double flo, fhi;           /* F_REAL: the range; flo excluded when lo_open */
    int lo_open;
    const char *const *names;  /* F_ENUM: values in enum order, NULL-terminated */
    const char *expect;        /* the error's "expected ..." */
    int (*parse)(np_config *c, const char *v);            /* F_CUSTOM: 0, or -1 when bad */
    void (*show)(const np_config *c, char *buf, size_t n); /* F_CUSTOM */
} key_def;

/* The key table (runtime/core/config_keys.c), in the help's order. */
extern const key_def np_cfg_keys[];
extern const int np_cfg_n_keys;
const key_def *np_cfg_find_key(const char *name);

/* ---- value parsers and custom keys (runtime/core/config_values.c): 0, or -1 when bad */
/* The "bad value" error: "WHERE: bad value 'V' for KEY: expected EXPECT". */
np_status np_cfg_bad(np_error *err, const char *where, const char *key, const char *value,
                     const char *expect);
int np_cfg_parse_i64(const char *s, long long lo, long long hi, long long *out);
int np_cfg_parse_u64(const char *s, uint64_t *out);
int np_cfg_parse_f64(const char *s, double lo, double hi, double *out);
int np_cfg_parse_bool(const char *s, int *out);
int np_cfg_parse_sizes(const char *s, int *out, int min_n, int max_n, int *n_out);
int np_cfg_copy_path(char *dst, const char *src);
int np_cfg_parse_spec(np_data_kind *kind, char *path, const char *none_word, const char *v);
void np_cfg_show_spec(np_data_kind kind, const char *path, const char *none_word, char *buf,
                      size_t n);
int np_cfg_parse_data(np_config *c, const char *v);
void np_cfg_show_data(const np_config *c, char *buf, size_t n);
int np_cfg_parse_eval_data(np_config *c, const char *v);
void np_cfg_show_eval_data(const np_config *c, char *buf, size_t n);
int np_cfg_parse_rows(np_config *c, const char *v);
void np_cfg_show_rows(const np_config *c, char *buf, size_t n);
void np_cfg_show_sizes(const int *s, int count, char *buf, size_t n);
int np_cfg_parse_bottom(np_config *c, const char *v);
void np_cfg_show_bottom(const np_config *c, char *buf, size_t n);
int np_cfg_parse_top(np_config *c, const char *v);
void np_cfg_show_top(const np_config *c, char *buf, size_t n);
int np_cfg_parse_deep(np_config *c, const char *v);
void np_cfg_show_deep(const np_config *c, char *buf, size_t n);
int np_cfg_parse_eval_every(np_config *c, const char *v);
void np_cfg_show_eval_every(const np_config *c, char *buf, size_t n);
int np_cfg_parse_windows(np_config *c, const char *v);
void np_cfg_show_windows(const np_config *c, char *buf, size_t n);
int np_cfg_parse_sched(np_config *c, const char *v);
void np_cfg_show_sched(const np_config *c, char *buf, size_t n);
int np_cfg_parse_gpus(np_config *c, const char *v);
void np_cfg_show_gpus(const np_config *c, char *buf, size_t n);
int np_cfg_parse_place(np_config *c, const char *v);
void np_cfg_show_place(const np_config *c, char *buf, size_t n);
int np_cfg_parse_plugin(np_config *c, const char *v);
void np_cfg_show_plugin(const np_config *c, char *buf, size_t n);
int np_cfg_parse_dense_features(np_config *c, const char *v);
void np_cfg_show_dense_features(const np_config *c, char *buf, size_t n);
int np_cfg_parse_split_rows(np_config *c, const char *v);
void np_cfg_show_split_rows(const np_config *c, char *buf, size_t n);

/* Named values, in enum order, NULL-terminated (place_kinds: NP_PLACE_KINDS names). */
extern const char *const np_cfg_data_names[];
extern const char *const np_cfg_model_names[];
extern const char *const np_cfg_loss_names[];
extern const char *const np_cfg_optim_names[];
extern const char *const np_cfg_engine_names[];
extern const char *const np_cfg_pipeline_names[];
extern const char *const np_cfg_precision_names[];
extern const char *const np_cfg_cluster_names[];
extern const char *const np_cfg_shard_names[];
extern const char *const np_cfg_a2a_names[];
extern const char *const np_cfg_exchange_names[];
extern const char *const np_cfg_priorities_names[];
extern const char *const np_cfg_comm_names[];
extern const char *const np_cfg_place_kinds[NP_PLACE_KINDS];
extern const char *const np_cfg_arch_names[];

#endif
