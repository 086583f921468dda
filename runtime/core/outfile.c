/* Output files written whole or not at all (np_outfile_*, nestpipe.h): a temporary beside
 * the output, named after this process (PATH.np-HOST-PID.XXXXXX), fsynced and renamed.
 * Also here: the temporaries removed on SIGINT/SIGTERM/SIGHUP and, when their process is
 * gone, by a later run writing the same output; the check that an output is not one of
 * the inputs; and the probe that an output can be created at all. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "runtime/core/util.h"

/* ---------------------------------------------------------------- the temporaries of this
 * process, for the signal handler: fixed buffers (a handler may not allocate), a slot is 1
 * once its name is whole and 0 again before it is reused. unlink is async-signal-safe. */
#define N_TEMPS 32
static char temp_name[N_TEMPS][PATH_MAX];
static int temp_used[N_TEMPS];

static void temp_track(const char *name) {
    size_t len = strlen(name);
    if (len >= PATH_MAX) return; /* cannot be kept: a signal would leave it */
    for (int i = 0; i < N_TEMPS; i++) {
        int free_slot = 0;
        if (__atomic_compare_exchange_n(&temp_used[i], &free_slot, 2, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            memcpy(temp_name[i], name, len + 1);
            __atomic_store_n(&temp_used[i], 1, __ATOMIC_RELEASE);
            return;
        }
    }
}

static void temp_untrack(const char *name) {
    for (int i = 0; i < N_TEMPS; i++)
        if (__atomic_load_n(&temp_used[i], __ATOMIC_ACQUIRE) == 1 && !strcmp(temp_name[i], name)) {
            __atomic_store_n(&temp_used[i], 0, __ATOMIC_RELEASE);
            return;
        }
}

static const int clean_sigs[3] = {SIGINT, SIGTERM, SIGHUP};
static struct sigaction clean_old[3];

static void clean_handler(int sig) {
    int saved = errno;
    for (int i = 0; i < N_TEMPS; i++)
        if (__atomic_load_n(&temp_used[i], __ATOMIC_ACQUIRE) == 1) unlink(temp_name[i]);
    for (int k = 0; k < 3; k++)
        if (clean_sigs[k] == sig) sigaction(sig, &clean_old[k], NULL);
    errno = saved;
    raise(sig); /* what the signal did before: end the process (128 + sig), mostly */
}

void np_outfile_clean_on_signals(void) {
    static int done;
    if (__atomic_exchange_n(&done, 1, __ATOMIC_ACQ_REL)) return;
    for (int k = 0; k < 3; k++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = clean_handler;
        sigemptyset(&sa.sa_mask);
        if (sigaction(clean_sigs[k], NULL, &clean_old[k]) ||
            clean_old[k].sa_handler == SIG_IGN) /* nohup: still ignored */
            continue;
        sigaction(clean_sigs[k], &sa, NULL);
    }
}

/* ---------------------------------------------------------------- names */

/* "np-HOST-PID": how this process marks its temporaries (host: letters, digits, '-', '_',
 * '.', at most 32 of them). */
static void temp_tag(char *out, size_t cap, long pid) {
    struct utsname u;
    char host[33] = "";
    if (!uname(&u)) snprintf(host, sizeof host, "%.32s", u.nodename);
    for (char *c = host; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '-' || *c == '_' || *c == '.'))
            *c = '_';
    snprintf(out, cap, "np-%s-%ld", host[0] ? host : "host", pid);
}

const char *np_path_folder(const char *path, char *dir, size_t cap) {
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, cap, ".");
    else if (slash == path)
        snprintf(dir, cap, "/");
    else
        snprintf(dir, cap, "%.*s", (int)(slash - path), path);
    return slash ? slash + 1 : path;
}

static void split_path(const char *path, char *dir, size_t cap, const char **base) {
    *base = np_path_folder(path, dir, cap);
}

/* 1 when name (after the prefix's n bytes) is "PID.XXXXXX": a pid that fits an int, then
 * mkstemp's six letters or digits; *pid is set. */
