/* args.c: the flag parser shared by dtrain and dtbench (see args.h), and
 * the failure exit of the programs that load OpenBLAS (dt_args_exit_failed).
 *
 * Every rejection is one line on stderr that names the flag, echoes the
 * value in quotes and says what was expected, built from the same range
 * description --help prints; the caller turns DT_ARGS_ERROR into exit 2. */
#include "args.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define DT__ARGS_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DT__ARGS_LSAN 1
#endif
#endif
#ifdef DT__ARGS_LSAN
#include <sanitizer/lsan_interface.h>
#endif

void dt_args_exit_failed(int status)
{
    fflush(NULL);
#ifdef DT__ARGS_LSAN
    __lsan_do_leak_check(); /* reports and ends the process, as at exit(), when something leaked */
#endif
    _exit(status);
}

static void dt__args_error(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void dt__args_error(const char *prog, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* The range alone: ">= 1", "in [0, 1)", "in 1..1024", or "" when unbounded. */
static void dt__args_range_text(char *buf, size_t n, int integer, unsigned range, double min, double max)
{
    int has_min = (range & DT_ARG_HAS_MIN) != 0, has_max = (range & DT_ARG_HAS_MAX) != 0;
    int min_ex = (range & DT_ARG_MIN_EXCLUSIVE) != 0, max_ex = (range & DT_ARG_MAX_EXCLUSIVE) != 0;
    if (has_min && has_max) {
        if (integer && !min_ex && !max_ex) snprintf(buf, n, "in %.17g..%.17g", min, max);
        else snprintf(buf, n, "in %c%.17g, %.17g%c", min_ex ? '(' : '[', min, max, max_ex ? ')' : ']');
    } else if (has_min) {
        snprintf(buf, n, "%s %.17g", min_ex ? ">" : ">=", min);
    } else if (has_max) {
        snprintf(buf, n, "%s %.17g", max_ex ? "<" : "<=", max);
    } else {
        buf[0] = '\0';
    }
}

/* "an integer >= 1", "a number in [0, 1)", "a number" */
static void dt__args_describe(char *buf, size_t n, int integer, unsigned range, double min, double max)
{
    char r[96];
    dt__args_range_text(r, sizeof r, integer, range, min, max);
    snprintf(buf, n, "%s%s%s", integer ? "an integer" : "a number", r[0] ? " " : "", r);
}

static int dt__args_in_range(double v, unsigned range, double min, double max)
{
    if (range & DT_ARG_HAS_MIN) {
        if ((range & DT_ARG_MIN_EXCLUSIVE) ? !(v > min) : !(v >= min)) return 0;
    }
    if (range & DT_ARG_HAS_MAX) {
        if ((range & DT_ARG_MAX_EXCLUSIVE) ? !(v < max) : !(v <= max)) return 0;
    }
    return 1;
}

static int dt__args_bad(const char *prog, const char *flag, const char *text, int integer, unsigned range, double min,
                        double max)
{
    char want[128];
    dt__args_describe(want, sizeof want, integer, range, min, max);
    dt__args_error(prog, "%s '%s': expected %s", flag, text, want);
    return DT_ARGS_ERROR;
}

int dt_args_parse_int64(const char *prog, const char *flag, const char *text, unsigned range, double min, double max,
                        int64_t *out)
{
    if (text[0] == '\0' || isspace((unsigned char)text[0])) return dt__args_bad(prog, flag, text, 1, range, min, max);
    errno = 0;
    char *end = NULL;
    long long v = strtoll(text, &end, 10);
    if (*end != '\0') return dt__args_bad(prog, flag, text, 1, range, min, max);
    if (errno == ERANGE) {
        dt__args_error(prog, "%s '%s': out of range for a 64-bit integer", flag, text);
        return DT_ARGS_ERROR;
    }
    if (!dt__args_in_range((double)v, range, min, max)) return dt__args_bad(prog, flag, text, 1, range, min, max);
    *out = (int64_t)v;
    return DT_ARGS_OK;
}

int dt_args_parse_double(const char *prog, const char *flag, const char *text, unsigned range, double min, double max,
                         double *out)
{
    if (text[0] == '\0' || isspace((unsigned char)text[0])) return dt__args_bad(prog, flag, text, 0, range, min, max);
    errno = 0;
    char *end = NULL;
    double v = strtod(text, &end);
    if (*end != '\0' || !isfinite(v)) return dt__args_bad(prog, flag, text, 0, range, min, max);
    if (errno == ERANGE && fabs(v) > 1.0) {
        dt__args_error(prog, "%s '%s': out of range for a double", flag, text);
        return DT_ARGS_ERROR;
    }
    if (!dt__args_in_range(v, range, min, max)) return dt__args_bad(prog, flag, text, 0, range, min, max);
    *out = v;
    return DT_ARGS_OK;
}

int dt_args_parse_rank_value(const char *prog, const char *flag, const char *text, const char *unit,
                             const char *example, long min, long max, int *rank, int *value)
{
    char *end = NULL;
    long r = strtol(text, &end, 10), m = min - 1;
    int ok = end != text && *end == ':';
    if (ok) {
        char *e2 = NULL;
        m = strtol(end + 1, &e2, 10);
        ok = e2 != end + 1 && !*e2;
    }
    if (!ok || r < 0 || r > 1000000 || m < min || m > max) {
        dt__args_error(prog, "%s '%s': expected RANK:%s, e.g. %s (rank >= 0, %s %ld..%ld)", flag, text, unit, example,
                       unit, min, max);
        return DT_ARGS_ERROR;
    }
    *rank = (int)r;
    *value = (int)m;
    return DT_ARGS_OK;
}

int dt_args_parse_rank_ms(const char *prog, const char *flag, const char *text, int *rank, int *ms)
{
    return dt_args_parse_rank_value(prog, flag, text, "MS", "1:20", 0, 3600000, rank, ms);
}

int dt_args_parse_int_list(const char *prog, const char *flag, const char *text, unsigned range, double min, double max,
                           int64_t *out, int max_count, int *count)
{
    char want[128];
    dt__args_range_text(want, sizeof want, 1, range, min, max);
    *count = 0;
    const char *p = text;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[64];
        int64_t v = 0;
        int ok = len > 0 && len < sizeof item;
        if (ok) {
            memcpy(item, p, len);
            item[len] = '\0';
            char *end = NULL;
            errno = 0;
            long long ll = strtoll(item, &end, 10);
            ok = !isspace((unsigned char)item[0]) && *end == '\0' && errno == 0 &&
                 dt__args_in_range((double)ll, range, min, max);
            v = (int64_t)ll;
        }
        if (!ok) {
            dt__args_error(prog, "%s '%s': expected a comma-separated list of integers%s%s", flag, text,
                           want[0] ? ", each " : "", want);
            return DT_ARGS_ERROR;
        }
        if (*count >= max_count) {
            dt__args_error(prog, "%s '%s': expected at most %d values", flag, text, max_count);
            return DT_ARGS_ERROR;
        }
        out[(*count)++] = v;
        if (!comma) break;
        p = comma + 1;
    }
    return DT_ARGS_OK;
}

/* Is text one of the '|'-separated choices? */
static int dt__args_is_choice(const char *choices, const char *text)
{
    size_t tl = strlen(text);
    const char *p = choices;
    while (*p) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == tl && strncmp(p, text, len) == 0) return 1;
        if (!bar) break;
        p = bar + 1;
    }
    return 0;
}

