/* checkpoint_lock.c: one job at a time in a save directory
 * (dt_checkpoint_lock_take, dt_checkpoint_lock_release; dt_checkpoint.h).
 *
 * The lock is flock(2) on DIR/dtrain.lock, exclusive and non-blocking,
 * held by the process that commits checkpoints (rank 0) for the job's
 * life and released by the kernel when that process ends however it
 * ends, so a killed job's lock goes with its last process. The file holds
 * "HOST:PID\n" of the holder for the refusal message; the file itself is
 * never removed (removing it would let two jobs lock two different files
 * of the same name). util-linux's flock(1) on the same file is the same
 * lock. */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "dt_checkpoint.h"
#include "dt_file.h"

dt_status dt_checkpoint_lock_take(const char *dir, int *fd_out)
{
    *fd_out = -1;
    DT_CHECK(dt_file_mkdir_p(dir));
    char path[4200];
    if ((size_t)snprintf(path, sizeof path, "%s/dtrain.lock", dir) >= sizeof path)
        return DT_FAIL(DT_ERR_INVALID, "--save %s: path too long", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return DT_FAIL(DT_ERR_IO, "--save %s: cannot open %s (%s)", dir, path, strerror(errno));
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
