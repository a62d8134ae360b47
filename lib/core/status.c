/* status.c: owns the per-thread "last error" record behind dt_last_error().
 * Invariant: a message is always NUL-terminated and at most one line. */
#include "dt_status.h"

#include <stdio.h>
#include <string.h>

static _Thread_local char dt__errmsg[512];
static _Thread_local char dt__errsite[128];

const char *dt_status_str(dt_status s)
{
    switch (s) {
    case DT_OK: return "ok";
    case DT_ERR_INVALID: return "invalid argument";
    case DT_ERR_NOMEM: return "out of memory";
    case DT_ERR_IO: return "I/O error";
    case DT_ERR_FORMAT: return "malformed input";
    case DT_ERR_UNSUPPORTED: return "unsupported";
    case DT_ERR_BACKEND: return "backend failure";
    case DT_ERR_NUMERIC: return "non-finite value";
    }
    return "unknown status";
}

const char *dt_last_error(void) { return dt__errmsg; }
const char *dt_last_error_site(void) { return dt__errsite; }

void dt_clear_error(void)
{
    dt__errmsg[0] = '\0';
    dt__errsite[0] = '\0';
}

dt_status dt__fail(dt_status st, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dt__errmsg, sizeof dt__errmsg, fmt, ap);
    va_end(ap);
    for (char *p = dt__errmsg; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    const char *base = strrchr(file, '/');
    snprintf(dt__errsite, sizeof dt__errsite, "%s:%d", base ? base + 1 : file, line);
    return st;
}
