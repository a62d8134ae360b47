/* file.c: output files written whole or not at all (dt_file.h).
 *
 * Owns: the one writer of every output file (a temporary file beside the
 * target, then rename), its deferred form for sets of files placed all or
 * none (dt_file_stage_whole), the up-front checks that an output path can
 * be written, and mkdir -p for output directories.
 *
 * Invariants: while a dt_file_out is open, only its temporary file
 * (".NAME.tmp.PID.N" beside the target, created O_EXCL so two writers
 * never share one) changes; the target changes only by rename(2) after
 * the data was flushed, fsynced and closed without error, so it is always
 * either its old contents or the complete new ones. The target is PATH,
 * or the file PATH's symbolic links lead to (the links stay). A replaced
 * file keeps its permission bits; a new one gets 0666 less the umask
 * (open's mode). A failure is sticky (every later call fails) and removes
 * the temporary file. Paths that exist and are not regular files, and
 * links to an open descriptor (/dev/stdout), are written in place
 * (tmp NULL). A staged file is complete, synced and closed (f NULL): only
 * its rename is left.
 *
 * The temporary files of the open and staged outputs are also listed
 * process-wide (dt__live), so that a process about to end without
 * returning (MPI_Abort, a signal) can remove them:
 * dt_file_out_remove_temporaries. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "dt_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

struct dt_file_out {
    FILE *f;      /* NULL once staged */
    char *path;   /* as given, for messages */
    char *target; /* the file replaced: PATH, or where its links lead */
    char *tmp;    /* NULL: written in place */
    char *dir;    /* the target's directory, fsynced after the rename */
    const char *what;
    int failed; /* a write failed: the file is incomplete */
};

/* "WHAT PATH" or "PATH" for messages. */
#define DT__WHO(what, path) (what) ? (what) : "", (what) ? " " : "", (path)

static dt_status dt__file_fail(dt_file_out *f, const char *doing, int err)
{
    f->failed = 1;
    return DT_FAIL(DT_ERR_IO, "%s%s%s%s (%s)", DT__WHO(f->what, f->path), doing, strerror(err ? err : EIO));
}

