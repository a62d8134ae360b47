/* trace_read.c: owns dt_trace_read, which turns a dtrain trace file (schema
 * in docs/trace-format.md, writer in trace_write.c) back into events.
 *
 * How: the file is read into memory (a regular file only: dt_file_read_whole
 * refuses a FIFO, which would block, and a device such as /dev/zero, which
 * never ends); this file walks only the outer shape
 * ({ "key": value, ... } and the traceEvents array) and hands every value,
 * one event at a time, to jansson (JSON_DISABLE_EOF_CHECK makes jansson stop
 * after one value and report how many bytes it used). So the JSON tree held
 * at any moment is one event, not the whole trace, and every syntax error,
 * ours or jansson's, is reported with its line, column and byte offset in
 * the file. ts and dur are converted from their text, not from the double
 * jansson makes of them: "%lld.%03lld" microseconds are exact nanoseconds
 * only if read digit by digit (a double cannot hold CLOCK_MONOTONIC values
 * to the nanosecond).
 *
 * What is accepted (and why):
 *   - otherData.format must be "dtrain-trace" and otherData.version must be
 *     DT_TRACE_VERSION, and otherData must come before traceEvents (the
 *     writer puts it first; sorting keys keeps it first): another version
 *     may mean something else by the same field, so it is refused before
 *     any event is looked at, rather than guessed at. Chrome traces from
 *     other tools (no otherData) are refused with a message saying so.
 *   - Unknown top-level keys and unknown non-numeric args are ignored (new
 *     fields are additive within a version). Unknown numeric args become
 *     extras; more than DT_TRACE_MAX_EXTRA of them is an error, not a silent
 *     drop, because extras are data the reader promises to give back.
 *   - ph is one of X, C, i, M and the flows s and f (minor version 1: "id"
 *     an integer >= 0; f with "bp":"e", so that it binds to the receive
 *     that encloses it rather than to the next span); other Chrome phases
 *     are an error. otherData.minor_version (absent: 0) may be any minor
 *     of this version; a phase this reader does not know names it.
 *   - Numbers in ts/dur may be written any way JSON allows ("1.5e3", more
 *     than three decimals): they are rounded to the nearest nanosecond,
 *     halves away from zero; outside int64 is an error.
 *   - Duplicate keys anywhere are an error (which one wins is undefined).
 *   - otherData.config.machine.cluster is at most 4096 bytes, as dtrain
 *     records it (a longer one is refused, not kept).
 *   - Every well-known integer is checked against its range (docs/trace-
 *     format.md "Ranges"): times >= 0 with ts + dur representable, pid
 *     below the world and iter <= train_iters and layer <= num_layers when
 *     otherData.config says them, tid a lane. Consumers index arrays and
 *     add times with these values, so they are checked once, here.
 *
 * Invariant: on failure nothing is returned (*out = NULL) and the message
 * names the file and either a position or traceEvents[i] and the field. */
#define _POSIX_C_SOURCE 200809L
#include "dt_file.h"
#include "dt_trace.h"
#include "trace_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

typedef struct dt__rd {
    const char *path;
    const char *buf; /* the whole file */
    size_t len;
    size_t pos; /* next byte the walker looks at */
    dt_trace *t;
    size_t cap; /* allocated length of t->events */
    int seen_other, seen_events;
    int header_only; /* dt_trace_read_header: stop after otherData */
    /* ranges of the well-known integers, from otherData.config when it says
     * (dt__config_limits); otherwise only what the format itself implies */
    int64_t max_iter;  /* largest args.iter */
    int64_t max_pid;   /* largest pid: world size - 1 */
    int64_t max_layer; /* largest args.layer: num_layers (the head) */
    char iter_why[96], pid_why[160], layer_why[64]; /* where each bound comes from, for messages */
} dt__rd;

/* ---- errors ------------------------------------------------------------- */

/* "line L, column C (byte B)" for the point after `used` bytes, counted the
 * way jansson counts (columns are characters read on that line). */
static void dt__where(const dt__rd *r, size_t used, char *out, size_t cap)
{
    long line = 1, col = 0;
    for (size_t i = 0; i < used && i < r->len; i++) {
        unsigned char c = (unsigned char)r->buf[i];
        if (c == '\n') {
            line++;
            col = 0;
        } else if ((c & 0xC0) != 0x80) {
            col++;
        }
    }
    snprintf(out, cap, "line %ld, column %ld (byte %zu)", line, col, used);
}

