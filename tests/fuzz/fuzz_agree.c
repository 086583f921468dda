/* The ranks' agreement on the configuration (runtime/train/agree.c), in one process: the input is
 * two config files separated by a NUL byte, one per rank. Besides not crashing, the verdict
 * must be right: the ranks disagree exactly when some key that must match has two values,
 * and the message then names such a key (or the graph, or a file's size). */
#include "../../runtime/train/agree.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t na = nul ? (size_t)(nul - data) : size;
    np_config c[2];
    np_error e;
    np_config_defaults(&c[0]);
    np_config_defaults(&c[1]);
    c[0].ranks = c[1].ranks = 2;
    c[1].rank = 1;
    if (np_config_load(&c[0], fuzz_file(data, na, "agree0.ini"), &e) ||
        np_config_load(&c[1], fuzz_file(nul ? nul + 1 : data, nul ? size - na - 1 : 0, "agree1.ini"),
                       &e))
        return 0;
    /* what must differ for a disagreement: a key's value (the graph and the files' sizes
     * follow from the keys here: the same paths on one host) */
    const char *first = NULL;
    for (int i = 0; np_config_key_at(i) && !first; i++) {
        const char *key = np_config_key_at(i)->name;
        char a[2 * NP_PATH_MAX], b[2 * NP_PATH_MAX];
        if (np_agree_key_is_own(key)) continue;
        int ga = np_config_get(&c[0], key, a, sizeof a), gb = np_config_get(&c[1], key, b, sizeof b);
        if (ga || gb || strcmp(a, b)) first = key;
    }
    np_status st = np_config_agree_local(c, 2, &e);
    if (st != NP_OK && st != NP_STATUS_BAD_INPUT) abort();
    if ((st == NP_OK) != !first) {
        fprintf(stderr, "agreement says %s, but key %s differs\n", e.msg, first ? first : "none");
        abort();
    }
    if (st && strncmp(e.msg, "ranks disagree on ", 18)) abort();
    return 0;
}
