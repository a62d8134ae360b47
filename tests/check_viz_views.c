/* check_viz_views.c: the viewer's loss-scale and memory views
 * (viz/view_scale.c, viz/view_memory.c) on hand-made traces, rendered
 * headless (a memory surface: no display needed) and probed pixel by pixel
 * at the positions the views' geometry helpers give:
 *   - scale: 20 steps, the scale 2^10, one overflow at step 7 (layer 2,
 *     skipped) that halves it, growth back at step 14: the red marker is
 *     in step 7's column and in no column of a clean step; the step
 *     function is at 2^10 before and 2^9 after; before the overflow has
 *     happened (playback) there is no marker; the x axis is the iteration;
 *   - scale: a trace without a loss scale draws its message and no line;
 *   - memory: two ranks with known static / activations / stash; the
 *     stacked area's top at a time is at the y of the known sum, the
 *     activations' colour just under it and not above; nothing is drawn
 *     after the playback time; 20 ranks give 16 panels and 4 left out;
 *   - a real run's activation counter gives an activations-only layout;
 *   - the layer names and the number of layers;
 *   - breakdown: two data-parallel ranks with known categories (per step
 *     compute 30 ms, optimizer 12, comm exposed 8 or 5, overlapped 13 or
 *     0, idle 5 or 8): the model's figures are dt_breakdown_all's, each
 *     segment of a rank's bar has its category's colour and a width in
 *     proportion, the overlapped strip is as long as the overlap and
 *     absent without one; a shared scale twice the step halves the bars;
 *     a trace of one step draws no bar and says why. */
#include <string.h>

#include "testutil.h"
#include "dtv_view.h"

#define MS 1000000LL
#define W 1000
#define H 520

static const char *const CONFIG = "{\"num_layers\":4,\"initial_loss_scale\":1024.0,\"min_loss_scale\":1.0,"
                                  "\"loss_scale_window\":7,\"hysteresis\":1}";
enum { STEPS = 20, OVER = 7 };

/* 20 steps of 10 ms: an optimizer span, a loss_scale counter at the end;
 * the scale is 1024, halved by the overflow at step 7, doubled at 14. */
static void scale_trace(dtv_trace *tr, int with_scale)
{
    dt_trace_event *ev = calloc(3 * STEPS + 2, sizeof *ev);
    ck_assert_ptr_nonnull(ev);
    size_t n = 0;
    double s = 1024;
    for (int i = 0; i < STEPS; i++) {
        dt_trace_event *e = &ev[n++];
        dt_trace_event_init(e, DT_TRACE_COMPLETE, "optimizer", "optim", 0, DT_LANE_OPTIM, i * 10 * MS, 8 * MS);
        e->iter = i;
        if (!with_scale) continue;
        if (i == OVER) {
            e = &ev[n++];
            dt_trace_event_init(e, DT_TRACE_INSTANT, "overflow", "optim", 0, DT_LANE_OPTIM, i * 10 * MS + 9 * MS, 0);
            e->iter = i;
            ck_dt(dt_trace_event_add_arg(e, "loss_scale", s));
            ck_dt(dt_trace_event_add_arg(e, "layer_slot", 3)); /* layer 2 */
            ck_dt(dt_trace_event_add_arg(e, "skipped", 1));
            s /= 2;
        }
        if (i == 14) s *= 2;
        e = &ev[n++];
        dt_trace_event_init(e, DT_TRACE_COUNTER, "loss_scale", "counter", 0, DT_LANE_COMPUTE, i * 10 * MS + 9 * MS, 0);
        e->value = s;
    }
    ck_dt(dtv_trace_from_events(ev, n, "scale", "dtsim", CONFIG, tr));
}

/* Is colour `col` somewhere in column x between y0 and y1? */
static int column_has(const dtv_canvas *c, int x, int y0, int y1, SDL_Color col)
{
    for (int y = y0; y <= y1; y++)
        if (dtv_color_eq(dtv_canvas_pixel(c, x, y), col)) return 1;
    return 0;
}

static const SDL_Color LINE = {0, 114, 178, 255};

/* A W x H headless canvas with view id of tr, over the whole trace,
 * drawn on a cleared background; the view returned. */
