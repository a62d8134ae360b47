/* file_dir.c: the no-follow operations on a directory dtrain owns
 * (dt_dir.h), the only code that creates, renames or removes entries of a
 * save directory.
 *
 * Invariants: every call works relative to an open directory descriptor
 * (openat, mkdirat, unlinkat, renameat, fstatat) and never follows a
 * symbolic link below it: openat with O_NOFOLLOW (a link is ELOOP, refused
 * with its name), fstatat with AT_SYMLINK_NOFOLLOW. A file is created with
 * O_EXCL, so no existing file (a hard link to something else included) is
 * ever truncated. Removal descends one level only: a checkpoint directory
 * holds files, so a subdirectory in it is refused rather than walked. */
#define _POSIX_C_SOURCE 200809L
#include "dt_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static dt_status dt__dir_link(const char *dir, const char *name)
{
    return DT_FAIL(DT_ERR_IO,
                   "%s/%s: is a symbolic link; dtrain never writes or removes through links in a save directory "
                   "(remove the link)",
                   dir, name);
}

dt_status dt_dir_open(const char *path, int *fd)
{
    *fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*fd < 0) return DT_FAIL(DT_ERR_IO, "%s: cannot open the directory (%s)", path, strerror(errno));
    return DT_OK;
}

dt_status dt_dir_list(int dfd, const char *dir, DIR **out)
{
    /* "." opened anew: a stream of its own (a dup of dfd would share dfd's offset) */
    const int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    *out = fd >= 0 ? fdopendir(fd) : NULL;
    if (*out) return DT_OK;
    const int e = errno;
    if (fd >= 0) close(fd);
    return DT_FAIL(DT_ERR_IO, "%s: cannot list the directory (%s)", dir, strerror(e));
}

dt_status dt_dir_kind_of(int dfd, const char *dir, const char *name, dt_dir_kind *kind)
{
    struct stat sb;
    *kind = DT_DIR_NONE;
    if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) return DT_OK;
        return DT_FAIL(DT_ERR_IO, "%s/%s: cannot access (%s)", dir, name, strerror(errno));
    }
    *kind = S_ISREG(sb.st_mode)   ? DT_DIR_FILE
            : S_ISDIR(sb.st_mode) ? DT_DIR_DIR
            : S_ISLNK(sb.st_mode) ? DT_DIR_LINK
                                  : DT_DIR_OTHER;
    return DT_OK;
}

dt_status dt_dir_expect(int dfd, const char *dir, const char *name, dt_dir_kind want)
{
    dt_dir_kind k;
    DT_CHECK(dt_dir_kind_of(dfd, dir, name, &k));
    if (k == DT_DIR_NONE || k == want) return DT_OK;
    if (k == DT_DIR_LINK) return dt__dir_link(dir, name);
    return DT_FAIL(DT_ERR_IO, "%s/%s: is a %s, expected a %s (dtrain's own name in a save directory)", dir, name,
                   k == DT_DIR_DIR    ? "directory"
                   : k == DT_DIR_FILE ? "regular file"
                                      : "special file",
                   want == DT_DIR_DIR ? "directory" : "regular file");
}

/* DT_OK unless NAME is a link (then the link's message). */
static dt_status dt__dir_not_link(int dfd, const char *dir, const char *name)
{
    dt_dir_kind k;
    DT_CHECK(dt_dir_kind_of(dfd, dir, name, &k));
    return k == DT_DIR_LINK ? dt__dir_link(dir, name) : DT_OK;
}

dt_status dt_dir_open_sub(int dfd, const char *dir, const char *name, int *fd)
{
    *fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (*fd >= 0) return DT_OK;
    const int e = errno;
    if (e == ELOOP || e == ENOTDIR) DT_CHECK(dt_dir_expect(dfd, dir, name, DT_DIR_DIR)); /* says which */
    return DT_FAIL(DT_ERR_IO, "%s/%s: cannot open the directory (%s)", dir, name, strerror(e));
}

dt_status dt_dir_mkdir(int dfd, const char *dir, const char *name)
{
    if (mkdirat(dfd, name, 0777) == 0) return DT_OK;
    const int e = errno;
    if (e == EEXIST) DT_CHECK(dt__dir_not_link(dfd, dir, name));
    return DT_FAIL(DT_ERR_IO, "%s/%s: cannot create the directory (%s)", dir, name, strerror(e));
}

