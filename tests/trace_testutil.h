/* trace_testutil.h: what check_trace.c and check_trace_read.c share: a
 * scratch directory per test (setup_dir/teardown_dir), files in it, and
 * expect_format_error, which reads a text that must be refused. */
#ifndef DT_TRACE_TESTUTIL_H
#define DT_TRACE_TESTUTIL_H

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

/* ---- fixture: a scratch directory --------------------------------------- */

static char g_dir[256]; /* this test's scratch directory */

static inline void setup_dir(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/dt_check_trace_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    ck_assert_msg(mkdtemp(g_dir) != NULL, "mkdtemp(%s) failed", g_dir);
}

static inline void teardown_dir(void)
{
    DIR *d = opendir(g_dir);
    if (!d) return;
    struct dirent *de;
    char p[512];
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        snprintf(p, sizeof p, "%s/%s", g_dir, de->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(g_dir);
}

/* g_dir/name in one of a few rotating static buffers. */
static inline const char *path_in(const char *name)
{
    static char bufs[4][512];
    static int k;
    char *p = bufs[k++ % 4];
    snprintf(p, 512, "%s/%s", g_dir, name);
    return p;
}

static inline void write_bytes(const char *path, const char *text, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot create %s", path);
    ck_assert_uint_eq(fwrite(text, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

static inline char *read_bytes(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap + 1);
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) buf = realloc(buf, (cap *= 2) + 1);
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* ---- malformed files ---------------------------------------------------- */

#define HDR "{\"otherData\":{\"format\":\"dtrain-trace\",\"version\":1,\"tool\":\"t\"},\"traceEvents\":[\n"
#define OK_EV "{\"name\":\"ok\",\"ph\":\"i\",\"ts\":0,\"pid\":0,\"tid\":0},\n"

/* text must fail with DT_ERR_FORMAT and a message holding the path and the
 * given fragments (NULL-terminated). */
static inline void expect_format_error(const char *text, ...)
{
    const char *p = path_in("bad.json");
    write_bytes(p, text, strlen(text));
    dt_trace *t = (dt_trace *)&t;
    dt_status st = dt_trace_read(p, &t);
    ck_assert_msg(st == DT_ERR_FORMAT, "want DT_ERR_FORMAT, got %s (%s) for:\n%s", dt_status_str(st), dt_last_error(),
                  text);
    ck_assert_ptr_null(t);
    const char *msg = dt_last_error();
    ck_assert_msg(strncmp(msg, p, strlen(p)) == 0, "message does not start with the path: %s", msg);
    ck_assert_msg(strchr(msg, '\n') == NULL, "message is not one line: %s", msg);
    va_list ap;
    va_start(ap, text);
    const char *frag;
    while ((frag = va_arg(ap, const char *)) != NULL)
        ck_assert_msg(strstr(msg, frag) != NULL, "message lacks \"%s\": %s", frag, msg);
    va_end(ap);
}

#endif
