/* view_timeline.c: the timeline (see dtv_view.h); its time axis and
 * legend come from view_axis.c.
 *
 * Layout, top to bottom: a title line (trace, tool, step time, bubble
 * against the formula), the time axis, one row per (rank, lane) with its
 * label on the left and, for a pipeline stage's compute row, the stage's
 * measured bubble (the title gives the schedule's ideal one) and its most
 * weight versions in flight; then the legend. Boxes are coloured by kind (dtv_kind_color);
 * idle time is left as background, so a pipeline bubble is the white gap
 * between boxes. A box carries its micro-batch ("7") where the text fits
 * (measured with the font; never cut), and under PipeDream its weight
 * version ("7 v3"): with vertical sync every stage shows the same version
 * for a micro-batch; with model chunks per stage (interleaved 1F1B, ZB-V)
 * its chunk ("7 c1"); a box too narrow for those shows the bare
 * micro-batch. A run of one micro-batch per step has no labels (every box
 * would read "0"). Zero-bubble schedules'
 * backward_b is drawn as a backward, their backward_w (weight gradients)
 * in its own colour. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dtv_view.h"

enum { DTV__GUTTER = 250, DTV__TITLE = 44, DTV__AXIS = 22, DTV__LEGEND = 40, DTV__ROW_MAX = 30 };

void dtv_timeline_layout_of(const dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v,
                            dtv_timeline_layout *out)
{
    (void)c;
    out->x = area.x + DTV__GUTTER;
    out->w = area.w - DTV__GUTTER - 10;
    out->y = area.y + DTV__TITLE + DTV__AXIS;
    out->h = area.h - DTV__TITLE - DTV__AXIS - DTV__LEGEND;
    if (out->w < 10) out->w = 10;
    if (out->h < 10) out->h = 10;
    const int rows = t->n_rows - v->first_row;
    int rh = rows > 0 ? out->h / rows : out->h;
    if (rh > DTV__ROW_MAX) rh = DTV__ROW_MAX;
    if (rh < 6) rh = 6;
    out->row_h = rh;
    out->rows_shown = out->h / rh < rows ? out->h / rh : rows;
}

int dtv_timeline_height_for(const dtv_trace *t)
{
    return DTV__TITLE + DTV__AXIS + t->n_rows * DTV__ROW_MAX + DTV__LEGEND;
}

/* The stage whose compute row this is (-1 when none). */
static int dtv__stage_of_row(const dtv_trace *t, const dtv_row *row)
{
    if (row->lane != DT_LANE_COMPUTE) return -1;
    for (int s = 0; s < t->p && s < DTV_MAX_STAGES; s++)
        if (t->stage_pid[s] == row->pid) return s;
    return -1;
}

static double dtv__extra(const dt_trace_event *e, const char *key, double dflt)
{
    return dt_trace_event_arg(e, key, dflt);
}

