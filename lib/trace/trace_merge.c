/* trace_merge.c: one trace for a multi-rank run (dt_trace_merge.h; the
 * format: docs/trace-format.md "Merged files"): the header sections
 * otherData.clock (a rank's file) and otherData.merge (the merged file),
 * the alignment of rank files, and the merged file's writer.
 *
 * The merged file is the rank files' events in ascending pid, each moved
 * by its rank's offset and each message span followed by its flow event
 * (dt_trace_flow_of), under a header that is the first rank's (tool,
 * config) plus otherData.merge. It goes through dt_trace_writer, so it
 * reaches its name whole or not at all.
 *
 * Invariants: offsets are >= 0 (the earliest rank's time 0 is the merged
 * file's), so moved times stay >= 0, and an addition past INT64_MAX is an
 * error, never a wrap; every file is added exactly once before close. */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_trace_merge.h"
#include "trace_internal.h"

/* ---- header sections --------------------------------------------------- */

static const char *dt__jtype(const json_t *v)
{
    return json_is_object(v)    ? "an object"
           : json_is_array(v)   ? "an array"
           : json_is_string(v)  ? "a string"
           : json_is_integer(v) ? "an integer"
           : json_is_real(v)    ? "a real number"
           : json_is_null(v)    ? "null"
                                : "a boolean";
}

/* obj.key, an integer in lo..hi (null allowed when null_ok: *out = -1). */
static dt_status dt__member_int(const char *path, const char *where, json_t *obj, const char *key, int64_t lo,
                                int64_t hi, int null_ok, int64_t *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v) return DT_FAIL(DT_ERR_FORMAT, "%s: %s: missing \"%s\"", path, where, key);
    if (null_ok && json_is_null(v)) return *out = -1, DT_OK;
    if (!json_is_integer(v))
        return DT_FAIL(DT_ERR_FORMAT, "%s: %s.%s must be an integer%s, not %s", path, where, key,
                       null_ok ? " or null" : "", dt__jtype(v));
    const json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return DT_FAIL(DT_ERR_FORMAT, "%s: %s.%s is %" PRId64 "; expected %" PRId64 "..%" PRId64, path, where, key,
                       (int64_t)x, lo, hi);
    *out = (int64_t)x;
    return DT_OK;
}

static dt_status dt__member_method(const char *path, const char *where, json_t *obj, char out[16])
{
    json_t *v = json_object_get(obj, "method");
    if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) >= 16)
        return DT_FAIL(DT_ERR_FORMAT, "%s: %s.method must be a string of 1..15 bytes", path, where);
    memcpy(out, json_string_value(v), json_string_length(v) + 1);
    return DT_OK;
}

