/* file.c: output files written whole or not at all (dt_file.h).
 *
 * Owns: the temporary-file-then-rename writer every output file goes
 * through, and the up-front checks that an output path can be written.
 *
 * Invariants: while a dt_file_out is open, only its temporary file
 * (".NAME.tmp.PID.N" beside NAME, created O_EXCL so two writers never
 * share one) changes; NAME changes only by rename(2) after the data was
 * flushed, fsynced and closed without error, so NAME is always either
 * its old contents or the complete new ones. A failure is sticky (every
 * later call fails) and removes the temporary file. Paths that exist and
 * are not regular files are written in place (f->in_place). */
#define _POSIX_C_SOURCE 200809L
#include "dt_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct dt_file_out {
    FILE *f;
    char *path, *tmp; /* tmp NULL: written in place */
    char *dir;        /* the directory to fsync after the rename */
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

dt_status dt_file_check_output(const char *path, const char *what)
{
    if (!path || !path[0])
        return DT_FAIL(DT_ERR_INVALID, "%s%s'': expected a file name", what ? what : "", what ? " " : "");
    struct stat sb;
    if (stat(path, &sb) == 0) {
        if (S_ISDIR(sb.st_mode))
            return DT_FAIL(DT_ERR_IO, "%s%s%s: is a directory (expected a file name)", DT__WHO(what, path));
        if (!S_ISREG(sb.st_mode)) {
            if (access(path, W_OK) != 0)
                return DT_FAIL(DT_ERR_IO, "%s%s%s: cannot write (%s)", DT__WHO(what, path), strerror(errno));
            return DT_OK; /* written in place */
        }
    }
    char *dir = dt__file_dirname(path);
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

dt_status dt_file_check_output_dir(const char *dir, const char *what)
{
    if (!dir || !dir[0])
        return DT_FAIL(DT_ERR_INVALID, "%s%s'': expected a directory", what ? what : "", what ? " " : "");
    char *p = strdup(dir);
    if (!p) return DT_FAIL(DT_ERR_NOMEM, "%s%s%s: out of memory", DT__WHO(what, dir));
    dt_status st = DT_OK;
    struct stat sb;
    /* DIR, then each ancestor until one exists */
    for (;;) {
        if (stat(p, &sb) == 0) {
            const int self = strcmp(p, dir) == 0;
            if (!S_ISDIR(sb.st_mode))
                st = self ? DT_FAIL(DT_ERR_IO, "%s%s%s: exists and is not a directory", DT__WHO(what, dir))
                          : DT_FAIL(DT_ERR_IO, "%s%s%s: %s is not a directory", DT__WHO(what, dir), p);
            else if (access(p, W_OK | X_OK) != 0)
                st = DT_FAIL(DT_ERR_IO, "%s%s%s: cannot create files in %s (%s)", DT__WHO(what, dir), p,
                             strerror(errno));
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
    }
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
        (void)mkdir(p, 0755);
        *c = '/';
    }
    free(p);
    if (mkdir(dir, 0755) == 0 || errno == EEXIST) {
        struct stat sb;
        if (stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode)) return DT_OK;
        return DT_FAIL(DT_ERR_IO, "%s: exists and is not a directory", dir);
    }
    return DT_FAIL(DT_ERR_IO, "%s: cannot create the directory (%s)", dir, strerror(errno));
}

static void dt__file_free(dt_file_out *f)
{
    free(f->path);
    free(f->tmp);
    free(f->dir);
    free(f);
}

dt_status dt_file_out_open(const char *path, const char *what, dt_file_out **out)
{
    *out = NULL;
    DT_CHECK(dt_file_check_output(path, what));
    dt_file_out *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path)) || !(f->dir = dt__file_dirname(path))) {
        if (f) dt__file_free(f);
        return DT_FAIL(DT_ERR_NOMEM, "%s%s%s: out of memory", DT__WHO(what, path));
    }
    f->what = what;
    struct stat sb;
    int fd = -1;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) { /* a device or FIFO: in place */
        fd = open(path, O_WRONLY | O_CLOEXEC);
    } else {
        const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        static unsigned serial; /* names differ within a process; O_EXCL between processes */
        const size_t cap = strlen(f->dir) + strlen(base) + 64;
        f->tmp = malloc(cap);
        for (int tries = 0; f->tmp && tries < 100; tries++) {
            snprintf(f->tmp, cap, "%s/.%s.tmp.%ld.%u", f->dir, base, (long)getpid(), serial++);
            fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
            if (fd >= 0 || errno != EEXIST) break;
        }
        if (!f->tmp) {
            dt__file_free(f);
            return DT_FAIL(DT_ERR_NOMEM, "%s%s%s: out of memory", DT__WHO(what, path));
        }
    }
    if (fd < 0 || !(f->f = fdopen(fd, "w"))) {
        const int e = errno;
        dt_status st =
            f->tmp ? DT_FAIL(DT_ERR_IO, "%s%s%s: cannot create %s (%s)", DT__WHO(what, path), f->tmp, strerror(e))
                   : DT_FAIL(DT_ERR_IO, "%s%s%s: cannot open for writing (%s)", DT__WHO(what, path), strerror(e));
        if (fd >= 0) close(fd);
        if (fd >= 0 && f->tmp) unlink(f->tmp);
        dt__file_free(f);
        return st;
    }
    *out = f;
    return DT_OK;
}

FILE *dt_file_out_stream(dt_file_out *f) { return f->f; }

dt_status dt_file_out_write(dt_file_out *f, const void *buf, size_t n)
{
    if (f->failed) return DT_FAIL(DT_ERR_IO, "%s%s%s: an earlier write failed", DT__WHO(f->what, f->path));
    errno = 0;
    if (n && fwrite(buf, 1, n, f->f) != n) return dt__file_fail(f, ": write failed", errno);
    return DT_OK;
}

dt_status dt_file_out_flush(dt_file_out *f)
{
    if (f->failed) return DT_FAIL(DT_ERR_IO, "%s%s%s: an earlier write failed", DT__WHO(f->what, f->path));
    errno = 0;
    if (fflush(f->f) != 0 || ferror(f->f)) return dt__file_fail(f, ": write failed", errno);
    return DT_OK;
}

void dt_file_out_abort(dt_file_out *f)
{
    if (!f) return;
    if (f->f) fclose(f->f);
    if (f->tmp) unlink(f->tmp);
    dt__file_free(f);
}

dt_status dt_file_out_commit(dt_file_out *f)
{
    dt_status st = f->failed ? DT_FAIL(DT_ERR_IO, "%s%s%s: an earlier write failed", DT__WHO(f->what, f->path))
                             : dt_file_out_flush(f);
    /* a device (/dev/null) cannot be synced: EINVAL there is no error */
    if (st == DT_OK && fsync(fileno(f->f)) != 0 && (f->tmp || (errno != EINVAL && errno != ENOTSUP)))
        st = dt__file_fail(f, ": fsync failed", errno);
    const int closed = fclose(f->f);
    f->f = NULL;
    if (closed != 0 && st == DT_OK) st = dt__file_fail(f, ": close failed", errno);
    if (st == DT_OK && f->tmp && rename(f->tmp, f->path) != 0)
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
