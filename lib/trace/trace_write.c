/* trace_write.c: owns the streaming writer of dtrain's trace file and the
 * event helpers (dt_trace_event_init, dt_trace_event_add_arg). The schema is
 * in docs/trace-format.md; the reader is trace_read.c.
 *
 * Layout written:
 *   {"otherData":{...},"displayTimeUnit":"ns","traceEvents":[\n
 *   {event 0},\n
 *   {event 1}\n
 *   ]}\n
 * otherData is built and serialised by jansson. Each event is formatted into
 * w->line and written with one fwrite: jansson escapes every string (name,
 * cat, label, arg keys); numbers are formatted here because jansson cannot
 * write them the way the format needs:
 *   - ts/dur are integer nanoseconds printed as microseconds with exactly
 *     three decimals ("%s%llu.%03llu" on the magnitude, so every int64,
 *     INT64_MIN included, is exact and the reader can recover it digit for
 *     digit; a double could not hold CLOCK_MONOTONIC values to the ns);
 *   - doubles (counter values, extra args) use the shortest of %.15g, %.16g,
 *     %.17g that reads back to the same double, with ".0" appended when the
 *     text would otherwise look like an integer (keeps -0.0 and "real-ness").
 * Flow events ('s', 'f') carry "id" (and 'f' "bp":"e") after "tid".
 *
 * Invariants: the trace reaches its name only whole (dt_file.h: written to
 * a temporary file beside it, renamed at dt_trace_writer_close after a
 * checked flush, fsync and close), so a crash or a full disk leaves the
 * old file or none, never a partial one; the temporary holds the header
 * followed by whole events; an event is validated completely before any
 * byte of it is written, so a rejected event leaves the writer usable; an
 * I/O failure is sticky (every later call
 * fails) and never silent: fwrite, fflush and fclose are all checked. A
 * writer is not thread-safe: one thread writes, or the caller locks. */
#include "dt_trace.h"

#include "dt_file.h"

#include <errno.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* Longest event line: name and label escaped at worst 6 bytes per byte
 * (\u00XX), 8 extras with escaped keys, every number at full width. About
 * 2.4 KiB; the check in dt__buf_* turns an overflow into an error anyway. */
#define DT__LINE_MAX 4096

struct dt_trace_writer {
    dt_file_out *out; /* the file, written whole or not at all (dt_file.h) */
    FILE *f;          /* its stream */
    char *path;
    uint64_t n_events; /* events written so far */
    int failed;        /* an I/O error happened: the file is incomplete */
    char line[DT__LINE_MAX];
};

/* ---- event helpers ------------------------------------------------------ */

/* Copy src into dst[cap], cutting on a UTF-8 character boundary if too long. */
static void dt__copy_utf8(char *dst, size_t cap, const char *src)
{
    size_t n = src ? strlen(src) : 0;
    if (n >= cap) {
        n = cap - 1;
        while (n > 0 && ((unsigned char)src[n] & 0xC0) == 0x80) n--;
    }
    if (n) memcpy(dst, src, n);
    dst[n] = '\0';
}

void dt_trace_event_init(dt_trace_event *e, char ph, const char *name, const char *cat, int pid, int tid, int64_t ts_ns,
                         int64_t dur_ns)
{
    memset(e, 0, sizeof *e);
    e->ph = ph;
    dt__copy_utf8(e->name, sizeof e->name, name);
    dt__copy_utf8(e->cat, sizeof e->cat, cat);
    e->pid = pid;
    e->tid = tid;
    e->ts_ns = ts_ns;
    e->dur_ns = dur_ns;
    e->iter = DT_TRACE_NONE;
    e->micro_batch = DT_TRACE_NONE;
    e->layer = DT_TRACE_NONE;
    e->bytes = DT_TRACE_NONE;
    e->value = 0.0;
    e->label[0] = '\0';
    e->n_extra = 0;
}

