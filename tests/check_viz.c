/* check_viz.c: the SDL2 viewer's model and drawing (viz/), headless (no
 * display: dtv_canvas_headless draws into a memory surface).
 *
 * What it checks:
 *   (a) pixels of a simulated pipeline with exact costs (gpipe and 1f1b,
 *       p = 2, m = 4, forward 1000 ns, backward 2000 ns, a free network):
 *       stage 1's compute row is background during its warm-up idle time
 *       (before its first forward), and a point inside a forward / backward
 *       box has that kind's palette colour (found through
 *       dtv_timeline_layout_of, away from the box's centred label);
 *   (b) a real run's rank files (run.rank0.json, run.rank1.json written with
 *       dt_trace_writer, each with its own clock offset) load by the run's
 *       name, merged, with their step-0 ends aligned, as their merged file
 *       (dt_trace_merge_files) loads;
 *   (c) bad and huge inputs fail with a dt_status and a message naming the
 *       file, without crashing: missing, empty, not JSON, a Chrome trace
 *       without otherData, a wrong version, a truncated file, no spans,
 *       5000 ranks (> DTV_MAX_RANKS);
 *   (d) the same render twice gives the same pixels;
 *   (e) a recomputation nested in a backward (a pipeline stage's) is drawn
 *       over the backward box's lower half;
 *   (f) zero-bubble spans: backward_b is drawn as a backward, backward_w in
 *       the weight-gradient colour (neither forward's nor backward's), and
 *       the `chunk` extra gives the trace its chunks per stage; a chunk
 *       out of range is refused naming the event.
 * Files go to a fresh directory under $TMPDIR (or /tmp), removed at the end. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dts_run.h"
#include "dts_scenario.h"
#include "dtv_view.h"
#include "simtest.h"
#include "testutil.h"

enum { W = 1400, H = 800 };
static const int64_t F_NS = 1000, B_NS = 2000;

/* ---- helpers ----------------------------------------------------------------- */

/* A pipeline with exact costs (as tests/check_sim.c's fixed_scenario): L = p
 * blocks, forward F and backward B per block, links with no latency and
 * (nearly) infinite bandwidth. */
static void fixed_scenario(dts_scenario *sc, int p, int m, int steps, dt_sched_kind kind)
{
    dt_test_fixed_scenario(sc, p, p, m, steps, kind, F_NS, B_NS);
}

/* Simulate and index (the viewer takes the events). */
static dtv_trace *sim_trace(dt_sched_kind kind, int p, int m, int steps)
{
    dts_scenario sc;
    fixed_scenario(&sc, p, m, steps, kind);
    dts_run_opts o = {.keep_events = 1};
    dts_summary s;
    ck_dt(dts_run(&sc, &o, &s));
    ck_assert_uint_gt(s.n_ev, 0);
    char *config = dts_scenario_json(&sc);
    ck_assert_ptr_nonnull(config);
    dtv_trace *t = malloc(sizeof *t);
    ck_assert_ptr_nonnull(t);
    ck_dt(dtv_trace_from_events(s.ev, s.n_ev, "fixed", "dtsim", config, t));
    s.ev = NULL;
    s.n_ev = 0;
    dts_summary_free(&s);
    free(config);
    return t;
}

static void free_trace(dtv_trace *t)
{
    dtv_trace_free(t);
    free(t);
}

/* The index of the compute row of the rank running stage s. */
static int stage_compute_row(const dtv_trace *t, int s)
{
    ck_assert_int_ge(t->stage_pid[s], 0);
    for (int r = 0; r < t->n_rows; r++)
        if (t->rows[r].pid == t->stage_pid[s] && t->rows[r].lane == DT_LANE_COMPUTE) return r;
    ck_abort_msg("no compute row for stage %d (pid %d)", s, t->stage_pid[s]);
    return -1;
}

static void render(dtv_canvas *c, const dtv_trace *t, const dtv_view *v)
{
    dtv_clear(c, DTV_BG);
    dtv_draw_timeline(c, (SDL_Rect){0, 0, c->w, c->h}, t, v);
}

/* The whole trace's timeline on a fresh W x H canvas (rows at least 12 px high). */
static void render_whole(const dtv_trace *t, dtv_canvas *c, dtv_view *v, dtv_timeline_layout *L)
{
    ck_dt(dtv_canvas_headless(W, H, c));
    dtv_view_all(v, t);
    v->id = DTV_VIEW_TIMELINE;
    render(c, t, v);
    dtv_timeline_layout_of(c, (SDL_Rect){0, 0, W, H}, t, v, L);
    ck_assert_int_ge(L->row_h, 12);
}

