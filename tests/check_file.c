/* check_file.c: output files written whole or not at all (dt_file.h):
 * a committed file has exactly its bytes; a failed or aborted one leaves
 * the old file (or none) and no temporary behind; /dev/full's ENOSPC and a
 * file size limit's EFBIG are errors naming the file; the up-front checks
 * refuse a missing directory, a directory given as a file and a file given
 * as a directory. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
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
    ck_dt(dt_file_check_output_dir(p, "--save")); /* mkdir -p can make it */
    snprintf(p, sizeof p, "%s/file", dir);
    ck_dt(dt_file_write_whole(p, NULL, "x", 1));
    ck_assert_int_eq(dt_file_check_output_dir(p, "--save"), DT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "exists and is not a directory"));
    snprintf(p, sizeof p, "%s/file/sub", dir);
    ck_assert_int_eq(dt_file_check_output_dir(p, "--save"), DT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "is not a directory"));
    ck_dt(dt_file_check_output("/dev/null", "--trace"));
    ck_assert_int_eq(entries(), 1); /* the checks create nothing */
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
    suite_add_tcase(s, tc);
    return dt_test_run(s);
}