dt_status dt_dir_create(int dfd, const char *dir, const char *name, int *fd)
{
    *fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (*fd >= 0) return DT_OK;
    const int e = errno;
    if (e == EEXIST) DT_CHECK(dt__dir_not_link(dfd, dir, name));
    return DT_FAIL(DT_ERR_IO, "%s/%s: cannot create (%s)", dir, name, strerror(e));
}

dt_status dt_dir_unlink(int dfd, const char *dir, const char *name)
{
    if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT) return DT_OK;
    return DT_FAIL(DT_ERR_IO, "%s/%s: cannot remove (%s)", dir, name, strerror(errno));
}

dt_status dt_dir_remove_tree(int dfd, const char *dir, const char *name)
{
    dt_dir_kind k;
    DT_CHECK(dt_dir_kind_of(dfd, dir, name, &k));
    if (k == DT_DIR_NONE) return DT_OK;
    int sub;
    DT_CHECK(dt_dir_open_sub(dfd, dir, name, &sub));
    DIR *d = fdopendir(sub);
    if (!d) {
        const int e = errno;
        close(sub);
        return DT_FAIL(DT_ERR_IO, "%s/%s: cannot list (%s)", dir, name, strerror(e));
    }
    dt_status st = DT_OK;
    struct dirent *e;
    while (st == DT_OK && (e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0 || errno == ENOENT) continue; /* a link: the link only */
        st = errno == EISDIR || errno == EPERM
                 ? DT_FAIL(DT_ERR_IO, "%s/%s/%s: a directory inside a checkpoint directory; not removed", dir, name,
                           e->d_name)
                 : DT_FAIL(DT_ERR_IO, "%s/%s/%s: cannot remove (%s)", dir, name, e->d_name, strerror(errno));
    }
    closedir(d); /* closes sub */
    if (st == DT_OK && unlinkat(dfd, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
        st = DT_FAIL(DT_ERR_IO, "%s/%s: cannot remove the directory (%s)", dir, name, strerror(errno));
    return st;
}

dt_status dt_dir_rename(int dfd, const char *dir, const char *from, const char *to)
{
    dt_dir_kind k;
    DT_CHECK(dt_dir_kind_of(dfd, dir, to, &k));
    if (k == DT_DIR_LINK) return dt__dir_link(dir, to);
    if (renameat(dfd, from, dfd, to) == 0) return DT_OK;
    return DT_FAIL(DT_ERR_IO, "%s/%s: cannot rename to %s (%s)", dir, from, to, strerror(errno));
}

static dt_status dt__dir_write_fd(int fd, const char *dir, const char *name, const void *buf, size_t n)
{
    const unsigned char *p = buf;
    while (n > 0) {
        const ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
            return DT_FAIL(DT_ERR_IO, "%s/%s: write failed (%s)", dir, name, w < 0 ? strerror(errno) : "no progress");
        p += w;
        n -= (size_t)w;
    }
    if (fsync(fd) != 0) return DT_FAIL(DT_ERR_IO, "%s/%s: fsync failed (%s)", dir, name, strerror(errno));
    return DT_OK;
}

dt_status dt_dir_write_whole(int dfd, const char *dir, const char *name, const void *buf, size_t n)
{
    DT_CHECK(dt_dir_expect(dfd, dir, name, DT_DIR_FILE));
    static unsigned serial;
    char tmp[512];
    if ((size_t)snprintf(tmp, sizeof tmp, ".%s.tmp.%ld.%u", name, (long)getpid(), serial++) >= sizeof tmp)
        return DT_FAIL(DT_ERR_INVALID, "%s/%s: name too long", dir, name);
    int fd;
    DT_CHECK(dt_dir_create(dfd, dir, tmp, &fd));
    dt_status st = dt__dir_write_fd(fd, dir, tmp, buf, n);
    if (close(fd) != 0 && st == DT_OK) st = DT_FAIL(DT_ERR_IO, "%s/%s: close failed (%s)", dir, tmp, strerror(errno));
    if (st == DT_OK) st = dt_dir_rename(dfd, dir, tmp, name);
    if (st != DT_OK) {
        (void)unlinkat(dfd, tmp, 0);
        return st;
    }
    return dt_dir_fsync(dfd, dir);
}

dt_status dt_dir_fsync(int dfd, const char *dir)
{
    if (fsync(dfd) != 0 && errno != EINVAL && errno != ENOTSUP)
        return DT_FAIL(DT_ERR_IO, "%s: fsync of the directory failed (%s)", dir, strerror(errno));
    return DT_OK;
}
