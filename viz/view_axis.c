/* view_axis.c: what the views draw around their plots (see dtv_view.h):
 * the time axis (ticks at 1, 2 or 5 x 10^k, labelled in time units) and
 * the legend of the span kinds present in a trace. It depends on no view.
 *
 * Invariants: draws only on the given line or area; the same state gives
 * the same pixels. */
#include <math.h>
#include <stdio.h>

#include "dtv_view.h"

/* A "nice" tick step (1, 2, 5 x 10^k) for about `want` ticks over span. */
static double dtv__tick(double span, int want)
{
    const double raw = span / (want > 0 ? want : 1);
    const double p = pow(10.0, floor(log10(raw)));
    const double f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

void dtv_time_axis(dtv_canvas *c, int x, int y, int w, const dtv_view *v)
{
    const double span = (double)(v->t1 - v->t0);
    const double step = dtv__tick(span, w / 110);
    dtv_line(c, x, y, x + w, y, DTV_DIM);
    for (double tk = ceil((double)v->t0 / step) * step; tk <= (double)v->t1; tk += step) {
        const int px = (int)lround(dtv_x_of(v, x, w, (int64_t)tk));
        dtv_line(c, px, y, px, y + 4, DTV_DIM);
        char b[32];
        dtv_fmt_time_tick(b, sizeof b, tk, step);
        dtv_text(c, px, y + 5, DTV_FONT_SMALL, DTV_CENTER, DTV_DIM, "%s", b);
    }
}

int dtv_legend(dtv_canvas *c, SDL_Rect area, const dtv_trace *t)
{
    int present[DTV_N_KINDS] = {0};
    for (int r = 0; r < t->n_rows; r++)
        for (int i = 0; i < t->rows[r].n; i++) present[t->rows[r].s[i].kind] = 1;
    const int lh = dtv_text_height(c, DTV_FONT_SMALL) + 4;
    int x = area.x, y = area.y;
    for (int k = 0; k < DTV_N_KINDS; k++) {
        if (!present[k]) continue;
        char label[64];
        snprintf(label, sizeof label, "%s", dtv_kind_name((dtv_kind)k));
        int tw = 0;
        TTF_SizeUTF8(c->small, label, &tw, NULL);
        if (x + 16 + tw > area.x + area.w && x > area.x) {
            x = area.x;
            y += lh;
        }
        dtv_fill(c, x, y + 2, 12, lh - 6, dtv_kind_color((dtv_kind)k));
        dtv_text(c, x + 16, y, DTV_FONT_SMALL, DTV_LEFT, DTV_FG, "%s", label);
        x += 16 + tw + 14;
    }
    return y + lh - area.y;
}
