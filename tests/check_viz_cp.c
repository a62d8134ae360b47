/* check_viz_cp.c: the viewer's sequence- and context-parallel pictures
 * (viz/trace_cp.c, viz/view_cp.c, the kinds of viz/trace_model.c) on
 * hand-made traces with known answers:
 *   - the kinds: sequence parallelism's tp all-gather, tp reduce-scatter and
 *     tp layernorm grad allreduce, and the four cp exchanges, each its own
 *     kind with its own name and colour (no two kinds share one), none
 *     "other"; the timeline draws each box in its kind's colour;
 *   - the ring (p2p), written by the test as a trace file, for c = 2 with
 *     t = 2 (4 ranks, two context groups: ranks 0, 2 and 1, 3) and c = 4
 *     with t = 1: per rank a forward and a backward of micro-batch 0, two
 *     blocks (num_layers 2), each attention's ring steps 10 ms apart
 *     (forward steps 0..c-2, backward 0..c-1) with `from` = (i - s - 1)
 *     mod c and 5 ms between attentions. In the middle of step s context
 *     rank i holds the block of rank (i - s) mod c and receives that of
 *     (i - s - 1) mod c, in the forward and the backward, for every block
 *     (numbered within its pass: forward 0, 1; backward 1, 0); after the
 *     forward's last step it holds (i + 1) mod c. The picture: the matrix
 *     cell of the block held is filled in the pass's colour, the one
 *     arriving framed in the ring step's, the box on the lane i -> i + 1;
 *     `dtviz --view cp --png` (dtv_app_png) writes a PNG;
 *   - a `from` outside 0..c-1 refuses the trace, naming the event;
 *   - allgather: the all-gather brings every block, the reduce-scatter
 *     leaves the rank's own;
 *   - a trace without cp events: no index, and the view says so.
 * Files go to $TMPDIR (or /tmp), removed at the end. */
#include <string.h>
#include <unistd.h>

#include "dtv_app.h"
#include "testutil.h"

#define MS 1000000LL

enum { STEP = 10, GAP = 5, BLOCKS = 2 }; /* ms per ring step, ms between attentions, blocks */

/* A fresh file name under $TMPDIR (or /tmp), made by mkstemp; the caller unlinks it. */
static void temp_name(char *buf, size_t n, const char *what)
{
    const char *base = getenv("TMPDIR");
    snprintf(buf, n, "%s/check_viz_cp_%s_XXXXXX", base && base[0] ? base : "/tmp", what);
    const int fd = mkstemp(buf);
    ck_assert_int_ge(fd, 0);
    close(fd);
}

static int mod(int a, int c) { return ((a % c) + c) % c; }

/* The start of ring step s of block b's attention in the forward (fwd 1)
 * or the backward, in ms: the forward's attentions from 1 ms, each c - 1
 * steps and a gap; the backward's after them, each c steps and a gap. */
static int64_t step_t0(int c, int fwd, int b, int s)
{
    const int64_t fwd_len = (int64_t)BLOCKS * ((c - 1) * STEP + GAP);
    if (fwd) return 1 + (int64_t)b * ((c - 1) * STEP + GAP) + (int64_t)s * STEP;
    return 1 + fwd_len + 1 + (int64_t)b * (c * STEP + GAP) + (int64_t)s * STEP;
}

static void write_event(dt_trace_writer *w, const dt_trace_event *e) { ck_dt(dt_trace_write(w, e)); }