dt_status dt__trace_read_alignment(const char *path, json_t *other, int64_t max_pid, dt_trace *t)
{
    const int64_t max_ranks = max_pid < (1 << 20) ? max_pid + 1 : (1 << 20);
    json_t *c = json_object_get(other, "clock");
    if (c) {
        if (!json_is_object(c))
            return DT_FAIL(DT_ERR_FORMAT, "%s: otherData.clock must be an object, not %s", path, dt__jtype(c));
        dt_trace_clock *k = &t->clock;
        int64_t rank, ranks;
        DT_CHECK(dt__member_method(path, "otherData.clock", c, k->method));
        DT_CHECK(dt__member_int(path, "otherData.clock", c, "sync_id", 0, INT64_MAX, 0, &k->sync_id));
        DT_CHECK(dt__member_int(path, "otherData.clock", c, "ranks", 1, max_ranks, 0, &ranks));
        DT_CHECK(dt__member_int(path, "otherData.clock", c, "rank", 0, ranks - 1, 0, &rank));
        DT_CHECK(dt__member_int(path, "otherData.clock", c, "start_ns", 0, INT64_MAX, 0, &k->start_ns));
        DT_CHECK(dt__member_int(path, "otherData.clock", c, "error_ns", 0, INT64_MAX, 0, &k->error_ns));
        k->rank = (int)rank;
        k->ranks = (int)ranks;
    }
    json_t *m = json_object_get(other, "merge");
    if (!m) return DT_OK;
    if (!json_is_object(m))
        return DT_FAIL(DT_ERR_FORMAT, "%s: otherData.merge must be an object, not %s", path, dt__jtype(m));
    dt_trace_merge_info *g = &t->merge;
    DT_CHECK(dt__member_method(path, "otherData.merge", m, g->method));
    const int timed = strcmp(g->method, "ping-pong") == 0;
    DT_CHECK(dt__member_int(path, "otherData.merge", m, "sync_id", 0, INT64_MAX, 0, &g->sync_id));
    json_t *a = json_object_get(m, "ranks");
    if (!json_is_array(a) || json_array_size(a) == 0 || (int64_t)json_array_size(a) > max_ranks)
        return DT_FAIL(DT_ERR_FORMAT, "%s: otherData.merge.ranks must be an array of 1..%" PRId64 " ranks", path,
                       max_ranks);
    const size_t n = json_array_size(a);
    g->pid = malloc(n * sizeof *g->pid);
    g->offset_ns = malloc(n * sizeof *g->offset_ns);
    g->error_ns = malloc(n * sizeof *g->error_ns);
    if (!g->pid || !g->offset_ns || !g->error_ns)
        return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory for %zu merged ranks", path, n);
    for (size_t i = 0; i < n; i++) {
        char where[64];
        snprintf(where, sizeof where, "otherData.merge.ranks[%zu]", i);
        json_t *e = json_array_get(a, i);
        if (!json_is_object(e)) return DT_FAIL(DT_ERR_FORMAT, "%s: %s must be an object", path, where);
        int64_t pid;
        DT_CHECK(dt__member_int(path, where, e, "pid", i ? g->pid[i - 1] + 1 : 0, max_pid, 0, &pid));
        g->pid[i] = (int)pid;
        DT_CHECK(dt__member_int(path, where, e, "offset_ns", 0, INT64_MAX, 0, &g->offset_ns[i]));
        DT_CHECK(dt__member_int(path, where, e, "error_ns", 0, INT64_MAX, !timed, &g->error_ns[i]));
        g->n = (int)i + 1;
    }
    return DT_OK;
}

char *dt_trace_clock_json(const dt_trace_clock *c)
{
    json_t *o = json_pack("{s:{s:s,s:I,s:i,s:i,s:I,s:I}}", "clock", "method", c->method, "sync_id",
                          (json_int_t)c->sync_id, "rank", c->rank, "ranks", c->ranks, "start_ns",
                          (json_int_t)c->start_ns, "error_ns", (json_int_t)c->error_ns);
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return s;
}

/* ---- alignment ---------------------------------------------------------- */

dt_status dt_trace_align_clocks(const dt_trace_clock *c, const char *const *names, int n, dt_trace_merge_file *out)
{
    if (n < 1 || !c || !out) return DT_FAIL(DT_ERR_INVALID, "trace merge: no files");
    int64_t first = INT64_MAX;
    for (int i = 0; i < n; i++) {
        if (strcmp(c[i].method, c[0].method) != 0 || c[i].sync_id != c[0].sync_id || c[i].ranks != c[0].ranks)
            return DT_FAIL(DT_ERR_INVALID,
                           "%s and %s: clocks of different runs (sync_id %" PRId64 " of %d ranks, %" PRId64
                           " of %d): merge the files of one run",
                           names[0], names[i], c[0].sync_id, c[0].ranks, c[i].sync_id, c[i].ranks);
        if (c[i].start_ns < first) first = c[i].start_ns;
    }
    for (int i = 0; i < n; i++) out[i] = (dt_trace_merge_file){c[i].rank, c[i].start_ns - first, c[i].error_ns};
    return DT_OK;
}

