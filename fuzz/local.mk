# fuzz/local.mk: libFuzzer harnesses of the readers of untrusted input
# (docs/sanitizers.md): traces (fuzz/trace_read.c), simulator configs
# (fuzz/sim_config.c), command lines (fuzz/args.c), hardware files
# (fuzz/hw.c) and checkpoints (fuzz/checkpoint.c).
#
# `make fuzz` compiles the library sources they need with clang
# (FUZZ_CC, -fsanitize=fuzzer-no-link,address,undefined) into
# fuzz/out/ of the build tree, apart from the gcc build: nothing here is
# part of `all` or `check`, and the gcc objects are never reused. It then
# runs each fuzzer for FUZZ_SECONDS (default 60) on its seed corpus
# fuzz/corpus/TARGET (real files; inputs the fuzzer finds go to
# fuzz/out/TARGET/corpus, never into the source tree) and fails if any
# fuzzer crashes; a crash input is left as fuzz/out/TARGET/crash-*. Add it
# to fuzz/regress/TARGET/ once fixed: tests/check_fuzz_regress feeds those
# (and the seeds) to the same harness code in `make check`.
#   make fuzz FUZZ_SECONDS=300 FUZZ_TARGETS=trace_read
#   make fuzz FUZZ_RUNS=10000000  # a number of executions instead of a time
# Without TMPDIR the checkpoint harness's files go to /dev/shm where it is
# writable (one 10-15 s run each here: 26k executions/s there against
# 1.9k on /tmp's disk; a hint, not a benchmark).
# Each fuzzer gets a dictionary (fuzz/out/TARGET.dict): the values of
# fuzz/dict/values.dict (0, -1, huge, NaN, inf, 2^31, 2^62, 2^63-1...)
# and the JSON keys and --flags found in its seeds, so that mutations
# put those values into real fields.
#   make fuzz-build             # only build fuzz/out/fuzz_TARGET
#   fuzz/out/fuzz_hw CRASHFILE  # replay one input
FUZZ_CC = clang-14
FUZZ_SECONDS = 60
FUZZ_RUNS =
FUZZ_TARGETS = trace_read sim_config args hw checkpoint
FUZZ_ALL_TARGETS = trace_read sim_config args hw checkpoint
FUZZ_OUT = fuzz/out
FUZZ_SAN = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS = -g -O1 -std=gnu11 -fopenmp -fno-math-errno -w $(FUZZ_SAN) \
	-I$(top_srcdir)/include $(DT_LIB_CPPFLAGS) -I$(top_srcdir)/sim -I$(top_srcdir)/programs -I$(top_srcdir)/cuda -I$(top_builddir) \
	$(JANSSON_CFLAGS) $(OPENBLAS_CFLAGS)
FUZZ_LIBS = $(JANSSON_LIBS) $(OPENBLAS_LIBS) -lm
# What the harnesses reach: the core library without MPI or CUDA (their
# stand-ins instead), the simulator and the flag parser. Linked from an
# archive, so each fuzzer takes only the objects it calls into.
FUZZ_LIB_SRCS = $(libdtrain_core_la_SOURCES:lib/comm/comm_mpi.c=lib/comm/comm_mpi_none.c) cuda/cuda_none.c \
	$(libdtsim_la_SOURCES) programs/args.c
FUZZ_HARNESSES = fuzz/trace_read.c fuzz/sim_config.c fuzz/args.c fuzz/hw.c fuzz/checkpoint.c
EXTRA_DIST += $(FUZZ_HARNESSES) fuzz/corpus fuzz/regress fuzz/dict fuzz/.gitignore

