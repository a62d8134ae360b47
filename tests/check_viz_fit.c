/* check_viz_fit.c: the viewer fitting its pictures to the data
 * (viz/view_fit.c, dtv_app_fit, dtv_app_fit_height, the memory view's
 * per-layer samples and the timeline's box labels), on hand-made traces
 * rendered headless and probed pixel by pixel:
 *   - a real run of 200 steps of 20 ms (2 blocks, 1 ms per layer span):
 *     the whole trace gives a step 5.7 px, so a 1400 px picture shows the
 *     last 5 complete steps (195..199), their note in the title, with
 *     --time the steps up to the playback time, a run cut short without
 *     its partial last step, --zoom (dtv_app_zoom) the whole trace again;
 *     3 steps, or steps wide enough, are not cut; two panes share a span;
 *   - the height: 2 rows of one rank make a 166 px picture (30 px rows),
 *     many rows stop at 800;
 *   - memory: the per-layer live_activation_bytes samples are the series
 *     (8 per micro-batch, the per-step activation_bytes left out), and in
 *     the fitted picture the area reaches the peak after the head's forward
 *     and is empty in the optimizer (the sawtooth);
 *   - labels: forward boxes of micro-batch 3 from 2 to 40 px wide carry
 *     text exactly where "3" (measured with the font) fits with a pixel on
 *     each side, and nothing in the narrower ones; a chunk label "3 c1"
 *     where it fits, the bare "3" in a box too narrow for it; a run of one
 *     micro-batch per step has no labels;
 *   - steps: an evaluation after the last step carries the next step's
 *     number, as do the spans inside it (a tensor-parallel forward's
 *     allreduces): neither counts as a step; one pipeline stage (tensor
 *     parallelism alone, p = 1) shows no bubble, two do. */
#include <math.h>
#include <string.h>

#include "dtv_app.h"
#include "testutil.h"

#define MS 1000000LL
#define US 1000LL
#define MIB (1024.0 * 1024.0)
enum { NL = 2, SPANS = NL + 2 }; /* blocks; layer spans per pass: embedding, blocks, head */

/* A real run (tool dtrain): `steps` steps of 20 ms from 0, each of m
 * micro-batches of forward spans (layers -1..NL, 1 ms each) then backward
 * spans (NL..-1), a live_activation_bytes counter at the end of each
 * (1, 2, .. SPANS MiB through the forward, back to 0 through the backward),
 * then a 1 ms optimizer span (none in step `cut`, -1: every step has one)
 * and the step's activation_bytes. */
static void real_trace(dtv_trace *tr, int steps, int m, int cut)
{
    const size_t cap = (size_t)steps * (size_t)(m * 4 * SPANS + 2) + 1;
    dt_trace_event *ev = calloc(cap, sizeof *ev);
    ck_assert_ptr_nonnull(ev);
    size_t n = 0;
    for (int i = 0; i < steps; i++) {
        int64_t t = i * 20 * MS;
        for (int k = 0; k < m; k++)
            for (int pass = 0; pass < 2; pass++)
                for (int j = 0; j < SPANS; j++) {
                    dt_trace_event *e = &ev[n++];
                    dt_trace_event_init(e, DT_TRACE_COMPLETE, pass ? "backward" : "forward", "compute", 0,
                                        DT_LANE_COMPUTE, t, MS);
                    e->iter = i;
                    e->micro_batch = k;
                    e->layer = pass ? NL - j : j - 1;
                    t += MS;
                    e = &ev[n++];
                    dt_trace_event_init(e, DT_TRACE_COUNTER, "live_activation_bytes", "counter", 0, DT_LANE_COMPUTE, t,
                                        0);
                    e->value = (pass ? SPANS - 1 - j : j + 1) * MIB;
                }
        if (i != cut) {
            dt_trace_event *e = &ev[n++];
            dt_trace_event_init(e, DT_TRACE_COMPLETE, "optimizer", "optim", 0, DT_LANE_OPTIM, t, MS);
            e->iter = i;
            t += MS;
        }
        dt_trace_event *e = &ev[n++];
        dt_trace_event_init(e, DT_TRACE_COUNTER, "activation_bytes", "counter", 0, DT_LANE_COMPUTE, t, 0);
        e->value = SPANS * MIB;
    }
    char cfg[64];
    snprintf(cfg, sizeof cfg, "{\"micro_batches\":%d}", m);
    ck_dt(dtv_trace_from_events(ev, n, "real", "dtrain", cfg, tr));
}