static dtv_view render(dtv_canvas *c, const dtv_trace *tr, dtv_view_id id)
{
    ck_dt(dtv_canvas_headless(W, H, c));
    dtv_view v = {.id = id};
    dtv_view_all(&v, tr);
    dtv_clear(c, DTV_BG);
    dtv_draw_view(c, (SDL_Rect){0, 0, W, H}, tr, &v);
    return v;
}

START_TEST(test_scale_overflow_marker)
{
    dtv_trace tr;
    scale_trace(&tr, 1);
    ck_assert_int_eq(tr.loss_scale.n, STEPS);
    ck_assert_int_eq(tr.n_overflow, 1);
    ck_assert_int_eq(tr.overflow[0].layer, 2);
    dtv_canvas c;
    dtv_view v = render(&c, &tr, DTV_VIEW_SCALE);
    SDL_Rect area = {0, 0, W, H};
    dtv_scale_layout L;
    dtv_scale_layout_of(&c, area, &tr, &v, &L);
    ck_assert_int_eq(L.by_iter, 1);
    ck_assert(L.x_lo == 0 && L.x_hi == STEPS);
    ck_assert(L.l2_lo <= 9 && L.l2_lo > 0 && L.l2_hi >= 10); /* the minimum 2^0 is far below 2^9: off the axis */
    /* the marker: in step 7's column, in no clean step's column */
    const int xk = dtv_scale_x_of_iter(&L, OVER);
    /* the mapping itself: step i is the i-th of STEPS equal slices of the plot, the marker in its middle */
    for (int i = 0; i < STEPS; i++) {
        const double mid = L.x + (i + 0.5) * L.w / STEPS;
        ck_assert_msg(fabs(dtv_scale_x_of_iter(&L, i) - mid) <= 1.0, "step %d at x %d, expected %.1f", i,
                      dtv_scale_x_of_iter(&L, i), mid);
    }
    /* y: log2, 2^l2_hi at the top, 2^l2_lo at the bottom */
    ck_assert_int_eq(dtv_scale_y_of(&L, ldexp(1.0, (int)L.l2_hi)), L.y);
    ck_assert_int_eq(dtv_scale_y_of(&L, ldexp(1.0, (int)L.l2_lo)), L.y + L.h);
    ck_assert(abs(dtv_scale_y_of(&L, 512) - dtv_scale_y_of(&L, 1024) - L.h / (int)(L.l2_hi - L.l2_lo)) <= 1);
    ck_assert_msg(column_has(&c, xk, L.y, L.y + L.h, DTV_ACCENT), "no overflow marker at x %d (step %d)", xk, OVER);
    for (int i = 0; i < STEPS; i++) {
        if (i >= OVER - 1 && i <= OVER + 1) continue; /* the layer's label may spill into the neighbours */
        const int x = dtv_scale_x_of_iter(&L, i);
        ck_assert_msg(!column_has(&c, x, L.y, L.y + L.h, DTV_ACCENT), "a red marker at step %d (x %d)", i, x);
    }
    /* the marker sits on the scale that overflowed, its tip just above the line */
    const int y10 = dtv_scale_y_of(&L, 1024), y9 = dtv_scale_y_of(&L, 512);
    ck_assert(column_has(&c, xk, y10 - 12, y10 - 1, DTV_ACCENT));
    /* the step function: 2^10 before the overflow, 2^9 after it (steps 8..14), 2^10 again from 15 */
    ck_assert(column_has(&c, dtv_scale_x_of_iter(&L, 3), y10, y10 + 1, LINE));
    ck_assert(column_has(&c, dtv_scale_x_of_iter(&L, 11), y9, y9 + 1, LINE));
    ck_assert(!column_has(&c, dtv_scale_x_of_iter(&L, 11), y10 - 1, y10 + 2, LINE));
    ck_assert(column_has(&c, dtv_scale_x_of_iter(&L, 17), y10, y10 + 1, LINE));
    /* playback before the overflow: no marker, and no line after `now` */
    v.now = 5 * 10 * MS;
    dtv_clear(&c, DTV_BG);
    dtv_draw_scale(&c, area, &tr, &v);
    ck_assert(!column_has(&c, xk, L.y, L.y + L.h, DTV_ACCENT));
    ck_assert(column_has(&c, dtv_scale_x_of_iter(&L, 2), y10, y10 + 1, LINE));
    ck_assert(!column_has(&c, dtv_scale_x_of_iter(&L, 12), L.y, L.y + L.h, LINE));
    /* zoomed on steps 10..19: the x range follows the window */
    dtv_view_all(&v, &tr);
    v.t0 = 10 * 10 * MS;
    dtv_scale_layout_of(&c, area, &tr, &v, &L);
    ck_assert(L.x_lo == 10 && L.x_hi == STEPS);
    dtv_canvas_free(&c);
    dtv_trace_free(&tr);
}
END_TEST