/* The ring trace above as a fresh file; returns its path in buf. */
static const char *ring_file(char *buf, size_t n, int c, int t)
{
    temp_name(buf, n, "ring");
    char cfg[200];
    snprintf(cfg, sizeof cfg,
             "{\"context_parallel_size\":%d,\"tensor_model_parallel_size\":%d,\"cp_comm_type\":\"p2p\","
             "\"num_layers\":%d,\"micro_batch_size\":4,\"global_batch_size\":4}",
             c, t, BLOCKS);
    dt_trace_writer *w;
    ck_dt(dt_trace_writer_open(buf, "dtrain", cfg, &w));
    const int64_t f_end = step_t0(c, 1, BLOCKS, 0), b_end = step_t0(c, 0, BLOCKS, 0);
    for (int pid = 0; pid < c * t; pid++) {
        const int i = (pid / t) % c; /* rank = t_i + t * c_i */
        dt_trace_event e;
        dt_trace_event_init(&e, DT_TRACE_COMPLETE, "forward", "pipeline", pid, DT_LANE_COMPUTE, 0, f_end * MS);
        e.iter = 0, e.micro_batch = 0;
        write_event(w, &e);
        dt_trace_event_init(&e, DT_TRACE_COMPLETE, "backward", "pipeline", pid, DT_LANE_COMPUTE, f_end * MS + 1,
                            (b_end - f_end) * MS);
        e.iter = 0, e.micro_batch = 0;
        write_event(w, &e);
        for (int fwd = 1; fwd >= 0; fwd--)
            for (int b = 0; b < BLOCKS; b++)
                for (int s = 0; s < (fwd ? c - 1 : c); s++) {
                    dt_trace_event_init(&e, DT_TRACE_COMPLETE, "cp ring step", "cp", pid, DT_LANE_COMM,
                                        step_t0(c, fwd, b, s) * MS, STEP * MS);
                    e.iter = 0;
                    e.bytes = fwd || s == c - 1 ? 4096 : 8192;
                    ck_dt(dt_trace_event_add_arg(&e, "forward", fwd));
                    ck_dt(dt_trace_event_add_arg(&e, "step", s));
                    ck_dt(dt_trace_event_add_arg(&e, "from", mod(i - s - 1, c)));
                    write_event(w, &e);
                }
    }
    ck_dt(dt_trace_writer_close(w));
    return buf;
}

static void ck_pixel(const dtv_canvas *cv, int x, int y, SDL_Color want, const char *what)
{
    const SDL_Color got = dtv_canvas_pixel(cv, x, y);
    ck_assert_msg(dtv_color_eq(got, want), "%s at (%d, %d): got %d,%d,%d, expected %d,%d,%d", what, x, y, got.r, got.g,
                  got.b, want.r, want.g, want.b);
}

START_TEST(test_kinds)
{
    static const struct {
        const char *name, *cat;
        dtv_kind kind;
    } cases[] = {{"tp all-gather", "tp", DTV_SP_AG},
                 {"tp reduce-scatter", "tp", DTV_SP_RS},
                 {"tp layernorm grad allreduce", "tp", DTV_SP_LN},
                 {"tp allreduce f", "tp", DTV_TP},
                 {"tp allreduce g", "tp", DTV_TP},
                 {"tp vocab allreduce", "tp", DTV_TP},
                 {"tp vocab gather", "tp", DTV_TP},
                 {"cp ring step", "cp", DTV_CP_RING},
                 {"cp kv all-gather", "cp", DTV_CP_AG},
                 {"cp dkv reduce-scatter", "cp", DTV_CP_RS},
                 {"cp all-to-all", "cp", DTV_CP_A2A},
                 {"all-gather", "comm", DTV_AG}};
    enum { N = sizeof cases / sizeof cases[0] };
    dt_trace_event *ev = calloc(N + 1, sizeof *ev);
    ck_assert_ptr_nonnull(ev);
    for (int k = 0; k < N; k++) {
        dt_trace_event_init(&ev[k], DT_TRACE_COMPLETE, cases[k].name, cases[k].cat, 0, DT_LANE_COMM, k * 10 * MS,
                            10 * MS);
        if (cases[k].kind == DTV_CP_RING) { /* a ring step names its step and the block that arrived */
            ck_dt(dt_trace_event_add_arg(&ev[k], "step", 0));
            ck_dt(dt_trace_event_add_arg(&ev[k], "from", 0));
        }
        ck_assert_msg(dtv_kind_of(&ev[k]) == cases[k].kind, "%s: kind %d, expected %d", cases[k].name,
                      dtv_kind_of(&ev[k]), cases[k].kind);
    }
    /* every kind its own name and colour */
    for (int a = 0; a < DTV_N_KINDS; a++)
        for (int b = a + 1; b < DTV_N_KINDS; b++) {
            ck_assert_str_ne(dtv_kind_name((dtv_kind)a), dtv_kind_name((dtv_kind)b));
            ck_assert_msg(!dtv_color_eq(dtv_kind_color((dtv_kind)a), dtv_kind_color((dtv_kind)b)),
                          "kinds %s and %s share a colour", dtv_kind_name((dtv_kind)a), dtv_kind_name((dtv_kind)b));
        }
    /* the timeline: each box in its kind's colour (one compute span for a second row) */
    dt_trace_event_init(&ev[N], DT_TRACE_COMPLETE, "forward", "compute", 0, DT_LANE_COMPUTE, 0, N * 10 * MS);
    dtv_trace t;
    ck_dt(dtv_trace_from_events(ev, N + 1, "kinds", "dtrain", NULL, &t));
    ck_assert_ptr_nonnull(t.cp); /* no config: c from the events, at least 2 */
    ck_assert_int_eq(t.cp->c, 2);
    dtv_canvas cv;
    ck_dt(dtv_canvas_headless(1400, 400, &cv));
    const SDL_Rect area = {0, 0, 1400, 400};
    dtv_view v = {.id = DTV_VIEW_TIMELINE};
    dtv_view_all(&v, &t);
    dtv_clear(&cv, DTV_BG);
    dtv_draw_view(&cv, area, &t, &v);
    dtv_timeline_layout L;
    dtv_timeline_layout_of(&cv, area, &t, &v, &L);
    ck_assert_int_eq(t.rows[1].lane, DT_LANE_COMM);
    for (int k = 0; k < N; k++) {
        const int x = (int)dtv_x_of(&v, L.x, L.w, k * 10 * MS + 5 * MS), y = L.y + L.row_h + L.row_h / 2;
        ck_pixel(&cv, x, y, dtv_kind_color(cases[k].kind), cases[k].name);
    }
    dtv_canvas_free(&cv);
    dtv_trace_free(&t);
}
END_TEST