/* The pixel at trace time ns in row k (counted from the view's first row), dy below the row's top. */
static SDL_Color probe(const dtv_canvas *c, const dtv_trace *t, const dtv_view *v, int k, int64_t ns, int dy)
{
    dtv_timeline_layout L;
    dtv_timeline_layout_of(c, (SDL_Rect){0, 0, c->w, c->h}, t, v, &L);
    ck_assert_int_lt(k - v->first_row, L.rows_shown);
    const int x = (int)dtv_x_of(v, L.x, L.w, ns);
    const int y = L.y + (k - v->first_row) * L.row_h + dy;
    ck_assert_int_ge(x, L.x);
    ck_assert_int_lt(x, L.x + L.w);
    return dtv_canvas_pixel(c, x, y);
}

#define ck_color(got, want, what)                                                                                \
    ck_assert_msg(dtv_color_eq((got), (want)), "%s: pixel (%d, %d, %d), expected (%d, %d, %d)", (what), (got).r, \
                  (got).g, (got).b, (want).r, (want).g, (want).b)

static char tmpdir[256];

static void make_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/check_viz.XXXXXX", base && base[0] ? base : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void remove_tmpdir(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* ---- (a) pixels of a simulated pipeline --------------------------------------- */

static void check_pipeline_pixels(dt_sched_kind kind)
{
    dtv_trace *t = sim_trace(kind, 2, 4, 1);
    ck_assert_int_eq(t->p, 2);
    ck_assert_int_eq(t->m, 4);
    dtv_canvas c;
    dtv_view v;
    dtv_timeline_layout L;
    render_whole(t, &c, &v, &L);
    ck_assert_int_eq(L.rows_shown, t->n_rows);
    const int k = stage_compute_row(t, 1);
    const dtv_row *row = &t->rows[k];
    /* the first forward of stage 1 waits for stage 0's: F of idle time (the network is free) */
    const dtv_span *fwd = NULL, *bwd = NULL;
    for (int i = 0; i < row->n; i++) {
        if (!fwd && row->s[i].kind == DTV_FORWARD) fwd = &row->s[i];
        if (!bwd && row->s[i].kind == DTV_BACKWARD) bwd = &row->s[i];
    }
    ck_assert_ptr_nonnull(fwd);
    ck_assert_ptr_nonnull(bwd);
    ck_assert_int_eq(t->t_min, 0);
    ck_assert_msg(fwd->t0 >= F_NS && fwd->t0 < F_NS + 50, "stage 1's first forward at %lld ns", (long long)fwd->t0);
    ck_assert_int_eq(fwd->t1 - fwd->t0, F_NS);
    ck_assert_int_eq(bwd->t1 - bwd->t0, B_NS);
    /* idle warm-up: background, in the middle of the row and at half the wait */
    const SDL_Color idle = probe(&c, t, &v, k, fwd->t0 / 2, L.row_h / 2);
    ck_color(idle, DTV_BG, "stage 1 warm-up idle");
    /* inside the boxes, a quarter in (the micro-batch label is centred) and 3 pixels below the top */
    const SDL_Color f = probe(&c, t, &v, k, fwd->t0 + (fwd->t1 - fwd->t0) / 4, 3);
    ck_color(f, dtv_kind_color(DTV_FORWARD), "stage 1 forward");
    const SDL_Color b = probe(&c, t, &v, k, bwd->t0 + (bwd->t1 - bwd->t0) / 4, 3);
    ck_color(b, dtv_kind_color(DTV_BACKWARD), "stage 1 backward");
    /* and the same in the middle of the row's height, left of the label */
    ck_color(probe(&c, t, &v, k, fwd->t0 + (fwd->t1 - fwd->t0) / 8, L.row_h / 2), dtv_kind_color(DTV_FORWARD),
             "stage 1 forward (mid-row)");
    /* stage 0 starts at once: its first pixel column is a forward */
    const int k0 = stage_compute_row(t, 0);
    ck_assert_int_eq(t->rows[k0].s[0].t0, 0);
    ck_color(probe(&c, t, &v, k0, F_NS / 4, 3), dtv_kind_color(DTV_FORWARD), "stage 0 forward");
    /* before the playback time reaches a box, it is not drawn */
    v.now = fwd->t0 - 1;
    render(&c, t, &v);
    ck_color(probe(&c, t, &v, k, fwd->t0 + (fwd->t1 - fwd->t0) / 4, 3), DTV_BG, "stage 1 forward not yet played");
    dtv_canvas_free(&c);
    free_trace(t);
}