START_TEST(test_scale_absent)
{
    dtv_trace tr;
    scale_trace(&tr, 0);
    ck_assert_int_eq(tr.loss_scale.n, 0);
    dtv_canvas c;
    render(&c, &tr, DTV_VIEW_SCALE);
    int line = 0, text = 0;
    for (int y = 0; y < H; y += 2)
        for (int x = 0; x < W; x += 2) {
            const SDL_Color p = dtv_canvas_pixel(&c, x, y);
            line += dtv_color_eq(p, LINE) || dtv_color_eq(p, DTV_ACCENT);
            text += !dtv_color_eq(p, DTV_BG);
        }
    ck_assert_int_eq(line, 0);
    ck_assert_int_gt(text, 100); /* the message */
    dtv_canvas_free(&c);
    dtv_trace_free(&tr);
}
END_TEST

#define MIB (1024.0 * 1024.0)

static void memory_point(dt_trace_event *e, int pid, int64_t ts, double st, double act, double stash)
{
    dt_trace_event_init(e, DT_TRACE_COUNTER, "memory", "counter", pid, DT_LANE_COMPUTE, ts, 0);
    e->value = st + act + stash;
    ck_dt(dt_trace_event_add_arg(e, "static", st));
    ck_dt(dt_trace_event_add_arg(e, "activations", act));
    ck_dt(dt_trace_event_add_arg(e, "stash", stash));
}

/* `ranks` ranks over 40 ms: static 1 MiB from 0; activations 2 MiB (rank
 * 0) or 1 MiB (others) from 10 to 20 ms; 0.5 MiB of stash from 30 ms. */
static void memory_trace(dtv_trace *tr, int ranks)
{
    dt_trace_event *ev = calloc((size_t)ranks * 6, sizeof *ev);
    ck_assert_ptr_nonnull(ev);
    size_t n = 0;
    for (int r = 0; r < ranks; r++) {
        const double act = r == 0 ? 2 * MIB : MIB;
        dt_trace_event_init(&ev[n], DT_TRACE_COMPLETE, "forward", "pipeline", r, DT_LANE_COMPUTE, 10 * MS, 10 * MS);
        ev[n++].iter = 0;
        memory_point(&ev[n++], r, 0, MIB, 0, 0);
        memory_point(&ev[n++], r, 10 * MS, MIB, act, 0);
        memory_point(&ev[n++], r, 20 * MS, MIB, 0, 0);
        memory_point(&ev[n++], r, 30 * MS, MIB, 0, MIB / 2);
        memory_point(&ev[n++], r, 40 * MS, MIB, 0, MIB / 2);
    }
    ck_dt(dtv_trace_from_events(ev, n, "memory", "dtsim", NULL, tr));
}

