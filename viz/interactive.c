/* interactive.c: PLACEHOLDER being written (issue 9); not to be committed as is. */
#include "dtv_app.h"

dt_status dtv_app_interactive(dtv_app *a, int w, int h)
{
    (void)a;
    (void)w;
    (void)h;
    return DT_FAIL(DT_ERR_UNSUPPORTED, "dtviz: the interactive window is not written yet");
}
