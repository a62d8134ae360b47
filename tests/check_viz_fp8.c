/* check_viz_fp8.c: the viewer's FP8 scaling view (viz/trace_fp8.c,
 * viz/view_fp8.c) on hand-made traces with known answers:
 *   - the model: 12 steps of 10 ms of a hybrid delayed-scaling run with an
 *     amax history of 4 steps (max), three tensors: h.0.qkv.x (E4M3) with
 *     amax 1 and a spike of 16 at step 5 that saturates 1000 of its 4096
 *     values, h.0.qkv.dy (E5M2, amax 2^-10, rising to 2^-9 at step 8: 10
 *     saturated), h.0.fc.w (E4M3, nothing saturated). Each delayed step
 *     carries the scale the library's rule gives (max / the history's max
 *     amax; the first step none). The index: the tensors in the model's
 *     order, their formats, the list most saturated first and h.0.qkv.x
 *     the default; the window of every step: top max / s (the history's
 *     max amax: 1 before the spike, 16 while it is in the history, steps
 *     6..9, 1 again from step 10), bottom smallest subnormal / 2s, the
 *     first step's from its own amax; the steps marked saturated are 5 of
 *     qkv.x and 8 of qkv.dy; the sums and the worst step; the steps
 *     revealed by a playback time; cycling the tensors;
 *   - tensorwise and blockwise windows from the step's own amax: top amax
 *     x 2^margin; blockwise's power-of-two scale;
 *   - the picture (headless, 1400 x 800): the red marker at step 5's amax,
 *     the top edge's tick above steps 5 and none above step 4, the band's
 *     colour inside step 2's window; at a playback time inside step 5 no
 *     marker and no band for it yet; a click on the list's second row shows
 *     h.0.qkv.dy, and so do ']' and the down key; key 7 the view; two panes
 *     show the first pane's tensor; `--view fp8 --png` writes a PNG;
 *   - a trace without FP8 events draws its message; a negative count
 *     refuses the trace, naming the event. */
#include <string.h>
#include <unistd.h>

#include "dt_fp8.h"
#include "dtv_app.h"
#include "testutil.h"

#define MS 1000000LL

enum { STEPS = 12, SPIKE = 5, DY_RISE = 8, HIST = 4, VALUES = 4096 };

static const char *const CONFIG_DELAYED =
    "{\"num_layers\":1,\"fp8_format\":\"hybrid\",\"fp8_recipe\":\"delayed\",\"fp8_margin\":0,"
    "\"fp8_amax_history_len\":4,\"fp8_amax_compute_algo\":\"max\"}";

/* The three tensors: name, index in the block, and each step's amax and saturated values. */
static double amax_of(int tensor, int k, int alt)
{
    if (tensor == 0) return k == SPIKE ? 16.0 : 1.0;
    if (tensor == 2) return k >= DY_RISE ? ldexp(1, -9) : ldexp(1, -10);
    return alt && k == 2 ? 2.0 : 0.25; /* fc.w; alt: a spike at step 2 */
}
static double sat_of(int tensor, int k, int alt)
{
    if (tensor == 0) return k == SPIKE ? 1000 : 0;
    if (tensor == 2) return k == DY_RISE ? 10 : 0;
    return alt && k == 2 ? 5000 : 0;
}
static const struct {
    const char *name;
    int tensor;
    dt_fp8_format fmt;
} TENSORS[3] = {{"h.0.qkv.x", 0, DT_FP8_E4M3}, {"h.0.qkv.dy", 2, DT_FP8_E5M2}, {"h.0.fc.w", 7, DT_FP8_E4M3}};

/* Delayed scaling's scale of step k of tensor i: max / the max amax of the HIST steps before (none at step 0). */
static double delayed_scale(int i, int k, int alt)
{
    double m = 0;
    for (int j = k - HIST; j < k; j++)
        if (j >= 0 && amax_of(TENSORS[i].tensor, j, alt) > m) m = amax_of(TENSORS[i].tensor, j, alt);
    return m > 0 ? dt_fp8_scale_from_amax((float)m, TENSORS[i].fmt, 0, 0) : 0;
}