/* A syntax error at byte offset at (the offending byte; at == len for EOF). */
__attribute__((format(printf, 3, 4))) static dt_status dt__fail_at(const dt__rd *r, size_t at, const char *fmt, ...)
{
    char msg[256], where[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    dt__where(r, at < r->len ? at + 1 : r->len, where, sizeof where);
    return DT_FAIL(DT_ERR_FORMAT, "%s: %s: %s", r->path, where, msg);
}

static const char *dt__type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

/* ---- the outer walker --------------------------------------------------- */

static void dt__skip_ws(dt__rd *r)
{
    while (r->pos < r->len) {
        char c = r->buf[r->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        r->pos++;
    }
}

/* One JSON value at r->pos, parsed by jansson; r->pos moves past it. The
 * printf-style tail says where the value is; it is formatted only on
 * failure, as this runs once per event. */
__attribute__((format(printf, 3, 4))) static dt_status dt__take(dt__rd *r, json_t **out, const char *fmt, ...)
{
    json_error_t jerr;
    *out = json_loadb(r->buf + r->pos, r->len - r->pos,
                      JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK | JSON_REJECT_DUPLICATES, &jerr);
    size_t used = jerr.position > 0 ? (size_t)jerr.position : 0;
    if (!*out) {
        char where[96], in[160];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(in, sizeof in, fmt, ap);
        va_end(ap);
        dt__where(r, r->pos + used, where, sizeof where);
        return DT_FAIL(DT_ERR_FORMAT, "%s: %s: %s (in %s)", r->path, where, jerr.text, in);
    }
    r->pos += used;
    return DT_OK;
}

/* Expects one of the characters in seps after optional whitespace; stores it
 * in *got (if not NULL) and moves past it. Otherwise fails; the printf-style
 * tail says where ("after traceEvents[3]"). */
__attribute__((format(printf, 4, 5))) static dt_status dt__expect(dt__rd *r, const char *seps, char *got,
                                                                  const char *fmt, ...)
{
    dt__skip_ws(r);
    if (r->pos < r->len && strchr(seps, r->buf[r->pos])) {
        if (got) *got = r->buf[r->pos];
        r->pos++;
        return DT_OK;
    }
    char after[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(after, sizeof after, fmt, ap);
    va_end(ap);
    if (r->pos >= r->len)
        return dt__fail_at(r, r->len, "the file ends %s (cut short: did the writer crash or is it still running?)",
                           after);
    char list[16] = "";
    for (const char *sp = seps; *sp; sp++) {
        size_t n = strlen(list);
        snprintf(list + n, sizeof list - n, "%s'%c'", n ? " or " : "", *sp);
    }
    return dt__fail_at(r, r->pos, "expected %s %s, found '%c'", list, after, r->buf[r->pos]);
}

/* ---- exact microsecond text -> nanoseconds ------------------------------ */

/* s[0..n) is a JSON number (checked by jansson) in microseconds. Sets *ns to
 * it times 1000, rounded to nearest (halves away from zero). 0 if out of
 * int64 range. */
static int dt__us_text_to_ns(const char *s, size_t n, int64_t *ns)
{
    size_t i = 0;
    int neg = 0;
    if (i < n && s[i] == '-') {
        neg = 1;
        i++;
    }
    /* value = 0.dig[0]dig[1]... * 10^point, dig without leading zeros.
     * Significant digits past 64 are dropped: within int64 range they are
     * far below a nanosecond, and beyond it the result is an error anyway. */
    char dig[64];
    size_t nd = 0;
    long point = 0;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
        if (nd == 0 && s[i] == '0') continue;
        if (nd < sizeof dig) dig[nd++] = s[i];
        if (point < 100000) point++;
    }
    if (i < n && s[i] == '.')
        for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
            if (nd == 0 && s[i] == '0') {
                if (point > -100000) point--;
                continue;
            }
            if (nd < sizeof dig) dig[nd++] = s[i];
        }
    long exp10 = 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        int eneg = 0;
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) eneg = s[i++] == '-';
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
            if (exp10 < 100000) exp10 = exp10 * 10 + (s[i] - '0');
        if (eneg) exp10 = -exp10;
    }
    if (nd == 0) {
        *ns = 0;
        return 1;
    }
    /* times 1000: the nanosecond point falls after `point` digits of dig */
    point += exp10 + 3;
    if (point > 20) return 0; /* >= 10^20 ns with a nonzero leading digit */
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    uint64_t v = 0;
    for (long k = 0; k < point; k++) {
        unsigned d = (size_t)k < nd ? (unsigned)(dig[k] - '0') : 0;
        if (v > (limit - d) / 10) return 0;
        v = v * 10 + d;
    }
    if (point >= 0 && (size_t)point < nd && dig[point] >= '5') {
        if (v >= limit) return 0;
        v++;
    }
    if (!neg) *ns = (int64_t)v;
    else *ns = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    return 1;
}

/* ---- finding a member's text inside a (valid) event object -------------- */

static size_t dt__ws(const char *s, size_t n, size_t i)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    return i;
}

/* i at an opening quote; returns the index after the closing quote. */
static size_t dt__skip_string(const char *s, size_t n, size_t i)
{
    for (i++; i < n; i++) {
        if (s[i] == '\\') i++;
        else if (s[i] == '"') return i + 1;
    }
    return n;
}

