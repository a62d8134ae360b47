# viz/local.mk: the SDL2 viewer (libdtviz.la and dtviz), built when
# configure finds sdl2, SDL2_ttf and SDL2_image.
if HAVE_SDL
noinst_LTLIBRARIES += libdtviz.la
libdtviz_la_SOURCES = viz/dtv_trace.h viz/trace_model.c viz/dtv_draw.h viz/draw.c viz/dtv_view.h \
	viz/trace_coll.c viz/trace_cp.c viz/trace_fp8.c viz/view.c viz/view_fit.c viz/view_axis.c viz/view_timeline.c \
	viz/dtv_ring_draw.h viz/ring_draw.c viz/view_ring.c viz/view_cp.c viz/view_scale.c viz/view_memory.c \
	viz/view_breakdown.c viz/view_fp8.c \
	viz/dtv_app.h viz/app.c viz/interactive.c
libdtviz_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/sim -I$(top_srcdir)/viz
libdtviz_la_CFLAGS = $(AM_CFLAGS) $(SDL_CFLAGS) $(JANSSON_CFLAGS)
libdtviz_la_LIBADD = $(SDL_LIBS) $(JANSSON_LIBS) -lm

bin_PROGRAMS += dtviz
dtviz_SOURCES = programs/dtviz.c programs/args.c programs/args.h
dtviz_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/sim -I$(top_srcdir)/viz
dtviz_CFLAGS = $(AM_CFLAGS) $(SDL_CFLAGS) $(JANSSON_CFLAGS)
dtviz_LDADD = libdtviz.la libdtsim.la libdtrain_core.la $(SDL_LIBS) $(OPENBLAS_LIBS) $(JANSSON_LIBS) -lm
endif