.PHONY: fuzz fuzz-build fuzz-clean
# The sources are compiled in one loop (automake allows no pattern rules):
# an object is rebuilt when its source or any header of lib/, sim/, cuda/
# or programs/ is newer.
fuzz-build:
	@command -v $(FUZZ_CC) >/dev/null 2>&1 || { \
	  echo "make fuzz: $(FUZZ_CC) not found (install clang-14, or make fuzz FUZZ_CC=clang)" >&2; exit 1; }
	@mkdir -p $(FUZZ_OUT)/obj
	@newest=`ls -t $(top_srcdir)/include/*.h $(top_srcdir)/lib/*/*.h $(top_srcdir)/lib/*/*/*.h $(top_srcdir)/sim/*.h $(top_srcdir)/cuda/*.h $(top_srcdir)/programs/*.h | head -n 1`; \
	objs=; \
	for src in $(FUZZ_LIB_SRCS); do \
	  case $$src in *.h|*.cu|cuda/comm_nccl.c) continue ;; esac; \
	  test -f "$(top_srcdir)/$$src" || continue; \
	  obj=$(FUZZ_OUT)/obj/`echo $$src | sed 's|/|_|g; s|\.c$$|.o|'`; \
	  objs="$$objs $$obj"; \
	  if test ! -f $$obj || test $(top_srcdir)/$$src -nt $$obj || test $$newest -nt $$obj; then \
	    echo "  FUZZCC   $$src"; \
	    $(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $(top_srcdir)/$$src -o $$obj || exit 1; \
	    rm -f $(FUZZ_OUT)/libfuzzdeps.a; \
	  fi; \
	done; \
	if test ! -f $(FUZZ_OUT)/libfuzzdeps.a; then echo "  AR       $(FUZZ_OUT)/libfuzzdeps.a"; \
	  ar rcs $(FUZZ_OUT)/libfuzzdeps.a $$objs || exit 1; fi; \
	for t in $(FUZZ_ALL_TARGETS); do \
	  h=$(top_srcdir)/fuzz/$$t.c; \
	  test -f $$h || continue; \
	  if test $$t = checkpoint && test ! -f $(top_srcdir)/lib/train/checkpoint.c; then continue; fi; \
	  bin=$(FUZZ_OUT)/fuzz_$$t; \
	  if test ! -f $$bin || test $$h -nt $$bin || test $(FUZZ_OUT)/libfuzzdeps.a -nt $$bin; then \
	    echo "  FUZZLD   $$bin"; \
	    $(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $$h $(FUZZ_OUT)/libfuzzdeps.a $(FUZZ_LIBS) -o $$bin || exit 1; \
	  fi; \
	done

# Each fuzzer in turn (one core each: the CI machine has two); stdin from
# /dev/null so that no input can make a reader wait on the terminal. LSan
# is on: a leak is a crash. Per-input time limit 10 s, 2 GiB of memory.
fuzz: fuzz-build
	@failed=; \
	for t in $(FUZZ_TARGETS); do \
	  bin=$(FUZZ_OUT)/fuzz_$$t; \
	  if test ! -x $$bin; then echo "fuzz $$t: not built (no fuzz/$$t.c or its library source)"; continue; fi; \
	  mkdir -p $(FUZZ_OUT)/$$t/corpus; \
	  echo "fuzz $$t: $(if $(FUZZ_RUNS),$(FUZZ_RUNS) runs,$(FUZZ_SECONDS) s) (log: $(FUZZ_OUT)/$$t/fuzz.log)"; \
	  seeds=$(top_srcdir)/fuzz/corpus/$$t; test -d $$seeds || seeds=; \
	  regress=$(top_srcdir)/fuzz/regress/$$t; test -d $$regress || regress=; \
	  { grep -v '^#' $(top_srcdir)/fuzz/dict/values.dict; \
	    cat $$seeds/* $$regress/* 2>/dev/null | LC_ALL=C grep -ao '"[A-Za-z_][A-Za-z0-9_.]*"' | LC_ALL=C sort -u; \
	    cat $$seeds/* 2>/dev/null | LC_ALL=C grep -ao -- '--[a-z][a-z0-9-]*' | LC_ALL=C sort -u | sed 's/.*/"&"/'; \
	  } >$(FUZZ_OUT)/$$t.dict; \
	  if test -n "$(FUZZ_RUNS)"; then limit=-runs=$(FUZZ_RUNS); else limit=-max_total_time=$(FUZZ_SECONDS); fi; \
	  start=`date +%s`; \
	  fuzz_tmp=$${TMPDIR:-/tmp}; test -z "$${TMPDIR:-}" && test -w /dev/shm && fuzz_tmp=/dev/shm; \
	  TMPDIR=$$fuzz_tmp UBSAN_OPTIONS=$${UBSAN_OPTIONS:-print_stacktrace=1} \
	  $$bin $$limit -dict=$(FUZZ_OUT)/$$t.dict -timeout=10 -rss_limit_mb=2048 -close_fd_mask=3 \
	    -print_final_stats=1 -artifact_prefix=$(FUZZ_OUT)/$$t/ \
	    $(FUZZ_OUT)/$$t/corpus $$seeds $$regress </dev/null >$(FUZZ_OUT)/$$t/fuzz.log 2>&1; \
	  rc=$$?; \
	  execs=`sed -n 's/^stat::number_of_executed_units: *//p' $(FUZZ_OUT)/$$t/fuzz.log | tail -n 1`; \
	  cov=`grep -o 'cov: [0-9]*' $(FUZZ_OUT)/$$t/fuzz.log | tail -n 1`; \
	  secs=$$((`date +%s` - start)); \
	  if test $$rc = 0; then echo "fuzz $$t: ok, $${execs:-?} executions in $$secs s, $$cov"; \
	  else echo "fuzz $$t: FAILED (exit $$rc) after $${execs:-?} executions:"; \
	    grep -E 'ERROR|SUMMARY|runtime error|Test unit written' $(FUZZ_OUT)/$$t/fuzz.log | head -n 8; \
	    failed="$$failed $$t"; fi; \
	done; \
	if test -n "$$failed"; then echo "make fuzz: crashes in:$$failed (inputs in $(FUZZ_OUT)/TARGET/crash-*)" >&2; exit 1; fi

fuzz-clean:
	-rm -rf $(FUZZ_OUT)
clean-local: fuzz-clean