/* The one pid of file t (non-metadata events first), or -1 for none; -2 for several. */
static int dt__file_pid(const dt_trace *t, int *other)
{
    int pid = -1;
    for (size_t i = 0; i < t->n_events; i++) {
        if (pid < 0) pid = t->events[i].pid;
        if (t->events[i].pid != pid) {
            *other = t->events[i].pid;
            return -2;
        }
    }
    return pid;
}

/* The end of step 0 in t: of its last span with iter 0, not an evaluation (INT64_MIN: none). */
static int64_t dt__step0_end(const dt_trace *t)
{
    int64_t end = INT64_MIN;
    for (size_t i = 0; i < t->n_events; i++) {
        const dt_trace_event *e = &t->events[i];
        if (e->ph == DT_TRACE_COMPLETE && e->iter == 0 && strcmp(e->name, "evaluate") != 0 &&
            e->ts_ns + e->dur_ns > end)
            end = e->ts_ns + e->dur_ns;
    }
    return end;
}

dt_status dt_trace_align(const dt_trace *const *t, const char *const *names, int n, dt_trace_merge_file *out,
                         char method[16])
{
    if (n < 1 || !t || !out || !method) return DT_FAIL(DT_ERR_INVALID, "trace merge: no files");
    int clocks = 0;
    for (int i = 0; i < n; i++) {
        int other = 0;
        const int pid = dt__file_pid(t[i], &other);
        if (pid == -1) return DT_FAIL(DT_ERR_INVALID, "%s: the trace has no events (no rank to merge)", names[i]);
        if (pid == -2)
            return DT_FAIL(DT_ERR_INVALID, "%s: events of ranks %d and %d: merge takes one rank's file each", names[i],
                           t[i]->events[0].pid, other);
        if (t[i]->merge.method[0])
            return DT_FAIL(DT_ERR_INVALID, "%s: already a merged trace (otherData.merge)", names[i]);
        if (t[i]->clock.method[0] && t[i]->clock.rank != pid)
            return DT_FAIL(DT_ERR_INVALID, "%s: otherData.clock.rank is %d but its events are rank %d's", names[i],
                           t[i]->clock.rank, pid);
        out[i].pid = pid;
        for (int j = 0; j < i; j++)
            if (out[j].pid == pid)
                return DT_FAIL(DT_ERR_INVALID, "%s and %s: both hold rank %d", names[j], names[i], pid);
        clocks += t[i]->clock.method[0] != 0;
    }
    if (clocks == n) {
        dt_trace_clock *c = malloc((size_t)n * sizeof *c);
        if (!c) return DT_FAIL(DT_ERR_NOMEM, "trace merge: out of memory");
        for (int i = 0; i < n; i++) c[i] = t[i]->clock;
        dt_status st = dt_trace_align_clocks(c, names, n, out);
        free(c);
        if (st == DT_OK) snprintf(method, 16, "%s", t[0]->clock.method);
        return st;
    }
    if (clocks > 0) {
        int with = 0, without = 0;
        for (int i = 0; i < n; i++) *(t[i]->clock.method[0] ? &with : &without) = i;
        return DT_FAIL(DT_ERR_INVALID, "%s has otherData.clock and %s has none: files of different runs?", names[with],
                       names[without]);
    }
    /* no clocks: the ends of step 0 together, or every file its own time 0 */
    int64_t latest = INT64_MIN;
    int all = 1;
    for (int i = 0; i < n; i++) {
        const int64_t e = dt__step0_end(t[i]);
        all &= e != INT64_MIN;
        if (e > latest) latest = e;
    }
    for (int i = 0; i < n; i++) {
        out[i].offset_ns = all ? latest - dt__step0_end(t[i]) : 0;
        out[i].error_ns = -1;
    }
    snprintf(method, 16, "%s", all ? "step0" : "none");
    return DT_OK;
}

/* ---- the merged file ----------------------------------------------------- */

