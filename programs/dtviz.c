/* dtviz.c: the viewer's command line (viz/ does the work).
 *
 *   dtviz [flags] TRACE [TRACE2]
 *       TRACE: a dtsim trace, a real rank's trace, or a real run's name
 *       (run.json for run.rank0.json, run.rank1.json, ...). With TRACE2 the
 *       two are shown in aligned panes with the difference in step time.
 *   --png FILE            render one picture headless (no display needed) and exit
 *   --frames DIR          render numbered PNGs of the replay headless: --fps N frames per second of
 *                         a --duration S seconds video (or exactly --frame-count N frames)
 *   --view V              timeline | ring | scale | memory | breakdown | cp | fp8 (default timeline)
 *   --time F              playback position as a fraction of the trace, 0..1 (default 1: all)
 *   --size WxH            picture or window size (default 1400x800; a timeline picture: 1400 wide, as
 *                         tall as its rows need, at most 800)
 *   --zoom A:B            show the part A..B of the trace (fractions); without it a picture of the
 *                         timeline or memory view whose steps would be slivers shows its last few
 *                         complete steps and says so (viz/view_fit.c)
 *   --profile FILE, --hw FILE   what-if re-runs of a simulated trace: the simulator's costs
 *
 * Exit status: 0 done; 1 a run-time failure (SDL, no display for the
 * window, a file that cannot be written); 2 bad flags or an unreadable
 * trace. Errors are one line, "dtviz: ...".
 *
 * The window needs a display (SDL_VIDEODRIVER's driver, else DISPLAY or
 * WAYLAND_DISPLAY); without one dtviz says so at once, before reading the
 * traces. A display that accepts the connection and never answers (a dead
 * X forward) is given DTVIZ_DISPLAY_WAIT_S seconds.
 *
 * --png FILE and --frames DIR are checked before the traces are read (the
 * directory exists and is writable; FILE is none of the inputs: not a
 * trace, nor --profile or --hw, by device and inode), and written whole or not at all: a
 * full disk or a file-size limit leaves no partial PNG and an existing FILE
 * as it was, and --frames writes every frame or none (dt_file.h). */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../viz/dtv_app.h"
#include "dt_file.h"
#include "args.h"

#define PROG "dtviz"
#define DTVIZ_DISPLAY_WAIT_S 5

/* SIGALRM while SDL connects to the display: the line is made before the
 * alarm is set, so the handler only writes it (async-signal-safe). */
static char dtviz__hung_msg[256];
static size_t dtviz__hung_len;
static void dtviz__hung(int sig)
{
    (void)sig;
    ssize_t rc = write(STDERR_FILENO, dtviz__hung_msg, dtviz__hung_len);
    (void)rc;
    _exit(1);
}

/* The library's last message, escaped for the terminal: it may quote what
 * a trace holds (dt_escape). */
static const char *dtviz__error(void)
{
    static char esc[4 * 512 + 1];
    return dt_escape(dt_last_error(), esc, sizeof esc);
}

/* --png PNG must not be one of the inputs: a trace (or a real run's rank
 * files, run.rank<r>.json for run.json), --profile or --hw. */
static dt_status dtviz__check_png(const char *png, const char *const *paths, int n_paths, const char *profile,
                                  const char *hw)
{
    for (int i = 0; i < n_paths; i++) {
        DT_CHECK(dt_file_check_not_input(png, "--png", paths[i], "trace"));
        const size_t len = strlen(paths[i]);
        if (access(paths[i], F_OK) == 0 || len <= 5 || strcmp(paths[i] + len - 5, ".json") != 0) continue;
        for (int r = 0;; r++) { /* run.json: its rank files */
            char f[600];
            snprintf(f, sizeof f, "%.*s.rank%d.json", (int)(len - 5), paths[i], r);
            if (access(f, F_OK) != 0) break;
            DT_CHECK(dt_file_check_not_input(png, "--png", f, "trace"));
        }
    }
    DT_CHECK(dt_file_check_not_input(png, "--png", profile, "--profile"));
    return dt_file_check_not_input(png, "--png", hw, "--hw");
}