/* 12 steps of 10 ms: a forward span and, at its end, one fp8 event per
 * tensor (the events in a scrambled order: the index sorts them). alt:
 * fc.w saturates 5000 values at step 2 (it is then the default). */
static void fp8_trace(dtv_trace *tr, const char *config, int delayed, int alt)
{
    dt_trace_event *ev = calloc(4 * STEPS, sizeof *ev);
    ck_assert_ptr_nonnull(ev);
    size_t n = 0;
    for (int k = STEPS - 1; k >= 0; k--) {
        dt_trace_event *e = &ev[n++];
        dt_trace_event_init(e, DT_TRACE_COMPLETE, "forward", "compute", 0, DT_LANE_COMPUTE, k * 10 * MS, 9 * MS);
        e->iter = k;
        for (int i = 2; i >= 0; i--) {
            char name[64];
            snprintf(name, sizeof name, "fp8 %s", TENSORS[i].name);
            e = &ev[n++];
            dt_trace_event_init(e, DT_TRACE_INSTANT, name, "optim", 0, DT_LANE_OPTIM, k * 10 * MS + 9 * MS, 0);
            e->iter = k;
            e->layer = 0;
            ck_dt(dt_trace_event_add_arg(e, "tensor", TENSORS[i].tensor));
            ck_dt(dt_trace_event_add_arg(e, "amax", amax_of(TENSORS[i].tensor, k, alt)));
            if (delayed && k > 0) ck_dt(dt_trace_event_add_arg(e, "scale", delayed_scale(i, k, alt)));
            ck_dt(dt_trace_event_add_arg(e, "saturated", sat_of(TENSORS[i].tensor, k, alt)));
            ck_dt(dt_trace_event_add_arg(e, "flushed", 3));
            ck_dt(dt_trace_event_add_arg(e, "values", VALUES));
        }
    }
    ck_dt(dtv_trace_from_events(ev, n, "fp8", "dtrain", config, tr));
}

static void ck_pixel(const dtv_canvas *cv, int x, int y, SDL_Color want, const char *what)
{
    const SDL_Color got = dtv_canvas_pixel(cv, x, y);
    ck_assert_msg(dtv_color_eq(got, want), "%s at (%d, %d): got %d,%d,%d, expected %d,%d,%d", what, x, y, got.r, got.g,
                  got.b, want.r, want.g, want.b);
}