struct dt_trace_merger {
    dt_trace_writer *w;
    char *path;
    int n;
    dt_trace_merge_file *files;
    int *added;
    dt_trace_merge_stats stats;
};

void dt_trace_merge_abort(dt_trace_merger *m)
{
    if (!m) return;
    dt_trace_writer_abort(m->w);
    free(m->path);
    free(m->files);
    free(m->added);
    free(m);
}

dt_status dt_trace_merge_open(const char *path, const char *tool, const char *config_json, const char *method,
                              int64_t sync_id, const dt_trace_merge_file *files, int n, dt_trace_merger **out)
{
    if (out) *out = NULL;
    if (!path || !tool || !method || !files || n < 1 || !out)
        return DT_FAIL(DT_ERR_INVALID, "dt_trace_merge_open: NULL argument or no files");
    dt_status st = DT_OK;
    json_t *ranks = json_array();
    for (int i = 0; i < n && ranks; i++) {
        if (files[i].offset_ns < 0 || (i && files[i].pid <= files[i - 1].pid) || files[i].pid < 0) {
            json_decref(ranks);
            return DT_FAIL(DT_ERR_INVALID, "%s: merged rank %d: pids must ascend and offsets be >= 0", path, i);
        }
        json_t *r = json_pack("{s:i,s:I,s:o}", "pid", files[i].pid, "offset_ns", (json_int_t)files[i].offset_ns,
                              "error_ns", files[i].error_ns < 0 ? json_null() : json_integer(files[i].error_ns));
        if (!r || json_array_append_new(ranks, r) != 0) {
            json_decref(ranks);
            ranks = NULL;
        }
    }
    json_t *o = ranks ? json_pack("{s:{s:s,s:I,s:o}}", "merge", "method", method, "sync_id", (json_int_t)sync_id,
                                  "ranks", ranks)
                      : NULL;
    char *other = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    dt_trace_merger *m = calloc(1, sizeof *m);
    if (m) {
        m->path = strdup(path);
        m->files = malloc((size_t)n * sizeof *m->files);
        m->added = calloc((size_t)n, sizeof *m->added);
    }
    if (!other || !m || !m->path || !m->files || !m->added) {
        free(other);
        dt_trace_merge_abort(m);
        return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory for the merged trace's header", path);
    }
    memcpy(m->files, files, (size_t)n * sizeof *files);
    m->n = n;
    m->stats.files = n;
    for (int i = 0; i < n; i++)
        if (files[i].error_ns < 0 || m->stats.max_error_ns < 0) m->stats.max_error_ns = -1;
        else if (files[i].error_ns > m->stats.max_error_ns) m->stats.max_error_ns = files[i].error_ns;
    st = dt_trace_writer_open_ext(path, tool, config_json, other, &m->w);
    free(other);
    if (st != DT_OK) {
        dt_trace_merge_abort(m);
        return st;
    }
    *out = m;
    return DT_OK;
}