START_TEST(test_pixels_gpipe) { check_pipeline_pixels(DT_SCHED_GPIPE); }
END_TEST

START_TEST(test_pixels_1f1b) { check_pipeline_pixels(DT_SCHED_1F1B); }
END_TEST

/* A pipeline stage's recomputation nested in its backward (cat "stage"):
 * drawn over the backward box's lower half, the backward's colour above
 * it and after it. */
START_TEST(test_pixels_nested_recompute)
{
    dt_trace_event *ev = calloc(3, sizeof *ev);
    ck_assert_ptr_nonnull(ev);
    dt_trace_event_init(&ev[0], DT_TRACE_COMPLETE, "forward", "pipeline", 0, DT_LANE_COMPUTE, 0, 1000);
    dt_trace_event_init(&ev[1], DT_TRACE_COMPLETE, "recompute", "stage", 0, DT_LANE_COMPUTE, 2000, 1000);
    dt_trace_event_init(&ev[2], DT_TRACE_COMPLETE, "backward", "pipeline", 0, DT_LANE_COMPUTE, 1000, 4000);
    for (int i = 0; i < 3; i++) ev[i].iter = 0, ev[i].micro_batch = 0;
    dtv_trace *t = malloc(sizeof *t);
    ck_assert_ptr_nonnull(t);
    ck_dt(dtv_trace_from_events(ev, 3, "nested", "dtrain", "{\"pipeline_model_parallel_size\":1}", t));
    dtv_canvas c;
    dtv_view v;
    dtv_timeline_layout L;
    render_whole(t, &c, &v, &L);
    int k = -1;
    for (int r = 0; r < t->n_rows; r++)
        if (t->rows[r].lane == DT_LANE_COMPUTE) k = r;
    ck_assert_int_ge(k, 0);
    const SDL_Color bwd = dtv_kind_color(DTV_BACKWARD), re = dtv_kind_color(DTV_RECOMPUTE);
    ck_color(probe(&c, t, &v, k, 2500, L.row_h - 3), re, "recompute, lower half");
    ck_color(probe(&c, t, &v, k, 2500, 3), bwd, "backward above the recompute");
    ck_color(probe(&c, t, &v, k, 4500, L.row_h - 3), bwd, "backward after the recompute");
    ck_color(probe(&c, t, &v, k, 500, L.row_h - 3), dtv_kind_color(DTV_FORWARD), "forward");
    dtv_canvas_free(&c);
    free_trace(t);
}
END_TEST

/* ---- (f) zero-bubble spans and model chunks ----------------------------------- */

