# bench/local.mk: benchmarks (speed and memory goals live here, not in tests).
bin_PROGRAMS += dtbench
dtbench_SOURCES = bench/dtbench.c bench/simval.c programs/args.c programs/args.h
dtbench_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/sim -DDT_SRCDIR_DEFAULT='"$(abs_top_srcdir)"'
dtbench_CFLAGS = $(AM_CFLAGS) $(OPENBLAS_CFLAGS) $(JANSSON_CFLAGS) -I$(top_srcdir)/cuda
dtbench_LDADD = libdtsim.la libdtrain_core.la $(OPENBLAS_LIBS) $(JANSSON_LIBS) -lm
EXTRA_DIST += bench/README.md
