/* view_scale.c: PLACEHOLDER being written (issue 9); not to be committed as is. */
#include "dtv_view.h"

void dtv_draw_scale(dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v)
{
    (void)t;
    (void)v;
    dtv_text(c, area.x + 10, area.y + 10, DTV_FONT_BOLD, DTV_LEFT, DTV_FG, "scale view: not written yet");
}