/* The directory part of path ("." when there is none). */
static char *dt__file_dirname(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

/* Is PATH's directory in /proc? A link there (/proc/self/fd/1, /dev/fd/1)
 * names an open descriptor, not a file that can be replaced. */
static int dt__file_in_proc(const char *path)
{
    char *dir = dt__file_dirname(path);
    char *real = dir ? realpath(dir, NULL) : NULL;
    const int yes = real && (strcmp(real, "/proc") == 0 || strncmp(real, "/proc/", 6) == 0);
    free(real);
    free(dir);
    return yes;
}

/* Where a write to PATH lands (*target, malloc'd): PATH, or the end of its
 * chain of symbolic links, which need not exist yet (fopen would create
 * it); the links stay and their target is replaced. *fd_link: the chain
 * reaches a descriptor's link (/dev/stdout, /dev/fd/N), and *target is
 * that link, to be written in place: replacing the file behind it would
 * lose what the descriptor's other writers put there. */
static dt_status dt__file_target(const char *path, const char *what, char **target, int *fd_link)
{
    *target = NULL;
    *fd_link = 0;
    char *cur = strdup(path);
    for (int hops = 0; cur; hops++) {
        struct stat ls;
        if (lstat(cur, &ls) != 0 || !S_ISLNK(ls.st_mode)) break;
        if (dt__file_in_proc(cur)) {
            *fd_link = 1;
            break;
        }
        char link[PATH_MAX];
        const ssize_t len = hops < 40 ? readlink(cur, link, sizeof link) : -1;
        if (len < 0 || (size_t)len >= sizeof link) {
            const int e = hops >= 40 ? ELOOP : len < 0 ? errno : ENAMETOOLONG;
            free(cur);
            return DT_FAIL(DT_ERR_IO, "%s%s%s: %s", DT__WHO(what, path), strerror(e));
        }
        link[len] = '\0';
        const int rel = link[0] != '/'; /* relative to the link's own directory */
        char *dir = rel ? dt__file_dirname(cur) : NULL;
        const size_t cap = (dir ? strlen(dir) + 1 : 0) + (size_t)len + 1;
        char *next = rel && !dir ? NULL : malloc(cap);
        if (next) snprintf(next, cap, "%s%s%s", rel ? dir : "", rel ? "/" : "", link);
        free(dir);
        free(cur);
        cur = next;
    }
    if (!cur) return DT_FAIL(DT_ERR_NOMEM, "%s%s%s: out of memory", DT__WHO(what, path));
    *target = cur;
    return DT_OK;
}

/* dt_file_check_output once PATH's target is known. */
static dt_status dt__file_check_target(const char *path, const char *what, const char *target, int fd_link)
{
    struct stat sb;
    if (stat(target, &sb) == 0) {
        if (S_ISDIR(sb.st_mode))
            return DT_FAIL(DT_ERR_IO, "%s%s%s: is a directory (expected a file name)", DT__WHO(what, path));
        if (fd_link || !S_ISREG(sb.st_mode)) { /* written in place */
            if (access(target, W_OK) != 0)
                return DT_FAIL(DT_ERR_IO, "%s%s%s: cannot write (%s)", DT__WHO(what, path), strerror(errno));
            return DT_OK;
        }
    } else if (errno != ENOENT && errno != ENOTDIR) { /* ENOTDIR: a parent is a file, said below */
        return DT_FAIL(DT_ERR_IO, "%s%s%s: %s", DT__WHO(what, path), strerror(errno));
    }
    char *dir = dt__file_dirname(target);
    if (!dir) return DT_FAIL(DT_ERR_NOMEM, "%s%s%s: out of memory", DT__WHO(what, path));
    dt_status st = DT_OK;
    if (stat(dir, &sb) != 0)
        st = DT_FAIL(DT_ERR_IO, "%s%s%s: directory %s: %s (expected an existing directory)", DT__WHO(what, path), dir,
                     strerror(errno));
    else if (!S_ISDIR(sb.st_mode)) st = DT_FAIL(DT_ERR_IO, "%s%s%s: %s is not a directory", DT__WHO(what, path), dir);
    else if (access(dir, W_OK | X_OK) != 0)
        st = DT_FAIL(DT_ERR_IO, "%s%s%s: cannot create files in %s (%s)", DT__WHO(what, path), dir, strerror(errno));
    free(dir);
    return st;
}

dt_status dt_file_check_output(const char *path, const char *what)
{
    if (!path || !path[0])
        return DT_FAIL(DT_ERR_INVALID, "%s%s'': expected a file name", what ? what : "", what ? " " : "");
    char *target = NULL;
    int fd_link = 0;
    DT_CHECK(dt__file_target(path, what, &target, &fd_link));
    const dt_status st = dt__file_check_target(path, what, target, fd_link);
    free(target);
    return st;
}

dt_status dt_file_check_output_dir(const char *dir, const char *what, int parents)
{
    if (!dir || !dir[0])
        return DT_FAIL(DT_ERR_INVALID, "%s%s'': expected a directory", what ? what : "", what ? " " : "");
    char *p = strdup(dir), *parent = NULL;
    if (!p) return DT_FAIL(DT_ERR_NOMEM, "%s%s%s: out of memory", DT__WHO(what, dir));
    dt_status st = DT_OK;
    struct stat sb;
    /* DIR, then each ancestor until one exists */
    for (int up = 0;; up++) {
        if (stat(p, &sb) == 0) {
            if (!S_ISDIR(sb.st_mode))
                st = up == 0 ? DT_FAIL(DT_ERR_IO, "%s%s%s: exists and is not a directory", DT__WHO(what, dir))
                             : DT_FAIL(DT_ERR_IO, "%s%s%s: %s is not a directory", DT__WHO(what, dir), p);
            else if (up > 1 && !parents) /* only DIR itself may be made */
                st = DT_FAIL(DT_ERR_IO, "%s%s%s: directory %s: %s (expected an existing directory)", DT__WHO(what, dir),
                             parent, strerror(ENOENT));
            else if (access(p, W_OK | X_OK) != 0)
                st = DT_FAIL(DT_ERR_IO, "%s%s%s: cannot create files in %s (%s)", DT__WHO(what, dir), p,
                             strerror(errno));
            break;
        }
        struct stat ls;
        if (up == 0 && errno == ENOENT && lstat(p, &ls) == 0 && S_ISLNK(ls.st_mode)) { /* a dangling link */
            st = DT_FAIL(DT_ERR_IO, "%s%s%s: is a symbolic link to a missing directory (make what it names, or "
                         "name a directory)", DT__WHO(what, dir));
            break;
        }
        if (errno != ENOENT && errno != ENOTDIR) { /* ENOTDIR: an ancestor is a file, found above */
            st = DT_FAIL(DT_ERR_IO, "%s%s%s: %s: %s", DT__WHO(what, dir), p, strerror(errno));
            break;
        }
        char *slash = strrchr(p, '/');
        while (slash && slash > p && slash[1] == '\0') { /* "a/b/" */
            *slash = '\0';
            slash = strrchr(p, '/');
        }
        if (!slash) {
            p[0] = '.', p[1] = '\0';
        } else if (slash == p) {
            p[1] = '\0';
        } else {
            *slash = '\0';
        }
        if (up == 0 && !(parent = strdup(p))) {
            st = DT_FAIL(DT_ERR_NOMEM, "%s%s%s: out of memory", DT__WHO(what, dir));
            break;
        }
    }
    free(parent);
    free(p);
    return st;
}

dt_status dt_file_mkdir_p(const char *dir)
{
    char *p = strdup(dir ? dir : "");
    if (!p) return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", dir);
    for (char *c = p + 1; *c; c++) { /* the parents first (failures show at the end) */
        if (*c != '/') continue;
        *c = '\0';
        (void)mkdir(p, 0777);
        *c = '/';
    }
    free(p);
    if (mkdir(dir, 0777) == 0 || errno == EEXIST) {
        struct stat sb;
        if (stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode)) return DT_OK;
        return DT_FAIL(DT_ERR_IO, "%s: exists and is not a directory", dir);
    }
    return DT_FAIL(DT_ERR_IO, "%s: cannot create the directory (%s)", dir, strerror(errno));
}