/* An app of one pane (or two) over hand-made traces, views on the whole trace. */
static void app_of(dtv_app *a, dtv_trace *t0, dtv_trace *t1, dtv_view_id id)
{
    memset(a, 0, sizeof *a);
    a->n = t1 ? 2 : 1;
    a->tr[0] = *t0;
    if (t1) a->tr[1] = *t1;
    for (int i = 0; i < a->n; i++) dtv_view_all(&a->view[i], &a->tr[i]);
    dtv_app_set(a, id, 2.0);
}

/* 3 steps of a one-rank run on the pipeline runtime (cat "pipeline",
 * stage 0 of p), then an evaluation with iter 3 and a "tp allreduce g"
 * inside it; with p = 2 a stage 1 rank beside it. */
static void eval_trace(dtv_trace *tr, int p)
{
    dt_trace_event *ev = calloc(32, sizeof *ev); /* dtv_trace_from_events takes it */
    ck_assert_ptr_nonnull(ev);
    size_t n = 0;
    for (int pid = 0; pid < p; pid++) {
        for (int i = 0; i < 3; i++) {
            const int64_t t = i * 10 * MS + pid * MS;
            dt_trace_event_init(&ev[n], DT_TRACE_COMPLETE, "forward", "pipeline", pid, DT_LANE_COMPUTE, t, 2 * MS);
            ev[n].iter = i;
            ev[n].micro_batch = 0;
            ck_dt(dt_trace_event_add_arg(&ev[n++], "stage", pid));
            dt_trace_event_init(&ev[n], DT_TRACE_COMPLETE, "backward", "pipeline", pid, DT_LANE_COMPUTE,
                                t + 4 * MS, 3 * MS);
            ev[n].iter = i;
            ev[n].micro_batch = 0;
            ck_dt(dt_trace_event_add_arg(&ev[n++], "stage", pid));
            dt_trace_event_init(&ev[n], DT_TRACE_COMPLETE, "optimizer", "optim", pid, DT_LANE_OPTIM, t + 8 * MS, MS);
            ev[n++].iter = i;
        }
        dt_trace_event_init(&ev[n], DT_TRACE_COMPLETE, "evaluate", "compute", pid, DT_LANE_COMPUTE, 30 * MS, 5 * MS);
        ev[n++].iter = 3;
        dt_trace_event_init(&ev[n], DT_TRACE_COMPLETE, "tp allreduce g", "tp", pid, DT_LANE_COMM, 31 * MS, MS);
        ev[n++].iter = 3;
    }
    char cfg[96];
    snprintf(cfg, sizeof cfg, "{\"pipeline_model_parallel_size\":%d,\"micro_batches\":1}", p);
    ck_dt(dtv_trace_from_events(ev, n, "eval", "dtrain", cfg, tr));
}

START_TEST(test_steps_and_stages)
{
    dtv_trace tr;
    eval_trace(&tr, 1);
    ck_assert_int_eq(tr.n_steps, 3); /* not 4: the evaluation and its allreduce are not a step */
    ck_assert(isnan(tr.bubble_fb[0]) && isnan(tr.bubble[0]));
    dtv_trace_free(&tr);
    eval_trace(&tr, 2);
    ck_assert_int_eq(tr.n_steps, 3);
    ck_assert(!isnan(tr.bubble_fb[0]) && !isnan(tr.bubble_fb[1]));
    dtv_trace_free(&tr);
}
END_TEST