dt_status dt_trace_merge_add(dt_trace_merger *m, int i, const dt_trace *t, const char *name)
{
    if (!m || !t || i < 0 || i >= m->n) return DT_FAIL(DT_ERR_INVALID, "dt_trace_merge_add: no such file %d", i);
    if (!name) name = "(rank file)";
    if (m->added[i]) return DT_FAIL(DT_ERR_INVALID, "%s: rank %d added twice", m->path, m->files[i].pid);
    m->added[i] = 1;
    const dt_trace_merge_file *f = &m->files[i];
    for (size_t k = 0; k < t->n_events; k++) {
        dt_trace_event e = t->events[k];
        if (e.pid != f->pid)
            return DT_FAIL(DT_ERR_FORMAT, "%s: traceEvents[%zu]: pid %d in the file of rank %d", name, k, e.pid,
                           f->pid);
        const int64_t end = e.ts_ns + (e.ph == DT_TRACE_COMPLETE ? e.dur_ns : 0);
        if (end > INT64_MAX - f->offset_ns)
            return DT_FAIL(DT_ERR_FORMAT,
                           "%s: traceEvents[%zu] ends at %" PRId64 " ns, past the largest time once "
                           "moved by rank %d's offset %" PRId64 " ns",
                           name, k, end, f->pid, f->offset_ns);
        e.ts_ns += f->offset_ns;
        DT_CHECK(dt_trace_write(m->w, &e));
        m->stats.events++;
        dt_trace_event flow;
        const int made = dt_trace_flow_of(&e, &flow);
        if (made < 0)
            return DT_FAIL(DT_ERR_FORMAT,
                           "%s: traceEvents[%zu] (\"%s\"): \"args.flow\" is %.17g; expected an integer "
                           "in 0..%lld",
                           name, k, e.name, dt_trace_event_arg(&e, "flow", 0), DT_TRACE_FLOW_ID_MAX);
        if (made) {
            DT_CHECK(dt_trace_write(m->w, &flow));
            m->stats.events++;
            m->stats.flows++;
        }
    }
    return DT_OK;
}

dt_status dt_trace_merge_close(dt_trace_merger *m, dt_trace_merge_stats *stats)
{
    if (!m) return DT_FAIL(DT_ERR_INVALID, "dt_trace_merge_close: no merger");
    for (int i = 0; i < m->n; i++)
        if (!m->added[i]) {
            const dt_status st = DT_FAIL(DT_ERR_INVALID, "%s: rank %d's events were never added (not written)", m->path,
                                         m->files[i].pid);
            dt_trace_merge_abort(m);
            return st;
        }
    if (stats) *stats = m->stats;
    const dt_status st = dt_trace_writer_close(m->w);
    m->w = NULL;
    dt_trace_merge_abort(m);
    return st;
}

/* ---- rank files on disk ---------------------------------------------------- */

dt_status dt_trace_merge_files(const char *out_path, const char *const *paths, int n, dt_trace_merge_stats *stats)
{
    if (!out_path || !paths || n < 1) return DT_FAIL(DT_ERR_INVALID, "trace merge: no files to merge");
    dt_trace **t = calloc((size_t)n, sizeof *t);
    dt_trace_merge_file *f = malloc((size_t)n * sizeof *f);
    int *order = malloc((size_t)n * sizeof *order);
    dt_trace_merge_file *sorted = malloc((size_t)n * sizeof *sorted);
    dt_status st = t && f && order && sorted ? DT_OK : DT_FAIL(DT_ERR_NOMEM, "trace merge: out of memory");
    for (int i = 0; i < n && st == DT_OK; i++) st = dt_trace_read(paths[i], &t[i]);
    char method[16] = "";
    if (st == DT_OK) st = dt_trace_align((const dt_trace *const *)t, paths, n, f, method);
    if (st == DT_OK) { /* ascending pid: insertion sort of the indices (n is the ranks of one run) */
        for (int i = 0; i < n; i++) {
            int j = i;
            for (; j > 0 && f[order[j - 1]].pid > f[i].pid; j--) order[j] = order[j - 1];
            order[j] = i;
        }
        for (int i = 0; i < n; i++) sorted[i] = f[order[i]];
        const dt_trace *first = t[order[0]];
        const int64_t sync = first->clock.method[0] ? first->clock.sync_id : 0;
        dt_trace_merger *m = NULL;
        st = dt_trace_merge_open(out_path, first->tool, first->config_json, method, sync, sorted, n, &m);
        for (int i = 0; i < n && st == DT_OK; i++) st = dt_trace_merge_add(m, i, t[order[i]], paths[order[i]]);
        if (st == DT_OK) st = dt_trace_merge_close(m, stats);
        else dt_trace_merge_abort(m);
    }
    for (int i = 0; t && i < n; i++) dt_trace_free(t[i]);
    free(t);
    free(f);
    free(order);
    free(sorted);
    return st;
}