START_TEST(test_pixels_zero_bubble)
{
    /* one stage, two chunks: F(c0) F(c1) B(c1) W(c1) B(c0) W(c0), 1000 ns each */
    static const char *const names[] = {"forward", "forward", "backward_b", "backward_w", "backward_b", "backward_w"};
    static const int chunk[] = {0, 1, 1, 1, 0, 0};
    dt_trace_event *ev = calloc(6, sizeof *ev);
    ck_assert_ptr_nonnull(ev);
    for (int i = 0; i < 6; i++) {
        dt_trace_event_init(&ev[i], DT_TRACE_COMPLETE, names[i], "pipeline", 0, DT_LANE_COMPUTE, 1000 * i, 1000);
        ev[i].iter = 0;
        ev[i].micro_batch = 0;
        ck_dt(dt_trace_event_add_arg(&ev[i], "stage", 0));
        ck_dt(dt_trace_event_add_arg(&ev[i], "chunk", chunk[i]));
    }
    dtv_trace *t = malloc(sizeof *t);
    ck_assert_ptr_nonnull(t);
    ck_dt(dtv_trace_from_events(ev, 6, "zb", "dtrain", "{\"pipeline_model_parallel_size\":1}", t));
    ck_assert_int_eq(t->chunks, 2);
    dtv_canvas c;
    dtv_view v;
    dtv_timeline_layout L;
    render_whole(t, &c, &v, &L);
    const int k = stage_compute_row(t, 0);
    const SDL_Color w = dtv_kind_color(DTV_WGRAD);
    ck_assert(!dtv_color_eq(w, dtv_kind_color(DTV_FORWARD)) && !dtv_color_eq(w, dtv_kind_color(DTV_BACKWARD)));
    ck_color(probe(&c, t, &v, k, 1250, 3), dtv_kind_color(DTV_FORWARD), "forward of chunk 1");
    ck_color(probe(&c, t, &v, k, 2250, 3), dtv_kind_color(DTV_BACKWARD), "backward_b of chunk 1");
    ck_color(probe(&c, t, &v, k, 3250, 3), w, "backward_w of chunk 1");
    ck_color(probe(&c, t, &v, k, 5250, 3), w, "backward_w of chunk 0");
    dtv_canvas_free(&c);
    free_trace(t);

    /* a negative chunk is refused, naming the event */
    ev = calloc(1, sizeof *ev);
    ck_assert_ptr_nonnull(ev);
    dt_trace_event_init(&ev[0], DT_TRACE_COMPLETE, "backward_w", "pipeline", 0, DT_LANE_COMPUTE, 0, 1000);
    ck_dt(dt_trace_event_add_arg(&ev[0], "chunk", -1));
    t = malloc(sizeof *t);
    ck_assert_ptr_nonnull(t);
    dt_status st = dtv_trace_from_events(ev, 1, "zb", "dtrain", NULL, t);
    ck_assert_int_ne(st, DT_OK);
    ck_assert_msg(strstr(dt_last_error(), "backward_w") && strstr(dt_last_error(), "chunk"), "message: %s",
                  dt_last_error());
    free(t);
}
END_TEST

/* ---- (b) a real run's rank files ---------------------------------------------- */

/* A rank's file: forward/backward of steps 0 and 1 and an optimizer step each,
 * its clock starting at `offset` (each rank counts time from its own start);
 * returns the end of its step 0 in its own clock. */
static int64_t write_rank(const char *path, int rank, int64_t offset, int64_t work)
{
    dt_trace_writer *w = NULL;
    ck_dt(dt_trace_writer_open(path, "dtrain", "{\"data_parallel_size\":2,\"micro_batch_size\":4}", &w));
    dt_trace_event e;
    dt_trace_event_init(&e, DT_TRACE_METADATA, "process_name", "meta", rank, DT_LANE_COMPUTE, 0, 0);
    snprintf(e.label, sizeof e.label, "dtrain rank %d", rank);
    ck_dt(dt_trace_write(w, &e));
    int64_t t = offset, end0 = 0;
    for (int it = 0; it < 2; it++) {
        dt_trace_event_init(&e, DT_TRACE_COMPLETE, "forward", "compute", rank, DT_LANE_COMPUTE, t, work);
        e.iter = it;
        e.micro_batch = 0;
        ck_dt(dt_trace_write(w, &e));
        t += work;
        dt_trace_event_init(&e, DT_TRACE_COMPLETE, "backward", "compute", rank, DT_LANE_COMPUTE, t, 2 * work);
        e.iter = it;
        e.micro_batch = 0;
        ck_dt(dt_trace_write(w, &e));
        t += 2 * work;
        dt_trace_event_init(&e, DT_TRACE_COMPLETE, "optimizer", "optim", rank, DT_LANE_OPTIM, t, 500);
        e.iter = it;
        ck_dt(dt_trace_write(w, &e));
        t += 500;
        if (it == 0) end0 = t;
        dt_trace_event_init(&e, DT_TRACE_COUNTER, "loss", "counter", rank, DT_LANE_COMPUTE, t, 0);
        e.value = 2.0 - it;
        ck_dt(dt_trace_write(w, &e));
    }
    ck_dt(dt_trace_writer_close(w));
    return end0;
}