static int dt__args_set(const char *prog, dt_arg *a, const char *text)
{
    switch (a->kind) {
    case DT_ARG_INT: {
        int64_t v;
        if (dt_args_parse_int64(prog, a->name, text, a->range, a->min, a->max, &v) != DT_ARGS_OK) return DT_ARGS_ERROR;
        if (v < INT_MIN || v > INT_MAX) {
            dt__args_error(prog, "%s '%s': out of range (at most %d)", a->name, text, INT_MAX);
            return DT_ARGS_ERROR;
        }
        *(int *)a->dest = (int)v;
        return DT_ARGS_OK;
    }
    case DT_ARG_INT64: return dt_args_parse_int64(prog, a->name, text, a->range, a->min, a->max, (int64_t *)a->dest);
    case DT_ARG_UINT64: {
        errno = 0;
        char *end = NULL;
        unsigned long long v = 0;
        int ok = isdigit((unsigned char)text[0]);
        if (ok) {
            v = strtoull(text, &end, 10);
            ok = *end == '\0' && errno == 0 && dt__args_in_range((double)v, a->range, a->min, a->max);
        }
        if (!ok) {
            char want[128];
            dt__args_describe(want, sizeof want, 1, a->range | DT_ARG_HAS_MIN, (a->range & DT_ARG_HAS_MIN) ? a->min : 0,
                              a->max);
            dt__args_error(prog, "%s '%s': expected %s (64-bit)", a->name, text, want);
            return DT_ARGS_ERROR;
        }
        *(uint64_t *)a->dest = (uint64_t)v;
        return DT_ARGS_OK;
    }
    case DT_ARG_FLOAT: {
        double v;
        if (dt_args_parse_double(prog, a->name, text, a->range, a->min, a->max, &v) != DT_ARGS_OK) return DT_ARGS_ERROR;
        if (fabs(v) > FLT_MAX) {
            dt__args_error(prog, "%s '%s': out of range for a float", a->name, text);
            return DT_ARGS_ERROR;
        }
        *(float *)a->dest = (float)v;
        return DT_ARGS_OK;
    }
    case DT_ARG_DOUBLE: return dt_args_parse_double(prog, a->name, text, a->range, a->min, a->max, (double *)a->dest);
    case DT_ARG_STRING:
        if (text[0] == '\0') {
            dt__args_error(prog, "%s '': expected a non-empty value", a->name);
            return DT_ARGS_ERROR;
        }
        *(const char **)a->dest = text;
        return DT_ARGS_OK;
    case DT_ARG_CHOICE:
        if (!dt__args_is_choice(a->choices, text)) {
            char list[256];
            size_t j = 0;
            for (const char *p = a->choices; *p && j + 3 < sizeof list; p++) {
                if (*p == '|') {
                    list[j++] = ',';
                    list[j++] = ' ';
                } else {
                    list[j++] = *p;
                }
            }
            list[j] = '\0';
            dt__args_error(prog, "%s '%s': expected one of %s", a->name, text, list);
            return DT_ARGS_ERROR;
        }
        *(const char **)a->dest = text;
        return DT_ARGS_OK;
    case DT_ARG_FLAG:
    case DT_ARG_SECTION: break;
    }
    return DT_ARGS_ERROR;
}

