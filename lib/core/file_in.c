/* file_in.c: input files read whole, and outputs checked against inputs
 * (dt_file.h: dt_file_read_whole, dt_file_check_not_input).
 *
 * Owns: the one reader of every whole input file the programs take
 * (configs, hardware files, traces, checkpoint manifests, `latest`), and
 * the check that an output names none of a program's inputs.
 *
 * Invariants: only a regular file is read. A FIFO, a device (/dev/zero,
 * /dev/urandom), a socket or a directory is refused before any byte is
 * read: a FIFO with no writer would block for ever and a device never
 * ends. open(2) uses O_NONBLOCK so that a FIFO cannot block before fstat
 * refuses it. The file is read up to the size fstat reported (one that
 * grows meanwhile is read as it was) and never past max bytes; the buffer
 * ends with a NUL byte not counted in *n. Two paths are the same file when
 * stat(2) gives the same device and inode (names, links and ./ do not
 * matter). */
#define _POSIX_C_SOURCE 200809L
#include "dt_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* "WHAT PATH" or "PATH" for messages. */
#define DT__WHO(what, path) (what) ? (what) : "", (what) ? " " : "", (path)

const char *dt_file_kind_name(unsigned mode)
{
    return S_ISDIR(mode)    ? "directory"
           : S_ISFIFO(mode) ? "pipe (FIFO)"
           : S_ISCHR(mode)  ? "character device"
           : S_ISBLK(mode)  ? "block device"
           : S_ISSOCK(mode) ? "socket"
           : S_ISLNK(mode)  ? "symbolic link"
           : S_ISREG(mode)  ? "regular file"
                            : "special file";
}

dt_status dt_file_open_input(const char *path, const char *what, int *fd_out, size_t *size_out)
{
    *fd_out = -1;
    if (size_out) *size_out = 0;
    if (!path || !path[0])
        return DT_FAIL(DT_ERR_INVALID, "%s%s'': expected a file name", what ? what : "", what ? " " : "");
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        const int e = errno;
        if (e == ENOENT) return DT_FAIL(DT_ERR_IO, "%s%s%s: no such file", DT__WHO(what, path));
        return DT_FAIL(DT_ERR_IO, "%s%s%s: cannot open for reading (%s)", DT__WHO(what, path), strerror(e));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        const int e = errno;
        close(fd);
        return DT_FAIL(DT_ERR_IO, "%s%s%s: cannot access (%s)", DT__WHO(what, path), strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return DT_FAIL(DT_ERR_IO, "%s%s%s: is a %s, expected a regular file", DT__WHO(what, path),
                       dt_file_kind_name((unsigned)sb.st_mode));
    }
    const int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK); /* a regular file: blocking reads as usual */
    *fd_out = fd;
    if (size_out) *size_out = (size_t)sb.st_size;
    return DT_OK;
}

dt_status dt_file_read_whole(const char *path, const char *what, size_t max, char **out, size_t *n_out)
{
    *out = NULL;
    if (n_out) *n_out = 0;
    int fd;
    size_t size;
    DT_CHECK(dt_file_open_input(path, what, &fd, &size));
    if (max && size > max) {
        close(fd);
        return DT_FAIL(DT_ERR_FORMAT, "%s%s%s: %zu bytes, more than the %zu this input may have", DT__WHO(what, path),
                       size, max);
    }
    char *buf = malloc(size + 1);
    if (!buf) {
        close(fd);
        return DT_FAIL(DT_ERR_NOMEM, "%s%s%s: out of memory for %zu bytes", DT__WHO(what, path), size);
    }
    size_t n = 0;
    while (n < size) {
        const ssize_t got = read(fd, buf + n, size - n);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            const int e = errno;
            free(buf);
            close(fd);
            return DT_FAIL(DT_ERR_IO, "%s%s%s: read error after %zu bytes (%s)", DT__WHO(what, path), n, strerror(e));
        }
        if (got == 0) break; /* shrank since fstat: what is there */
        n += (size_t)got;
    }
    close(fd);
    buf[n] = '\0';
    *out = buf;
    if (n_out) *n_out = n;
    return DT_OK;
}

dt_status dt_file_check_not_input(const char *out, const char *out_what, const char *in, const char *in_what)
{
    if (!out || !in) return DT_OK;
    struct stat so, si;
    if (stat(out, &so) != 0 || stat(in, &si) != 0) return DT_OK; /* a new output cannot be an existing input */
    if (so.st_dev != si.st_dev || so.st_ino != si.st_ino) return DT_OK;
    if (!S_ISREG(so.st_mode)) return DT_OK; /* /dev/null as both: nothing is overwritten */
    return DT_FAIL(DT_ERR_INVALID, "%s%s%s: is the same file as %s%s%s; an output may not overwrite an input",
                   DT__WHO(out_what, out), DT__WHO(in_what, in));
}