START_TEST(test_memory_stack)
{
    dtv_trace tr;
    memory_trace(&tr, 2);
    dtv_canvas c;
    dtv_view v = render(&c, &tr, DTV_VIEW_MEMORY);
    SDL_Rect area = {0, 0, W, H};
    dtv_memory_layout L;
    dtv_memory_layout_of(&c, area, &tr, &v, &L);
    ck_assert_int_eq(L.n_panels, 2);
    ck_assert_int_eq(L.omitted, 0);
    ck_assert_int_eq(L.full, 1);
    ck_assert(L.y_max >= 3 * MIB);
    for (int p = 0; p < 2; p++) { /* the mapping itself: 0 at the bottom, y_max at the top, linear */
        ck_assert_int_eq(dtv_memory_y_of(&L, p, 0), L.plot[p].y + L.plot[p].h);
        ck_assert_int_eq(dtv_memory_y_of(&L, p, L.y_max), L.plot[p].y);
        ck_assert(abs(dtv_memory_y_of(&L, p, L.y_max / 2) - (L.plot[p].y + L.plot[p].h / 2)) <= 1);
    }
    const SDL_Color act = dtv_kind_color(DTV_FORWARD), stash = dtv_kind_color(DTV_STASH);
    for (int p = 0; p < 2; p++) {
        const SDL_Rect *r = &L.plot[p];
        const double top = p == 0 ? 3 * MIB : 2 * MIB;
        /* at 15 ms: static + activations; the top at the y of the sum */
        const int x = (int)dtv_x_of(&v, r->x, r->w, 15 * MS);
        const int yt = dtv_memory_y_of(&L, p, top);
        ck_assert_msg(dtv_color_eq(dtv_canvas_pixel(&c, x, yt + 2), act), "panel %d: no activations under the top", p);
        ck_assert_msg(!dtv_color_eq(dtv_canvas_pixel(&c, x, yt - 2), act), "panel %d: activations above the top", p);
        /* under the activations: the static area, another colour */
        const int ys = dtv_memory_y_of(&L, p, 0.5 * MIB);
        const SDL_Color st = dtv_canvas_pixel(&c, x, ys);
        ck_assert(!dtv_color_eq(st, act) && !dtv_color_eq(st, DTV_PANEL) && !dtv_color_eq(st, DTV_BG));
        /* at 25 ms: static only, no activations */
        const int x25 = (int)dtv_x_of(&v, r->x, r->w, 25 * MS);
        ck_assert(!column_has(&c, x25, r->y, r->y + r->h, act));
        ck_assert(dtv_color_eq(dtv_canvas_pixel(&c, x25, ys), st));
        /* at 35 ms: the stash on top of the static area */
        const int x35 = (int)dtv_x_of(&v, r->x, r->w, 35 * MS);
        ck_assert(dtv_color_eq(dtv_canvas_pixel(&c, x35, dtv_memory_y_of(&L, p, 1.25 * MIB)), stash));
        ck_assert(!dtv_color_eq(dtv_canvas_pixel(&c, x35, dtv_memory_y_of(&L, p, 1.75 * MIB)), stash));
    }
    /* playback at 12 ms: activations drawn up to it, nothing after */
    v.now = 12 * MS;
    dtv_clear(&c, DTV_BG);
    dtv_draw_memory(&c, area, &tr, &v);
    const SDL_Rect *r = &L.plot[0];
    const int y = dtv_memory_y_of(&L, 0, 2 * MIB);
    ck_assert(dtv_color_eq(dtv_canvas_pixel(&c, (int)dtv_x_of(&v, r->x, r->w, 11 * MS), y), act));
    ck_assert(!dtv_color_eq(dtv_canvas_pixel(&c, (int)dtv_x_of(&v, r->x, r->w, 15 * MS), y), act));
    ck_assert(!column_has(&c, (int)dtv_x_of(&v, r->x, r->w, 35 * MS), r->y, r->y + r->h, stash));
    dtv_canvas_free(&c);
    dtv_trace_free(&tr);
}
END_TEST

START_TEST(test_memory_many_ranks)
{
    dtv_trace tr;
    memory_trace(&tr, 20);
    dtv_canvas c;
    dtv_view v = render(&c, &tr, DTV_VIEW_MEMORY);
    dtv_memory_layout L;
    dtv_memory_layout_of(&c, (SDL_Rect){0, 0, W, H}, &tr, &v, &L);
    ck_assert_int_eq(L.n_panels, DTV_MEMORY_PANELS);
    ck_assert_int_eq(L.omitted, 4);
    for (int i = 0; i < L.n_panels; i++) {
        ck_assert_int_eq(L.rank[i], i);
        ck_assert(L.plot[i].w > 20 && L.plot[i].h > 10);
        ck_assert(L.plot[i].x + L.plot[i].w <= W && L.plot[i].y + L.plot[i].h <= H);
        for (int j = 0; j < i; j++) ck_assert(!SDL_HasIntersection(&L.plot[i], &L.plot[j]));
    }
    dtv_canvas_free(&c);
    dtv_trace_free(&tr);
}
END_TEST

