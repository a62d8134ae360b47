/* check_file.c: output files written whole or not at all (dt_file.h):
 * a committed file has exactly its bytes; a failed or aborted one leaves
 * the old file (or none) and no temporary behind; /dev/full's ENOSPC and a
 * file size limit's EFBIG are errors naming the file; the up-front checks
 * refuse a missing directory, a directory given as a file and a file given
 * as a directory. What is replaced: a replaced file keeps its mode and a
 * new one gets 0666 less the umask; a symbolic link's target is replaced
 * and the link stays; a descriptor's link (/dev/fd/N) is appended to in
 * place. Staged files (dt_file_stage_whole) appear only when committed
 * and leave nothing when aborted. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static char dir[256];

static void setup(void)
{
    snprintf(dir, sizeof dir, "%s/dt-file.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Entries of dir (. and .. not counted). */
static int entries(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d) closedir(d);
    return n;
}

static size_t slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

START_TEST(test_whole_and_replace)
{
    char p[512], buf[64];
    snprintf(p, sizeof p, "%s/out.json", dir);
    ck_dt(dt_file_write_whole(p, "--summary", "first", 5));
    ck_assert_uint_eq(slurp(p, buf, sizeof buf), 5);
    ck_dt(dt_file_write_whole(p, "--summary", "second!", 7));
    ck_assert_uint_eq(slurp(p, buf, sizeof buf), 7);
    ck_assert(memcmp(buf, "second!", 7) == 0);
    ck_assert_int_eq(entries(), 1); /* no temporary left */
}
END_TEST

START_TEST(test_abort_keeps_old)
{
    char p[512], buf[64];
    snprintf(p, sizeof p, "%s/out.json", dir);
    ck_dt(dt_file_write_whole(p, NULL, "old", 3));
    dt_file_out *f = NULL;
    ck_dt(dt_file_out_open(p, "--trace", &f));
    ck_dt(dt_file_out_write(f, "new and longer", 14));
    ck_dt(dt_file_out_flush(f));
    ck_assert_uint_eq(slurp(p, buf, sizeof buf), 3); /* not yet */
    dt_file_out_abort(f);
    ck_assert_uint_eq(slurp(p, buf, sizeof buf), 3);
    ck_assert_int_eq(entries(), 1);
}
END_TEST

START_TEST(test_dev_full)
{
    if (access("/dev/full", W_OK) != 0) return;
    ck_assert_int_eq(dt_file_write_whole("/dev/full", "--summary", "x", 1), DT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "--summary /dev/full: write failed (No space left on device)"));
}
END_TEST

/* Under a 1-block size limit (SIGXFSZ ignored, as the programs do) a big
 * write fails with EFBIG: a message, and neither the file nor a temporary. */
START_TEST(test_size_limit)
{
    char p[512];
    snprintf(p, sizeof p, "%s/big.json", dir);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {1024, 1024};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(3);
        static char big[65536];
        memset(big, 'a', sizeof big);
        dt_status st = dt_file_write_whole(p, "--summary", big, sizeof big);
        _exit(st == DT_ERR_IO && strstr(dt_last_error(), "File too large") ? 0 : 1);
    }
    int ws = 0;
    ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
    ck_assert(WIFEXITED(ws));
    ck_assert_int_eq(WEXITSTATUS(ws), 0);
    ck_assert_int_eq(entries(), 0);
}
END_TEST

START_TEST(test_checks)
{
    char p[512];
    snprintf(p, sizeof p, "%s/no/such/s.json", dir);
    ck_assert_int_eq(dt_file_check_output(p, "--summary"), DT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "expected an existing directory"));
    ck_assert_int_eq(dt_file_check_output(dir, "--summary"), DT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "is a directory"));
    ck_dt(dt_file_check_output_dir(p, "--save", 1)); /* mkdir -p can make it */
    snprintf(p, sizeof p, "%s/file", dir);
    ck_dt(dt_file_write_whole(p, NULL, "x", 1));
    ck_assert_int_eq(dt_file_check_output_dir(p, "--save", 1), DT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "exists and is not a directory"));
    snprintf(p, sizeof p, "%s/file/sub", dir);
    ck_assert_int_eq(dt_file_check_output_dir(p, "--save", 1), DT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "is not a directory"));
    ck_dt(dt_file_check_output("/dev/null", "--trace"));
    ck_assert_int_eq(entries(), 1); /* the checks create nothing */
}
END_TEST