static size_t dt__skip_value(const char *s, size_t n, size_t i)
{
    if (i >= n) return n;
    if (s[i] == '"') return dt__skip_string(s, n, i);
    if (s[i] == '{' || s[i] == '[') {
        int depth = 0;
        while (i < n) {
            char c = s[i];
            if (c == '"') {
                i = dt__skip_string(s, n, i);
                continue;
            }
            if (c == '{' || c == '[') depth++;
            if (c == '}' || c == ']') {
                if (--depth == 0) return i + 1;
            }
            i++;
        }
        return n;
    }
    while (i < n && !strchr(" \t\r\n,}]", s[i])) i++;
    return i;
}

/* Does the JSON string text s[0..n) (quotes included) decode to key? */
static int dt__key_is(const char *s, size_t n, const char *key)
{
    if (!memchr(s, '\\', n)) return n - 2 == strlen(key) && memcmp(s + 1, key, n - 2) == 0;
    json_t *j = json_loadb(s, n, JSON_DECODE_ANY, NULL);
    int eq = j && json_is_string(j) && strcmp(json_string_value(j), key) == 0;
    json_decref(j);
    return eq;
}

/* In the text of an object jansson accepted (so well formed, no duplicate
 * keys), the text of the value of top-level member key. */
static int dt__member_text(const char *s, size_t n, const char *key, const char **val, size_t *vlen)
{
    size_t i = dt__ws(s, n, 0);
    if (i >= n || s[i] != '{') return 0;
    for (i++;;) {
        i = dt__ws(s, n, i);
        if (i >= n || s[i] != '"') return 0;
        size_t k0 = i;
        i = dt__skip_string(s, n, i);
        int match = dt__key_is(s + k0, i - k0, key);
        i = dt__ws(s, n, i);
        if (i >= n || s[i] != ':') return 0;
        i = dt__ws(s, n, i + 1);
        size_t v0 = i;
        i = dt__skip_value(s, n, i);
        if (match) {
            *val = s + v0;
            *vlen = i - v0;
            return 1;
        }
        i = dt__ws(s, n, i);
        if (i >= n || s[i] != ',') return 0;
        i++;
    }
}

/* ---- one event ---------------------------------------------------------- */

static const char *const dt__span_keys[] = {"iter", "micro_batch", "layer", "bytes"};

/* Copies a string member into dst[cap]; required says whether absence is an
 * error; empty_ok whether "" is allowed. ctx is "path: traceEvents[i]". */
static dt_status dt__get_str(const char *ctx, json_t *obj, const char *key, const char *shown, int required,
                             int empty_ok, char *dst, size_t cap)
{
    json_t *v = json_object_get(obj, key);
    if (!v) {
        if (required) return DT_FAIL(DT_ERR_FORMAT, "%s: missing \"%s\"", ctx, shown);
        dst[0] = '\0';
        return DT_OK;
    }
    if (!json_is_string(v))
        return DT_FAIL(DT_ERR_FORMAT, "%s: \"%s\" must be a string, not %s", ctx, shown, dt__type_name(v));
    size_t n = json_string_length(v);
    if (n >= cap) return DT_FAIL(DT_ERR_FORMAT, "%s: \"%s\" is %zu bytes, longer than %zu", ctx, shown, n, cap - 1);
    if (n == 0 && !empty_ok) return DT_FAIL(DT_ERR_FORMAT, "%s: \"%s\" is empty", ctx, shown);
    memcpy(dst, json_string_value(v), n + 1);
    return DT_OK;
}

/* An integer in lo..hi; the field is shown as prefix+key ("args.layer");
 * why (may be "") says where the range comes from. */
static dt_status dt__get_int(const char *ctx, json_t *v, const char *prefix, const char *key, int64_t lo, int64_t hi,
                             const char *why, int64_t *out)
{
    if (!json_is_integer(v))
        return DT_FAIL(DT_ERR_FORMAT, "%s: \"%s%s\" must be an integer, not %s", ctx, prefix, key, dt__type_name(v));
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return DT_FAIL(DT_ERR_FORMAT, "%s: \"%s%s\" is %" PRId64 "; expected %" PRId64 "..%" PRId64 "%s", ctx, prefix,
                       key, (int64_t)x, lo, hi, why);
    *out = (int64_t)x;
    return DT_OK;
}

/* ts or dur: a number, converted exactly from its text. */
static dt_status dt__get_time(const char *ctx, json_t *obj, const char *key, const char *text, size_t text_len,
                              int64_t *ns)
{
    json_t *v = json_object_get(obj, key);
    if (!v) return DT_FAIL(DT_ERR_FORMAT, "%s: missing \"%s\"", ctx, key);
    if (!json_is_number(v))
        return DT_FAIL(DT_ERR_FORMAT, "%s: \"%s\" must be a number (microseconds), not %s", ctx, key, dt__type_name(v));
    const char *num;
    size_t num_len;
    if (!dt__member_text(text, text_len, key, &num, &num_len))
        return DT_FAIL(DT_ERR_FORMAT, "%s: cannot locate the text of \"%s\"", ctx, key);
    if (!dt__us_text_to_ns(num, num_len, ns))
        return DT_FAIL(DT_ERR_FORMAT, "%s: \"%s\" %.*s us is outside the int64 nanosecond range", ctx, key,
                       (int)(num_len > 40 ? 40 : num_len), num);
    return DT_OK;
}