static dt_arg *dt__args_lookup(dt_arg *args, int n_args, const char *name, size_t len)
{
    for (int i = 0; i < n_args; i++) {
        if (args[i].kind == DT_ARG_SECTION) continue;
        if (strlen(args[i].name) == len && strncmp(args[i].name, name, len) == 0) return &args[i];
    }
    return NULL;
}

dt_arg *dt_args_find(dt_arg *args, int n_args, const char *name)
{
    return dt__args_lookup(args, n_args, name, strlen(name));
}

int dt_args_given(dt_arg *args, int n_args, const char *name)
{
    dt_arg *a = dt_args_find(args, n_args, name);
    return a ? a->given : 0;
}

int dt_args_parse(const char *prog, dt_arg *args, int n_args, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *tok = argv[i];
        if (strcmp(tok, "-h") == 0) tok = "--help";
        if (strncmp(tok, "--", 2) != 0 || tok[2] == '\0') {
            dt__args_error(prog, "unexpected argument '%s' (flags start with --; see %s --help)", tok, prog);
            return DT_ARGS_ERROR;
        }
        const char *eq = strchr(tok, '=');
        size_t len = eq ? (size_t)(eq - tok) : strlen(tok);
        dt_arg *a = dt__args_lookup(args, n_args, tok, len);
        if (!a) {
            dt__args_error(prog, "unknown flag '%.*s' (see %s --help)", (int)len, tok, prog);
            return DT_ARGS_ERROR;
        }
        a->given++;
        if (a->kind == DT_ARG_FLAG) {
            if (eq) {
                dt__args_error(prog, "%s takes no value (got '%s')", a->name, eq + 1);
                return DT_ARGS_ERROR;
            }
            *(int *)a->dest = 1;
            continue;
        }
        const char *value = NULL;
        if (eq) {
            value = eq + 1;
        } else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
            value = argv[++i];
        } else {
            dt__args_error(prog, "%s: missing value%s%s%s", a->name, i + 1 < argc ? " before '" : "",
                           i + 1 < argc ? argv[i + 1] : "", i + 1 < argc ? "'" : "");
            return DT_ARGS_ERROR;
        }
        if (dt__args_set(prog, a, value) != DT_ARGS_OK) return DT_ARGS_ERROR;
    }
    return DT_ARGS_OK;
}

