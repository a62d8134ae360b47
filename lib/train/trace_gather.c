/* trace_gather.c: one trace for a multi-rank run (docs/trace-format.md
 * "Merged files"). Under a communicator of several ranks each rank writes
 * its own file (run.json -> run.rank<r>.json, trace_hooks.c); this file
 * puts the ranks' clocks on rank 0's when the trainer is created
 * (dt_comm_clock_sync, recorded in each rank file's otherData.clock) and,
 * when the trace is finished, gathers every rank file to rank 0 over the
 * communicator, which writes the merged file at the --trace path itself
 * (dt_trace_merge). No shared file system is assumed: each rank reads
 * back only its own file.
 *
 * Protocol at the end (world communicator, tags DT__TG_TAG_HDR/DATA):
 * every rank r > 0 sends rank 0 a header {ok, start_ns, error_ns,
 * sync_id, bytes} and, when ok, its file's bytes; rank 0 takes every
 * header, then every file in rank order, parsing and adding each one
 * (dt_trace_read_mem) while the next waits, so it holds one rank file at
 * a time. ok = 0 (the rank's trace failed, or could not be read back):
 * rank 0 still takes every message, writes no merged file and fails
 * naming the rank.
 *
 * Invariants: both steps are collective over cfg.comm and run on every
 * rank with a trace (all ranks get the same flags); the merged file is
 * written whole or not at all (dt_trace_writer). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_trace_merge.h"
#include "trainer_internal.h"

/* below the parameter server's 32000.. and the checkpoint's 31000 */
enum { DT__TG_TAG_HDR = 31100, DT__TG_TAG_DATA = 31101, DT__TG_ROUNDS = 8 };

int dt__trace_multi(const dt_trainer *tr) { return tr->cfg.trace_path && tr->cfg.comm && tr->cfg.comm->size > 1; }

dt_status dt__trace_sync(dt_trainer *tr)
{
    if (!dt__trace_multi(tr)) return DT_OK;
    return dt_comm_clock_sync(tr->cfg.comm, DT__TG_ROUNDS, &tr->trace.clock);
}

char *dt__trace_clock_other(const dt_trainer *tr)
{
    const dt_trace_clock c = {"ping-pong",
                              tr->trace.clock.sync_id,
                              tr->rank,
                              tr->cfg.comm->size,
                              tr->t_start_ns + tr->trace.clock.offset_ns,
                              tr->trace.clock.error_ns};
    return dt_trace_clock_json(&c);
}

/* The whole file at path (this rank's own trace). */
static dt_status dt__slurp(const char *path, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return DT_FAIL(DT_ERR_IO, "--trace %s: cannot read it back to merge: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (buf && n == cap) {
            char *nb = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
            if (!nb) {
                free(buf);
                buf = NULL;
            } else {
                buf = nb;
                cap *= 2;
            }
        }
        if (!buf) {
            fclose(f);
            return DT_FAIL(DT_ERR_NOMEM, "--trace %s: out of memory reading it back to merge", path);
        }
        const size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    const int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return DT_FAIL(DT_ERR_IO, "--trace %s: cannot read it back to merge", path);
    }
    *out = buf;
    *len = n;
    return DT_OK;
}

/* A rank r > 0: its header, then its file. */
static dt_status dt__gather_send(dt_trainer *tr, dt_status closed)
{
    dt_comm *c = tr->cfg.comm;
    char *buf = NULL;
    size_t len = 0;
    dt_status st = closed == DT_OK ? dt__slurp(tr->cfg.trace_path, &buf, &len) : closed;
    const int64_t hdr[5] = {st == DT_OK, tr->t_start_ns + tr->trace.clock.offset_ns, tr->trace.clock.error_ns,
                            tr->trace.clock.sync_id, (int64_t)len};
    dt_comm_request *q[2] = {NULL, NULL};
    dt_status cs = c->ops->isend(c, hdr, sizeof hdr, 0, DT__TG_TAG_HDR, &q[0]);
    if (cs == DT_OK && hdr[0]) cs = c->ops->isend(c, buf, len, 0, DT__TG_TAG_DATA, &q[1]);
    for (int i = 0; i < 2; i++)
        if (q[i]) {
            const dt_status w = c->ops->wait(c, q[i]);
            if (cs == DT_OK) cs = w;
        }
    free(buf);
    return st != DT_OK ? st : cs;
}

