# bench/local.mk: benchmarks (speed and memory goals live here, not in tests).
# `dtbench viz` (bench/vizbench.c) needs the SDL2 viewer; without SDL2 it is
# bench/vizbench_none.c, which says so and exits 1.
bin_PROGRAMS += dtbench
dtbench_SOURCES = bench/dtbench.c bench/dtbench.h bench/bench_kernels.c bench/bench_train.c \
	bench/bench_parallel.c bench/bench_compose.c bench/bench_zero.c bench/bench_longseq.c bench/bench_fp8.c bench/bench_interop.c bench/bench_threads.c bench/simval.c bench/simval.h bench/simval_runs.c bench/simspeed.c programs/args.c programs/args.h
dtbench_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/sim -DDT_SRCDIR_DEFAULT='"$(abs_top_srcdir)"'
dtbench_CFLAGS = $(AM_CFLAGS) $(OPENBLAS_CFLAGS) $(JANSSON_CFLAGS) -I$(top_srcdir)/cuda
dtbench_LDADD =
if HAVE_SDL
dtbench_SOURCES += bench/vizbench.c
dtbench_CPPFLAGS += -I$(top_srcdir)/viz $(SDL_CFLAGS)
dtbench_LDADD += libdtviz.la $(SDL_LIBS)
else
dtbench_SOURCES += bench/vizbench_none.c
endif
dtbench_LDADD += libdtsim.la libdtrain_core.la $(OPENBLAS_LIBS) $(JANSSON_LIBS) -lm
EXTRA_DIST += bench/README.md
EXTRA_DIST += bench/soak.sh bench/published.sh bench/longseq-whatif.sh
