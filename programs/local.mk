# programs/local.mk: command-line programs, built at the top of the tree.
bin_PROGRAMS += dtrain
# the job flags dtrain and dtsim share (one table) and the parser under them
DT_JOB_FLAGS_SOURCES = programs/job_flags.c programs/job_flags.h programs/args.c programs/args.h
dtrain_SOURCES = programs/dtrain.c programs/dtrain_config.c programs/dtrain_report.c programs/dtrain_mpi.c \
	programs/dtrain_outputs.c programs/dtrain_generate.c programs/dtrain_prog.h $(DT_JOB_FLAGS_SOURCES)
dtrain_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)
dtrain_LDADD = libdtrain_core.la $(OPENBLAS_LIBS) $(JANSSON_LIBS) -lm
# dtsim: the discrete-event simulator's program (run, sweep, validate, analyze, merge).
bin_PROGRAMS += dtsim
dtsim_SOURCES = programs/dtsim.c programs/dtsim_scenario.c programs/dtsim_sweep.c programs/dtsim_analyze.c \
	programs/dtsim_merge.c programs/dtsim_prog.h \
	$(DT_JOB_FLAGS_SOURCES)
dtsim_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/sim
dtsim_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)
dtsim_LDADD = libdtsim.la libdtrain_core.la $(OPENBLAS_LIBS) $(JANSSON_LIBS) -lm
# `make demo`: the showcase (programs/demo.sh): a 4-rank CPU run with
# pipeline x data parallelism on the built-in task, its trace, dtsim's
# prediction of it with the error, and the rendered timeline (BUILDDIR/demo/).
# Not part of `make` or `make check`: it trains for a few minutes.
.PHONY: demo
EXTRA_DIST += programs/demo.sh
if HAVE_SDL
DEMO_VIEWER = dtviz$(EXEEXT)
endif
demo: dtrain$(EXEEXT) dtsim$(EXEEXT) $(DEMO_VIEWER)
	$(SHELL) $(top_srcdir)/programs/demo.sh '$(abs_top_builddir)' '$(abs_top_srcdir)'