START_TEST(test_model)
{
    dtv_trace t;
    fp8_trace(&t, CONFIG_DELAYED, 1, 0);
    const dtv_fp8 *f = t.fp8;
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(f->mode, DT_FP8_MODE_HYBRID);
    ck_assert_int_eq(f->recipe, DT_FP8_DELAYED);
    ck_assert_int_eq(f->recipe_known, 1);
    ck_assert_int_eq(f->history_len, HIST);
    ck_assert_int_eq(f->n, 3);
    /* the model's order (qkv.x 0, qkv.dy 2, fc.w 7), each its role's format */
    for (int i = 0; i < 3; i++) {
        ck_assert_str_eq(f->x[i].name, TENSORS[i].name);
        ck_assert_int_eq(f->x[i].tensor, TENSORS[i].tensor);
        ck_assert_int_eq(f->x[i].format, TENSORS[i].fmt);
        ck_assert_int_eq(f->x[i].n, STEPS);
        ck_assert_int_eq(dtv_fp8_find(f, TENSORS[i].name), i);
    }
    ck_assert_int_eq(dtv_fp8_find(f, "h.9.qkv.x"), -1);
    /* the list: most saturated first; the default the most saturated, qkv.x */
    ck_assert_int_eq(f->order[0], 0);
    ck_assert_int_eq(f->order[1], 1);
    ck_assert_int_eq(f->order[2], 2);
    ck_assert_int_eq(f->dflt, 0);
    ck_assert(f->x[0].saturated == 1000 && f->x[0].steps_saturated == 1);
    ck_assert(f->x[1].saturated == 10 && f->x[1].steps_saturated == 1);
    ck_assert(f->x[2].saturated == 0 && f->x[2].flushed == 3 * STEPS && f->x[2].values == (double)VALUES * STEPS);
    /* the windows: top max / s, bottom smallest subnormal / 2s */
    for (int i = 0; i < 3; i++) {
        const dtv_fp8_tensor *x = &f->x[i];
        const double mx = dt_fp8_max(TENSORS[i].fmt), sub = dt_fp8_min_subnormal(TENSORS[i].fmt);
        for (int k = 0; k < STEPS; k++) {
            ck_assert_int_eq(x->s[k].iter, k);
            ck_assert_int_eq(x->s[k].t, (k * 10 + 9) * MS);
            double lo, hi;
            ck_assert_int_eq(dtv_fp8_window(f, x, k, &lo, &hi), 1);
            /* the history's max amax (steps k-4 .. k-1), or the step's own at step 0; the library lowers a
             * scale by at most one float ulp (2^-23 relative) so that amax x s <= max */
            double top = 0;
            for (int j = (k > 0 ? k - HIST : 0); j < (k > 0 ? k : 1); j++)
                if (j >= 0 && amax_of(TENSORS[i].tensor, j, 0) > top) top = amax_of(TENSORS[i].tensor, j, 0);
            ck_assert_msg(dt_test_close(hi, top, 0, 4e-7), "%s step %d: top %.9g, expected %.9g", x->name, k, hi, top);
            const double s = mx / hi;
            ck_assert_msg(dt_test_close(lo, sub / (2 * s), 0, 1e-12), "%s step %d: bottom %.9g", x->name, k, lo);
            /* a step is marked saturated where it has saturated values: there its amax left the window */
            const int marked = x->s[k].saturated > 0;
            ck_assert_int_eq(marked, (i == 0 && k == SPIKE) || (i == 1 && k == DY_RISE));
            ck_assert_int_eq(marked, x->s[k].amax > hi * (1 + 1e-6));
        }
    }
    /* qkv.x's top: 1 before the spike, 16 while it is in the 4-step history (steps 6..9), 1 again */
    double lo, hi;
    dtv_fp8_window(f, &f->x[0], SPIKE, &lo, &hi);
    ck_assert(dt_test_close(hi, 1, 0, 4e-7));
    for (int k = SPIKE + 1; k <= SPIKE + HIST; k++) {
        dtv_fp8_window(f, &f->x[0], k, &lo, &hi);
        ck_assert(dt_test_close(hi, 16, 0, 4e-7));
    }
    dtv_fp8_window(f, &f->x[0], SPIKE + HIST + 1, &lo, &hi);
    ck_assert(dt_test_close(hi, 1, 0, 4e-7));
    /* the sums, so far and for the run */
    dtv_fp8_sum sum;
    dtv_fp8_sums(&f->x[0], STEPS, &sum);
    ck_assert(sum.saturated == 1000 && sum.flushed == 3 * STEPS && sum.values == (double)VALUES * STEPS);
    ck_assert_int_eq(sum.steps, STEPS);
    ck_assert_int_eq(sum.steps_saturated, 1);
    ck_assert_int_eq(sum.worst, SPIKE);
    dtv_fp8_sums(&f->x[0], SPIKE, &sum);
    ck_assert(sum.saturated == 0 && sum.worst == -1 && sum.steps == SPIKE);
    /* playback: a step is revealed by its event (the step's end) */
    ck_assert_int_eq(dtv_fp8_steps_by(&f->x[0], t.t_min), 0);
    ck_assert_int_eq(dtv_fp8_steps_by(&f->x[0], (SPIKE * 10 + 5) * MS), SPIKE);
    ck_assert_int_eq(dtv_fp8_steps_by(&f->x[0], (SPIKE * 10 + 9) * MS), SPIKE + 1);
    ck_assert_int_eq(dtv_fp8_steps_by(&f->x[0], INT64_MAX), STEPS);
    /* the tensor shown: the default, then the list's order, wrapping */
    dtv_view v = {.id = DTV_VIEW_FP8};
    dtv_view_all(&v, &t);
    ck_assert_int_eq(dtv_fp8_tensor_of(&t, &v), 0);
    ck_assert_int_eq(dtv_fp8_cycle(&t, &v, 1), 1);
    ck_assert_int_eq(dtv_fp8_cycle(&t, &v, 1), 2);
    ck_assert_int_eq(dtv_fp8_cycle(&t, &v, 1), 0);
    ck_assert_int_eq(dtv_fp8_cycle(&t, &v, -1), 2);
    ck_assert_int_eq(dtv_fp8_tensor_of(&t, &v), 2);
    /* the registry */
    dtv_view_id id;
    ck_assert_int_eq(dtv_view_parse("fp8", &id), 0);
    ck_assert_int_eq(id, DTV_VIEW_FP8);
    ck_assert_str_eq(dtv_view_name(DTV_VIEW_FP8), "fp8");
    dtv_trace_free(&t);
    /* alt: fc.w saturates most, so it is the default */
    fp8_trace(&t, CONFIG_DELAYED, 1, 1);
    ck_assert_int_eq(t.fp8->dflt, 2);
    ck_assert_int_eq(t.fp8->order[0], 2);
    dtv_trace_free(&t);
}
END_TEST