/* The temporary files that exist now: a slot holds a dt_file_out's tmp
 * from its creation until it is renamed or removed; NULL: free. Lock-free
 * atomics, so that a signal handler may read them. More outputs open at
 * once than slots (never in these programs) go unlisted: only
 * dt_file_out_remove_temporaries misses them. */
#define DT__LIVE_MAX 256
static _Atomic(char *) dt__live[DT__LIVE_MAX];

static void dt__live_add(char *tmp)
{
    for (int i = 0; i < DT__LIVE_MAX; i++) {
        char *none = NULL;
        if (atomic_compare_exchange_strong(&dt__live[i], &none, tmp)) return;
    }
}

static void dt__live_remove(const char *tmp)
{
    if (!tmp) return;
    for (int i = 0; i < DT__LIVE_MAX; i++) {
        char *expected = (char *)tmp;
        if (atomic_compare_exchange_strong(&dt__live[i], &expected, NULL)) return;
    }
}

void dt_file_out_remove_temporaries(void)
{
    /* async-signal-safe: atomic exchanges and unlink(2); the strings are
     * not freed (their dt_file_out still owns them) */
    for (int i = 0; i < DT__LIVE_MAX; i++) {
        char *tmp = atomic_exchange(&dt__live[i], NULL);
        if (tmp) unlink(tmp);
    }
}