static int temp_suffix(const char *name, long *pid) {
    char *end;
    errno = 0;
    *pid = strtol(name, &end, 10);
    if (end == name || errno || *pid <= 0 || *pid > INT_MAX || end[0] != '.' || strlen(end) != 7)
        return 0;
    for (int i = 1; i < 7; i++)
        if (!((end[i] >= 'a' && end[i] <= 'z') || (end[i] >= 'A' && end[i] <= 'Z') ||
              (end[i] >= '0' && end[i] <= '9')))
            return 0;
    return 1;
}

/* Removes the temporaries of path that processes of this host left when killed while
 * writing it, saying so: PATH.np-HOST-PID.XXXXXX, a regular file of this user, whose PID
 * is gone and whose lock (np_outfile holds one on its temporary while it writes) can be
 * taken. The lock is what protects a live writer whose PID this process cannot see (another
 * PID namespace, another machine of the same name on a shared file system); another host's
 * name, a live PID and any other file are left alone. */
static void remove_stale(const char *path) {
    char dir[PATH_MAX], tag[96], prefix[NAME_MAX + 1];
    const char *base;
    split_path(path, dir, sizeof dir, &base);
    temp_tag(tag, sizeof tag, 0);
    tag[strlen(tag) - 1] = 0; /* "np-HOST-" without the pid */
    int n = snprintf(prefix, sizeof prefix, "%s.%s", base, tag);
    if (n < 0 || (size_t)n >= sizeof prefix) return;
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        long pid;
        if (strncmp(e->d_name, prefix, (size_t)n) || !temp_suffix(e->d_name + n, &pid)) continue;
        if (pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char full[PATH_MAX + NAME_MAX + 2];
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        int fd = open(full, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        struct stat sb;
        if (fd < 0) continue;
        if (!fstat(fd, &sb) && S_ISREG(sb.st_mode) && sb.st_uid == geteuid() &&
            !flock(fd, LOCK_SH | LOCK_NB) && !unlink(full)) /* (shared: NFS emulates flock
                                                               with fcntl locks, whose
                                                               exclusive kind needs a writer) */
            fprintf(stderr,
                    "nestpipe: removed %s, a temporary of process %ld of this host, which was "
                    "stopped while writing %s (%.1f MB)\n",
                    full, pid, path, (double)sb.st_size / 1e6);
        close(fd); /* and its lock */
    }
    closedir(d);
}

/* A temporary beside path (PATH.np-HOST-PID.XXXXXX; PATH.XXXXXX when that name is too long
 * for the file system), locked (flock) while open: its descriptor, or -1 with errno set.
 * *tmp is allocated. */
static int make_temp(const char *path, char **tmp) {
    char tag[96];
    temp_tag(tag, sizeof tag, (long)getpid());
    size_t len = strlen(path) + strlen(tag) + 9;
    if (!(*tmp = malloc(len))) return -1;
    snprintf(*tmp, len, "%s.%s.XXXXXX", path, tag);
    int fd = mkstemp(*tmp);
    if (fd < 0 && errno == ENAMETOOLONG) {
        snprintf(*tmp, len, "%s.XXXXXX", path);
        fd = mkstemp(*tmp);
    }
    if (fd < 0) return -1;
    (void)flock(fd, LOCK_EX | LOCK_NB); /* new, so free; where locks are not supported, the
                                           PID check alone decides */
    temp_track(*tmp);
    return fd;
}

/* ---------------------------------------------------------------- np_outfile */

np_status np_outfile_open(np_outfile *o, const char *path, const char *what, np_error *err) {
    *o = (np_outfile){.path = path, .what = what};
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode)) {
        if (!(o->f = fopen(path, "wb")))
            return np_err(err, NP_STATUS_IO, "%s: cannot open %s: %s", what, path,
                          strerror(errno));
        return NP_OK;
    }
    remove_stale(path);
    int fd = make_temp(path, &o->tmp);
    if (fd < 0) {
        np_status st = np_err(err, NP_STATUS_IO, "%s: cannot create a temporary file beside %s: %s",
                              what, path, strerror(errno));
        free(o->tmp);
        *o = (np_outfile){0};
        return st;
    }
    /* mkstemp makes 0600; give the file what fopen would have. umask can only be read by
     * setting it: set it back at once (no thread of ours creates files meanwhile). */
    mode_t mask = umask(0);
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0 || !(o->f = fdopen(fd, "w+b"))) {
        np_status st = np_err(err, NP_STATUS_IO, "%s: cannot open %s: %s", what, o->tmp,
                              strerror(errno));
        close(fd);
        np_outfile_discard(o);
        return st;
    }
    return NP_OK;
}