START_TEST(test_memory_real_run)
{
    dt_trace_event *ev = calloc(4, sizeof *ev);
    ck_assert_ptr_nonnull(ev);
    dt_trace_event_init(&ev[0], DT_TRACE_COMPLETE, "forward", "compute", 0, DT_LANE_COMPUTE, 0, 5 * MS);
    ev[0].iter = 0;
    dt_trace_event_init(&ev[1], DT_TRACE_COUNTER, "activation_bytes", "counter", 0, DT_LANE_COMPUTE, 6 * MS, 0);
    ev[1].value = MIB;
    dt_trace_event_init(&ev[2], DT_TRACE_COUNTER, "peak_activation_bytes", "counter", 0, DT_LANE_COMPUTE, 6 * MS, 0);
    ev[2].value = 3 * MIB;
    dt_trace_event_init(&ev[3], DT_TRACE_COMPLETE, "forward", "compute", 0, DT_LANE_COMPUTE, 10 * MS, 5 * MS);
    ev[3].iter = 1;
    dtv_trace tr;
    ck_dt(dtv_trace_from_events(ev, 4, "real", "dtrain", NULL, &tr));
    dtv_canvas c;
    dtv_view v = render(&c, &tr, DTV_VIEW_MEMORY);
    dtv_memory_layout L;
    dtv_memory_layout_of(&c, (SDL_Rect){0, 0, W, H}, &tr, &v, &L);
    ck_assert_int_eq(L.full, 0);
    ck_assert_int_eq(L.n_panels, 1);
    ck_assert(L.y_max >= 3 * MIB); /* the high-water mark fits */
    const SDL_Rect *r = &L.plot[0];
    const int x = (int)dtv_x_of(&v, r->x, r->w, 12 * MS);
    ck_assert(dtv_color_eq(dtv_canvas_pixel(&c, x, dtv_memory_y_of(&L, 0, 0.5 * MIB)), dtv_kind_color(DTV_FORWARD)));
    ck_assert(!dtv_color_eq(dtv_canvas_pixel(&c, x, dtv_memory_y_of(&L, 0, 1.5 * MIB)), dtv_kind_color(DTV_FORWARD)));
    dtv_canvas_free(&c);
    dtv_trace_free(&tr);
}
END_TEST

START_TEST(test_layer_names)
{
    char b[32];
    dtv_layer_name(b, sizeof b, -1, 4);
    ck_assert_str_eq(b, "embedding");
    dtv_layer_name(b, sizeof b, 3, 4);
    ck_assert_str_eq(b, "layer 3");
    dtv_layer_name(b, sizeof b, 4, 4);
    ck_assert_str_eq(b, "head");
    dtv_layer_name(b, sizeof b, DT_TRACE_NONE, 4);
    ck_assert_str_eq(b, "");
    dtv_trace tr;
    scale_trace(&tr, 1);
    ck_assert_int_eq(dtv_trace_num_layers(&tr), 4);
    ck_assert(dtv_trace_config_number(&tr, "min_loss_scale", -1) == 1.0);
    ck_assert(dtv_trace_config_number(&tr, "absent", -1) == -1.0);
    dtv_trace_free(&tr);
    memory_trace(&tr, 1); /* no config, no layers */
    ck_assert_int_eq(dtv_trace_num_layers(&tr), -1);
    dtv_trace_free(&tr);
}
END_TEST

/* Steps of 55 ms on two ranks from `steps` steps: forward [5, 15),
 * backward [15, 35) with a recomputation nested, optimizer [43, 55). Rank 0
 * reduce-scatters [25, 40) (10 under the backward), all-gathers [40, 43)
 * and [50, 53) (under the optimizer); rank 1 reduce-scatters [35, 40) only. */