START_TEST(test_current_scaling)
{
    /* tensorwise, margin 1: s = (max / amax) / 2, so the top is 2 amax */
    dtv_trace t;
    fp8_trace(&t,
              "{\"fp8_format\":\"e4m3\",\"fp8_recipe\":\"tensorwise\",\"fp8_margin\":1,\"fp8_amax_history_len\":1024}",
              0, 0);
    const dtv_fp8 *f = t.fp8;
    ck_assert_int_eq(f->recipe, DT_FP8_TENSORWISE);
    ck_assert_int_eq(f->mode, DT_FP8_MODE_E4M3);
    ck_assert_int_eq(f->x[1].format, DT_FP8_E4M3); /* e4m3 everywhere: gradients too */
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < STEPS; k++) {
            double lo, hi;
            ck_assert_int_eq(dtv_fp8_window(f, &f->x[i], k, &lo, &hi), 1);
            ck_assert(dt_test_close(hi, 2 * f->x[i].s[k].amax, 0, 4e-7));
            ck_assert(dt_test_close(lo, ldexp(1, -9) / (2 * (448 / hi)), 0, 1e-12));
        }
    dtv_trace_free(&t);
    /* blockwise, margin 0: the tile with amax 1 has s = 2^floor(log2 448) = 256, so its top is 448 / 256 */
    fp8_trace(&t, "{\"fp8_format\":\"hybrid\",\"fp8_recipe\":\"blockwise\"}", 0, 0);
    double lo, hi;
    ck_assert_int_eq(t.fp8->recipe, DT_FP8_BLOCKWISE);
    ck_assert_int_eq(dtv_fp8_window(t.fp8, &t.fp8->x[0], 0, &lo, &hi), 1);
    ck_assert(dt_test_close(hi, 448.0 / 256, 0, 1e-12));
    ck_assert(dt_test_close(lo, ldexp(1, -9) / (2 * 256.0), 0, 1e-12));
    dtv_trace_free(&t);
    /* no config: a `scale` extra means delayed scaling */
    fp8_trace(&t, NULL, 1, 0);
    ck_assert_int_eq(t.fp8->recipe, DT_FP8_DELAYED);
    ck_assert_int_eq(t.fp8->recipe_known, 0);
    dtv_trace_free(&t);
}
END_TEST