START_TEST(test_fit_last_steps)
{
    dtv_trace tr;
    real_trace(&tr, 200, 1, -1);
    ck_assert_int_eq(tr.n_steps, 200);
    dtv_app a;
    app_of(&a, &tr, NULL, DTV_VIEW_TIMELINE);
    ck_assert_int_eq(dtv_app_fit(&a, 1400, 800), 1);
    const dtv_view *v = &a.view[0];
    ck_assert_int_eq(v->fit_first, 195);
    ck_assert_int_eq(v->fit_count, 5);
    /* steps 195..199 whole (each 2*SPANS + 1 ms from i * 20 ms), with a margin that stays in the gaps */
    ck_assert(v->t0 <= 195 * 20 * MS && v->t0 > 194 * 20 * MS + 9 * MS);
    ck_assert(v->t1 >= 199 * 20 * MS + 9 * MS && v->t1 <= tr.t_max);
    char note[96];
    dtv_fit_note(note, sizeof note, &tr, v);
    ck_assert_str_eq(note, "showing steps 195\xe2\x80\x93"
                           "199 of 200 (--zoom 0:1 for all)");
    /* --zoom overrides: the part asked for, no note */
    dtv_app_zoom(&a, 0, 1);
    ck_assert(a.view[0].t0 == tr.t_min && a.view[0].t1 == tr.t_max);
    dtv_fit_note(note, sizeof note, &tr, &a.view[0]);
    ck_assert_str_eq(note, "");
    /* --time 0.5: the steps up to the playback time (just after step 99's end) */
    dtv_view_all(&a.view[0], &tr);
    dtv_app_set(&a, DTV_VIEW_MEMORY, 0.5);
    ck_assert_int_eq(dtv_app_fit(&a, 1400, 800), 1);
    ck_assert_int_eq(a.view[0].fit_first, 95);
    ck_assert_int_eq(a.view[0].fit_count, 5);
    ck_assert(a.view[0].now >= a.view[0].t0 && a.view[0].now <= a.view[0].t1);
    /* the other views keep the whole trace */
    dtv_view_all(&a.view[0], &tr);
    dtv_app_set(&a, DTV_VIEW_SCALE, 2.0);
    ck_assert_int_eq(dtv_app_fit(&a, 1400, 800), 0);
    ck_assert(a.view[0].t0 == tr.t_min && a.view[0].t1 == tr.t_max);
    /* a narrow picture: fewer steps (k = width / 200) */
    dtv_app_set(&a, DTV_VIEW_TIMELINE, 2.0);
    ck_assert_int_eq(dtv_app_fit(&a, 700, 800), 1);
    ck_assert_int_eq(a.view[0].fit_count, 2); /* 700 - 260 px of time */
    ck_assert_int_eq(a.view[0].fit_first, 198);
    dtv_app_close(&a);

    /* a run cut short: its last step has no optimizer span and is not shown */
    real_trace(&tr, 200, 1, 199);
    app_of(&a, &tr, NULL, DTV_VIEW_TIMELINE);
    ck_assert_int_eq(dtv_app_fit(&a, 1400, 800), 1);
    ck_assert_int_eq(a.view[0].fit_first, 194);
    ck_assert_int_eq(a.view[0].fit_count, 5);
    dtv_app_close(&a);

    /* 3 steps (each over 300 px): the whole trace */
    real_trace(&tr, 3, 1, -1);
    app_of(&a, &tr, NULL, DTV_VIEW_TIMELINE);
    ck_assert_int_eq(dtv_app_fit(&a, 1400, 800), 0);
    ck_assert(a.view[0].t0 == tr.t_min && a.view[0].t1 == tr.t_max && a.view[0].fit_count == 0);
    dtv_app_close(&a);
    /* 8 steps: 69 px each, readable: not cut */
    real_trace(&tr, 8, 1, -1);
    app_of(&a, &tr, NULL, DTV_VIEW_TIMELINE);
    ck_assert_int_eq(dtv_app_fit(&a, 1400, 800), 0);
    dtv_app_close(&a);
}
END_TEST

START_TEST(test_fit_two_panes)
{
    dtv_trace t0, t1;
    real_trace(&t0, 200, 1, -1);
    real_trace(&t1, 100, 2, -1); /* longer steps' worth of spans, the same 20 ms period */
    dtv_app a;
    app_of(&a, &t0, &t1, DTV_VIEW_TIMELINE);
    ck_assert_int_eq(dtv_app_fit(&a, 1400, 800), 1);
    ck_assert_int_eq(a.view[0].t1 - a.view[0].t0, a.view[1].t1 - a.view[1].t0); /* one span */
    ck_assert_int_eq(a.view[0].fit_first + a.view[0].fit_count, 200);           /* each ends with its last step */
    ck_assert_int_eq(a.view[1].fit_first + a.view[1].fit_count, 100);
    ck_assert(a.view[1].fit_count >= 5);
    dtv_app_close(&a);
}
END_TEST