static void breakdown_trace(dtv_trace *tr, int steps)
{
    dt_trace_event *ev = calloc((size_t)steps * 16, sizeof *ev);
    ck_assert_ptr_nonnull(ev);
    size_t n = 0;
    static const struct {
        const char *name, *cat;
        int pid, lane, t0, t1;
    } sp[] = {
        {"forward", "compute", -1, DT_LANE_COMPUTE, 5, 15},    {"backward", "compute", -1, DT_LANE_COMPUTE, 15, 35},
        {"recompute", "compute", -1, DT_LANE_COMPUTE, 17, 21}, {"optimizer", "optim", -1, DT_LANE_OPTIM, 43, 55},
        {"reduce-scatter", "comm", 0, DT_LANE_COMM, 25, 40},   {"all-gather", "comm", 0, DT_LANE_COMM, 40, 43},
        {"all-gather", "comm", 0, DT_LANE_COMM, 50, 53},       {"reduce-scatter", "comm", 1, DT_LANE_COMM, 35, 40}};
    for (int i = 0; i < steps; i++)
        for (int pid = 0; pid < 2; pid++)
            for (size_t k = 0; k < sizeof sp / sizeof sp[0]; k++) {
                if (sp[k].pid >= 0 && sp[k].pid != pid) continue;
                dt_trace_event *e = &ev[n++];
                dt_trace_event_init(e, DT_TRACE_COMPLETE, sp[k].name, sp[k].cat, pid, sp[k].lane,
                                    (i * 55 + sp[k].t0) * MS, (sp[k].t1 - sp[k].t0) * MS);
                e->iter = i;
            }
    ck_dt(dtv_trace_from_events(ev, n, "breakdown", "dtsim", NULL, tr));
}

START_TEST(test_breakdown_bars)
{
    dtv_trace tr;
    breakdown_trace(&tr, 4);
    ck_assert_int_eq(tr.bd_skip, 1);
    ck_assert_int_eq(tr.n_breakdown, 2);
    dt_breakdown *want = NULL;
    int n_want = 0;
    ck_dt(dt_breakdown_all(tr.ev, tr.n_ev, 1, &want, &n_want));
    ck_assert_int_eq(n_want, 2);
    ck_assert(memcmp(want, tr.breakdown, 2 * sizeof *want) == 0);
    free(want);
    static const int64_t cat[2][DT_BREAKDOWN_N_CATS] = {{30, 12, 8, 0, 5}, {30, 12, 5, 0, 8}};
    for (int r = 0; r < 2; r++) {
        ck_assert(tr.breakdown[r].step_ns == 55.0 * MS);
        for (int k = 0; k < DT_BREAKDOWN_N_CATS; k++) ck_assert_int_eq(tr.breakdown[r].cat_ns[k], 3 * cat[r][k] * MS);
    }
    ck_assert_int_eq(tr.breakdown[0].comm_overlapped_ns, 3 * 13 * MS);
    ck_assert_int_eq(tr.breakdown[1].comm_overlapped_ns, 0);
    dtv_canvas c;
    ck_dt(dtv_canvas_headless(W, H, &c));
    dtv_view v = {.id = DTV_VIEW_BREAKDOWN};
    ck_assert_int_eq(dtv_view_parse("breakdown", &v.id), 0);
    ck_assert_int_eq(v.id, DTV_VIEW_BREAKDOWN);
    dtv_view_all(&v, &tr);
    SDL_Rect area = {0, 0, W, H};
    dtv_clear(&c, DTV_BG);
    dtv_draw_view(&c, area, &tr, &v);
    dtv_breakdown_layout L;
    dtv_breakdown_layout_of(&c, area, &tr, &v, &L);
    ck_assert_int_eq(L.n_rows, 2);
    ck_assert_int_eq(L.omitted, 0);
    ck_assert(L.step_max == 55.0 * MS);
    for (int r = 0; r < 2; r++) {
        ck_assert_int_eq(L.seg[r][DT_BREAKDOWN_N_CATS], L.x + L.w); /* the longest step: full width */
        for (int k = 0; k < DT_BREAKDOWN_N_CATS; k++) {
            const int x0 = L.seg[r][k], x1 = L.seg[r][k + 1];
            ck_assert_msg(abs((x1 - x0) - (int)lround(cat[r][k] / 55.0 * L.w)) <= 1, "rank %d %s: %d px", r,
                          dt_breakdown_cat_name((dt_breakdown_cat)k), x1 - x0);
            if (x1 - x0 < 4) continue;
            /* the segment's left columns, in the bar's top rows (its label is centred) */
            const SDL_Color px = dtv_canvas_pixel(&c, x0 + 1, L.y[r] + 2);
            ck_assert_msg(dtv_color_eq(px, dtv_breakdown_color(k)), "rank %d %s at x %d: (%d, %d, %d)", r,
                          dt_breakdown_cat_name((dt_breakdown_cat)k), x0 + 1, px.r, px.g, px.b);
        }
    }
    /* the overlapped strip: 13/55 of the width on rank 0, none on rank 1 */
    const SDL_Color ov = dtv_breakdown_color(DT_BREAKDOWN_N_CATS);
    const int sy = L.y[0] + L.bar_h + 2 + L.strip_h / 2;
    ck_assert(abs(L.strip_x1[0] - L.x - (int)lround(13 / 55.0 * L.w)) <= 1);
    ck_assert(dtv_color_eq(dtv_canvas_pixel(&c, L.x + 1, sy), ov));
    ck_assert(dtv_color_eq(dtv_canvas_pixel(&c, L.strip_x1[0] - 2, sy), ov));
    ck_assert(dtv_color_eq(dtv_canvas_pixel(&c, L.strip_x1[0] + 2, sy), DTV_BG));
    ck_assert_int_eq(L.strip_x1[1], L.x);
    ck_assert(!column_has(&c, L.x + 1, L.y[1] + L.bar_h + 2, L.y[1] + L.bar_h + 1 + L.strip_h, ov));
    /* two panes to one scale, twice this step: the bars end half-way */
    v.bd_scale_ns = 110.0 * MS;
    dtv_breakdown_layout_of(&c, area, &tr, &v, &L);
    ck_assert(abs(L.seg[0][DT_BREAKDOWN_N_CATS] - (L.x + L.w / 2)) <= 1);
    dtv_canvas_free(&c);
    dtv_trace_free(&tr);
}
END_TEST

