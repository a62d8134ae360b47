# tests/valgrind.mk: `make valgrind` (docs/sanitizers.md) runs the three
# programs under valgrind --leak-check=full: a short training run that
# writes a trace and a summary, a simulator run of a pipelined scenario
# profiled from that trace, and a headless render of the simulated trace by
# the viewer (when built). Any memory error or definite leak fails it
# (--error-exitcode=1 --errors-for-leak-kinds=definite); "possibly lost"
# and "still reachable" blocks (thread pools of OpenMP and OpenBLAS,
# fontconfig's caches) are listed in the logs but do not count.
# tests/valgrind.supp holds the suppressions, for system libraries only.
#
# Needs a build without --enable-sanitizers (ASan and valgrind exclude each
# other) and configured with --disable-native: valgrind 3.19 stops at the
# AVX-512 instructions -march=native emits on this machine ("unhandled
# instruction"). Not part of `make check`: it takes a few minutes.
VALGRIND = valgrind
VALGRIND_FLAGS = --leak-check=full --show-leak-kinds=definite,possible --errors-for-leak-kinds=definite \
	--error-exitcode=1 --num-callers=30 --suppressions=$(top_srcdir)/tests/valgrind.supp
VALGRIND_OUT = valgrind-out
EXTRA_DIST += tests/valgrind.supp tests/lsan.supp
CLEANFILES += $(VALGRIND_OUT)/*

.PHONY: valgrind
if HAVE_SDL
DT_VALGRIND_PROGS = dtrain$(EXEEXT) dtsim$(EXEEXT) dtviz$(EXEEXT)
else
DT_VALGRIND_PROGS = dtrain$(EXEEXT) dtsim$(EXEEXT)
endif
valgrind: $(DT_VALGRIND_PROGS)
	@case " $(CFLAGS) $(DT_OPT_CFLAGS) " in \
	  *-fsanitize=*) echo "make valgrind: this build has --enable-sanitizers; configure another without it" >&2; exit 1 ;; \
	  *-march=native*) echo "make valgrind: this build uses -march=native (AVX-512 here), which valgrind cannot run; configure with --disable-native" >&2; exit 1 ;; \
	esac
	@command -v $(VALGRIND) >/dev/null 2>&1 || { echo "make valgrind: $(VALGRIND) not found (apt-get install valgrind)" >&2; exit 1; }
	@mkdir -p $(VALGRIND_OUT); rm -f $(VALGRIND_OUT)/*; failed=; \
	run() { name=$$1; shift; echo "valgrind $$name: $$*"; \
	  if $(VALGRIND) $(VALGRIND_FLAGS) --log-file=$(VALGRIND_OUT)/$$name.log "$$@" >$(VALGRIND_OUT)/$$name.out 2>&1; then \
	    echo "valgrind $$name: ok (`grep -h 'ERROR SUMMARY' $(VALGRIND_OUT)/$$name.log | sed 's/^==[0-9]*== //'`)"; \
	  else echo "valgrind $$name: FAILED (log: $(VALGRIND_OUT)/$$name.log)"; \
	    grep -h -E 'definitely lost|ERROR SUMMARY|Invalid|uninitialised' $(VALGRIND_OUT)/$$name.log | head -n 10; \
	    tail -n 3 $(VALGRIND_OUT)/$$name.out; failed="$$failed $$name"; fi; }; \
	run dtrain ./dtrain$(EXEEXT) --train-iters 20 --micro-batch-size 8 --eval-interval 0 --eval-iters 1 \
	  --log-interval 10 --threads 2 --trace $(VALGRIND_OUT)/train.json --summary $(VALGRIND_OUT)/train-summary.json; \
	run dtsim ./dtsim$(EXEEXT) run --pipeline-model-parallel-size 2 --micro-batches 4 --micro-batch-size 8 \
	  --train-iters 3 --profile $(VALGRIND_OUT)/train.json --trace $(VALGRIND_OUT)/sim.json; \
	if test -x ./dtviz$(EXEEXT); then \
	  run dtviz ./dtviz$(EXEEXT) $(VALGRIND_OUT)/sim.json --png $(VALGRIND_OUT)/sim.png; \
	else echo "valgrind dtviz: not built (no SDL2): skipped"; fi; \
	if test -n "$$failed"; then echo "make valgrind: errors or definite leaks in:$$failed" >&2; exit 1; fi