static mode_t mode_of(const char *path)
{
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    return sb.st_mode & 07777;
}

START_TEST(test_modes)
{
    char p[512];
    snprintf(p, sizeof p, "%s/s.json", dir);
    const mode_t old_mask = umask(027);
    ck_dt(dt_file_write_whole(p, "--summary", "a", 1)); /* new: 0666 less the umask */
    ck_assert_uint_eq(mode_of(p), 0640);
    umask(022);
    ck_assert_int_eq(chmod(p, 0604), 0);
    ck_dt(dt_file_write_whole(p, "--summary", "b", 1)); /* replaced: its mode kept */
    ck_assert_uint_eq(mode_of(p), 0604);
    ck_assert_int_eq(chmod(p, 0444), 0); /* read-only: replaced all the same, still read-only */
    ck_dt(dt_file_write_whole(p, "--summary", "c", 1));
    ck_assert_uint_eq(mode_of(p), 0444);
    umask(old_mask);
    ck_assert_int_eq(entries(), 1);
}
END_TEST

START_TEST(test_symlink_target)
{
    char real[600], link[512], sub[512], buf[64];
    struct stat sb;
    snprintf(sub, sizeof sub, "%s/sub", dir);
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    snprintf(real, sizeof real, "%s/real.json", sub);
    snprintf(link, sizeof link, "%s/link.json", dir);
    ck_assert_int_eq(symlink("sub/real.json", link), 0); /* relative, dangling for now */
    ck_dt(dt_file_check_output(link, "--trace"));
    ck_dt(dt_file_write_whole(link, "--trace", "first", 5)); /* made where the link points */
    ck_assert_int_eq(lstat(link, &sb), 0);
    ck_assert(S_ISLNK(sb.st_mode));
    ck_assert_uint_eq(slurp(real, buf, sizeof buf), 5);
    ck_dt(dt_file_write_whole(link, "--trace", "second!", 7)); /* replaced, the link kept */
    ck_assert_int_eq(lstat(link, &sb), 0);
    ck_assert(S_ISLNK(sb.st_mode));
    ck_assert_uint_eq(slurp(real, buf, sizeof buf), 7);
    ck_assert(memcmp(buf, "second!", 7) == 0);
    ck_assert_int_eq(entries(), 2); /* sub and the link: no temporary beside the link */
    /* a link into a missing directory is checked there */
    ck_assert_int_eq(unlink(link), 0);
    ck_assert_int_eq(symlink("gone/x.json", link), 0);
    ck_assert_int_eq(dt_file_check_output(link, "--trace"), DT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "gone: No such file or directory"));
}
END_TEST

/* /dev/fd/N names descriptor N: appended to in place, never replaced. */
START_TEST(test_descriptor_link)
{
    char p[512], fdp[64], buf[64];
    struct stat before, after;
    snprintf(p, sizeof p, "%s/stdout.txt", dir);
    const int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "log;", 4), 4);
    snprintf(fdp, sizeof fdp, "/dev/fd/%d", fd);
    if (access(fdp, W_OK) != 0) {
        close(fd);
        return; /* no /dev/fd here */
    }
    ck_assert_int_eq(stat(p, &before), 0);
    ck_dt(dt_file_check_output(fdp, "--summary"));
    ck_dt(dt_file_write_whole(fdp, "--summary", "summary", 7));
    ck_assert_int_eq(stat(p, &after), 0);
    ck_assert(before.st_ino == after.st_ino);
    ck_assert_uint_eq(slurp(p, buf, sizeof buf), 11);
    ck_assert(memcmp(buf, "log;summary", 11) == 0);
    close(fd);
    ck_assert_int_eq(entries(), 1);
}
END_TEST