/* The middle of step k's window, in log2, of tensor index i (between the band's edges). */
static int band_mid_y(const dtv_fp8_layout *L, const dtv_trace *t, int i, int k)
{
    double lo, hi;
    ck_assert_int_eq(dtv_fp8_window(t->fp8, &t->fp8->x[i], k, &lo, &hi), 1);
    return dtv_fp8_y_of(L, sqrt(lo * hi));
}

START_TEST(test_render)
{
    dtv_trace t;
    fp8_trace(&t, CONFIG_DELAYED, 1, 0);
    dtv_canvas cv;
    ck_dt(dtv_canvas_headless(1400, 800, &cv));
    const SDL_Rect area = {0, 0, 1400, 800};
    dtv_view v = {.id = DTV_VIEW_FP8};
    dtv_view_all(&v, &t);
    dtv_clear(&cv, DTV_BG);
    dtv_draw_view(&cv, area, &t, &v);
    dtv_fp8_layout L;
    dtv_fp8_layout_of(&cv, area, &t, &v, &L);
    ck_assert_int_eq(L.tensor, 0);
    ck_assert_int_eq(L.k0, 0);
    ck_assert_int_eq(L.k1, STEPS);
    ck_assert(L.x_lo == 0 && L.x_hi == STEPS);
    ck_assert(L.l2_lo <= -10 - 1 && L.l2_hi >= 4 + 1); /* the spike 2^4 and the bottoms ~2^-18 are on the axis */
    const int xs = dtv_fp8_x_of_iter(&L, SPIKE), ys = dtv_fp8_y_of(&L, 16.0);
    ck_pixel(&cv, xs, ys, DTV_ACCENT, "step 5's saturation marker");
    ck_pixel(&cv, xs, L.y + 2, DTV_ACCENT, "step 5's tick on the top edge");
    ck_assert(!dtv_color_eq(dtv_canvas_pixel(&cv, dtv_fp8_x_of_iter(&L, SPIKE - 1), L.y + 2), DTV_ACCENT));
    ck_assert(!dtv_color_eq(dtv_canvas_pixel(&cv, dtv_fp8_x_of_iter(&L, SPIKE - 1), ys), DTV_ACCENT));
    ck_assert_int_gt(dtv_fp8_marker_radius(1000), dtv_fp8_marker_radius(10)); /* size by count */
    /* the band inside step 2's window, a few pixels off the amax's dot */
    const int xb = dtv_fp8_x_of_iter(&L, 2) + 8;
    ck_pixel(&cv, xb, band_mid_y(&L, &t, 0, 2), dtv_fp8_band_color(), "step 2's band");
    /* playback inside step 5: its marker, tick and band not yet */
    v.now = (SPIKE * 10 + 5) * MS;
    dtv_clear(&cv, DTV_BG);
    dtv_draw_view(&cv, area, &t, &v);
    ck_pixel(&cv, xs, L.y + 2, DTV_PANEL, "no tick before step 5 ends");
    ck_assert(!dtv_color_eq(dtv_canvas_pixel(&cv, xs, ys), DTV_ACCENT));
    ck_assert(!dtv_color_eq(dtv_canvas_pixel(&cv, dtv_fp8_x_of_iter(&L, SPIKE) + 4, band_mid_y(&L, &t, 0, SPIKE)),
                            dtv_fp8_band_color()));
    ck_pixel(&cv, xb, band_mid_y(&L, &t, 0, 2), dtv_fp8_band_color(), "step 2's band, played");
    /* the list: h.0.qkv.x first (shown), a click on the second row is h.0.qkv.dy */
    ck_assert_int_eq(L.n_rows, 3);
    ck_assert_int_eq(L.row_tensor[0], 0);
    ck_assert_int_eq(L.row_tensor[1], 1);
    const int rx = L.list.x + 10, ry = L.list.y + L.row_h + L.row_h / 2;
    ck_assert_int_eq(dtv_fp8_hit(&cv, area, &t, &v, rx, ry), 1);
    ck_assert_int_eq(dtv_fp8_hit(&cv, area, &t, &v, L.x + 10, ry), -1);
    ck_assert_int_eq(dtv_fp8_hit(&cv, area, &t, &v, rx, L.list.y + 3 * L.row_h + 2), -1);
    dtv_canvas_free(&cv);

    /* the app: key 7, ']' and down, a click in the list; one pane of the trace above */
    dtv_app a;
    memset(&a, 0, sizeof a);
    a.n = 1;
    a.tr[0] = t; /* owned by the app now */
    dtv_view_all(&a.view[0], &a.tr[0]);
    a.step_ns[0] = 10 * MS;
    dtv_app_key(&a, SDLK_7, 0);
    ck_assert_int_eq(a.view[0].id, DTV_VIEW_FP8);
    ck_assert_int_eq(dtv_fp8_tensor_of(&a.tr[0], &a.view[0]), 0);
    dtv_app_key(&a, SDLK_RIGHTBRACKET, 0);
    ck_assert_int_eq(dtv_fp8_tensor_of(&a.tr[0], &a.view[0]), 1);
    dtv_app_key(&a, SDLK_DOWN, 0);
    ck_assert_int_eq(dtv_fp8_tensor_of(&a.tr[0], &a.view[0]), 2);
    ck_assert_int_eq(a.view[0].first_row, 0); /* not the timeline's scroll */
    dtv_app_key(&a, SDLK_LEFTBRACKET, 0);
    ck_assert_int_eq(dtv_fp8_tensor_of(&a.tr[0], &a.view[0]), 1);
    ck_assert_ptr_nonnull(strstr(a.status, "h.0.qkv.dy"));
    /* a click on the list's first row of the window's pane (the canvas less the status line) */
    dtv_canvas wc;
    ck_dt(dtv_canvas_headless(1400, 800, &wc));
    const SDL_Rect pane = {0, 0, 1400, 800 - DTV_STATUS_H};
    dtv_fp8_layout_of(&wc, pane, &a.tr[0], &a.view[0], &L);
    dtv_app_mouse(&a, &wc, DTV_MOUSE_DOWN, L.list.x + 10, L.list.y + L.row_h / 2, 0);
    dtv_app_mouse(&a, &wc, DTV_MOUSE_UP, L.list.x + 10, L.list.y + L.row_h / 2, 0);
    ck_assert_int_eq(dtv_fp8_tensor_of(&a.tr[0], &a.view[0]), 0);
    ck_assert_int_eq(a.dragging, 0);
    dtv_app_render_window(&a, &wc); /* the window's frame draws the view */
    dtv_fp8_layout_of(&wc, pane, &a.tr[0], &a.view[0], &L);
    ck_pixel(&wc, dtv_fp8_x_of_iter(&L, SPIKE), dtv_fp8_y_of(&L, 16.0), DTV_ACCENT, "the window's marker");
    dtv_canvas_free(&wc);
    /* `dtviz --view fp8 --png`: a PNG */
    dtv_app_set(&a, DTV_VIEW_FP8, 2.0);
    const char *base = getenv("TMPDIR");
    char png[512];
    snprintf(png, sizeof png, "%s/check_viz_fp8_XXXXXX", base && base[0] ? base : "/tmp");
    const int fd = mkstemp(png);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_dt(dtv_app_png(&a, 1400, 800, png));
    FILE *fp = fopen(png, "rb");
    ck_assert_ptr_nonnull(fp);
    unsigned char magic[8] = {0};
    ck_assert_int_eq(fread(magic, 1, 8, fp), 8);
    fclose(fp);
    ck_assert(!memcmp(magic, "\x89PNG\r\n\x1a\n", 8));
    ck_assert_int_eq(unlink(png), 0);
    dtv_app_close(&a);
}
END_TEST