np_status np_outfile_commit(np_outfile *o, int failed, np_error *err) {
    if (!o->f) return np_err(err, NP_STATUS_INTERNAL, "%s: no file open", o->what);
    int saved = failed ? errno : 0;
    int bad = failed || fflush(o->f) != 0 || ferror(o->f) ||
              (o->tmp && fsync(fileno(o->f)) != 0);
    if (bad && !saved) saved = errno;
    /* the temporary stays locked until it has its name (a later run's remove_stale) */
    int lock = o->tmp ? dup(fileno(o->f)) : -1;
    if (fclose(o->f) != 0 && !bad) {
        bad = 1;
        saved = errno;
    }
    o->f = NULL;
    if (!bad && o->tmp && rename(o->tmp, o->path) != 0) {
        bad = 1;
        saved = errno;
    }
    if (lock >= 0) close(lock);
    if (!bad) {
        if (o->tmp) temp_untrack(o->tmp);
        free(o->tmp);
        *o = (np_outfile){0};
        return NP_OK;
    }
    np_status st = np_err(err, NP_STATUS_IO, "%s: cannot write %s: %s", o->what, o->path,
                          saved ? strerror(saved) : "write error");
    np_outfile_discard(o);
    return st;
}

void np_outfile_discard(np_outfile *o) {
    if (!o) return;
    if (o->f) fclose(o->f);
    if (o->tmp) {
        remove(o->tmp);
        temp_untrack(o->tmp);
    }
    free(o->tmp);
    *o = (np_outfile){0};
}

np_status np_outfile_probe(const char *path, const char *what, np_error *err) {
    struct stat sb;
    if (!path[0]) return NP_OK;
    if (!stat(path, &sb) && !S_ISREG(sb.st_mode)) {
        if (S_ISDIR(sb.st_mode))
            return np_err(err, NP_STATUS_IO, "%s %s: is a folder, not a file", what, path);
        if (access(path, W_OK)) /* a device or FIFO, written in place: not opened here */
            return np_err(err, NP_STATUS_IO, "%s %s: cannot write it: %s", what, path,
                          strerror(errno));
        return NP_OK;
    }
    remove_stale(path);
    char *tmp = NULL;
    int fd = make_temp(path, &tmp);
    if (fd < 0) {
        np_status st = np_err(err, NP_STATUS_IO, "%s %s: cannot create a file there: %s", what,
                              path, strerror(errno));
        free(tmp);
        return st;
    }
    close(fd);
    unlink(tmp);
    temp_untrack(tmp);
    free(tmp);
    return NP_OK;
}

/* ---------------------------------------------------------------- outputs over inputs */

/* The folder of path (stat'ed) and its name. */
static int folder_of(const char *path, struct stat *sb, const char **base) {
    char dir[PATH_MAX];
    split_path(path, dir, sizeof dir, base);
    return stat(dir, sb);
}

int np_same_file(const char *a, const char *b) {
    if (!a[0] || !b[0]) return 0;
    struct stat sa, sb;
    int ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
    if (ea && eb) /* only files: two outputs may both be /dev/null */
        return S_ISREG(sa.st_mode) && S_ISREG(sb.st_mode) && sa.st_dev == sb.st_dev &&
               sa.st_ino == sb.st_ino;
    if (ea || eb) return 0;
    const char *na, *nb; /* neither exists: the same name in the same folder */
    return !folder_of(a, &sa, &na) && !folder_of(b, &sb, &nb) && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino && !strcmp(na, nb);
}

np_status np_output_not_input(const char *out, const char *out_what, const char *in,
                              const char *in_what, np_error *err) {
    if (!np_same_file(out, in)) return NP_OK;
    return np_err(err, NP_STATUS_BAD_INPUT,
                  "%s %s is the same file as %s %s, which it would replace; write it to another "
                  "path",
                  out_what, out, in_what, in);
}
