/* Registered buffers of the StarPU engine: starpu_malloc'ed memory (pinned where a device
 * would want it) registered as a vector handle on main memory, grown in place when a batch
 * brings more keys. Not here: which buffers exist (engine.c, chunk.c). */
#include <string.h>

#include "runtime/core/util.h"
#include "runtime/engine/engine_impl.h"

np_status np_buf_reg(np_buf *b, size_t count, size_t elem, const char *what, np_error *err) {
    if (count == 0) count = 1; /* StarPU vectors hold at least one element */
    size_t bytes = count * elem;
    if (count > UINT32_MAX)
        return np_err(err, NP_STATUS_UNSUPPORTED, "%s: %zu elements exceed a StarPU vector", what,
                      count);
    if (starpu_malloc(&b->mem, bytes))
        return np_err(err, NP_STATUS_NO_MEMORY, "out of memory allocating %s (%zu bytes)", what,
                      bytes);
    memset(b->mem, 0, bytes);
    b->count = count;
    b->elem = elem;
    starpu_vector_data_register(&b->h, STARPU_MAIN_RAM, (uintptr_t)b->mem, (uint32_t)count, elem);
    return NP_OK;
}

void np_buf_unreg(np_buf *b) {
    if (b->h) starpu_data_unregister(b->h);
    if (b->mem) starpu_free(b->mem);
    b->h = NULL;
    b->mem = NULL;
    b->count = 0;
}

np_status np_buf_grow(np_buf *b, size_t count, size_t elem, const char *what, np_error *err) {
    if (b->h && count <= b->count) return NP_OK;
    np_buf old = *b;
    if (old.h) starpu_data_unregister(old.h); /* makes main memory hold the latest data */
    b->h = NULL;
    np_status st = np_buf_reg(b, count, elem, what, err);
    if (!st && old.mem) memcpy(b->mem, old.mem, old.count * old.elem);
    if (old.mem) starpu_free(old.mem);
    return st;
}