/* Rank 0: every header, then every file into the merged trace. */
static dt_status dt__gather_merge(dt_trainer *tr, dt_status closed)
{
    dt_comm *c = tr->cfg.comm;
    const int n = c->size;
    int64_t(*hdr)[5] = calloc((size_t)n, sizeof *hdr);
    dt_trace_clock *clk = calloc((size_t)n, sizeof *clk);
    dt_trace_merge_file *files = calloc((size_t)n, sizeof *files);
    char(*names)[600] = calloc((size_t)n, sizeof *names);
    const char **np = calloc((size_t)n, sizeof *np);
    dt_status st = hdr && clk && files && names && np ? DT_OK : DT_FAIL(DT_ERR_NOMEM, "trace merge: out of memory");
    int talking = st == DT_OK; /* 0 once a message failed: nothing more is taken */
    for (int r = 1; r < n && talking; r++) {
        dt_comm_request *q = NULL;
        dt_status cs = c->ops->irecv(c, hdr[r], sizeof hdr[r], r, DT__TG_TAG_HDR, &q);
        if (cs == DT_OK) cs = c->ops->wait(c, q);
        if (cs != DT_OK) st = cs, talking = 0;
    }
    int failed = closed != DT_OK ? 0 : -1;
    for (int r = 1; st == DT_OK && r < n && failed < 0; r++)
        if (!hdr[r][0]) failed = r;
    dt_trace *own = NULL;
    dt_trace_merger *m = NULL;
    if (st == DT_OK && failed < 0) {
        for (int r = 0; r < n; r++) {
            dt__trace_rank_path(tr->trace.merged_path, r, names[r], sizeof names[r]);
            np[r] = names[r];
            const int64_t *h = hdr[r];
            if (r == 0)
                clk[r] = (dt_trace_clock){"ping-pong",
                                          tr->trace.clock.sync_id,
                                          0,
                                          n,
                                          tr->t_start_ns + tr->trace.clock.offset_ns,
                                          tr->trace.clock.error_ns};
            else clk[r] = (dt_trace_clock){"ping-pong", h[3], r, n, h[1], h[2]};
        }
        st = dt_trace_align_clocks(clk, np, n, files);
        if (st == DT_OK) st = dt_trace_read(tr->cfg.trace_path, &own);
        if (st == DT_OK)
            st = dt_trace_merge_open(tr->trace.merged_path, "dtrain", own->config_json, "ping-pong",
                                     tr->trace.clock.sync_id, files, n, &m);
        if (st == DT_OK) st = dt_trace_merge_add(m, 0, own, names[0]);
        dt_trace_free(own);
    }
    /* every file that was sent is taken, merged or not, so that no rank waits */
    for (int r = 1; r < n && talking; r++) {
        if (!hdr[r][0]) continue;
        const int64_t bytes = hdr[r][4];
        char *buf = bytes >= 0 && (uint64_t)bytes < SIZE_MAX ? malloc((size_t)bytes + 1) : NULL;
        if (!buf) {
            if (st == DT_OK)
                st = DT_FAIL(DT_ERR_NOMEM, "trace merge: out of memory for rank %d's %lld-byte trace", r,
                             (long long)bytes);
            break; /* cannot take it: the job ends on this failure */
        }
        dt_comm_request *q = NULL;
        dt_status cs = c->ops->irecv(c, buf, (size_t)bytes, r, DT__TG_TAG_DATA, &q);
        if (cs == DT_OK) cs = c->ops->wait(c, q);
        if (cs != DT_OK) {
            if (st == DT_OK) st = cs;
            talking = 0;
        }
        dt_trace *t = NULL;
        if (cs == DT_OK && st == DT_OK && m) {
            st = dt_trace_read_mem(names[r], buf, (size_t)bytes, &t);
            if (st == DT_OK) st = dt_trace_merge_add(m, r, t, names[r]);
            dt_trace_free(t);
        }
        free(buf);
    }
    if (m) {
        if (st == DT_OK) st = dt_trace_merge_close(m, NULL);
        else dt_trace_merge_abort(m);
    }
    if (st == DT_OK && failed > 0)
        st = DT_FAIL(DT_ERR_IO, "--trace %s: rank %d's trace failed (its message is on its stderr): no merged trace",
                     tr->trace.merged_path, failed);
    if (st == DT_OK && failed == 0) st = closed;
    free(hdr);
    free(clk);
    free(files);
    free(names);
    free(np);
    return st;
}

dt_status dt__trace_gather(dt_trainer *tr, dt_status closed)
{
    if (!dt__trace_multi(tr)) return closed;
    return tr->rank == 0 ? dt__gather_merge(tr, closed) : dt__gather_send(tr, closed);
}