/* The state of every context rank in the middle of every step, and after
 * the forward; the picture's cells and boxes there. */
static void check_ring(int c, int tp)
{
    char path[512];
    ring_file(path, sizeof path, c, tp);
    dtv_trace t;
    ck_dt(dtv_trace_load(path, &t));
    const dtv_cp *cp = t.cp;
    ck_assert_ptr_nonnull(cp);
    ck_assert_int_eq(cp->c, c);
    ck_assert_int_eq(cp->t, tp);
    ck_assert_int_eq(cp->type, DTV_CP_TYPE_P2P);
    ck_assert_int_eq(cp->base, 0);
    ck_assert_int_eq(cp->groups, tp);
    for (int i = 0; i < c; i++) {
        ck_assert_int_eq(cp->m[i].pid, tp * i);
        ck_assert_int_eq(cp->m[i].n, BLOCKS * (2 * c - 1));
    }
    dtv_canvas cv;
    ck_dt(dtv_canvas_headless(1400, 800, &cv));
    const SDL_Rect area = {0, 0, 1400, 800};
    dtv_view v = {.id = DTV_VIEW_CP};
    dtv_view_all(&v, &t);
    /* before the first step: nothing held */
    dtv_cp_state s;
    dtv_cp_state_of(&t, 0, t.t_min, &s);
    ck_assert_int_eq(s.x, -1);
    ck_assert_int_eq(dtv_cp_cell(&s, 0, 0), DTV_CP_CELL_NONE);
    for (int fwd = 1; fwd >= 0; fwd--)
        for (int b = 0; b < BLOCKS; b++)
            for (int st = 0; st < (fwd ? c - 1 : c); st++) {
                v.now = t.t_min + step_t0(c, fwd, b, st) * MS + STEP * MS / 4;
                dtv_clear(&cv, DTV_BG);
                dtv_draw_view(&cv, area, &t, &v);
                for (int i = 0; i < c; i++) {
                    dtv_cp_state_of(&t, i, v.now, &s);
                    const int holds = mod(i - st, c), arriving = mod(i - st - 1, c);
                    ck_assert_int_eq(s.active, 1);
                    ck_assert_int_eq(s.kind, DTV_CP_RING);
                    ck_assert_int_eq(s.forward, fwd);
                    ck_assert_int_eq(s.step, st);
                    ck_assert_int_eq(s.steps, fwd ? c - 1 : c);
                    ck_assert_msg(s.holds == holds, "c %d, %s block %d step %d: rank %d holds %d, expected %d", c,
                                  fwd ? "forward" : "backward", b, st, i, s.holds, holds);
                    ck_assert_int_eq(s.arriving, arriving);
                    ck_assert_int_eq(s.grad, fwd ? 0 : st < c - 1 ? 1 : 2);
                    ck_assert_int_eq(s.enc_kind, fwd ? DTV_FORWARD : DTV_BACKWARD);
                    ck_assert_int_eq(s.mb, 0);
                    ck_assert_int_eq(s.nth, b);
                    ck_assert_int_eq(s.of, BLOCKS);
                    ck_assert(dt_test_close(s.frac, 0.25, 1e-9, 0));
                    for (int j = 0; j < c; j++) {
                        const int want = j == holds      ? DTV_CP_CELL_HELD
                                         : j == arriving ? DTV_CP_CELL_ARRIVING
                                                         : DTV_CP_CELL_NONE;
                        ck_assert_int_eq(dtv_cp_cell(&s, i, j), want);
                        SDL_Rect r;
                        dtv_cp_cell_rect(area, c, i, j, &r);
                        ck_assert_int_gt(r.w, 8);
                        const SDL_Color in =
                            want == DTV_CP_CELL_HELD ? dtv_kind_color(fwd ? DTV_FORWARD : DTV_BACKWARD) : DTV_PANEL;
                        ck_pixel(&cv, r.x + r.w / 2, r.y + r.h / 2, in, "matrix cell");
                        if (want == DTV_CP_CELL_ARRIVING)
                            ck_pixel(&cv, r.x, r.y + r.h / 2, dtv_kind_color(DTV_CP_RING), "arriving cell's frame");
                    }
                    int x, y;
                    dtv_ring_chunk_pos(area, c, i, (i + 1) % c, 0.25, &x, &y);
                    ck_pixel(&cv, x, y, dtv_kind_color(DTV_CP_RING), "the block on its lane");
                }
            }
    /* between the forward's last step and the next attention: the block that arrived last, (i + 1) mod c */
    v.now = t.t_min + (step_t0(c, 1, 0, c - 2) + STEP + 1) * MS;
    for (int i = 0; i < c; i++) {
        dtv_cp_state_of(&t, i, v.now, &s);
        ck_assert_int_eq(s.active, 0);
        ck_assert_int_eq(s.holds, (i + 1) % c);
        ck_assert_int_eq(s.arriving, -1);
    }
    /* the backward's last step brings each rank its own block's gradient, and the block numbers count down */
    v.now = t.t_min + (step_t0(c, 0, BLOCKS - 1, c - 1) + STEP + 1) * MS;
    for (int i = 0; i < c; i++) {
        dtv_cp_state_of(&t, i, v.now, &s);
        ck_assert_int_eq(s.holds, i);
        ck_assert_int_eq(s.forward, 0);
    }
    dtv_canvas_free(&cv);
    dtv_trace_free(&t);
    /* the command line's picture: dtviz PATH --view cp --time 0.3 --png */
    dtv_app a;
    const char *paths[1] = {path};
    ck_dt(dtv_app_open(&a, paths, 1));
    dtv_app_set(&a, DTV_VIEW_CP, 0.3);
    char png[512];
    temp_name(png, sizeof png, "png");
    ck_dt(dtv_app_png(&a, 1400, 800, png));
    dtv_app_close(&a);
    FILE *f = fopen(png, "rb");
    ck_assert_ptr_nonnull(f);
    unsigned char magic[8] = {0};
    ck_assert_int_eq(fread(magic, 1, 8, f), 8);
    fclose(f);
    ck_assert(!memcmp(magic, "\x89PNG\r\n\x1a\n", 8));
    ck_assert_int_eq(unlink(png), 0);
    ck_assert_int_eq(unlink(path), 0);
}