START_TEST(test_breakdown_too_few_steps)
{
    dtv_trace tr;
    breakdown_trace(&tr, 1); /* one step: skip 0, and the range from 0 */
    ck_assert_int_eq(tr.bd_skip, 0);
    ck_assert_int_eq(tr.n_breakdown, 2);
    ck_assert_int_eq(tr.breakdown[0].cat_ns[DT_BREAKDOWN_IDLE], 5 * MS);
    dtv_trace_free(&tr);
    /* no event with an iteration: no breakdown, and the reason */
    dt_trace_event *ev = calloc(1, sizeof *ev);
    ck_assert_ptr_nonnull(ev);
    dt_trace_event_init(ev, DT_TRACE_COMPLETE, "forward", "compute", 0, DT_LANE_COMPUTE, 0, 5 * MS);
    ck_dt(dtv_trace_from_events(ev, 1, "none", "dtsim", NULL, &tr));
    ck_assert_int_eq(tr.n_breakdown, 0);
    ck_assert_ptr_null(tr.breakdown);
    ck_assert_ptr_nonnull(strstr(tr.bd_why, "no rank has events with an iteration"));
    dtv_canvas c;
    dtv_view v = render(&c, &tr, DTV_VIEW_BREAKDOWN);
    SDL_Rect area = {0, 0, W, H};
    dtv_breakdown_layout L;
    dtv_breakdown_layout_of(&c, area, &tr, &v, &L);
    ck_assert_int_eq(L.n_rows, 0);
    for (int k = 0; k < DT_BREAKDOWN_N_CATS; k++) /* no bar's colour in the middle of the area */
        ck_assert(k == DT_BREAKDOWN_IDLE || !column_has(&c, W / 2, 60, H - 40, dtv_breakdown_color(k)));
    dtv_canvas_free(&c);
    dtv_trace_free(&tr);
}
END_TEST

static Suite *viz_views_suite(void)
{
    Suite *s = suite_create("viz_views");
    TCase *tc = tcase_create("views");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_scale_overflow_marker);
    tcase_add_test(tc, test_scale_absent);
    tcase_add_test(tc, test_memory_stack);
    tcase_add_test(tc, test_memory_many_ranks);
    tcase_add_test(tc, test_memory_real_run);
    tcase_add_test(tc, test_layer_names);
    tcase_add_test(tc, test_breakdown_bars);
    tcase_add_test(tc, test_breakdown_too_few_steps);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return dt_test_run(viz_views_suite()); }