static void dt__file_free(dt_file_out *f)
{
    dt__live_remove(f->tmp); /* renamed or removed by now */
    free(f->path);
    free(f->target);
    free(f->tmp);
    free(f->dir);
    free(f);
}

/* dt_file_out_open; staged: for dt_file_stage_whole, which cannot wait
 * with a file written in place, so refuses one before opening it. */
static dt_status dt__file_open(const char *path, const char *what, int staged, dt_file_out **out)
{
    *out = NULL;
    if (!path || !path[0])
        return DT_FAIL(DT_ERR_INVALID, "%s%s'': expected a file name", what ? what : "", what ? " " : "");
    dt_file_out *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return DT_FAIL(DT_ERR_NOMEM, "%s%s%s: out of memory", DT__WHO(what, path));
    }
    f->what = what;
    int fd_link = 0;
    dt_status st = dt__file_target(path, what, &f->target, &fd_link);
    if (st == DT_OK) st = dt__file_check_target(path, what, f->target, fd_link);
    if (st == DT_OK && !(f->dir = dt__file_dirname(f->target)))
        st = DT_FAIL(DT_ERR_NOMEM, "%s%s%s: out of memory", DT__WHO(what, path));
    struct stat sb;
    const int exists = st == DT_OK && stat(f->target, &sb) == 0;
    const int in_place = fd_link || (exists && !S_ISREG(sb.st_mode));
    if (st == DT_OK && in_place && staged)
        st = DT_FAIL(DT_ERR_IO, "%s%s%s: exists and is not a regular file (expected one that can be replaced)",
                     DT__WHO(what, path));
    if (st != DT_OK) {
        dt__file_free(f);
        return st;
    }
    int fd = -1;
    const char *fail = NULL; /* what could not be done, for the message */
    if (in_place) {          /* a device, FIFO or descriptor: appended to */
        fd = open(f->target, O_WRONLY | O_APPEND | O_CLOEXEC);
        if (fd < 0) fail = "cannot open for writing";
    } else {
        const char *base = strrchr(f->target, '/') ? strrchr(f->target, '/') + 1 : f->target;
        static unsigned serial; /* names differ within a process; O_EXCL between processes */
        const size_t cap = strlen(f->dir) + strlen(base) + 64;
        if (!(f->tmp = malloc(cap))) {
            dt__file_free(f);
            return DT_FAIL(DT_ERR_NOMEM, "%s%s%s: out of memory", DT__WHO(what, path));
        }
        for (int tries = 0; tries < 100; tries++) {
            snprintf(f->tmp, cap, "%s/.%s.tmp.%ld.%u", f->dir, base, (long)getpid(), serial++);
            fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666); /* less the umask */
            if (fd >= 0 || errno != EEXIST) break;
        }
        if (fd >= 0) dt__live_add(f->tmp);
        if (fd < 0) fail = "cannot create";
        else if (exists && fchmod(fd, sb.st_mode & 07777) != 0) /* the replaced file's permissions */
            fail = "cannot set the permissions of";
    }
    if (!fail && !(f->f = fdopen(fd, "w"))) fail = in_place ? "cannot open for writing" : "cannot create";
    if (fail) {
        const int e = errno;
        st = f->tmp ? DT_FAIL(DT_ERR_IO, "%s%s%s: %s %s (%s)", DT__WHO(what, path), fail, f->tmp, strerror(e))
                    : DT_FAIL(DT_ERR_IO, "%s%s%s: %s (%s)", DT__WHO(what, path), fail, strerror(e));
        if (fd >= 0) close(fd);
        if (fd >= 0 && f->tmp) unlink(f->tmp);
        dt__file_free(f);
        return st;
    }
    *out = f;
    return DT_OK;
}

dt_status dt_file_out_open(const char *path, const char *what, dt_file_out **out)
{
    return dt__file_open(path, what, 0, out);
}

FILE *dt_file_out_stream(dt_file_out *f) { return f->f; }