START_TEST(test_rank_files_aligned)
{
    make_tmpdir();
    char p0[400], p1[400], run[400];
    snprintf(p0, sizeof p0, "%s/run.rank0.json", tmpdir);
    snprintf(p1, sizeof p1, "%s/run.rank1.json", tmpdir);
    snprintf(run, sizeof run, "%s/run.json", tmpdir);
    /* rank 1 started 7 ms later by its own clock and is a bit slower */
    const int64_t e0 = write_rank(p0, 0, 100, 1000), e1 = write_rank(p1, 1, 7000000, 1200);
    ck_assert_int_ne(e0, e1);
    dtv_trace *t = malloc(sizeof *t);
    ck_assert_ptr_nonnull(t);
    ck_dt(dtv_trace_load(run, t));
    ck_assert_int_eq(t->n_ranks, 2);
    ck_assert_int_eq(t->aligned, 1);
    ck_assert_uint_eq(t->n_ev, 2 * 9); /* per rank: process_name, 3 spans and a counter per step */
    ck_assert_str_eq(t->tool, "dtrain");
    ck_assert_str_eq(t->pname[0], "dtrain rank 0");
    ck_assert_str_eq(t->pname[1], "dtrain rank 1");
    ck_assert_int_eq(t->n_steps, 2);
    /* rows: rank 0 compute, rank 0 optimizer, rank 1 compute, rank 1 optimizer */
    ck_assert_int_eq(t->n_rows, 4);
    /* the ends of step 0 coincide, at the later one (offsets >= 0, as in a merged file: dt_trace_align) */
    int64_t end[2] = {INT64_MIN, INT64_MIN};
    for (size_t i = 0; i < t->n_ev; i++) {
        const dt_trace_event *e = &t->ev[i];
        if (e->ph == DT_TRACE_COMPLETE && e->iter == 0 && e->ts_ns + e->dur_ns > end[e->pid])
            end[e->pid] = e->ts_ns + e->dur_ns;
    }
    ck_assert_int_eq(end[0], e1);
    ck_assert_int_eq(end[1], e1);
    /* rank 1 (slower) starts before rank 0 once aligned; every span lies in [t_min, t_max] */
    ck_assert_int_eq(t->t_min, e1 - (e1 - 7000000));
    for (int r = 0; r < t->n_rows; r++)
        for (int i = 0; i < t->rows[r].n; i++) {
            ck_assert_int_ge(t->rows[r].s[i].t0, t->t_min);
            ck_assert_int_le(t->rows[r].s[i].t1, t->t_max);
        }
    /* their merged file (dtsim merge) loads as the rank files do: the same spans at the same times */
    char merged[400];
    snprintf(merged, sizeof merged, "%s/merged.json", tmpdir);
    const char *files[] = {p0, p1};
    ck_dt(dt_trace_merge_files(merged, files, 2, NULL));
    dtv_trace *m = malloc(sizeof *m);
    ck_assert_ptr_nonnull(m);
    ck_dt(dtv_trace_load(merged, m));
    ck_assert(m->n_ranks == 2 && m->aligned == 1 && m->n_ev == t->n_ev && m->n_rows == t->n_rows);
    ck_assert(m->t_min == t->t_min && m->t_max == t->t_max && m->n_steps == t->n_steps);
    for (int r = 0; r < t->n_rows; r++) {
        ck_assert_int_eq(m->rows[r].n, t->rows[r].n);
        for (int i = 0; i < t->rows[r].n; i++)
            ck_assert(m->rows[r].s[i].t0 == t->rows[r].s[i].t0 && m->rows[r].s[i].t1 == t->rows[r].s[i].t1 &&
                      m->rows[r].s[i].kind == t->rows[r].s[i].kind);
    }
    free_trace(m);
    remove(merged);
    /* the real rank's file itself also loads (one rank, its own clock) */
    dtv_trace *one = malloc(sizeof *one);
    ck_assert_ptr_nonnull(one);
    ck_dt(dtv_trace_load(p1, one));
    ck_assert_int_eq(one->n_ranks, 1);
    ck_assert_int_eq(one->t_min, 7000000);
    free_trace(one);
    /* it draws: rank 1's first forward box in its colour */
    dtv_canvas c;
    ck_dt(dtv_canvas_headless(W, H, &c));
    dtv_view v;
    dtv_view_all(&v, t);
    render(&c, t, &v);
    int k1 = -1;
    for (int r = 0; r < t->n_rows; r++)
        if (t->rows[r].pid == 1 && t->rows[r].lane == DT_LANE_COMPUTE) k1 = r;
    ck_assert_int_ge(k1, 0);
    const dtv_span *s = &t->rows[k1].s[0];
    ck_color(probe(&c, t, &v, k1, s->t0 + (s->t1 - s->t0) / 4, 3), dtv_kind_color(DTV_FORWARD), "rank 1 forward");
    dtv_canvas_free(&c);
    free_trace(t);
    remove_tmpdir();
}
END_TEST

/* ---- (c) bad and huge inputs ------------------------------------------------- */