/* Start SDL's video (dtv_sdl_init(1)), giving up after DTVIZ_DISPLAY_WAIT_S. */
static dt_status dtviz__open_display(void)
{
    const char *d = getenv("DISPLAY"), *wl = getenv("WAYLAND_DISPLAY");
    const int n = snprintf(dtviz__hung_msg, sizeof dtviz__hung_msg,
                           PROG ": the display (DISPLAY=%.60s WAYLAND_DISPLAY=%.60s) did not answer in %d s; "
                                "use --png FILE or --frames DIR, which need none\n",
                           d ? d : "(unset)", wl ? wl : "(unset)", DTVIZ_DISPLAY_WAIT_S);
    dtviz__hung_len = n > 0 && (size_t)n < sizeof dtviz__hung_msg ? (size_t)n : 0;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = dtviz__hung;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, &old);
    alarm(DTVIZ_DISPLAY_WAIT_S);
    const dt_status st = dtv_sdl_init(1);
    alarm(0);
    sigaction(SIGALRM, &old, NULL);
    return st;
}

int main(int argc, char **argv)
{
    const char *png = NULL, *frames_dir = NULL, *view = "timeline", *size = "1400x800", *profile = NULL, *hw = NULL,
               *zoom = NULL;
    double when = 1.0;
    int n_frames = 60, fps = 30, help = 0;
    double duration = 4.0;
    dt_arg args[] = {
        {"--png", DT_ARG_STRING, &png, 0, 0, 0, NULL, "FILE", "render one picture headless and exit", "none", 0},
        {"--frames", DT_ARG_STRING, &frames_dir, 0, 0, 0, NULL, "DIR",
         "render numbered PNGs of the replay headless (frame_00000.png, ...) and exit", "none", 0},
        {"--fps", DT_ARG_INT, &fps, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 1, 240, NULL, "N",
         "--frames: frames per second of the video the replay becomes", NULL, 0},
        {"--duration", DT_ARG_DOUBLE, &duration, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX | DT_ARG_MIN_EXCLUSIVE, 0, 3600, NULL,
         "S", "--frames: seconds the whole replay lasts (frames = fps x duration)", NULL, 0},
        {"--frame-count", DT_ARG_INT, &n_frames, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 1, 100000, NULL, "N",
         "frames for --frames, instead of fps x duration", "fps x duration: 120", 0},
        {"--view", DT_ARG_CHOICE, &view, 0, 0, 0, "timeline|ring|scale|memory|breakdown|cp|fp8", NULL, "what to show",
         NULL, 0},
        {"--time", DT_ARG_DOUBLE, &when, DT_ARG_HAS_MIN | DT_ARG_HAS_MAX, 0, 1, NULL, "F",
         "playback position, a fraction of the trace (1: everything)", NULL, 0},
        {"--size", DT_ARG_STRING, &size, 0, 0, 0, NULL, "WxH", "picture or window size",
         "1400x800; a timeline picture: as tall as its rows need", 0},
        {"--zoom", DT_ARG_STRING, &zoom, 0, 0, 0, NULL, "A:B",
         "show only the part A..B of the trace, fractions 0 <= A < B <= 1 (e.g. 0.4:0.6; 0:1 all)",
         "all; a picture whose steps would be slivers: its last steps (below)", 0},
        {"--profile", DT_ARG_STRING, &profile, 0, 0, 0, NULL, "FILE",
         "what-if: per-layer costs for re-running a simulated trace (a single-rank dtrain trace)", "roofline", 0},
        {"--hw", DT_ARG_STRING, &hw, 0, 0, 0, NULL, "FILE", "what-if: hardware file", "the trace's", 0},
        {"--help", DT_ARG_FLAG, &help, 0, 0, 0, NULL, NULL, "print this help and exit", NULL, 0},
    };
    const int n_args = (int)(sizeof args / sizeof args[0]);
    /* positional traces first, flags after (the shared parser takes flags only) */
    const char *paths[3];
    int n_paths = 0;
    char **fl = calloc((size_t)argc + 1, sizeof *fl);
    int n_fl = 0;
    if (!fl) return 1;
    fl[n_fl++] = argv[0];
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1] == '-') {
            fl[n_fl++] = argv[i];
            /* a flag's separate value */
            if (!strchr(argv[i], '=') && i + 1 < argc && strcmp(argv[i], "--help") != 0) fl[n_fl++] = argv[++i];
        } else if (n_paths < 3) {
            paths[n_paths++] = argv[i];
        } else {
            n_paths++;
        }
    }
    const int parsed = dt_args_parse(PROG, args, n_args, n_fl, fl); /* values point into argv, not fl */
    free(fl);
    if (parsed != DT_ARGS_OK) return 2;
    if (help) {
        dt_args_print_help(stdout, "dtviz [flags] TRACE [TRACE2]", args, n_args);
        printf("\nKeys (window): h help, 1-7 views (timeline, ring, scale, memory, breakdown, cp, fp8), space\n"
               "play/pause (the whole trace in 20 s at x1), +/- speed x2 /2, . to the end of the next step,\n"
               "left/right scrub 5%%, wheel or z/x zoom, drag or a/d pan, up/down scroll rows, r reset, q or\n"
               "Escape quit. The fp8 view: [ ] (or up/down, or a click in its list) the previous / next tensor.\n"
               "What-if on a dtsim trace (re-simulates 4 steps): p/P stages -1/+1, m/M micro-batches\n"
               "/2 x2, s next schedule, b/B link bandwidth /2 x2.\n"
               "The window needs a display (SDL_VIDEODRIVER, else DISPLAY or WAYLAND_DISPLAY); --png and --frames\n"
               "need none. A picture (--png, --frames) is made to fit: without --zoom, where the whole trace would\n"
               "draw steps under 40 px wide, the timeline and memory views show the last complete steps (or\n"
               "those up to --time), --frames replaying them; the window opens on the whole trace.\n"
               "Exit status: 0 done, 1 run-time failure, 2 bad flags or an unreadable trace.\n");
        return 0;
    }
    if (n_paths < 1 || n_paths > 2) {
        fprintf(stderr, PROG ": expected one or two traces (TRACE [TRACE2]), got %d\n", n_paths);
        return 2;
    }
    int w = 0, h = 0;
    char extra = 0;
    if (sscanf(size, "%dx%d%c", &w, &h, &extra) != 2 || w < 64 || h < 64 || w > 16384 || h > 16384) {
        fprintf(stderr, PROG ": --size '%s': expected WxH, 64..16384 pixels each (e.g. 1400x800)\n", size);
        return 2;
    }
    double z0 = 0.0, z1 = 1.0;
    if (zoom && (sscanf(zoom, "%lf:%lf%c", &z0, &z1, &extra) != 2 || !(z0 >= 0.0 && z0 < z1 && z1 <= 1.0))) {
        fprintf(stderr, PROG ": --zoom '%s': expected A:B with 0 <= A < B <= 1 (e.g. 0.4:0.6)\n", zoom);
        return 2;
    }
    dtv_view_id vid = DTV_VIEW_TIMELINE;
    dtv_view_parse(view, &vid);
    /* before reading the traces: the display, or where the pictures go */
    dt_status st = png ? dtviz__check_png(png, paths, n_paths, profile, hw) : DT_OK; /* an input: exit 2 */
    if (st != DT_OK) {
        fprintf(stderr, PROG ": %s\n", dtviz__error());
        return 2;
    }
    st = png          ? dt_file_check_output(png, "--png")
         : frames_dir ? dt_file_check_output_dir(frames_dir, "--frames", 0)
                      : dtviz__open_display();
    if (st != DT_OK) {
        fprintf(stderr, PROG ": %s\n", dtviz__error());
        return 1;
    }
    /* past a file-size limit (ulimit -f) a write fails with EFBIG and is
     * reported, instead of the signal killing dtviz mid-file */
    signal(SIGXFSZ, SIG_IGN);
    dtv_app app;
    st = dtv_app_open(&app, paths, n_paths);
    if (st != DT_OK) {
        fprintf(stderr, PROG ": %s\n", dtviz__error());
        return st == DT_ERR_NOMEM ? 1 : 2;
    }
    app.profile = profile;
    app.hw = hw;
    dtv_app_set(&app, vid, when >= 1.0 ? 2.0 : when);
    /* a picture fits its data: a timeline as tall as its rows, steps readable (dtv_app.h) */
    if ((png || frames_dir) && vid == DTV_VIEW_TIMELINE && !dt_args_given(args, n_args, "--size"))
        h = dtv_app_fit_height(&app);
    if (zoom) dtv_app_zoom(&app, z0, z1);
    else if (png || frames_dir) dtv_app_fit(&app, w, h);
    if (png) st = dtv_app_png(&app, w, h, png);
    else if (frames_dir)
        st = dtv_app_frames(&app, w, h, frames_dir,
                            dt_args_given(args, n_args, "--frame-count") ? n_frames
                            : (int)(fps * duration + 0.5) > 0            ? (int)(fps * duration + 0.5)
                                                                         : 1);
    else st = dtv_app_interactive(&app, w, h);
    dtv_app_close(&app);
    if (st != DT_OK) {
        fprintf(stderr, PROG ": %s\n", dtviz__error());
        return st == DT_ERR_INVALID ? 2 : 1;
    }
    return 0;
}