/* Two panes: the second shows the first pane's tensor, though its own default is another. */
START_TEST(test_two_panes)
{
    dtv_app a;
    memset(&a, 0, sizeof a);
    a.n = 2;
    fp8_trace(&a.tr[0], CONFIG_DELAYED, 1, 0); /* default h.0.qkv.x */
    fp8_trace(&a.tr[1], CONFIG_DELAYED, 1, 1); /* default h.0.fc.w */
    for (int i = 0; i < 2; i++) dtv_view_all(&a.view[i], &a.tr[i]);
    dtv_app_set(&a, DTV_VIEW_FP8, 2.0);
    dtv_canvas cv;
    ck_dt(dtv_canvas_headless(1400, 1000, &cv));
    dtv_app_render(&a, &cv);
    const int top = 26, ph = (1000 - top) / 2;
    const SDL_Rect r1 = {0, top + ph, 1400, ph};
    dtv_view v1 = a.view[1];
    v1.fp8_tensor = 1; /* h.0.qkv.x of the second trace */
    dtv_fp8_layout L;
    dtv_fp8_layout_of(&cv, r1, &a.tr[1], &v1, &L);
    ck_pixel(&cv, dtv_fp8_x_of_iter(&L, SPIKE), dtv_fp8_y_of(&L, 16.0), DTV_ACCENT, "pane 1: h.0.qkv.x's marker");
    dtv_canvas_free(&cv);
    dtv_app_close(&a);
}
END_TEST