START_TEST(test_ring_c2_t2) { check_ring(2, 2); }
END_TEST

START_TEST(test_ring_c4)
{
    check_ring(4, 1);
    dtv_view_id id;
    ck_assert_int_eq(dtv_view_parse("cp", &id), 0);
    ck_assert_int_eq(id, DTV_VIEW_CP);
    ck_assert_str_eq(dtv_view_name(DTV_VIEW_CP), "cp");
}
END_TEST

static dt_trace_event *cp_event(dt_trace_event *e, const char *name, int pid, int64_t t0, int fwd)
{
    dt_trace_event_init(e, DT_TRACE_COMPLETE, name, "cp", pid, DT_LANE_COMM, t0 * MS, 10 * MS);
    e->iter = 0;
    ck_dt(dt_trace_event_add_arg(e, "forward", fwd));
    return e;
}

START_TEST(test_bad_from)
{
    dt_trace_event *ev = calloc(2, sizeof *ev);
    ck_assert_ptr_nonnull(ev);
    for (int pid = 0; pid < 2; pid++) {
        cp_event(&ev[pid], "cp ring step", pid, 0, 1);
        ck_dt(dt_trace_event_add_arg(&ev[pid], "step", 0));
        ck_dt(dt_trace_event_add_arg(&ev[pid], "from", pid ? 2 : 1)); /* rank 1's from is no context rank */
    }
    dtv_trace t;
    ck_assert_int_eq(dtv_trace_from_events(ev, 2, "bad", "dtrain", "{\"context_parallel_size\":2}", &t), DT_ERR_FORMAT);
    ck_assert_msg(strstr(dt_last_error(), "\"cp ring step\" of rank 1") && strstr(dt_last_error(), "args.from"), "%s",
                  dt_last_error());
}
END_TEST