static void dt__args_default(char *buf, size_t n, const dt_arg *a)
{
    buf[0] = '\0';
    if (a->default_text) {
        snprintf(buf, n, "%s", a->default_text);
        return;
    }
    switch (a->kind) {
    case DT_ARG_INT: snprintf(buf, n, "%d", *(const int *)a->dest); break;
    case DT_ARG_INT64: snprintf(buf, n, "%" PRId64, *(const int64_t *)a->dest); break;
    case DT_ARG_UINT64: snprintf(buf, n, "%" PRIu64, *(const uint64_t *)a->dest); break;
    case DT_ARG_FLOAT: snprintf(buf, n, "%g", (double)*(const float *)a->dest); break;
    case DT_ARG_DOUBLE: snprintf(buf, n, "%g", *(const double *)a->dest); break;
    case DT_ARG_STRING:
    case DT_ARG_CHOICE: {
        const char *s = *(const char *const *)a->dest;
        snprintf(buf, n, "%s", s ? s : "none");
        break;
    }
    case DT_ARG_FLAG:
    case DT_ARG_SECTION: break;
    }
}

void dt_args_print_help(FILE *f, const char *usage, const dt_arg *args, int n_args)
{
    fprintf(f, "%s\n", usage);
    for (int i = 0; i < n_args; i++) {
        const dt_arg *a = &args[i];
        if (a->kind == DT_ARG_SECTION) {
            fprintf(f, "\n%s:\n", a->name);
            continue;
        }
        const char *meta = a->metavar;
        if (!meta) {
            switch (a->kind) {
            case DT_ARG_INT:
            case DT_ARG_INT64:
            case DT_ARG_UINT64: meta = "N"; break;
            case DT_ARG_FLOAT:
            case DT_ARG_DOUBLE: meta = "X"; break;
            case DT_ARG_STRING: meta = "S"; break;
            case DT_ARG_CHOICE: meta = a->choices; break;
            default: meta = ""; break;
            }
        }
        char left[96];
        int w = snprintf(left, sizeof left, "  %s%s%s", a->name, meta[0] ? " " : "", meta);
        if (w < 0) w = 0;
        if (w > 33) fprintf(f, "%s\n%-34s", left, "");
        else fprintf(f, "%-34s", left);
        fprintf(f, "%s", a->help ? a->help : "");
        if (a->kind != DT_ARG_FLAG) {
            char def[128];
            dt__args_default(def, sizeof def, a);
            fprintf(f, " (default: %s)", def);
        } else if (a->default_text) { /* a switch: say what happens without it */
            fprintf(f, " (default: %s)", a->default_text);
        }
        fputc('\n', f);
    }
}