/* Keys an extra arg may not use because the phase writes them itself. */
static int dt__key_reserved(char ph, const char *key)
{
    switch (ph) {
    case DT_TRACE_COUNTER: return strcmp(key, "value") == 0;
    case DT_TRACE_METADATA: return strcmp(key, "name") == 0;
    case DT_TRACE_FLOW_START:
    case DT_TRACE_FLOW_END: return 0;
    default:
        return strcmp(key, "iter") == 0 || strcmp(key, "micro_batch") == 0 || strcmp(key, "layer") == 0 ||
               strcmp(key, "bytes") == 0;
    }
}

/* Checks one extra arg (key NUL-terminated, non-empty, not reserved, unique
 * among the first i, value finite). who names the event for the message. */
static dt_status dt__check_extra(const dt_trace_event *e, int i, const char *who)
{
    const dt_trace_arg *a = &e->extra[i];
    if (!memchr(a->key, '\0', sizeof a->key))
        return DT_FAIL(DT_ERR_INVALID, "%s: extra arg %d: key is not NUL-terminated within %zu bytes", who, i,
                       sizeof a->key);
    if (a->key[0] == '\0') return DT_FAIL(DT_ERR_INVALID, "%s: extra arg %d has an empty key", who, i);
    if (dt__key_reserved(e->ph, a->key))
        return DT_FAIL(DT_ERR_INVALID, "%s: extra arg \"%s\" is reserved for a '%c' event (use the field)", who, a->key,
                       e->ph);
    for (int j = 0; j < i; j++)
        if (strcmp(e->extra[j].key, a->key) == 0)
            return DT_FAIL(DT_ERR_INVALID, "%s: extra arg \"%s\" given twice", who, a->key);
    if (!isfinite(a->value))
        return DT_FAIL(DT_ERR_NUMERIC, "%s: extra arg \"%s\" is %g; JSON holds finite numbers only", who, a->key,
                       a->value);
    return DT_OK;
}

const dt_trace_arg *dt_trace_event_find_arg(const dt_trace_event *e, const char *key)
{
    for (int i = 0; i < e->n_extra && i < DT_TRACE_MAX_EXTRA; i++)
        if (strcmp(e->extra[i].key, key) == 0) return &e->extra[i];
    return NULL;
}

double dt_trace_event_arg(const dt_trace_event *e, const char *key, double dflt)
{
    const dt_trace_arg *a = dt_trace_event_find_arg(e, key);
    return a ? a->value : dflt;
}

int dt_trace_flow_of(const dt_trace_event *span, dt_trace_event *flow)
{
    if (!span || !flow || span->ph != DT_TRACE_COMPLETE) return 0;
    const int start = strncmp(span->name, "send", 4) == 0;
    if (!start && strncmp(span->name, "recv", 4) != 0) return 0;
    const dt_trace_arg *a = dt_trace_event_find_arg(span, "flow");
    if (!a) return 0;
    /* an extra is a double: only an integer in range is an id (a cast of 1e308 is undefined) */
    if (!(a->value >= 0 && a->value <= (double)DT_TRACE_FLOW_ID_MAX) || a->value != floor(a->value)) return -1;
    const char *us = strchr(span->name, '_');
    const int64_t ts = start ? span->ts_ns : span->ts_ns + span->dur_ns;
    dt_trace_event_init(flow, start ? DT_TRACE_FLOW_START : DT_TRACE_FLOW_END, us && us[1] ? us + 1 : span->name,
                        "flow", span->pid, span->tid, ts, 0);
    flow->flow_id = (int64_t)a->value;
    return 1;
}