static dt_status dt__add_extra(const char *ctx, dt_trace_event *e, const char *key, json_t *v)
{
    if (e->n_extra >= DT_TRACE_MAX_EXTRA)
        return DT_FAIL(DT_ERR_FORMAT,
                       "%s: more than %d numeric args beyond the known ones (at \"%s\"); this reader keeps at most "
                       "DT_TRACE_MAX_EXTRA = %d",
                       ctx, DT_TRACE_MAX_EXTRA, key, DT_TRACE_MAX_EXTRA);
    size_t n = strlen(key);
    if (n == 0 || n >= sizeof e->extra[0].key)
        return DT_FAIL(DT_ERR_FORMAT, "%s: numeric arg key \"%s\" must be 1..%zu bytes", ctx, key,
                       sizeof e->extra[0].key - 1);
    memcpy(e->extra[e->n_extra].key, key, n + 1);
    e->extra[e->n_extra].value = json_number_value(v);
    e->n_extra++;
    return DT_OK;
}

static dt_status dt__convert_event(dt__rd *r, json_t *v, size_t idx, const char *text, size_t text_len)
{
    char ctx[512];
    snprintf(ctx, sizeof ctx, "%s: traceEvents[%zu]", r->path, idx);
    if (!json_is_object(v)) return DT_FAIL(DT_ERR_FORMAT, "%s: not an object (%s)", ctx, dt__type_name(v));

    dt_trace_event e;
    memset(&e, 0, sizeof e);
    e.iter = e.micro_batch = e.layer = e.bytes = DT_TRACE_NONE;

    json_t *ph = json_object_get(v, "ph");
    if (!ph) return DT_FAIL(DT_ERR_FORMAT, "%s: missing \"ph\"", ctx);
    if (!json_is_string(ph) || json_string_length(ph) != 1)
        return DT_FAIL(DT_ERR_FORMAT, "%s: \"ph\" must be a one-letter string, not %s", ctx, dt__type_name(ph));
    e.ph = json_string_value(ph)[0];
    if (!strchr("XCiMsf", e.ph) || e.ph == '\0') {
        if (r->t->minor_version > DT_TRACE_VERSION_MINOR)
            return DT_FAIL(DT_ERR_FORMAT,
                           "%s: \"ph\" is \"%c\", unknown to this reader of minor version %d (the file's is %d)", ctx,
                           e.ph, DT_TRACE_VERSION_MINOR, r->t->minor_version);
        return DT_FAIL(DT_ERR_FORMAT, "%s: \"ph\" is \"%c\"; dtrain traces use X, C, i, M, s and f only", ctx, e.ph);
    }
    const int flow = e.ph == DT_TRACE_FLOW_START || e.ph == DT_TRACE_FLOW_END;

    DT_CHECK(dt__get_str(ctx, v, "name", "name", 1, 0, e.name, sizeof e.name));
    DT_CHECK(dt__get_str(ctx, v, "cat", "cat", 0, 1, e.cat, sizeof e.cat));
    DT_CHECK(dt__get_time(ctx, v, "ts", text, text_len, &e.ts_ns));
    if (e.ts_ns < 0)
        return DT_FAIL(DT_ERR_FORMAT, "%s: \"ts\" is negative (%" PRId64 " ns); times are >= 0 ns from the run's start",
                       ctx, e.ts_ns);
    if (e.ph == DT_TRACE_COMPLETE) {
        DT_CHECK(dt__get_time(ctx, v, "dur", text, text_len, &e.dur_ns));
        if (e.dur_ns < 0) return DT_FAIL(DT_ERR_FORMAT, "%s: \"dur\" is negative", ctx);
        if (e.dur_ns > INT64_MAX - e.ts_ns)
            return DT_FAIL(DT_ERR_FORMAT,
                           "%s: \"ts\" + \"dur\" (%" PRId64 " + %" PRId64 " ns) is past the largest time, %" PRId64
                           " ns",
                           ctx, e.ts_ns, e.dur_ns, INT64_MAX);
    }
    int64_t x;
    json_t *f;
    if (!(f = json_object_get(v, "pid"))) return DT_FAIL(DT_ERR_FORMAT, "%s: missing \"pid\"", ctx);
    DT_CHECK(dt__get_int(ctx, f, "", "pid", 0, r->max_pid, r->pid_why, &x));
    e.pid = (int)x;
    if (!(f = json_object_get(v, "tid"))) return DT_FAIL(DT_ERR_FORMAT, "%s: missing \"tid\"", ctx);
    DT_CHECK(dt__get_int(ctx, f, "", "tid", DT_LANE_COMPUTE, DT_LANE_DATA, " (a lane, DT_LANE_*)", &x));
    e.tid = (int)x;
    if (flow) {
        if (!(f = json_object_get(v, "id"))) return DT_FAIL(DT_ERR_FORMAT, "%s: missing \"id\" (a flow's)", ctx);
        DT_CHECK(dt__get_int(ctx, f, "", "id", 0, INT64_MAX, "", &x));
        e.flow_id = x;
        json_t *bp = json_object_get(v, "bp");
        if (e.ph == DT_TRACE_FLOW_END && !(json_is_string(bp) && strcmp(json_string_value(bp), "e") == 0))
            return DT_FAIL(DT_ERR_FORMAT,
                           "%s: a flow end needs \"bp\":\"e\" (binding to the receive span enclosing it)", ctx);
    }

    json_t *args = json_object_get(v, "args");
    if (args && !json_is_object(args))
        return DT_FAIL(DT_ERR_FORMAT, "%s: \"args\" must be an object, not %s", ctx, dt__type_name(args));
    int have_value = 0;
    const char *key;
    json_t *a;
    if (args) {
        json_object_foreach(args, key, a)
        {
            if (e.ph == DT_TRACE_COUNTER && strcmp(key, "value") == 0) {
                if (!json_is_number(a))
                    return DT_FAIL(DT_ERR_FORMAT, "%s: \"args.value\" must be a number, not %s", ctx, dt__type_name(a));
                e.value = json_number_value(a);
                have_value = 1;
                continue;
            }
            if (e.ph == DT_TRACE_METADATA && strcmp(key, "name") == 0) {
                DT_CHECK(dt__get_str(ctx, args, "name", "args.name", 1, 1, e.label, sizeof e.label));
                continue;
            }
            if (e.ph == DT_TRACE_COMPLETE || e.ph == DT_TRACE_INSTANT) {
                int k = 0;
                while (k < 4 && strcmp(key, dt__span_keys[k]) != 0) k++;
                if (k < 4) {
                    /* iter 0..max_iter, micro_batch 0..INT_MAX, layer -1..max_layer, bytes 0..INT64_MAX */
                    const int64_t lo = k == 2 ? -1 : 0;
                    const int64_t hi = k == 0 ? r->max_iter : k == 1 ? INT_MAX : k == 2 ? r->max_layer : INT64_MAX;
                    const char *why = k == 0 ? r->iter_why : k == 2 ? r->layer_why : "";
                    DT_CHECK(dt__get_int(ctx, a, "args.", key, lo, hi, why, &x));
                    if (k == 0) e.iter = x;
                    if (k == 1) e.micro_batch = (int)x;
                    if (k == 2) e.layer = (int)x;
                    if (k == 3) e.bytes = x;
                    continue;
                }
            }
            if (json_is_number(a)) DT_CHECK(dt__add_extra(ctx, &e, key, a));
            /* other non-numeric args: ignored (additive fields) */
        }
    }
    if (e.ph == DT_TRACE_COUNTER && !have_value) return DT_FAIL(DT_ERR_FORMAT, "%s: missing \"args.value\"", ctx);
    if (e.ph == DT_TRACE_METADATA && !(args && json_object_get(args, "name")))
        return DT_FAIL(DT_ERR_FORMAT, "%s: missing \"args.name\"", ctx);

    if (r->t->n_events == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 256;
        dt_trace_event *ev = realloc(r->t->events, cap * sizeof *ev);
        if (!ev) return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory for %zu events", r->path, cap);
        r->t->events = ev;
        r->cap = cap;
    }
    r->t->events[r->t->n_events++] = e;
    return DT_OK;
}