START_TEST(test_none)
{
    dt_trace_event *ev = calloc(1, sizeof *ev);
    ck_assert_ptr_nonnull(ev);
    dt_trace_event_init(ev, DT_TRACE_COMPLETE, "forward", "compute", 0, DT_LANE_COMPUTE, 0, 10 * MS);
    dtv_trace t;
    ck_dt(dtv_trace_from_events(ev, 1, "none", "dtrain", NULL, &t));
    ck_assert_ptr_null(t.fp8);
    dtv_canvas cv;
    ck_dt(dtv_canvas_headless(800, 500, &cv));
    dtv_view v = {.id = DTV_VIEW_FP8};
    dtv_view_all(&v, &t);
    ck_assert_int_eq(dtv_fp8_tensor_of(&t, &v), -1);
    ck_assert_int_eq(dtv_fp8_cycle(&t, &v, 1), -1);
    ck_assert_int_eq(dtv_fp8_hit(&cv, (SDL_Rect){0, 0, 800, 500}, &t, &v, 700, 100), -1);
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

START_TEST(test_bad_count)
{
    dt_trace_event *ev = calloc(2, sizeof *ev);
    ck_assert_ptr_nonnull(ev);
    dt_trace_event_init(&ev[0], DT_TRACE_COMPLETE, "forward", "compute", 0, DT_LANE_COMPUTE, 0, 10 * MS);
    dt_trace_event_init(&ev[1], DT_TRACE_INSTANT, "fp8 h.0.fc.x", "optim", 0, DT_LANE_OPTIM, 10 * MS, 0);
    ev[1].iter = 0;
    ck_dt(dt_trace_event_add_arg(&ev[1], "amax", 1));
    ck_dt(dt_trace_event_add_arg(&ev[1], "saturated", -2));
    dtv_trace t;
    ck_assert_int_eq(dtv_trace_from_events(ev, 2, "bad", "dtrain", NULL, &t), DT_ERR_FORMAT);
    ck_assert_msg(strstr(dt_last_error(), "\"fp8 h.0.fc.x\" of rank 0") && strstr(dt_last_error(), "args.saturated"),
                  "%s", dt_last_error());
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("viz_fp8");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_model);
    tcase_add_test(tc, test_current_scaling);
    tcase_add_test(tc, test_render);
    tcase_add_test(tc, test_two_panes);
    tcase_add_test(tc, test_none);
    tcase_add_test(tc, test_bad_count);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return dt_test_run(suite()); }