START_TEST(test_fit_height)
{
    dtv_trace tr;
    real_trace(&tr, 20, 1, -1);
    ck_assert_int_eq(tr.n_rows, 2); /* compute, optimizer */
    dtv_app a;
    app_of(&a, &tr, NULL, DTV_VIEW_TIMELINE);
    const int h = dtv_app_fit_height(&a);
    ck_assert_int_eq(h, 166);
    dtv_canvas c;
    ck_dt(dtv_canvas_headless(1400, h, &c));
    dtv_timeline_layout L;
    dtv_timeline_layout_of(&c, (SDL_Rect){0, 0, 1400, h}, &tr, &a.view[0], &L);
    ck_assert_int_eq(L.row_h, 30);
    ck_assert_int_eq(L.rows_shown, 2);
    /* the legend's line is under the rows */
    dtv_app_render(&a, &c);
    ck_assert(dtv_color_eq(dtv_canvas_pixel(&c, 12, h - 30), dtv_kind_color(DTV_FORWARD)));
    dtv_canvas_free(&c);
    dtv_app_close(&a);
    /* 40 ranks' rows: the old default height, rows shrink as before */
    dt_trace_event *ev = calloc(80, sizeof *ev);
    ck_assert_ptr_nonnull(ev);
    for (int r = 0; r < 40; r++)
        for (int lane = 0; lane < 2; lane++) {
            dt_trace_event *e = &ev[2 * r + lane];
            dt_trace_event_init(e, DT_TRACE_COMPLETE, lane ? "optimizer" : "forward", lane ? "optim" : "compute", r,
                                lane ? DT_LANE_OPTIM : DT_LANE_COMPUTE, 0, MS);
            e->iter = 0;
        }
    ck_dt(dtv_trace_from_events(ev, 80, "many", "dtsim", NULL, &tr));
    app_of(&a, &tr, NULL, DTV_VIEW_TIMELINE);
    ck_assert_int_eq(dtv_app_fit_height(&a), DTV_FIT_MAX_H);
    dtv_app_close(&a);
}
END_TEST

/* Is the activations' colour in column x between the byte counts lo and hi? */
static int act_between(const dtv_canvas *c, const dtv_memory_layout *L, int x, double lo, double hi)
{
    for (int y = dtv_memory_y_of(L, 0, hi); y <= dtv_memory_y_of(L, 0, lo); y++)
        if (dtv_color_eq(dtv_canvas_pixel(c, x, y), dtv_kind_color(DTV_FORWARD))) return 1;
    return 0;
}

START_TEST(test_memory_sawtooth)
{
    dtv_trace tr;
    real_trace(&tr, 200, 2, -1);
    ck_assert_int_eq(tr.mem_live, 1);
    ck_assert_int_eq(tr.memory[0].n, 200 * 2 * 2 * SPANS); /* per layer, not per step */
    dtv_app a;
    app_of(&a, &tr, NULL, DTV_VIEW_MEMORY);
    ck_assert_int_eq(dtv_app_fit(&a, 1400, 800), 1);
    dtv_canvas c;
    ck_dt(dtv_canvas_headless(1400, 800, &c));
    dtv_app_render(&a, &c);
    dtv_memory_layout L;
    const dtv_view *v = &a.view[0];
    dtv_memory_layout_of(&c, (SDL_Rect){0, 0, 1400, 800}, &tr, v, &L);
    ck_assert_int_eq(L.n_panels, 1);
    const SDL_Rect *r = &L.plot[0];
    for (int i = v->fit_first; i < v->fit_first + v->fit_count; i++)
        for (int k = 0; k < 2; k++) {
            const int64_t mb = i * 20 * MS + k * 2 * SPANS * MS; /* the micro-batch's start */
            /* the peak (SPANS MiB) from the head's forward end to the head's backward end */
            const int xp = (int)dtv_x_of(v, r->x, r->w, mb + SPANS * MS + MS / 2);
            ck_assert_msg(act_between(&c, &L, xp, (SPANS - 0.5) * MIB, (SPANS - 0.1) * MIB),
                          "step %d micro-batch %d: no peak at x %d", i, k, xp);
            /* one layer's worth less after the head's backward, and 1 MiB during block 0's forward */
            const int xb = (int)dtv_x_of(v, r->x, r->w, mb + (SPANS + 1) * MS + MS / 2);
            ck_assert(!act_between(&c, &L, xb, (SPANS - 0.5) * MIB, (SPANS - 0.1) * MIB));
            ck_assert(act_between(&c, &L, xb, (SPANS - 1.5) * MIB, (SPANS - 1.1) * MIB));
            const int xf = (int)dtv_x_of(v, r->x, r->w, mb + MS + MS / 2);
            ck_assert(act_between(&c, &L, xf, 0.5 * MIB, 0.9 * MIB));
            ck_assert(!act_between(&c, &L, xf, 1.1 * MIB, SPANS * MIB));
        }
    /* the optimizer holds none */
    const int xo = (int)dtv_x_of(v, r->x, r->w, 199 * 20 * MS + 4 * SPANS * MS + MS / 2);
    ck_assert(!act_between(&c, &L, xo, 0.05 * MIB, SPANS * MIB));
    dtv_canvas_free(&c);
    dtv_app_close(&a);
}
END_TEST

