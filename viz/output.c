/* output.c: the viewer's files written whole or not at all, and checked
 * before rendering (see dtv_output.h). Every write, fchmod, fsync, close
 * and rename result is checked; a failure removes the temporary file. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "dtv_output.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

/* The directory part of path ("." for a bare name, "/" at the root),
 * trailing slashes ignored. */
static void dtv__dir_of(const char *path, char *out, size_t n)
{
    snprintf(out, n, "%s", path);
    size_t len = strlen(out);
    while (len > 1 && out[len - 1] == '/') out[--len] = '\0';
    char *slash = strrchr(out, '/');
    if (!slash) snprintf(out, n, ".");
    else if (slash == out) out[1] = '\0';
    else *slash = '\0';
}

/* The file a write to path lands in: a symbolic link's target when it
 * resolves, else path. */
static void dtv__target(const char *path, char *out, size_t n)
{
    struct stat ls;
    char real[PATH_MAX];
    if (lstat(path, &ls) == 0 && S_ISLNK(ls.st_mode) && realpath(path, real)) snprintf(out, n, "%s", real);
    else snprintf(out, n, "%s", path);
}

/* 0666 less the process's umask (read back by setting it, once). */
static mode_t dtv__new_mode(void)
{
    static mode_t mode = (mode_t)-1;
    if (mode == (mode_t)-1) {
        const mode_t mask = umask(022);
        umask(mask);
        mode = 0666 & ~mask;
    }
    return mode;
}

/* All n bytes, or -1 with errno (a write of 0 bytes counts as ENOSPC). */
static int dtv__write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        const ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -1;
        if (w == 0) {
            errno = ENOSPC;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

dt_status dtv_out_check_file(const char *flag, const char *path)
{
    if (!path[0]) return DT_FAIL(DT_ERR_IO, "%s '': expected a file name", flag);
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return DT_FAIL(DT_ERR_IO, "%s %s: is a directory, expected a file", flag, path);
        if (!S_ISREG(st.st_mode)) { /* written in place */
            if (access(path, W_OK) != 0)
                return DT_FAIL(DT_ERR_IO, "%s %s: cannot write it (%s)", flag, path, strerror(errno));
            return DT_OK;
        }
    } else if (errno != ENOENT) {
        return DT_FAIL(DT_ERR_IO, "%s %s: %s", flag, path, strerror(errno));
    }
    /* a temporary file is made beside the target, then renamed */
    char target[PATH_MAX], dir[PATH_MAX];
    dtv__target(path, target, sizeof target);
    dtv__dir_of(target, dir, sizeof dir);
    if (stat(dir, &st) != 0)
        return DT_FAIL(DT_ERR_IO, "%s %s: the directory %s %s", flag, path, dir,
                       errno == ENOENT ? "does not exist" : strerror(errno));
    if (!S_ISDIR(st.st_mode)) return DT_FAIL(DT_ERR_IO, "%s %s: %s is not a directory", flag, path, dir);
    if (access(dir, W_OK | X_OK) != 0)
        return DT_FAIL(DT_ERR_IO, "%s %s: cannot write in the directory %s (%s)", flag, path, dir, strerror(errno));
    return DT_OK;
}

dt_status dtv_out_check_dir(const char *flag, const char *dir)
{
    if (!dir[0]) return DT_FAIL(DT_ERR_IO, "%s '': expected a directory name", flag);
    struct stat st;
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) return DT_FAIL(DT_ERR_IO, "%s %s: exists and is not a directory", flag, dir);
        if (access(dir, W_OK | X_OK) != 0)
            return DT_FAIL(DT_ERR_IO, "%s %s: cannot write in the directory (%s)", flag, dir, strerror(errno));
        return DT_OK;
    }
    if (errno != ENOENT) return DT_FAIL(DT_ERR_IO, "%s %s: %s", flag, dir, strerror(errno));
    char parent[PATH_MAX];
    dtv__dir_of(dir, parent, sizeof parent);
    if (stat(parent, &st) != 0 || !S_ISDIR(st.st_mode))
        return DT_FAIL(DT_ERR_IO, "%s %s: cannot create the directory: %s does not exist", flag, dir, parent);
    if (access(parent, W_OK | X_OK) != 0)
        return DT_FAIL(DT_ERR_IO, "%s %s: cannot create the directory in %s (%s)", flag, dir, parent,
                       strerror(errno));
    return DT_OK;
}

