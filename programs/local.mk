# programs/local.mk: command-line programs, built at the top of the tree.
bin_PROGRAMS += dtrain
dtrain_SOURCES = programs/dtrain.c programs/args.c programs/args.h
dtrain_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)
dtrain_LDADD = libdtrain_core.la $(OPENBLAS_LIBS) $(JANSSON_LIBS) -lm
# dtsim: the discrete-event simulator's program (run, sweep, validate).
bin_PROGRAMS += dtsim
dtsim_SOURCES = programs/dtsim.c programs/args.c programs/args.h
dtsim_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/sim
dtsim_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)
dtsim_LDADD = libdtsim.la libdtrain_core.la $(OPENBLAS_LIBS) $(JANSSON_LIBS) -lm