START_TEST(test_allgather)
{
    dt_trace_event *ev = calloc(4, sizeof *ev);
    ck_assert_ptr_nonnull(ev);
    for (int pid = 0; pid < 2; pid++) {
        cp_event(&ev[2 * pid], "cp kv all-gather", pid, 0, 0);
        cp_event(&ev[2 * pid + 1], "cp dkv reduce-scatter", pid, 20, 0);
    }
    dtv_trace t;
    ck_dt(dtv_trace_from_events(ev, 4, "ag", "dtrain", "{\"context_parallel_size\":2,\"cp_comm_type\":\"allgather\"}",
                                &t));
    ck_assert_ptr_nonnull(t.cp);
    ck_assert_int_eq(t.cp->type, DTV_CP_TYPE_ALLGATHER);
    const struct {
        int64_t ms;
        int kind, own, other;
    } cases[] = {{5, DTV_CP_AG, DTV_CP_CELL_HELD, DTV_CP_CELL_ARRIVING},
                 {15, DTV_CP_AG, DTV_CP_CELL_HELD, DTV_CP_CELL_HELD},
                 {25, DTV_CP_RS, DTV_CP_CELL_HELD, DTV_CP_CELL_HELD},
                 {35, DTV_CP_RS, DTV_CP_CELL_HELD, DTV_CP_CELL_NONE}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int i = 0; i < 2; i++) {
            dtv_cp_state s;
            dtv_cp_state_of(&t, i, t.t_min + cases[k].ms * MS, &s);
            ck_assert_int_eq(s.kind, cases[k].kind);
            ck_assert_int_eq(dtv_cp_cell(&s, i, i), cases[k].own);
            ck_assert_int_eq(dtv_cp_cell(&s, i, 1 - i), cases[k].other);
            ck_assert_int_eq(s.nth, 0);
        }
    dtv_trace_free(&t);
}
END_TEST

START_TEST(test_none)
{
    dt_trace_event *ev = calloc(1, sizeof *ev);
    ck_assert_ptr_nonnull(ev);
    dt_trace_event_init(ev, DT_TRACE_COMPLETE, "forward", "compute", 0, DT_LANE_COMPUTE, 0, 10 * MS);
    dtv_trace t;
    ck_dt(dtv_trace_from_events(ev, 1, "none", "dtrain", NULL, &t));
    ck_assert_ptr_null(t.cp);
    dtv_cp_state s;
    dtv_cp_state_of(&t, 0, t.t_max, &s);
    ck_assert_int_eq(s.x, -1);
    dtv_canvas cv;
    ck_dt(dtv_canvas_headless(800, 500, &cv));
    dtv_view v = {.id = DTV_VIEW_CP};
    dtv_view_all(&v, &t);
    dtv_clear(&cv, DTV_BG);
    dtv_draw_view(&cv, (SDL_Rect){0, 0, 800, 500}, &t, &v);
    int ink = 0; /* the message is drawn: some pixels in the middle third are not background */
    for (int y = 160; y < 260 && !ink; y++)
        for (int x = 0; x < 800 && !ink; x++) ink = !dtv_color_eq(dtv_canvas_pixel(&cv, x, y), DTV_BG);
    ck_assert(ink);
    dtv_canvas_free(&cv);
    dtv_trace_free(&t);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("viz_cp");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_kinds);
    tcase_add_test(tc, test_ring_c2_t2);
    tcase_add_test(tc, test_ring_c4);
    tcase_add_test(tc, test_bad_from);
    tcase_add_test(tc, test_allgather);
    tcase_add_test(tc, test_none);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return dt_test_run(suite()); }