/* A write after a failure, or to a staged file (whose stream is closed). */
static dt_status dt__file_refuse(const dt_file_out *f)
{
    if (!f->f) return DT_FAIL(DT_ERR_INVALID, "%s%s%s: already staged", DT__WHO(f->what, f->path));
    return DT_FAIL(DT_ERR_IO, "%s%s%s: an earlier write failed", DT__WHO(f->what, f->path));
}

dt_status dt_file_out_write(dt_file_out *f, const void *buf, size_t n)
{
    if (f->failed || !f->f) return dt__file_refuse(f);
    errno = 0;
    if (n && fwrite(buf, 1, n, f->f) != n) return dt__file_fail(f, ": write failed", errno);
    return DT_OK;
}

dt_status dt_file_out_flush(dt_file_out *f)
{
    if (f->failed || !f->f) return dt__file_refuse(f);
    errno = 0;
    if (fflush(f->f) != 0 || ferror(f->f)) return dt__file_fail(f, ": write failed", errno);
    return DT_OK;
}

void dt_file_out_abort(dt_file_out *f)
{
    if (!f) return;
    if (f->f) fclose(f->f);
    dt__live_remove(f->tmp);
    if (f->tmp) unlink(f->tmp);
    dt__file_free(f);
}

/* The first half of commit: flush, fsync and close, each checked; the
 * stream is gone after it (f->f NULL) whether or not it failed. */
static dt_status dt__file_finish(dt_file_out *f)
{
    dt_status st = f->failed ? dt__file_refuse(f) : dt_file_out_flush(f);
    /* a device (/dev/null) cannot be synced: EINVAL there is no error */
    if (st == DT_OK && fsync(fileno(f->f)) != 0 && (f->tmp || (errno != EINVAL && errno != ENOTSUP)))
        st = dt__file_fail(f, ": fsync failed", errno);
    const int closed = fclose(f->f);
    f->f = NULL;
    if (closed != 0 && st == DT_OK) st = dt__file_fail(f, ": close failed", errno);
    return st;
}

dt_status dt_file_out_commit(dt_file_out *f)
{
    dt_status st = f->f ? dt__file_finish(f) : DT_OK; /* a staged file is finished */
    if (st == DT_OK && f->tmp && rename(f->tmp, f->target) != 0)
        st = DT_FAIL(DT_ERR_IO, "%s%s%s: cannot rename %s to it (%s)", DT__WHO(f->what, f->path), f->tmp,
                     strerror(errno));
    if (st != DT_OK) {
        if (f->tmp) unlink(f->tmp);
        dt__file_free(f);
        return st;
    }
    if (f->tmp) { /* the rename durable */
        int dfd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            if (fsync(dfd) != 0 && errno != EINVAL && errno != ENOTSUP)
                st = DT_FAIL(DT_ERR_IO, "%s%s%s: fsync of %s failed (%s)", DT__WHO(f->what, f->path), f->dir,
                             strerror(errno));
            close(dfd);
        }
    }
    dt__file_free(f);
    return st;
}

dt_status dt_file_write_whole(const char *path, const char *what, const void *buf, size_t n)
{
    dt_file_out *f = NULL;
    DT_CHECK(dt_file_out_open(path, what, &f));
    dt_status st = dt_file_out_write(f, buf, n);
    if (st != DT_OK) {
        dt_file_out_abort(f);
        return st;
    }
    return dt_file_out_commit(f);
}

dt_status dt_file_stage_whole(const char *path, const char *what, const void *buf, size_t n, dt_file_out **out)
{
    dt_file_out *f = NULL;
    DT_CHECK(dt__file_open(path, what, 1, &f));
    dt_status st = dt_file_out_write(f, buf, n);
    if (st == DT_OK) st = dt__file_finish(f);
    if (st != DT_OK) {
        dt_file_out_abort(f);
        return st;
    }
    *out = f;
    return DT_OK;
}