void dtv_draw_timeline(dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v)
{
    dtv_timeline_layout L;
    dtv_timeline_layout_of(c, area, t, v, &L);
    /* title */
    char span[32];
    dtv_fmt_time(span, sizeof span, (double)(v->t1 - v->t0));
    int tx = area.x + 8;
    tx += dtv_text(c, tx, area.y + 4, DTV_FONT_BOLD, DTV_LEFT, DTV_FG, "%s", t->name);
    char fit[96];
    dtv_fit_note(fit, sizeof fit, t, v);
    if (fit[0]) /* a picture's default window: the last steps only (view_fit.c) */
        dtv_text(c, tx + 12, area.y + 6, DTV_FONT_NORMAL, DTV_LEFT, DTV_DIM, "%s, %d ranks, %s, %s%s", t->tool,
                 t->n_ranks, fit, span, t->aligned ? "" : " (ranks' clocks not aligned)");
    else
        dtv_text(c, tx + 12, area.y + 6, DTV_FONT_NORMAL, DTV_LEFT, DTV_DIM, "%s, %d ranks, %lld steps, showing %s%s",
                 t->tool, t->n_ranks, (long long)t->n_steps, span, t->aligned ? "" : " (ranks' clocks not aligned)");
    if (t->p > 1 && !isnan(t->formula)) {
        char sched[32] = "";
        dtv_trace_config_string(t, "pipeline_schedule", sched, sizeof sched);
        const int async = !strncmp(sched, "pipedream", 9);
        if (!isnan(t->formula))
            dtv_text(c, area.x + 8, area.y + 24, DTV_FONT_NORMAL, DTV_LEFT, DTV_FG,
                     "%s%spipeline p = %d, m = %d: ideal bubble %s = %.3f%s; white gaps in the compute rows are "
                     "the bubble%s",
                     sched, sched[0] ? " " : "", t->p, t->m, t->formula_text, t->formula,
                     strncmp(sched, "zb-", 3) == 0 ? " with equal F, B, W" : "",
                     async ? " (steps overlap: an upper bound; a box reads micro-batch v weight version)" : "");
    }
    dtv_time_axis(c, L.x, L.y - DTV__AXIS + 2, L.w, v);
    /* box labels: the small font's height inside the box, at least one digit's width (+ 2) across;
     * none in a run of one micro-batch per step, where every box would read "0" */
    const int lab_h = dtv_text_height(c, DTV_FONT_SMALL);
    int lab_min = 0;
    TTF_SizeUTF8(c->small, "0", &lab_min, NULL);
    lab_min += 2;
    const int lab_on = lab_h <= L.row_h - 2 && !(t->p <= 1 && t->m == 1 && t->chunks <= 1);
    /* rows */
    for (int k = 0; k < L.rows_shown; k++) {
        const dtv_row *row = &t->rows[v->first_row + k];
        const int y = L.y + k * L.row_h;
        if (k % 2 == 1) dtv_fill(c, area.x, y, DTV__GUTTER - 4, L.row_h, DTV_PANEL);
        dtv_line(c, L.x, y + L.row_h - 1, L.x + L.w, y + L.row_h - 1, DTV_GRID);
        const int font = L.row_h >= 16 ? DTV_FONT_NORMAL : DTV_FONT_SMALL;
        if (L.row_h >= 10) {
            const int st = dtv__stage_of_row(t, row);
            const int ty = y + (L.row_h - dtv_text_height(c, font)) / 2;
            int lw = dtv_text(c, area.x + 6, ty, font, DTV_LEFT, DTV_FG, "%s", row->label);
            if (st >= 0 && !isnan(t->bubble_fb[st]))
                dtv_text(c, area.x + 10 + lw, ty, DTV_FONT_SMALL, DTV_LEFT, DTV_ACCENT, "bubble %.3f%s",
                         t->bubble_fb[st], t->max_versions[st] > 1 ? "" : "");
            if (st >= 0 && t->max_versions[st] > 1 && L.row_h >= 24)
                dtv_text(c, area.x + 10 + lw, ty + 11, DTV_FONT_SMALL, DTV_LEFT, DTV_DIM, "%d versions",
                         t->max_versions[st]);
        }
        /* spans: at most one box per pixel column; a recomputation nested in
         * the span drawn last (a pipeline stage's, inside its backward) is
         * drawn over that box's lower half */
        const int64_t lim = v->now < v->t1 ? v->now : v->t1;
        const int lab_y = y + 1 + (L.row_h - 2 - lab_h) / 2;
        int last_x1 = INT32_MIN, skipped = 0;
        int64_t drawn_t1 = INT64_MIN;
        for (int i = dtv_row_first(row, v->t0); i < row->n && row->s[i].t0 <= lim; i++) {
            const dtv_span *s = &row->s[i];
            const int64_t e = s->t1 < lim ? s->t1 : lim;
            if (e < v->t0) continue;
            double fx0 = dtv_x_of(v, L.x, L.w, s->t0 < v->t0 ? v->t0 : s->t0), fx1 = dtv_x_of(v, L.x, L.w, e);
            int x0 = (int)floor(fx0), x1 = (int)ceil(fx1);
            if (x1 <= x0) x1 = x0 + 1;
            if (s->kind == DTV_RECOMPUTE && s->t1 <= drawn_t1) {
                const int h = (L.row_h - 2) / 2;
                if (h >= 1) dtv_fill(c, x0, y + 1 + (L.row_h - 2 - h), x1 - x0, h, dtv_kind_color(DTV_RECOMPUTE));
                continue;
            }
            if (x1 <= last_x1) { /* this pixel column is drawn already */
                /* after a run of such spans (many spans per pixel: zoomed far out), skip by binary
                 * search those that end before the next free column (each would be skipped here
                 * too); 2 ns of margin against rounding */
                if (++skipped >= 8) {
                    const double tc = (double)v->t0 + (double)(last_x1 - L.x) * (double)(v->t1 - v->t0) / (double)L.w;
                    const int j = dtv_row_first(row, (int64_t)floor(tc) - 2);
                    if (j > i + 1) i = j - 1;
                    skipped = 0;
                }
                continue;
            }
            skipped = 0;
            if (x0 < last_x1) x0 = last_x1;
            /* a box 4 px or wider leaves its last column free, so back-to-back operations read as separate boxes */
            dtv_fill(c, x0, y + 1, x1 - x0 >= 4 ? x1 - x0 - 1 : x1 - x0, L.row_h - 2,
                     dtv_kind_color((dtv_kind)s->kind));
            last_x1 = x1;
            drawn_t1 = s->t1;
            /* the micro-batch (and version or chunk) inside the box when its text, measured
             * with the font, fits with a pixel to spare on each side; else the bare micro-batch
             * when that fits; else nothing. The event (a cache miss) is read only for a box as
             * wide as one digit. */
            const int bw = x1 - x0 >= 4 ? x1 - x0 - 1 : x1 - x0; /* the box as drawn */
            if (!lab_on || bw < lab_min || (s->kind != DTV_FORWARD && s->kind != DTV_BACKWARD && s->kind != DTV_WGRAD))
                continue;
            const dt_trace_event *ev = &t->ev[s->ev];
            if (ev->micro_batch == DT_TRACE_NONE) continue;
            const double ver = dtv__extra(ev, "version", -1), ch = dtv__extra(ev, "chunk", -1);
            char lab[32];
            int tw = 0;
            if (ver >= 0 && t->max_versions[0] > 1) snprintf(lab, sizeof lab, "%d v%d", ev->micro_batch, (int)ver);
            else if (ch >= 0 && t->chunks > 1) snprintf(lab, sizeof lab, "%d c%d", ev->micro_batch, (int)ch);
            else snprintf(lab, sizeof lab, "%d", ev->micro_batch);
            TTF_SizeUTF8(c->small, lab, &tw, NULL);
            if (tw + 2 > bw && strchr(lab, ' ')) {
                snprintf(lab, sizeof lab, "%d", ev->micro_batch);
                TTF_SizeUTF8(c->small, lab, &tw, NULL);
            }
            if (tw + 2 <= bw) dtv_text(c, x0 + bw / 2, lab_y, DTV_FONT_SMALL, DTV_CENTER, DTV_BG, "%s", lab);
        }
    }
    if (L.rows_shown < t->n_rows - v->first_row)
        dtv_text(c, area.x + 6, L.y + L.rows_shown * L.row_h + 2, DTV_FONT_SMALL, DTV_LEFT, DTV_DIM,
                 "+%d more rows (scroll)", t->n_rows - v->first_row - L.rows_shown);
    /* playback cursor */
    if (v->now >= v->t0 && v->now <= v->t1) {
        const int px = (int)lround(dtv_x_of(v, L.x, L.w, v->now));
        dtv_line(c, px, L.y, px, L.y + L.rows_shown * L.row_h, DTV_ACCENT);
    }
    SDL_Rect lg = {area.x + 8, area.y + area.h - DTV__LEGEND + 6, area.w - 16, DTV__LEGEND - 6};
    dtv_legend(c, lg, t);
}