START_TEST(test_staged)
{
    char a[512], b[512], buf[64];
    snprintf(a, sizeof a, "%s/frame_0.png", dir);
    snprintf(b, sizeof b, "%s/frame_1.png", dir);
    ck_dt(dt_file_write_whole(a, NULL, "old", 3));
    dt_file_out *fa = NULL, *fb = NULL;
    ck_dt(dt_file_stage_whole(a, "--frames", "new a", 5, &fa));
    ck_dt(dt_file_stage_whole(b, "--frames", "new b", 5, &fb));
    ck_assert_uint_eq(slurp(a, buf, sizeof buf), 3); /* nothing placed yet */
    ck_assert_int_eq(access(b, F_OK), -1);
    ck_assert_int_eq(entries(), 3);                                  /* a and two temporaries */
    ck_assert_int_eq(dt_file_out_write(fa, "x", 1), DT_ERR_INVALID); /* staged: closed */
    ck_dt(dt_file_out_commit(fa));
    ck_assert_uint_eq(slurp(a, buf, sizeof buf), 5);
    ck_assert(memcmp(buf, "new a", 5) == 0);
    dt_file_out_abort(fb);
    ck_assert_int_eq(access(b, F_OK), -1);
    ck_assert_int_eq(entries(), 1);
    /* what would be written in place cannot wait for the others */
    fa = NULL;
    ck_assert_int_eq(dt_file_stage_whole("/dev/null", "--frames", "x", 1, &fa), DT_ERR_IO);
    ck_assert_ptr_null(fa);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "--frames /dev/null: exists and is not a regular file"));
}
END_TEST

START_TEST(test_check_dir_parents)
{
    char p[512];
    snprintf(p, sizeof p, "%s/new", dir);
    ck_dt(dt_file_check_output_dir(p, "--frames", 0)); /* its parent exists */
    snprintf(p, sizeof p, "%s/no/new", dir);
    ck_dt(dt_file_check_output_dir(p, "--save", 1));
    ck_assert_int_eq(dt_file_check_output_dir(p, "--frames", 0), DT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "/no: No such file or directory (expected an existing directory)"));
    ck_assert_int_eq(entries(), 0);
}
END_TEST

/* dt_escape (lib/core/escape.c): control bytes, DEL, C1 controls and broken UTF-8 as \xHH; UTF-8 kept;
 * a cut never splits an escape or a character */
START_TEST(test_escape)
{
    char out[64];
    ck_assert_str_eq(dt_escape("x\033[2Jy\n\t\177", out, sizeof out), "x\\x1b[2Jy\\x0a\\x09\\x7f");
    ck_assert_str_eq(dt_escape("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", out, sizeof out),
                     "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"); /* UTF-8 kept */
    ck_assert_str_eq(dt_escape("a\xc2\x9b"
                               "b",
                               out, sizeof out),
                     "a\\xc2\\x9bb"); /* a C1 control (CSI) */
    /* a stray byte, an overlong form, a surrogate */
    ck_assert_str_eq(dt_escape("\xff\xc0\xaf\xed\xa0\x80", out, sizeof out), "\\xff\\xc0\\xaf\\xed\\xa0\\x80");
    ck_assert_str_eq(dt_escape("ab\033", out, 6), "ab");   /* an escape that does not fit is left out whole */
    ck_assert_str_eq(dt_escape("a\xc3\xa9", out, 3), "a"); /* and so is half a character */
    ck_assert_str_eq(dt_escape(NULL, out, sizeof out), "");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("file");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_whole_and_replace);
    tcase_add_test(tc, test_abort_keeps_old);
    tcase_add_test(tc, test_dev_full);
    tcase_add_test(tc, test_size_limit);
    tcase_add_test(tc, test_checks);
    tcase_add_test(tc, test_modes);
    tcase_add_test(tc, test_symlink_target);
    tcase_add_test(tc, test_descriptor_link);
    tcase_add_test(tc, test_staged);
    tcase_add_test(tc, test_check_dir_parents);
    tcase_add_test(tc, test_escape);
    suite_add_tcase(s, tc);
    return dt_test_run(s);
}
