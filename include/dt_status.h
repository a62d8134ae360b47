/* dt_status.h: status codes and error reporting for every dtrain library call.
 *
 * Invariant: library functions never exit(); they return a dt_status. On
 * failure they record a one-line, human-readable message (naming the file,
 * flag or value and what was expected) that dt_last_error() returns, plus the
 * source file:line where the failure was detected (dt_last_error_site()).
 * Messages are per thread. */
#ifndef DT_STATUS_H
#define DT_STATUS_H

#include <stdarg.h>

#if defined(DT_BUILDING_LIBRARY) && defined(__GNUC__)
#define DT_API __attribute__((visibility("default")))
#else
#define DT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dt_status {
    DT_OK = 0,
    DT_ERR_INVALID,     /* a bad argument, flag or configuration value */
    DT_ERR_NOMEM,       /* an allocation failed */
    DT_ERR_IO,          /* a file could not be opened, read or written */
    DT_ERR_FORMAT,      /* a file's contents are malformed */
    DT_ERR_UNSUPPORTED, /* valid request that this build or backend cannot do */
    DT_ERR_BACKEND,     /* a backend library (BLAS, CUDA, MPI, ...) failed */
    DT_ERR_NUMERIC      /* NaN or inf where a finite value is required */
} dt_status;

DT_API const char *dt_status_str(dt_status s);
/* Message of the most recent failure on this thread ("" if none). */
DT_API const char *dt_last_error(void);
/* "file:line" where the most recent failure on this thread was raised. */
DT_API const char *dt_last_error_site(void);
DT_API void dt_clear_error(void);

/* Internal: record a failure and return st. Use through DT_FAIL. */
DT_API dt_status dt__fail(dt_status st, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define DT_FAIL(st, ...) dt__fail((st), __FILE__, __LINE__, __VA_ARGS__)
/* Propagate a non-OK status to the caller. */
#define DT_CHECK(expr)                        \
    do {                                      \
        dt_status dt__st_ = (expr);           \
        if (dt__st_ != DT_OK) return dt__st_; \
    } while (0)
/* Store the status in st and jump to label on failure (for cleanup). */
#define DT_CHECK_GOTO(expr, st, label) \
    do {                               \
        (st) = (expr);                 \
        if ((st) != DT_OK) goto label; \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