dt_status dt_trace_event_add_arg(dt_trace_event *e, const char *key, double value)
{
    if (!e || !key) return DT_FAIL(DT_ERR_INVALID, "dt_trace_event_add_arg: NULL event or key");
    char who[DT_TRACE_NAME_MAX + 32];
    snprintf(who, sizeof who, "trace event \"%.*s\"", DT_TRACE_NAME_MAX - 1, e->name);
    size_t n = strlen(key);
    if (n == 0) return DT_FAIL(DT_ERR_INVALID, "%s: extra arg key is empty", who);
    if (n >= sizeof e->extra[0].key)
        return DT_FAIL(DT_ERR_INVALID, "%s: extra arg key \"%s\" is %zu bytes, longer than %zu", who, key, n,
                       sizeof e->extra[0].key - 1);
    if (e->n_extra < 0 || e->n_extra >= DT_TRACE_MAX_EXTRA)
        return DT_FAIL(DT_ERR_INVALID, "%s: cannot add \"%s\": already %d extra args (DT_TRACE_MAX_EXTRA is %d)", who,
                       key, e->n_extra, DT_TRACE_MAX_EXTRA);
    dt_trace_arg *a = &e->extra[e->n_extra];
    memcpy(a->key, key, n + 1);
    a->value = value;
    dt_status st = dt__check_extra(e, e->n_extra, who);
    if (st != DT_OK) return st;
    e->n_extra++;
    return DT_OK;
}

/* ---- line formatting ---------------------------------------------------- */

typedef struct dt__buf {
    char *s;
    size_t n, cap;
    int full; /* something did not fit: the line is unusable */
} dt__buf;