/* Load path: expect a failure (not DT_OK, not a crash) whose message names `name`. */
static void expect_load_error(const char *path, const char *name, const char *what)
{
    dtv_trace *t = malloc(sizeof *t);
    ck_assert_ptr_nonnull(t);
    const dt_status st = dtv_trace_load(path, t);
    ck_assert_msg(st != DT_OK, "%s: loaded", what);
    ck_assert_msg(st == DT_ERR_IO || st == DT_ERR_FORMAT || st == DT_ERR_INVALID, "%s: status %s", what,
                  dt_status_str(st));
    const char *msg = dt_last_error();
    ck_assert_msg(msg && strstr(msg, name), "%s: the message does not name %s: %s", what, name, msg ? msg : "(none)");
    /* nothing left allocated or half-filled */
    ck_assert_ptr_null(t->ev);
    ck_assert_int_eq(t->n_rows, 0);
    free(t);
}

static void write_path(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", tmpdir, name); }

START_TEST(test_bad_inputs)
{
    make_tmpdir();
    char p[400];
    /* missing (neither the file nor rank files) */
    write_path(p, sizeof p, "missing.json");
    expect_load_error(p, "missing.json", "missing file");
    write_path(p, sizeof p, "nothing-here");
    expect_load_error(p, "nothing-here", "missing file without .json");
    /* empty */
    write_path(p, sizeof p, "empty.json");
    write_text(p, "");
    expect_load_error(p, "empty.json", "empty file");
    /* not JSON */
    write_path(p, sizeof p, "text.json");
    write_text(p, "this is not a trace\n");
    expect_load_error(p, "text.json", "not JSON");
    /* a Chrome trace without otherData */
    write_path(p, sizeof p, "chrome.json");
    write_text(p, "{\"traceEvents\":[\n{\"name\":\"forward\",\"ph\":\"X\",\"ts\":1.000,\"dur\":2.000,\"pid\":0,"
                  "\"tid\":0}\n]}\n");
    expect_load_error(p, "chrome.json", "Chrome trace without otherData");
    /* wrong version */
    write_path(p, sizeof p, "version.json");
    write_text(p, "{\"otherData\":{\"format\":\"dtrain-trace\",\"version\":99,\"tool\":\"dtrain\"},\"traceEvents\":[\n"
                  "{\"name\":\"forward\",\"cat\":\"compute\",\"ph\":\"X\",\"ts\":1.000,\"dur\":2.000,\"pid\":0,"
                  "\"tid\":0}\n]}\n");
    expect_load_error(p, "version.json", "wrong version");
    /* truncated: a real writer's file cut in the middle of an event */
    write_path(p, sizeof p, "whole.json");
    write_rank(p, 0, 0, 1000);
    FILE *f = fopen(p, "rb");
    ck_assert_ptr_nonnull(f);
    char buf[8192];
    const size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    ck_assert_uint_gt(n, 200);
    char q[400];
    write_path(q, sizeof q, "truncated.json");
    f = fopen(q, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, n - 40, f), n - 40);
    fclose(f);
    expect_load_error(q, "truncated.json", "truncated file");
    /* no spans: counters and metadata only */
    write_path(p, sizeof p, "nospans.json");
    dt_trace_writer *w = NULL;
    ck_dt(dt_trace_writer_open(p, "dtrain", NULL, &w));
    dt_trace_event e;
    dt_trace_event_init(&e, DT_TRACE_COUNTER, "loss", "counter", 0, DT_LANE_COMPUTE, 1000, 0);
    e.value = 1.5;
    ck_dt(dt_trace_write(w, &e));
    ck_dt(dt_trace_writer_close(w));
    expect_load_error(p, "nospans.json", "no spans");
    /* no events at all */
    write_path(p, sizeof p, "noevents.json");
    ck_dt(dt_trace_writer_open(p, "dtrain", NULL, &w));
    ck_dt(dt_trace_writer_close(w));
    expect_load_error(p, "noevents.json", "no events");
    /* 5000 ranks, one span each: more than the viewer's DTV_MAX_RANKS */
    write_path(p, sizeof p, "ranks5000.json");
    ck_dt(dt_trace_writer_open(p, "dtsim", NULL, &w));
    for (int r = 0; r < 5000; r++) {
        dt_trace_event_init(&e, DT_TRACE_COMPLETE, "forward", "compute", r, DT_LANE_COMPUTE, 1000 * r, 500);
        ck_dt(dt_trace_write(w, &e));
    }
    ck_dt(dt_trace_writer_close(w));
    ck_assert_int_gt(5000, DTV_MAX_RANKS);
    expect_load_error(p, "ranks5000.json", "5000 ranks");
    ck_assert_ptr_nonnull(strstr(dt_last_error(), "ranks"));
    /* ... while DTV_MAX_RANKS ranks load */
    write_path(p, sizeof p, "ranksmax.json");
    ck_dt(dt_trace_writer_open(p, "dtsim", NULL, &w));
    for (int r = 0; r < DTV_MAX_RANKS; r++) {
        dt_trace_event_init(&e, DT_TRACE_COMPLETE, "forward", "compute", r, DT_LANE_COMPUTE, 1000 * r, 500);
        ck_dt(dt_trace_write(w, &e));
    }
    ck_dt(dt_trace_writer_close(w));
    dtv_trace *t = malloc(sizeof *t);
    ck_assert_ptr_nonnull(t);
    ck_dt(dtv_trace_load(p, t));
    ck_assert_int_eq(t->n_ranks, DTV_MAX_RANKS);
    ck_assert_int_eq(t->n_rows, DTV_MAX_RANKS);
    /* it draws (rows beyond the area are left for scrolling) */
    dtv_canvas c;
    ck_dt(dtv_canvas_headless(W, H, &c));
    dtv_view v;
    dtv_view_all(&v, t);
    render(&c, t, &v);
    dtv_timeline_layout L;
    dtv_timeline_layout_of(&c, (SDL_Rect){0, 0, W, H}, t, &v, &L);
    ck_assert_int_lt(L.rows_shown, t->n_rows);
    ck_assert_int_gt(L.rows_shown, 0);
    dtv_canvas_free(&c);
    free_trace(t);
    /* a canvas too small or too large is refused */
    ck_assert_int_eq(dtv_canvas_headless(10, 10, &c), DT_ERR_INVALID);
    ck_assert_int_eq(dtv_canvas_headless(100000, 800, &c), DT_ERR_INVALID);
    remove_tmpdir();
}
END_TEST