/* ---- otherData and the top level ---------------------------------------- */

/* Integer key of the config in lo..hi, or dflt when absent. */
static dt_status dt__cfg_int(const dt__rd *r, json_t *cfg, const char *key, int64_t lo, int64_t hi, int64_t dflt,
                             int64_t *out)
{
    json_t *v = json_object_get(cfg, key);
    *out = dflt;
    if (!v) return DT_OK;
    if (!json_is_integer(v))
        return DT_FAIL(DT_ERR_FORMAT, "%s: otherData.config: \"%s\": expected an integer in %" PRId64 "..%" PRId64
                       ", not %s", r->path, key, lo, hi, dt__type_name(v));
    if (json_integer_value(v) < lo || json_integer_value(v) > hi)
        return DT_FAIL(DT_ERR_FORMAT, "%s: otherData.config: \"%s\": expected an integer in %" PRId64 "..%" PRId64
                       ", not %" PRId64, r->path, key, lo, hi, (int64_t)json_integer_value(v));
    *out = (int64_t)json_integer_value(v);
    return DT_OK;
}

/* The ranges otherData.config implies for the events (docs/trace-format.md,
 * "Ranges"): iter <= train_iters (the evaluation after the last step carries
 * train_iters), times the workers under a parameter server (a server's
 * `apply` counts every worker's push); pid < the world, t*p*d plus the
 * servers; layer <= num_layers (the head). A key that is absent leaves the
 * format's own range. The sizes are capped so that the products fit. */