static void dt__buf_raw(dt__buf *b, const char *s, size_t n)
{
    if (b->full || n > b->cap - b->n) {
        b->full = 1;
        return;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
}

static void dt__buf_str(dt__buf *b, const char *s) { dt__buf_raw(b, s, strlen(s)); }

/* s as a JSON string, escaped by jansson; 0 if s is not valid UTF-8. */
static int dt__buf_json_str(dt__buf *b, const char *s)
{
    json_t *j = json_string(s);
    if (!j) return 0;
    if (!b->full) {
        size_t avail = b->cap - b->n;
        size_t need = json_dumpb(j, b->s + b->n, avail, JSON_ENCODE_ANY | JSON_COMPACT);
        if (need == 0 || need > avail) b->full = 1;
        else b->n += need;
    }
    json_decref(j);
    return 1;
}

/* Integer nanoseconds as microseconds with exactly three decimals. */
static void dt__buf_ns_as_us(dt__buf *b, int64_t ns)
{
    uint64_t mag = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    char tmp[32];
    int k = snprintf(tmp, sizeof tmp, "%s%" PRIu64 ".%03" PRIu64, ns < 0 ? "-" : "", mag / 1000, mag % 1000);
    dt__buf_raw(b, tmp, (size_t)k);
}

static void dt__buf_int(dt__buf *b, int64_t v)
{
    char tmp[32];
    int k = snprintf(tmp, sizeof tmp, "%" PRId64, v);
    dt__buf_raw(b, tmp, (size_t)k);
}

/* A finite double, shortest text that reads back to the same bits. */
static void dt__buf_double(dt__buf *b, double v)
{
    char tmp[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (strtod(tmp, NULL) == v && signbit(strtod(tmp, NULL)) == signbit(v)) break;
    }
    /* %g and strtod follow LC_NUMERIC; JSON wants '.'. */
    char dp = localeconv()->decimal_point[0];
    if (dp != '.' && dp != '\0')
        for (char *p = tmp; *p; p++)
            if (*p == dp) *p = '.';
    if (!strpbrk(tmp, ".eE")) strcat(tmp, ".0");
    dt__buf_str(b, tmp);
}

/* ", "key":" then the value is appended by the caller. */
static int dt__buf_key(dt__buf *b, int *first, const char *key)
{
    if (!*first) dt__buf_raw(b, ",", 1);
    *first = 0;
    if (!dt__buf_json_str(b, key)) return 0;
    dt__buf_raw(b, ":", 1);
    return 1;
}

/* ---- writer ------------------------------------------------------------- */

static dt_status dt__io_fail(dt_trace_writer *w, const char *what, int err)
{
    w->failed = 1;
    return DT_FAIL(DT_ERR_IO, "%s: %s: %s", w->path, what, strerror(err));
}

static dt_status dt__put(dt_trace_writer *w, const char *s, size_t n)
{
    errno = 0;
    if (fwrite(s, 1, n, w->f) != n) return dt__io_fail(w, "write failed", errno ? errno : EIO);
    return DT_OK;
}

dt_status dt_trace_writer_open(const char *path, const char *tool, const char *config_json, dt_trace_writer **out)
{
    return dt_trace_writer_open_ext(path, tool, config_json, NULL, out);
}

dt_status dt_trace_writer_open_ext(const char *path, const char *tool, const char *config_json, const char *other_json,
                                   dt_trace_writer **out)
{
    if (out) *out = NULL;
    if (!path || !out) return DT_FAIL(DT_ERR_INVALID, "dt_trace_writer_open: NULL path or out");
    if (!tool || !tool[0] || strlen(tool) >= sizeof(((dt_trace *)0)->tool))
        return DT_FAIL(DT_ERR_INVALID, "%s: trace tool name must be 1..%zu bytes (\"dtrain\" or \"dtsim\")", path,
                       sizeof(((dt_trace *)0)->tool) - 1);

    /* Everything that can be wrong with the arguments is found before the
     * file is created. */
    dt_status st = DT_OK;
    json_t *other = json_object();
    json_t *tool_j = json_string(tool);
    if (!other || !tool_j) {
        json_decref(other);
        json_decref(tool_j);
        if (!tool_j && other) return DT_FAIL(DT_ERR_INVALID, "%s: trace tool name is not valid UTF-8", path);
        return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory building the trace header", path);
    }
    int bad = json_object_set_new(other, "format", json_string("dtrain-trace"));
    bad |= json_object_set_new(other, "version", json_integer(DT_TRACE_VERSION));
    bad |= json_object_set_new(other, "minor_version", json_integer(DT_TRACE_VERSION_MINOR));
    bad |= json_object_set_new(other, "tool", tool_j);
    if (config_json) {
        json_error_t jerr;
        json_t *cfg = json_loads(config_json, JSON_REJECT_DUPLICATES, &jerr);
        if (!cfg) {
            json_decref(other);
            return DT_FAIL(DT_ERR_INVALID, "%s: trace config is not valid JSON: column %d: %s", path, jerr.column,
                           jerr.text);
        }
        if (!json_is_object(cfg)) {
            json_decref(cfg);
            json_decref(other);
            return DT_FAIL(DT_ERR_INVALID, "%s: trace config must be a JSON object, not an array", path);
        }
        bad |= json_object_set_new(other, "config", cfg);
    }
    if (other_json) {
        json_error_t jerr;
        json_t *more = json_loads(other_json, JSON_REJECT_DUPLICATES, &jerr);
        if (!json_is_object(more)) {
            json_decref(more);
            json_decref(other);
            return DT_FAIL(DT_ERR_INVALID, "%s: otherData's extra keys are not a JSON object", path);
        }
        const char *key;
        json_t *v;
        json_object_foreach(more, key, v)
        {
            if (json_object_get(other, key) || !strcmp(key, "config")) {
                json_decref(more);
                json_decref(other);
                return DT_FAIL(DT_ERR_INVALID, "%s: otherData.%s is the writer's own key", path, key);
            }
            bad |= json_object_set(other, key, v);
        }
        json_decref(more);
    }
    /* 15 significant digits: configuration values are typed in by people
     * (0.003, not 0.0030000000000000001) and nothing recomputes from them. */
    char *other_s = bad ? NULL : json_dumps(other, JSON_COMPACT | JSON_REAL_PRECISION(15));
    json_decref(other);
    if (!other_s) return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory building the trace header", path);

    dt_trace_writer *w = calloc(1, sizeof *w);
    if (w) w->path = strdup(path);
    if (!w || !w->path) {
        free(w);
        free(other_s);
        return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory opening the trace", path);
    }
    DT_CHECK_GOTO(dt_file_out_open(path, NULL, &w->out), st, fail);
    w->f = dt_file_out_stream(w->out);
    static const char head[] = "{\"otherData\":";
    static const char tail[] = ",\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
    DT_CHECK_GOTO(dt__put(w, head, sizeof head - 1), st, fail);
    DT_CHECK_GOTO(dt__put(w, other_s, strlen(other_s)), st, fail);
    DT_CHECK_GOTO(dt__put(w, tail, sizeof tail - 1), st, fail);
    /* Flushing the header now makes a full disk or a dead NFS mount an error
     * of --trace itself rather than of some later iteration. */
    if (fflush(w->f) != 0) {
        st = dt__io_fail(w, "write failed", errno);
        goto fail;
    }
    free(other_s);
    *out = w;
    return DT_OK;

fail:
    free(other_s);
    dt_file_out_abort(w->out);
    free(w->path);
    free(w);
    return st;
}

/* Everything about e that the writer cannot represent faithfully is an error
 * here, before any byte is written; who names the file and event. */
static dt_status dt__check_event(const dt_trace_event *e, const char *who)
{
    switch (e->ph) {
    case DT_TRACE_COMPLETE:
    case DT_TRACE_COUNTER:
    case DT_TRACE_INSTANT:
    case DT_TRACE_METADATA:
    case DT_TRACE_FLOW_START:
    case DT_TRACE_FLOW_END: break;
    default:
        return DT_FAIL(DT_ERR_INVALID, "%s: ph 0x%02x is not one of 'X', 'C', 'i', 'M', 's', 'f'", who,
                       (unsigned)(unsigned char)e->ph);
    }
    const int flow = e->ph == DT_TRACE_FLOW_START || e->ph == DT_TRACE_FLOW_END;
    if (!memchr(e->name, '\0', sizeof e->name) || !memchr(e->cat, '\0', sizeof e->cat) ||
        !memchr(e->label, '\0', sizeof e->label))
        return DT_FAIL(DT_ERR_INVALID, "%s: name, cat or label is not NUL-terminated in its array", who);
    if (e->name[0] == '\0') return DT_FAIL(DT_ERR_INVALID, "%s: the event has an empty name", who);
    if (e->ph == DT_TRACE_COMPLETE && e->dur_ns < 0)
        return DT_FAIL(DT_ERR_INVALID, "%s: dur_ns is %" PRId64 "; a span cannot be negative", who, e->dur_ns);
    /* the ranges readers check (docs/trace-format.md, "Ranges"), so that what is written reads back */
    if (e->ts_ns < 0)
        return DT_FAIL(DT_ERR_INVALID, "%s: ts_ns is %" PRId64 "; times are >= 0 ns from the run's start", who,
                       e->ts_ns);
    if (e->dur_ns > INT64_MAX - e->ts_ns)
        return DT_FAIL(DT_ERR_INVALID, "%s: ts_ns + dur_ns (%" PRId64 " + %" PRId64 ") is past the largest time", who,
                       e->ts_ns, e->dur_ns);
    if (e->pid < 0) return DT_FAIL(DT_ERR_INVALID, "%s: pid is %d; expected a rank >= 0", who, e->pid);
    if (e->tid < DT_LANE_COMPUTE || e->tid > DT_LANE_DATA)
        return DT_FAIL(DT_ERR_INVALID, "%s: tid is %d; expected a lane %d..%d (DT_LANE_*)", who, e->tid,
                       DT_LANE_COMPUTE, DT_LANE_DATA);
    if ((e->iter != DT_TRACE_NONE && e->iter < 0) || (e->micro_batch != DT_TRACE_NONE && e->micro_batch < 0) ||
        (e->layer != DT_TRACE_NONE && e->layer < -1) || (e->bytes != DT_TRACE_NONE && e->bytes < 0))
        return DT_FAIL(DT_ERR_INVALID,
                       "%s: iter %" PRId64 ", micro_batch %d, layer %d, bytes %" PRId64
                       ": expected >= 0 (layer >= -1) or DT_TRACE_NONE",
                       who, e->iter, e->micro_batch, e->layer, e->bytes);
    if (e->ph != DT_TRACE_COMPLETE && e->dur_ns != 0)
        return DT_FAIL(DT_ERR_INVALID, "%s: dur_ns is %" PRId64 " on a '%c' event; only 'X' events have a duration",
                       who, e->dur_ns, e->ph);
    if ((e->ph == DT_TRACE_COUNTER || e->ph == DT_TRACE_METADATA || flow) &&
        (e->iter != DT_TRACE_NONE || e->micro_batch != DT_TRACE_NONE || e->layer != DT_TRACE_NONE ||
         e->bytes != DT_TRACE_NONE))
        return DT_FAIL(DT_ERR_INVALID,
                       "%s: a '%c' event carries no iter/micro_batch/layer/bytes (Perfetto would plot each "
                       "counter arg as its own series); leave them -1",
                       who, e->ph);
    if (e->ph == DT_TRACE_COUNTER && !isfinite(e->value))
        return DT_FAIL(DT_ERR_NUMERIC, "%s: counter value is %g; JSON holds finite numbers only", who, e->value);
    if (e->ph != DT_TRACE_COUNTER && e->value != 0.0)
        return DT_FAIL(DT_ERR_INVALID, "%s: value is set on a '%c' event; only counters ('C') have one", who, e->ph);
    if (e->ph != DT_TRACE_METADATA && e->label[0] != '\0')
        return DT_FAIL(DT_ERR_INVALID, "%s: label is set on a '%c' event; only metadata ('M') has one", who, e->ph);
    if (flow && e->flow_id < 0)
        return DT_FAIL(DT_ERR_INVALID, "%s: flow_id is %" PRId64 "; expected 0..%" PRId64, who, e->flow_id, INT64_MAX);
    if (!flow && e->flow_id != 0)
        return DT_FAIL(DT_ERR_INVALID, "%s: flow_id is set on a '%c' event; only flows ('s', 'f') have one", who,
                       e->ph);
    if (e->n_extra < 0 || e->n_extra > DT_TRACE_MAX_EXTRA)
        return DT_FAIL(DT_ERR_INVALID, "%s: n_extra is %d, outside 0..%d", who, e->n_extra, DT_TRACE_MAX_EXTRA);
    for (int i = 0; i < e->n_extra; i++) DT_CHECK(dt__check_extra(e, i, who));
    return DT_OK;
}

/* Formats e (already checked) into w->line; returns the length, 0 if a
 * string is not valid UTF-8, -1 if the line did not fit. */
static long dt__format_event(dt_trace_writer *w, const dt_trace_event *e, const char **bad_field)
{
    dt__buf b = {w->line, 0, sizeof w->line, 0};
    if (w->n_events > 0) dt__buf_str(&b, ",\n");
    dt__buf_str(&b, "{\"name\":");
    *bad_field = "name";
    if (!dt__buf_json_str(&b, e->name)) return 0;
    dt__buf_str(&b, ",\"cat\":");
    *bad_field = "cat";
    if (!dt__buf_json_str(&b, e->cat)) return 0;
    char ph[] = ",\"ph\":\"?\",\"ts\":";
    ph[7] = e->ph;
    dt__buf_str(&b, ph);
    dt__buf_ns_as_us(&b, e->ts_ns);
    if (e->ph == DT_TRACE_COMPLETE) {
        dt__buf_str(&b, ",\"dur\":");
        dt__buf_ns_as_us(&b, e->dur_ns);
    }
    dt__buf_str(&b, ",\"pid\":");
    dt__buf_int(&b, e->pid);
    dt__buf_str(&b, ",\"tid\":");
    dt__buf_int(&b, e->tid);
    if (e->ph == DT_TRACE_FLOW_START || e->ph == DT_TRACE_FLOW_END) {
        dt__buf_str(&b, ",\"id\":");
        dt__buf_int(&b, e->flow_id);
        /* bind to the enclosing span (the receive), not to the next one to start */
        if (e->ph == DT_TRACE_FLOW_END) dt__buf_str(&b, ",\"bp\":\"e\"");
    }
    dt__buf_str(&b, ",\"args\":{");
    int first = 1;
    if (e->ph == DT_TRACE_COUNTER) {
        dt__buf_key(&b, &first, "value");
        dt__buf_double(&b, e->value);
    } else if (e->ph == DT_TRACE_METADATA) {
        dt__buf_key(&b, &first, "name");
        *bad_field = "label";
        if (!dt__buf_json_str(&b, e->label)) return 0;
    } else if (e->ph == DT_TRACE_COMPLETE || e->ph == DT_TRACE_INSTANT) {
        if (e->iter != DT_TRACE_NONE) {
            dt__buf_key(&b, &first, "iter");
            dt__buf_int(&b, e->iter);
        }
        if (e->micro_batch != DT_TRACE_NONE) {
            dt__buf_key(&b, &first, "micro_batch");
            dt__buf_int(&b, e->micro_batch);
        }
        if (e->layer != DT_TRACE_NONE) {
            dt__buf_key(&b, &first, "layer");
            dt__buf_int(&b, e->layer);
        }
        if (e->bytes != DT_TRACE_NONE) {
            dt__buf_key(&b, &first, "bytes");
            dt__buf_int(&b, e->bytes);
        }
    }
    *bad_field = "an extra arg key";
    for (int i = 0; i < e->n_extra; i++) {
        if (!dt__buf_key(&b, &first, e->extra[i].key)) return 0;
        dt__buf_double(&b, e->extra[i].value);
    }
    dt__buf_str(&b, "}}");
    return b.full ? -1 : (long)b.n;
}

dt_status dt_trace_write(dt_trace_writer *w, const dt_trace_event *e)
{
    if (!w || !e) return DT_FAIL(DT_ERR_INVALID, "dt_trace_write: NULL writer or event");
    if (w->failed) return DT_FAIL(DT_ERR_IO, "%s: an earlier write failed; the trace is incomplete", w->path);
    char who[512];
    snprintf(who, sizeof who, "%s: trace event %" PRIu64 " (\"%.*s\")", w->path, w->n_events,
             (int)strnlen(e->name, sizeof e->name), e->name);
    DT_CHECK(dt__check_event(e, who));
    const char *bad_field = "";
    long n = dt__format_event(w, e, &bad_field);
    if (n == 0) return DT_FAIL(DT_ERR_INVALID, "%s: %s is not valid UTF-8", who, bad_field);
    if (n < 0) return DT_FAIL(DT_ERR_INVALID, "%s: formatted event exceeds %d bytes", who, DT__LINE_MAX);
    DT_CHECK(dt__put(w, w->line, (size_t)n));
    w->n_events++;
    return DT_OK;
}

void dt_trace_writer_abort(dt_trace_writer *w)
{
    if (!w) return;
    dt_file_out_abort(w->out);
    free(w->path);
    free(w);
}

dt_status dt_trace_writer_close(dt_trace_writer *w)
{
    if (!w) return DT_OK;
    dt_status st = DT_OK;
    if (w->failed) {
        st = DT_FAIL(DT_ERR_IO, "%s: an earlier write failed; the trace is incomplete (not written)", w->path);
        dt_file_out_abort(w->out);
    } else {
        static const char end[] = "\n]}\n";
        st = dt__put(w, end, sizeof end - 1);
        if (st == DT_OK) st = dt_file_out_commit(w->out); /* flush, fsync, close, rename: each checked */
        else dt_file_out_abort(w->out);
    }
    free(w->path);
    free(w);
    return st;
}
