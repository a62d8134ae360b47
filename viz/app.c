/* app.c: panes, headless rendering and frames (see dtv_app.h); the
 * interactive loop is in viz/interactive.c. */
#define _POSIX_C_SOURCE 200809L
#include "dtv_app.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dt_trace_stats.h"
#include "dt_file.h"

dt_status dtv_app_open(dtv_app *a, const char *const *paths, int n)
{
    memset(a, 0, sizeof *a);
    if (n < 1 || n > 2) return DT_FAIL(DT_ERR_INVALID, "dtviz: expected one or two traces, got %d", n);
    for (int i = 0; i < n; i++) {
        dt_status st = dtv_trace_load(paths[i], &a->tr[i]);
        if (st != DT_OK) {
            dtv_app_close(a);
            return st;
        }
        a->n = i + 1;
        dtv_view_all(&a->view[i], &a->tr[i]);
        dt_trace_phase_times pt;
        a->step_ns[i] = dt_trace_phase_times_events(a->tr[i].ev, a->tr[i].n_ev, a->tr[i].pids[0],
                                                    a->tr[i].n_steps > 2 ? 1 : 0, &pt) == DT_OK
                            ? pt.step_ns
                            : NAN;
    }
    /* two panes show the same span of time, each from its own start, and
     * their step breakdowns to one scale */
    if (n == 2) {
        double longest = 0;
        for (int i = 0; i < 2; i++)
            for (int r = 0; r < a->tr[i].n_breakdown; r++)
                if (a->tr[i].breakdown[r].step_ns > longest) longest = a->tr[i].breakdown[r].step_ns;
        a->view[0].bd_scale_ns = a->view[1].bd_scale_ns = longest;
        const int64_t s0 = a->view[0].t1 - a->view[0].t0, s1 = a->view[1].t1 - a->view[1].t0;
        const int64_t s = s0 > s1 ? s0 : s1;
        a->view[0].t1 = a->view[0].t0 + s;
        a->view[1].t1 = a->view[1].t0 + s;
    }
    return DT_OK;
}

void dtv_app_close(dtv_app *a)
{
    for (int i = 0; i < 2; i++) dtv_trace_free(&a->tr[i]);
    a->n = 0;
}

void dtv_app_set(dtv_app *a, dtv_view_id id, double frac)
{
    for (int i = 0; i < a->n; i++) {
        a->view[i].id = id;
        const dtv_trace *t = &a->tr[i];
        a->view[i].now = frac > 1.0 ? INT64_MAX : t->t_min + (int64_t)llround(frac * (double)(t->t_max - t->t_min));
    }
}

void dtv_app_zoom(dtv_app *a, double f0, double f1)
{
    for (int i = 0; i < a->n; i++) {
        const dtv_trace *t = &a->tr[i];
        const double span = (double)(t->t_max - t->t_min);
        a->view[i].t0 = t->t_min + (int64_t)llround(f0 * span);
        a->view[i].t1 = t->t_min + (int64_t)llround(f1 * span);
        if (a->view[i].t1 <= a->view[i].t0) a->view[i].t1 = a->view[i].t0 + 1;
        a->view[i].fit_first = a->view[i].fit_count = 0;
    }
}

int dtv_app_fit(dtv_app *a, int w, int h)
{
    const dtv_view_id id = a->n ? a->view[0].id : DTV_VIEW_TIMELINE;
    if (id != DTV_VIEW_TIMELINE && id != DTV_VIEW_MEMORY) return 0;
    const int top = a->n == 2 ? 26 : 0, ph = a->n ? (h - top) / a->n : h;
    int cut = 0;
    int64_t span = 0;
    for (int i = 0; i < a->n; i++) {
        const SDL_Rect r = {0, top + i * ph, w, ph};
        int tw = 0; /* the pixels of the time axis */
        if (id == DTV_VIEW_TIMELINE) {
            dtv_timeline_layout L;
            dtv_timeline_layout_of(NULL, r, &a->tr[i], &a->view[i], &L);
            tw = L.w;
        } else {
            dtv_memory_layout L;
            dtv_memory_layout_of(NULL, r, &a->tr[i], &a->view[i], &L);
            tw = L.n_panels ? L.plot[0].w : 0;
        }
        cut |= dtv_view_fit(&a->view[i], &a->tr[i], tw);
        if (a->view[i].t1 - a->view[i].t0 > span) span = a->view[i].t1 - a->view[i].t0;
    }
    if (a->n == 2 && cut) /* one span of time in both panes, as dtv_app_open set them */
        for (int i = 0; i < 2; i++) {
            if (a->view[i].fit_count > 0) dtv_view_fit_span(&a->view[i], &a->tr[i], span);
            else a->view[i].t1 = a->view[i].t0 + span;
        }
    return cut;
}