static dt_status dt__config_limits(dt__rd *r, json_t *cfg)
{
    int64_t iters, d, p, t, c, k, layers;
    DT_CHECK(dt__cfg_int(r, cfg, "train_iters", 0, (int64_t)1 << 40, -1, &iters));
    DT_CHECK(dt__cfg_int(r, cfg, "data_parallel_size", 1, 1 << 20, 1, &d));
    DT_CHECK(dt__cfg_int(r, cfg, "pipeline_model_parallel_size", 1, 1 << 20, 1, &p));
    DT_CHECK(dt__cfg_int(r, cfg, "tensor_model_parallel_size", 1, 1 << 20, 1, &t));
    DT_CHECK(dt__cfg_int(r, cfg, "context_parallel_size", 1, 1 << 20, 1, &c));
    DT_CHECK(dt__cfg_int(r, cfg, "num_ps_servers", 0, 1 << 20, 0, &k));
    DT_CHECK(dt__cfg_int(r, cfg, "num_layers", 1, 1 << 20, -1, &layers));
    json_t *ex = json_object_get(cfg, "allreduce");
    const int ps = json_is_string(ex) && strncmp(json_string_value(ex), "ps-", 3) == 0;
    if (iters >= 0) {
        r->max_iter = iters * (ps ? d : 1);
        if (ps)
            snprintf(r->iter_why, sizeof r->iter_why, " (otherData.config: train_iters %" PRId64 " x %" PRId64
                     " workers)", iters, d);
        else snprintf(r->iter_why, sizeof r->iter_why, " (otherData.config.train_iters)");
    }
    if (json_object_get(cfg, "data_parallel_size") || json_object_get(cfg, "pipeline_model_parallel_size") ||
        json_object_get(cfg, "tensor_model_parallel_size")) {
        const int64_t world = t * c * p * d + (ps ? k : 0);
        if (world - 1 < r->max_pid) r->max_pid = world - 1;
        snprintf(r->pid_why, sizeof r->pid_why,
                 " (otherData.config: a world of %" PRId64 " ranks, tensor x context x pipeline x data parallel%s)",
                 world,
                 ps ? " + parameter servers" : "");
    }
    if (layers >= 0) {
        r->max_layer = layers;
        snprintf(r->layer_why, sizeof r->layer_why, " (otherData.config.num_layers)");
    }
    return DT_OK;
}

/* otherData.config.machine.cluster: DT_CLUSTER as dtrain recorded it, at
 * most DT__TRACE_CLUSTER_MAX bytes (docs/trace-format.md; dtrain refuses a
 * longer one, and so does dtsim --config). */
#define DT__TRACE_CLUSTER_MAX 4096
static dt_status dt__config_cluster(const char *p, json_t *cfg)
{
    json_t *m = json_object_get(cfg, "machine");
    json_t *c = json_is_object(m) ? json_object_get(m, "cluster") : NULL;
    if (!c || json_is_null(c)) return DT_OK;
    if (!json_is_string(c))
        return DT_FAIL(DT_ERR_FORMAT, "%s: otherData.config.machine.cluster must be a string or null, not %s", p,
                       dt__type_name(c));
    if (json_string_length(c) > DT__TRACE_CLUSTER_MAX)
        return DT_FAIL(DT_ERR_FORMAT,
                       "%s: otherData.config.machine.cluster is %zu bytes; expected at most %d (a one-line "
                       "description, docs/trace-format.md)",
                       p, json_string_length(c), DT__TRACE_CLUSTER_MAX);
    return DT_OK;
}