dt_status dtv_out_stage(const char *path, const void *buf, size_t n, char *tmp, size_t tmp_size)
{
    tmp[0] = '\0';
    char target[PATH_MAX], dir[PATH_MAX];
    dtv__target(path, target, sizeof target);
    struct stat st;
    mode_t mode = dtv__new_mode();
    if (stat(target, &st) == 0) {
        if (!S_ISREG(st.st_mode))
            return DT_FAIL(DT_ERR_IO, "%s: cannot write it: exists and is not a regular file", path);
        mode = st.st_mode & 07777; /* keep an existing file's permissions */
    }
    dtv__dir_of(target, dir, sizeof dir);
    const char *base = strrchr(target, '/') ? strrchr(target, '/') + 1 : target;
    const int len = snprintf(tmp, tmp_size, "%s/.%s.XXXXXX", dir, base);
    if (len < 0 || (size_t)len >= tmp_size) {
        tmp[0] = '\0';
        return DT_FAIL(DT_ERR_IO, "%s: the path is too long", path);
    }
    const int fd = mkstemp(tmp);
    if (fd < 0) {
        const int e = errno;
        tmp[0] = '\0';
        return DT_FAIL(DT_ERR_IO, "%s: cannot create a temporary file in %s (%s)", path, dir, strerror(e));
    }
    const char *step = "write";
    int bad = dtv__write_all(fd, buf, n);
    if (!bad && (bad = fchmod(fd, mode)) != 0) step = "set the permissions of";
    if (!bad && (bad = fsync(fd)) != 0) step = "write"; /* a delayed ENOSPC shows here */
    int e = errno;
    if (close(fd) != 0 && !bad) {
        bad = 1;
        e = errno;
        step = "write";
    }
    if (bad) {
        unlink(tmp);
        tmp[0] = '\0';
        return DT_FAIL(DT_ERR_IO, "%s: cannot %s it (%s)", path, step, strerror(e));
    }
    return DT_OK;
}

dt_status dtv_out_commit(const char *tmp, const char *path)
{
    char target[PATH_MAX];
    dtv__target(path, target, sizeof target);
    if (rename(tmp, target) != 0) {
        const int e = errno;
        unlink(tmp);
        return DT_FAIL(DT_ERR_IO, "%s: cannot rename the finished file onto it (%s)", path, strerror(e));
    }
    return DT_OK;
}

void dtv_out_discard(const char *tmp)
{
    if (tmp && tmp[0]) unlink(tmp);
}

dt_status dtv_out_write(const char *path, const void *buf, size_t n)
{
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        /* a device or a FIFO: cannot be renamed over, so written in place */
        const int fd = open(path, O_WRONLY | O_TRUNC);
        if (fd < 0) return DT_FAIL(DT_ERR_IO, "%s: cannot open it (%s)", path, strerror(errno));
        int bad = dtv__write_all(fd, buf, n);
        int e = errno;
        if (close(fd) != 0 && !bad) {
            bad = 1;
            e = errno;
        }
        if (bad) return DT_FAIL(DT_ERR_IO, "%s: cannot write it (%s)", path, strerror(e));
        return DT_OK;
    }
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return DT_FAIL(DT_ERR_IO, "%s: is a directory, expected a file", path);
    char tmp[PATH_MAX + 16];
    DT_CHECK(dtv_out_stage(path, buf, n, tmp, sizeof tmp));
    return dtv_out_commit(tmp, path);
}