/* Pixels inside box [x0, x0 + bw) of timeline row 0 that are not the box's colour. */
static int text_extent(const dtv_canvas *c, const dtv_timeline_layout *L, int x0, int bw, SDL_Color box, int *lo,
                       int *hi)
{
    int n = 0;
    *lo = INT32_MAX, *hi = INT32_MIN;
    for (int x = x0; x < x0 + bw; x++)
        for (int y = L->y + 1; y < L->y + L->row_h - 1; y++)
            if (!dtv_color_eq(dtv_canvas_pixel(c, x, y), box)) {
                n++;
                if (x < *lo) *lo = x;
                if (x > *hi) *hi = x;
            }
    return n;
}

/* Forward boxes of micro-batch 3 of widths w[i] us on 1 px = 1 us, 12 us apart, cat `cat`, chunk `chunk` (-1: none). */
static void label_trace(dtv_trace *tr, const int *w, int n, const char *cat, int chunk, const char *cfg)
{
    dt_trace_event *ev = calloc((size_t)n + 1, sizeof *ev);
    ck_assert_ptr_nonnull(ev);
    int64_t t = 0;
    for (int i = 0; i < n; i++) {
        dt_trace_event_init(&ev[i], DT_TRACE_COMPLETE, "forward", cat, 0, DT_LANE_COMPUTE, t, w[i] * US);
        ev[i].iter = 0;
        ev[i].micro_batch = 3;
        if (chunk >= 0) {
            ck_dt(dt_trace_event_add_arg(&ev[i], "stage", 0));
            ck_dt(dt_trace_event_add_arg(&ev[i], "chunk", chunk));
        }
        t += (w[i] + 12) * US;
    }
    dt_trace_event_init(&ev[n], DT_TRACE_COMPLETE, "optimizer", "optim", 0, DT_LANE_OPTIM, t, US);
    ev[n].iter = 0;
    ck_dt(dtv_trace_from_events(ev, (size_t)n + 1, "labels", "dtsim", cfg, tr));
}

/* Draw tr's timeline on 1400 x 166 with 1 px per us from 0; the layout. */
static void draw_1us(dtv_canvas *c, const dtv_trace *tr, dtv_view *v, dtv_timeline_layout *L)
{
    const SDL_Rect area = {0, 0, 1400, 166};
    dtv_view_all(v, tr);
    dtv_timeline_layout_of(c, area, tr, v, L);
    v->t0 = 0;
    v->t1 = (int64_t)L->w * US;
    dtv_clear(c, DTV_BG);
    dtv_draw_timeline(c, area, tr, v);
}

/* The box of a span [t0, t0 + w us) as drawn: its first column and width. */
static void box_of(const dtv_view *v, const dtv_timeline_layout *L, int64_t t0, int w, int *x0, int *bw)
{
    *x0 = (int)floor(dtv_x_of(v, L->x, L->w, t0));
    const int x1 = (int)ceil(dtv_x_of(v, L->x, L->w, t0 + w * US));
    *bw = x1 - *x0 >= 4 ? x1 - *x0 - 1 : x1 - *x0;
}