static dt_status dt__convert_other(dt__rd *r, json_t *o)
{
    const char *p = r->path;
    if (!json_is_object(o))
        return DT_FAIL(DT_ERR_FORMAT, "%s: otherData must be an object, not %s", p, dt__type_name(o));
    json_t *fmt = json_object_get(o, "format");
    if (!fmt || !json_is_string(fmt))
        return DT_FAIL(DT_ERR_FORMAT, "%s: otherData.format is missing or not a string: not a dtrain trace", p);
    if (strcmp(json_string_value(fmt), "dtrain-trace") != 0)
        return DT_FAIL(DT_ERR_FORMAT, "%s: otherData.format is \"%s\", expected \"dtrain-trace\"", p,
                       json_string_value(fmt));
    json_t *ver = json_object_get(o, "version");
    if (!ver)
        return DT_FAIL(DT_ERR_FORMAT, "%s: otherData.version is missing (this dtrain reads version %d)", p,
                       DT_TRACE_VERSION);
    if (!json_is_integer(ver))
        return DT_FAIL(DT_ERR_FORMAT, "%s: otherData.version must be an integer, not %s (this dtrain reads version %d)",
                       p, dt__type_name(ver), DT_TRACE_VERSION);
    if (json_integer_value(ver) != DT_TRACE_VERSION)
        return DT_FAIL(DT_ERR_FORMAT,
                       "%s: trace format version %" JSON_INTEGER_FORMAT "; this dtrain reads version %d only", p,
                       json_integer_value(ver), DT_TRACE_VERSION);
    r->t->version = (int)json_integer_value(ver);
    json_t *minor = json_object_get(o, "minor_version");
    if (minor) {
        int64_t m;
        char mctx[512];
        snprintf(mctx, sizeof mctx, "%s: otherData", p);
        DT_CHECK(dt__get_int(mctx, minor, "", "minor_version", 0, INT_MAX, "", &m));
        r->t->minor_version = (int)m;
    }
    char ctx[512];
    snprintf(ctx, sizeof ctx, "%s: otherData", p);
    DT_CHECK(dt__get_str(ctx, o, "tool", "tool", 1, 0, r->t->tool, sizeof r->t->tool));
    json_t *cfg = json_object_get(o, "config");
    if (cfg) {
        if (!json_is_object(cfg))
            return DT_FAIL(DT_ERR_FORMAT, "%s: otherData.config must be an object, not %s", p, dt__type_name(cfg));
        char *s = json_dumps(cfg, JSON_COMPACT);
        r->t->config_json = s ? strdup(s) : NULL;
        free(s);
        if (!r->t->config_json) return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory for otherData.config", p);
        DT_CHECK(dt__config_limits(r, cfg));
        DT_CHECK(dt__config_cluster(p, cfg));
    }
    return dt__trace_read_alignment(p, o, r->max_pid, r->t);
}

static dt_status dt__read_events(dt__rd *r)
{
    dt__skip_ws(r);
    if (r->pos >= r->len || r->buf[r->pos] != '[') {
        if (r->pos < r->len) {
            json_t *v;
            DT_CHECK(dt__take(r, &v, "traceEvents"));
            const char *tn = dt__type_name(v);
            json_decref(v);
            return DT_FAIL(DT_ERR_FORMAT, "%s: traceEvents must be an array, not %s", r->path, tn);
        }
        return dt__fail_at(r, r->len, "the file ends before traceEvents' value (cut short)");
    }
    r->pos++;
    dt__skip_ws(r);
    if (r->pos < r->len && r->buf[r->pos] == ']') {
        r->pos++;
        return DT_OK;
    }
    for (size_t idx = 0;; idx++) {
        dt__skip_ws(r);
        if (r->pos >= r->len) return dt__expect(r, "{", NULL, "inside traceEvents after %zu events", idx);
        size_t start = r->pos;
        json_t *v;
        DT_CHECK(dt__take(r, &v, "traceEvents[%zu]", idx));
        dt_status st = dt__convert_event(r, v, idx, r->buf + start, r->pos - start);
        json_decref(v);
        if (st != DT_OK) return st;
        char c;
        DT_CHECK(dt__expect(r, ",]", &c, "after traceEvents[%zu]", idx));
        if (c == ']') return DT_OK;
    }
}

static dt_status dt__read_top(dt__rd *r)
{
    dt__skip_ws(r);
    if (r->pos >= r->len) return dt__fail_at(r, r->len, "the file is empty (a dtrain trace starts with '{')");
    DT_CHECK(dt__expect(r, "{", NULL, "at the start of a dtrain trace"));
    dt__skip_ws(r);
    if (r->pos < r->len && r->buf[r->pos] == '}') {
        r->pos++;
    } else {
        for (;;) {
            dt__skip_ws(r);
            if (r->pos >= r->len || r->buf[r->pos] != '"')
                DT_CHECK(dt__expect(r, "\"", NULL, "(a key of the top-level object)"));
            json_t *k;
            DT_CHECK(dt__take(r, &k, "a top-level key"));
            char key[64];
            snprintf(key, sizeof key, "%s", json_string_value(k));
            json_decref(k);
            DT_CHECK(dt__expect(r, ":", NULL, "after the key \"%s\"", key));
            dt__skip_ws(r);
            if (strcmp(key, "traceEvents") == 0) {
                if (r->seen_events) return dt__fail_at(r, r->pos, "a second \"traceEvents\" in the top-level object");
                /* The version decides how events are read, so it must be
                 * known first; a Chrome trace from another tool stops here. */
                if (!r->seen_other)
                    return DT_FAIL(DT_ERR_FORMAT,
                                   "%s: not a dtrain trace: \"traceEvents\" comes before any \"otherData\" with "
                                   "format \"dtrain-trace\" (this dtrain reads version %d)",
                                   r->path, DT_TRACE_VERSION);
                r->seen_events = 1;
                DT_CHECK(dt__read_events(r));
            } else {
                if (strcmp(key, "otherData") == 0 && r->seen_other)
                    return dt__fail_at(r, r->pos, "a second \"otherData\" in the top-level object");
                json_t *v;
                DT_CHECK(dt__take(r, &v, "the value of \"%s\"", key));
                dt_status st = DT_OK;
                if (strcmp(key, "otherData") == 0) {
                    r->seen_other = 1;
                    st = dt__convert_other(r, v);
                }
                json_decref(v); /* other keys (displayTimeUnit, ...) do not matter */
                if (st != DT_OK) return st;
                if (r->seen_other && r->header_only) return DT_OK; /* the events are not looked at */
            }
            char c;
            DT_CHECK(dt__expect(r, ",}", &c, "after the value of \"%s\"", key));
            if (c == '}') break;
        }
    }
    dt__skip_ws(r);
    if (r->pos < r->len) return dt__fail_at(r, r->pos, "unexpected data after the end of the trace");
    if (!r->seen_other)
        return DT_FAIL(DT_ERR_FORMAT,
                       "%s: no otherData with format \"dtrain-trace\": not a dtrain trace (dtrain reads its own "
                       "traces, version %d)",
                       r->path, DT_TRACE_VERSION);
    if (!r->seen_events) return DT_FAIL(DT_ERR_FORMAT, "%s: no \"traceEvents\" array", r->path);
    return DT_OK;
}