int dtv_app_fit_height(const dtv_app *a)
{
    int h = 0;
    for (int i = 0; i < a->n; i++) {
        const int ph = dtv_timeline_height_for(&a->tr[i]);
        if (ph > h) h = ph;
    }
    h = (a->n == 2 ? 26 : 0) + a->n * h;
    return h < DTV_FIT_MIN_H ? DTV_FIT_MIN_H : h > DTV_FIT_MAX_H ? DTV_FIT_MAX_H : h;
}

void dtv_app_render(dtv_app *a, dtv_canvas *c)
{
    dtv_clear(c, DTV_BG);
    int top = 0;
    if (a->n == 2) { /* the comparison line */
        char m0[32], m1[32];
        dtv_fmt_time(m0, sizeof m0, a->step_ns[0]);
        dtv_fmt_time(m1, sizeof m1, a->step_ns[1]);
        const double d = (a->step_ns[1] - a->step_ns[0]) / a->step_ns[0];
        dtv_fill(c, 0, 0, c->w, 24, DTV_PANEL);
        dtv_text(c, 8, 4, DTV_FONT_BOLD, DTV_LEFT, DTV_FG, "step time: %s (%s) vs %s (%s): %+.1f%%", m0, a->tr[0].tool,
                 m1, a->tr[1].tool, 100.0 * d);
        top = 26;
    }
    const int ph = (c->h - top) / a->n;
    for (int i = 0; i < a->n; i++) {
        SDL_Rect r = {0, top + i * ph, c->w, ph};
        dtv_view v = a->view[i];
        if (i > 0 && v.id == DTV_VIEW_FP8) { /* two panes show one tensor: the first pane's, where this one has it */
            const int k0 = dtv_fp8_tensor_of(&a->tr[0], &a->view[0]);
            const int k = k0 >= 0 ? dtv_fp8_find(a->tr[i].fp8, a->tr[0].fp8->x[k0].name) : -1;
            if (k >= 0) v.fp8_tensor = k + 1;
        }
        dtv_draw_view(c, r, &a->tr[i], &v);
        if (i + 1 < a->n) dtv_line(c, 0, r.y + ph - 1, c->w, r.y + ph - 1, DTV_DIM);
    }
}

dt_status dtv_app_png(dtv_app *a, int w, int h, const char *path)
{
    dtv_canvas c;
    DT_CHECK(dtv_canvas_headless(w, h, &c));
    dtv_app_render(a, &c);
    dt_status st = dtv_canvas_png(&c, path, "--png");
    dtv_canvas_free(&c);
    return st;
}

dt_status dtv_app_frames(dtv_app *a, int w, int h, const char *dir, int frames)
{
    if (frames < 1 || frames > 100000)
        return DT_FAIL(DT_ERR_INVALID, "--frames: %d frames, expected 1..100000", frames);
    DT_CHECK(dt_file_check_output_dir(dir, "--frames", 0));
    /* all frames or none: each is staged as a temporary file in DIR, and
     * they are renamed into place only once every one is written */
    dt_file_out **staged = calloc((size_t)frames, sizeof *staged);
    if (!staged) return DT_FAIL(DT_ERR_NOMEM, "--frames: %d frame names", frames);
    struct stat sb;
    const int made_dir = stat(dir, &sb) != 0;
    dt_status st = dt_file_mkdir_p(dir);
    if (st != DT_OK) {
        char why[600];
        snprintf(why, sizeof why, "%s", dt_last_error());
        free(staged);
        return DT_FAIL(st, "--frames %s", why);
    }
    dtv_canvas c;
    st = dtv_canvas_headless(w, h, &c);
    const dtv_view_id id = a->view[0].id;
    char path[1200];
    int placed = 0;
    for (int f = 0; f < frames && st == DT_OK; f++) { /* the replay of the window shown */
        for (int i = 0; i < a->n; i++) {
            dtv_view *v = &a->view[i];
            v->id = id;
            v->now = v->t0 + (int64_t)llround((double)(f + 1) / frames * (double)(v->t1 - v->t0));
        }
        dtv_app_render(a, &c);
        snprintf(path, sizeof path, "%s/frame_%05d.png", dir, f);
        void *png = NULL;
        size_t n = 0;
        st = dtv_canvas_encode_png(&c, &png, &n);
        if (st == DT_OK) st = dt_file_stage_whole(path, "--frames", png, n, &staged[f]);
        free(png);
    }
    dtv_canvas_free(&c);
    for (int f = 0; f < frames && st == DT_OK; f++) {
        st = dt_file_out_commit(staged[f]);
        staged[f] = NULL;
        if (st == DT_OK) placed++;
    }
    for (int f = 0; f < frames; f++) dt_file_out_abort(staged[f]);
    free(staged);
    if (st != DT_OK) { /* the same one line, saying what is left */
        char why[600];
        snprintf(why, sizeof why, "%s", dt_last_error());
        if (placed > 0)
            return DT_FAIL(DT_ERR_IO, "%s (frames 0..%d of %d are in place, the rest are not)", why, placed - 1,
                           frames);
        if (made_dir) rmdir(dir);
        return DT_FAIL(st, "%s; no frame was written", why);
    }
    return DT_OK;
}