START_TEST(test_labels_fit)
{
    dtv_canvas c;
    ck_dt(dtv_canvas_headless(1400, 166, &c));
    int one = 0, lng = 0;
    TTF_SizeUTF8(c.small, "3", &one, NULL);
    TTF_SizeUTF8(c.small, "3 c1", &lng, NULL);
    ck_assert(one > 2 && lng > one + 6);
    /* widths around the digit's: the box as drawn is w - 1 px from 4 px on */
    int w[24], n = 0;
    for (int x = 2; x <= one + 6; x++) w[n++] = x;
    w[n++] = 40;
    dtv_trace tr;
    label_trace(&tr, w, n, "compute", -1, "{\"micro_batches\":4}");
    dtv_view v;
    dtv_timeline_layout L;
    draw_1us(&c, &tr, &v, &L);
    ck_assert_int_eq(L.row_h, 30);
    int64_t t = 0, shown = 0;
    for (int i = 0; i < n; i++) {
        int x0, bw, lo, hi;
        box_of(&v, &L, t, w[i], &x0, &bw);
        const int px = text_extent(&c, &L, x0, bw, dtv_kind_color(DTV_FORWARD), &lo, &hi);
        if (one + 2 <= bw) {
            ck_assert_msg(px > 0, "a %d px box (text %d px) has no label", bw, one);
            ck_assert(lo >= x0 + 1 && hi <= x0 + bw - 2); /* a pixel to spare on each side */
            shown++;
        } else {
            ck_assert_msg(px == 0, "a %d px box (text %d px) has %d text pixels", bw, one, px);
        }
        t += (w[i] + 12) * US;
    }
    ck_assert_int_ge(shown, 4);
    dtv_trace_free(&tr);

    /* chunks: "3 c1" where it fits, else the bare "3" */
    const int wc[2] = {lng + 3, lng + 1}; /* drawn lng + 2 (fits), lng (does not) */
    label_trace(&tr, wc, 2, "pipeline", 1, "{\"micro_batches\":4}");
    ck_assert_int_eq(tr.chunks, 2);
    draw_1us(&c, &tr, &v, &L);
    int x0, bw, lo, hi;
    box_of(&v, &L, 0, wc[0], &x0, &bw);
    ck_assert_int_gt(text_extent(&c, &L, x0, bw, dtv_kind_color(DTV_FORWARD), &lo, &hi), 0);
    ck_assert_msg(hi - lo + 1 > one + 2, "the %d px box shows %d px of text, not \"3 c1\"", bw, hi - lo + 1);
    box_of(&v, &L, (wc[0] + 12) * US, wc[1], &x0, &bw);
    ck_assert_int_gt(text_extent(&c, &L, x0, bw, dtv_kind_color(DTV_FORWARD), &lo, &hi), 0);
    ck_assert_msg(hi - lo + 1 <= one, "the %d px box shows %d px of text, more than \"3\"", bw, hi - lo + 1);
    dtv_trace_free(&tr);

    /* one micro-batch per step: every box would read "0"; none does */
    const int wide[1] = {60};
    label_trace(&tr, wide, 1, "compute", -1, "{\"micro_batches\":1}");
    draw_1us(&c, &tr, &v, &L);
    box_of(&v, &L, 0, wide[0], &x0, &bw);
    ck_assert_int_eq(text_extent(&c, &L, x0, bw, dtv_kind_color(DTV_FORWARD), &lo, &hi), 0);
    dtv_trace_free(&tr);
    dtv_canvas_free(&c);
}
END_TEST

static Suite *viz_fit_suite(void)
{
    Suite *s = suite_create("viz_fit");
    TCase *tc = tcase_create("fit");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_steps_and_stages);
    tcase_add_test(tc, test_fit_last_steps);
    tcase_add_test(tc, test_fit_two_panes);
    tcase_add_test(tc, test_fit_height);
    tcase_add_test(tc, test_memory_sawtooth);
    tcase_add_test(tc, test_labels_fit);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return dt_test_run(viz_fit_suite()); }
