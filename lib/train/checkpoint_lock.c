/* checkpoint_lock.c: one job at a time in a save directory, and no links
 * where it writes (dt_checkpoint_lock_take, dt_checkpoint_lock_release,
 * dt_checkpoint_check_dir; dt_checkpoint.h).
 *
 * The lock is flock(2) on DIR/dtrain.lock, exclusive and non-blocking,
 * held by the process that commits checkpoints (rank 0) for the job's
 * life and released by the kernel when that process ends however it
 * ends, so a killed job's lock goes with its last process. The file holds
 * "HOST:PID\n" of the holder for the refusal message; the file itself is
 * never removed (removing it would let two jobs lock two different files
 * of the same name). util-linux's flock(1) on the same file is the same
 * lock.
 *
 * Invariants: dtrain.lock is opened relative to DIR's descriptor with
 * O_NOFOLLOW and written only when it is a regular file with one name (a
 * symbolic or hard link would have the holder's line overwrite another
 * file). Before the lock is taken, every entry of DIR with a name dtrain
 * writes or removes (dtrain.lock, latest, .latest.tmp.*, iter_*) is
 * checked: a symbolic link among them refuses the directory with one line,
 * so a run never trains for hours to fail at its first save. */
#define _DEFAULT_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dt_checkpoint.h"
#include "dt_dir.h"
#include "dt_file.h"

/* Is NAME one dtrain writes or removes in a save directory? */
static int dt__ck_owned_name(const char *name)
{
    return !strcmp(name, "latest") || !strcmp(name, "dtrain.lock") || !strncmp(name, ".latest.tmp.", 12) ||
           (!strncmp(name, "iter_", 5) && name[5] >= '0' && name[5] <= '9'); /* iter_X, .tmp, .old */
}

dt_status dt_checkpoint_check_dir(int dfd, const char *dir)
{
    DIR *d;
    DT_CHECK(dt_dir_list(dfd, dir, &d));
    dt_status st = DT_OK;
    struct dirent *e;
    while (st == DT_OK && (e = readdir(d)) != NULL) {
        if (!dt__ck_owned_name(e->d_name)) continue; /* not dtrain's: never touched */
        dt_dir_kind k;
        st = dt_dir_kind_of(dfd, dir, e->d_name, &k);
        if (st == DT_OK && k == DT_DIR_LINK) st = dt_dir_expect(dfd, dir, e->d_name, DT_DIR_FILE); /* its line */
    }
    closedir(d);
    return st;
}

/* Open DIR/dtrain.lock (dfd: DIR's descriptor) without following a link. */
static dt_status dt__lock_open(int dfd, const char *dir, const char *path, int *fd_out)
{
    int fd = openat(dfd, "dtrain.lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0) {
        const int e = errno;
        if (e == ELOOP) DT_CHECK(dt_dir_expect(dfd, dir, "dtrain.lock", DT_DIR_FILE)); /* the link's line */
        return DT_FAIL(DT_ERR_IO, "--save %s: cannot open %s (%s)", dir, path, strerror(e));
    }
    struct stat sb;
    const char *why = fstat(fd, &sb) != 0    ? strerror(errno)
                      : !S_ISREG(sb.st_mode) ? "not a regular file"
                      : sb.st_nlink != 1     ? "a hard link to a file with other names; writing it would change them"
                                             : NULL;
    if (why) {
        close(fd);
        return DT_FAIL(DT_ERR_IO, "--save %s: %s: %s (remove it)", dir, path, why);
    }
    *fd_out = fd;
    return DT_OK;
}

dt_status dt_checkpoint_lock_take(const char *dir, int *fd_out)
{
    *fd_out = -1;
    DT_CHECK(dt_file_mkdir_p(dir));
    char path[4200];
    if ((size_t)snprintf(path, sizeof path, "%s/dtrain.lock", dir) >= sizeof path)
        return DT_FAIL(DT_ERR_INVALID, "--save %s: path too long", dir);
    int dfd, fd = -1;
    DT_CHECK(dt_dir_open(dir, &dfd));
    dt_status st = dt_checkpoint_check_dir(dfd, dir);
    if (st == DT_OK) st = dt__lock_open(dfd, dir, path, &fd);
    close(dfd);
    DT_CHECK(st);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int e = errno;
        char holder[256] = "";
        ssize_t n = e == EWOULDBLOCK ? pread(fd, holder, sizeof holder - 1, 0) : -1;
        close(fd);
        if (e != EWOULDBLOCK) return DT_FAIL(DT_ERR_IO, "--save %s: cannot lock %s (%s)", dir, path, strerror(e));
        holder[n > 0 ? n : 0] = '\0';
        holder[strcspn(holder, "\r\n")] = '\0';
        return DT_FAIL(DT_ERR_IO,
                       "--save %s: in use by another job (%s held by %s); wait for it to end or save elsewhere", dir,
                       path, holder[0] ? holder : "a process that did not record itself");
    }
    char me[300], host[256] = "?";
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "?");
    host[sizeof host - 1] = '\0';
    const int n = snprintf(me, sizeof me, "%s:%ld\n", host, (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, me, (size_t)n, 0) != n) {
        const int e = errno;
        close(fd);
        return DT_FAIL(DT_ERR_IO, "--save %s: cannot write %s (%s)", dir, path, strerror(e));
    }
    *fd_out = fd;
    return DT_OK;
}

void dt_checkpoint_lock_release(int fd)
{
    if (fd >= 0) close(fd); /* the lock goes with the descriptor */
}