/* ---- (d) determinism ----------------------------------------------------------- */

static int same_pixels(const SDL_Surface *a, const SDL_Surface *b)
{
    if (a->w != b->w || a->h != b->h) return 0;
    for (int y = 0; y < a->h; y++)
        if (memcmp((const Uint8 *)a->pixels + (size_t)y * a->pitch, (const Uint8 *)b->pixels + (size_t)y * b->pitch,
                   (size_t)a->w * 4) != 0)
            return 0;
    return 1;
}

START_TEST(test_deterministic)
{
    dtv_trace *t = sim_trace(DT_SCHED_1F1B, 4, 8, 2);
    dtv_canvas a, b;
    ck_dt(dtv_canvas_headless(W, H, &a));
    ck_dt(dtv_canvas_headless(W, H, &b));
    dtv_view v;
    dtv_view_all(&v, t);
    for (int id = 0; id < 2; id++) { /* all played, then half-way */
        if (id == 1) v.now = t->t_min + (t->t_max - t->t_min) / 2;
        render(&a, t, &v);
        render(&b, t, &v);
        SDL_RenderFlush(a.r);
        SDL_RenderFlush(b.r);
        ck_assert_msg(same_pixels(a.surface, b.surface), "two renders differ (now %lld)", (long long)v.now);
        /* the same canvas drawn again over its own picture: still the same */
        render(&a, t, &v);
        SDL_RenderFlush(a.r);
        ck_assert(same_pixels(a.surface, b.surface));
    }
    /* and a different playback time does change the picture */
    v.now = t->t_min + (t->t_max - t->t_min) / 4;
    render(&a, t, &v);
    SDL_RenderFlush(a.r);
    ck_assert(!same_pixels(a.surface, b.surface));
    dtv_canvas_free(&a);
    dtv_canvas_free(&b);
    free_trace(t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("viz");
    TCase *tc = tcase_create("viz");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_pixels_gpipe);
    tcase_add_test(tc, test_pixels_1f1b);
    tcase_add_test(tc, test_pixels_nested_recompute);
    tcase_add_test(tc, test_pixels_zero_bubble);
    tcase_add_test(tc, test_rank_files_aligned);
    tcase_add_test(tc, test_bad_inputs);
    tcase_add_test(tc, test_deterministic);
    suite_add_tcase(s, tc);
    return dt_test_run(s);
}