/* ---- file --------------------------------------------------------------- */

/* Parse buf[0..len) (the whole file's bytes, or its start for header_only);
 * name is the file in messages. */
static dt_status dt__read_buf(const char *name, const char *buf, size_t len, int header_only, dt_trace **out)
{
    dt__rd r;
    memset(&r, 0, sizeof r);
    r.header_only = header_only;
    r.path = name;
    r.buf = buf;
    r.len = len;
    r.t = calloc(1, sizeof *r.t);
    if (!r.t) return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", name);
    /* without a config: the ranges of the fields' C types (dt_trace_event) */
    r.max_iter = INT_MAX;
    r.max_pid = INT_MAX;
    r.max_layer = INT_MAX;
    snprintf(r.iter_why, sizeof r.iter_why, " (no otherData.config.train_iters)");
    dt_status st = dt__read_top(&r);
    if (st != DT_OK) {
        dt_trace_free(r.t);
        return st;
    }
    *out = r.t;
    return DT_OK;
}

dt_status dt_trace_read(const char *path, dt_trace **out)
{
    if (out) *out = NULL;
    if (!path || !out) return DT_FAIL(DT_ERR_INVALID, "dt_trace_read: NULL path or out");
    char *buf;
    size_t len;
    /* a regular file only: a FIFO would block, /dev/zero never ends (dt_file.h) */
    DT_CHECK(dt_file_read_whole(path, NULL, 0, &buf, &len));
    dt_status st = dt__read_buf(path, buf, len, 0, out);
    free(buf);
    return st;
}

/* The header only: the file is read in growing prefixes (64 KiB first; the
 * writer's header is one line of a few KiB) until otherData has been parsed
 * in one; the events after it are never read. A prefix that fails is
 * retried longer unless it was the whole file, so the errors are those of
 * dt_trace_read for the same bytes. */
dt_status dt_trace_read_header(const char *path, dt_trace **out)
{
    if (out) *out = NULL;
    if (!path || !out) return DT_FAIL(DT_ERR_INVALID, "dt_trace_read_header: NULL path or out");
    int fd;
    size_t size;
    DT_CHECK(dt_file_open_input(path, NULL, &fd, &size)); /* a regular file only (dt_file.h) */
    size_t cap = (size_t)1 << 16, len = 0;
    char *buf = NULL;
    dt_status st;
    for (;;) {
        if (cap > size) cap = size; /* never past the size fstat gave: the last prefix is the whole file */
        char *nb = realloc(buf, cap + 1);
        if (!nb) {
            st = DT_FAIL(DT_ERR_NOMEM, "%s: out of memory reading %zu bytes of trace", path, cap);
            break;
        }
        buf = nb;
        st = DT_OK;
        while (len < cap) {
            const ssize_t got = read(fd, buf + len, cap - len);
            if (got < 0 && errno == EINTR) continue;
            if (got < 0) {
                st = DT_FAIL(DT_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
                break;
            }
            if (got == 0) break; /* shrank since fstat: what is there */
            len += (size_t)got;
        }
        if (st != DT_OK) break;
        const int whole = len < cap || cap == size;
        st = dt__read_buf(path, buf, len, 1, out);
        if (st == DT_OK || whole || st == DT_ERR_NOMEM || cap > SIZE_MAX / 4) break;
        cap *= 2;
    }
    free(buf);
    close(fd);
    return st;
}

dt_status dt_trace_read_mem(const char *name, const void *buf, size_t len, dt_trace **out)
{
    if (out) *out = NULL;
    if (!out || (!buf && len)) return DT_FAIL(DT_ERR_INVALID, "dt_trace_read_mem: NULL buf or out");
    return dt__read_buf(name ? name : "(memory)", buf ? (const char *)buf : "", len, 0, out);
}

void dt_trace_free(dt_trace *t)
{
    if (!t) return;
    free(t->merge.pid);
    free(t->merge.offset_ns);
    free(t->merge.error_ns);
    free(t->config_json);
    free(t->events);
    free(t);
}
