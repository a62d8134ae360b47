# bench/local.mk: benchmarks (speed and memory goals live here, not in tests).
bin_PROGRAMS += dtbench
dtbench_SOURCES = bench/dtbench.c programs/args.c programs/args.h
dtbench_CFLAGS = $(AM_CFLAGS) $(OPENBLAS_CFLAGS) $(JANSSON_CFLAGS) -I$(top_srcdir)/cuda
dtbench_LDADD = libdtrain_core.la $(OPENBLAS_LIBS) $(JANSSON_LIBS) -lm
EXTRA_DIST += bench/README.md
