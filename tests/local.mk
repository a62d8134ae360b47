# tests/local.mk: one Check suite per module (tests/check_<module>.c) and
# shell tests of the programs. GPU tests exit 77 (skipped) without a device.
if HAVE_CHECK
DT_CHECK_LDADD = libdtrain_core.la $(CHECK_LIBS) $(OPENBLAS_LIBS) $(DNNL_LIBS) $(JANSSON_LIBS) -lm
DT_CHECK_CFLAGS = $(DT_LIB_CPPFLAGS) $(AM_CFLAGS) $(CHECK_CFLAGS) $(JANSSON_CFLAGS) -DDT_SRCDIR='"$(abs_top_srcdir)"'
DT_CHECK_SUITES = \
	tests/check_tensor \
	tests/check_ops \
	tests/check_cpu_bf16 \
	tests/check_gpt \
	tests/check_sample \
	tests/check_optim \
	tests/check_optim_group \
	tests/check_data \
	tests/check_file \
	tests/check_trace \
	tests/check_trace_read \
	tests/check_train \
	tests/check_threads \
	tests/check_half \
	tests/check_fp8 \
	tests/check_safetensors \
	tests/check_bpe \
	tests/check_data_tokens \
	tests/check_mlp \
	tests/check_stage \
	tests/check_bw \
	tests/check_cuda_math \
	tests/check_grid \
	tests/check_schedule \
	tests/check_schedule_zb \
	tests/check_trace_stats \
	tests/check_trace_breakdown \
	tests/check_trace_merge \
	tests/check_sim_amp
check_PROGRAMS += tests/check_comm
check_PROGRAMS += tests/check_zero
check_PROGRAMS += tests/check_zero_stages
check_PROGRAMS += $(DT_CHECK_SUITES)
TESTS += $(DT_CHECK_SUITES)

tests_check_tensor_SOURCES = tests/check_tensor.c tests/testutil.h
tests_check_tensor_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_tensor_LDADD = $(DT_CHECK_LDADD)
tests_check_ops_SOURCES = tests/check_ops.c tests/testutil.h
tests_check_ops_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_ops_LDADD = $(DT_CHECK_LDADD)
tests_check_cpu_bf16_SOURCES = tests/check_cpu_bf16.c tests/testutil.h
tests_check_cpu_bf16_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_cpu_bf16_LDADD = $(DT_CHECK_LDADD)
tests_check_gpt_SOURCES = tests/check_gpt.c tests/testutil.h
tests_check_gpt_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_gpt_LDADD = $(DT_CHECK_LDADD)
tests_check_sample_SOURCES = tests/check_sample.c tests/testutil.h
tests_check_sample_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_sample_LDADD = $(DT_CHECK_LDADD)
tests_check_optim_SOURCES = tests/check_optim.c tests/testutil.h
tests_check_optim_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_optim_LDADD = $(DT_CHECK_LDADD)
tests_check_optim_group_SOURCES = tests/check_optim_group.c tests/testutil.h
tests_check_optim_group_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_optim_group_LDADD = $(DT_CHECK_LDADD)
tests_check_file_SOURCES = tests/check_file.c tests/testutil.h
tests_check_file_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_file_LDADD = $(DT_CHECK_LDADD)
tests_check_data_SOURCES = tests/check_data.c tests/testutil.h
tests_check_data_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_data_LDADD = $(DT_CHECK_LDADD)
tests_check_trace_SOURCES = tests/check_trace.c tests/trace_testutil.h tests/testutil.h
tests_check_trace_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_trace_LDADD = $(DT_CHECK_LDADD)
tests_check_trace_read_SOURCES = tests/check_trace_read.c tests/trace_testutil.h tests/testutil.h
tests_check_trace_read_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_trace_read_LDADD = $(DT_CHECK_LDADD)
tests_check_train_SOURCES = tests/check_train.c tests/testutil.h
tests_check_train_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_train_LDADD = $(DT_CHECK_LDADD)
tests_check_threads_SOURCES = tests/check_threads.c tests/testutil.h
tests_check_threads_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_threads_LDADD = $(DT_CHECK_LDADD)
tests_check_safetensors_SOURCES = tests/check_safetensors.c tests/testutil.h
tests_check_safetensors_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_safetensors_LDADD = $(DT_CHECK_LDADD)
tests_check_bpe_SOURCES = tests/check_bpe.c tests/testutil.h
tests_check_bpe_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_bpe_LDADD = $(DT_CHECK_LDADD)
tests_check_data_tokens_SOURCES = tests/check_data_tokens.c tests/testutil.h
tests_check_data_tokens_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_data_tokens_LDADD = $(DT_CHECK_LDADD)
tests_check_fp8_SOURCES = tests/check_fp8.c tests/fp8_op_tests.h tests/testutil.h
tests_check_fp8_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_fp8_LDADD = $(DT_CHECK_LDADD)
tests_check_half_SOURCES = tests/check_half.c tests/testutil.h
tests_check_half_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_half_LDADD = $(DT_CHECK_LDADD)
tests_check_mlp_SOURCES = tests/check_mlp.c tests/testutil.h
tests_check_mlp_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_mlp_LDADD = $(DT_CHECK_LDADD)
# check_grid runs alone (the arithmetic) and under mpirun with 1..4 ranks
# through tests/grid.sh (the world's groups)
tests_check_grid_SOURCES = tests/check_grid.c tests/testutil.h
tests_check_grid_CFLAGS = $(DT_CHECK_CFLAGS) $(MPI_CFLAGS)
tests_check_grid_LDADD = $(DT_CHECK_LDADD) $(MPI_LIBS)
tests_check_schedule_SOURCES = tests/check_schedule.c tests/testutil.h
tests_check_schedule_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_schedule_LDADD = $(DT_CHECK_LDADD)
tests_check_schedule_zb_SOURCES = tests/check_schedule_zb.c tests/testutil.h
tests_check_schedule_zb_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_schedule_zb_LDADD = $(DT_CHECK_LDADD)
tests_check_trace_stats_SOURCES = tests/check_trace_stats.c tests/testutil.h
tests_check_trace_stats_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_trace_stats_LDADD = $(DT_CHECK_LDADD)
tests_check_trace_breakdown_SOURCES = tests/check_trace_breakdown.c tests/testutil.h
tests_check_trace_breakdown_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_trace_breakdown_LDADD = $(DT_CHECK_LDADD)
tests_check_trace_merge_SOURCES = tests/check_trace_merge.c tests/trace_testutil.h tests/testutil.h
tests_check_trace_merge_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_trace_merge_LDADD = $(DT_CHECK_LDADD)
tests_check_stage_SOURCES = tests/check_stage.c tests/testutil.h
tests_check_stage_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_stage_LDADD = $(DT_CHECK_LDADD)
tests_check_bw_SOURCES = tests/check_bw.c tests/testutil.h
tests_check_bw_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_bw_LDADD = $(DT_CHECK_LDADD)
# The simulator's FP8 numerics (sim/fp8.c): by hand, its keys, a real FP8 run replayed.
DT_CHECK_SUITES += tests/check_sim_fp8
tests_check_sim_fp8_SOURCES = tests/check_sim_fp8.c tests/testutil.h
tests_check_sim_fp8_CFLAGS = $(DT_CHECK_CFLAGS) -I$(top_srcdir)/sim
tests_check_sim_fp8_LDADD = libdtsim.la $(DT_CHECK_LDADD)
# The simulator's mixed-precision model (sim/amp.c) against real fp16 runs.
tests_check_sim_amp_SOURCES = tests/check_sim_amp.c tests/testutil.h
tests_check_sim_amp_CFLAGS = $(DT_CHECK_CFLAGS) -I$(top_srcdir)/sim
tests_check_sim_amp_LDADD = libdtsim.la $(DT_CHECK_LDADD)
# The CUDA kernels' per-element math against the CPU backend (every build).
tests_check_cuda_math_SOURCES = tests/check_cuda_math.c tests/testutil.h
tests_check_cuda_math_CFLAGS = $(DT_CHECK_CFLAGS) -I$(top_srcdir)/cuda
tests_check_cuda_math_LDADD = $(DT_CHECK_LDADD)
# Every CUDA op against the CPU backend: built with CUDA only, exits 77
# (skipped) without a device.
if HAVE_CUDA
check_PROGRAMS += tests/check_cuda
TESTS += tests/check_cuda
tests_check_cuda_SOURCES = tests/check_cuda.c tests/testutil.h
tests_check_cuda_CFLAGS = $(DT_CHECK_CFLAGS) -I$(top_srcdir)/cuda
tests_check_cuda_LDADD = $(DT_CHECK_LDADD)
endif
# training on the GPU against the CPU (skipped without a CUDA device)
check_PROGRAMS += tests/check_cuda_train
TESTS += tests/check_cuda_train
tests_check_cuda_train_SOURCES = tests/check_cuda_train.c tests/testutil.h
tests_check_cuda_train_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_cuda_train_LDADD = $(DT_CHECK_LDADD)
# check_tp runs through tests/tp.sh under mpirun (t = 1, 2, 4)
check_PROGRAMS += tests/check_tp
tests_check_tp_SOURCES = tests/check_tp.c tests/testutil.h
tests_check_tp_CFLAGS = $(DT_CHECK_CFLAGS) $(MPI_CFLAGS)
tests_check_tp_LDADD = $(DT_CHECK_LDADD) $(MPI_LIBS)
# check_nccl runs through tests/nccl.sh (skipped without a CUDA device)
check_PROGRAMS += tests/check_nccl
tests_check_nccl_SOURCES = tests/check_nccl.c tests/testutil.h
tests_check_nccl_CFLAGS = $(DT_CHECK_CFLAGS) $(MPI_CFLAGS)
tests_check_nccl_LDADD = $(DT_CHECK_LDADD) $(MPI_LIBS)
# check_comm runs under mpirun with 1..4 ranks through tests/comm.sh
tests_check_comm_SOURCES = tests/check_comm.c tests/testutil.h
tests_check_comm_CFLAGS = $(DT_CHECK_CFLAGS) $(MPI_CFLAGS)
tests_check_comm_LDADD = $(DT_CHECK_LDADD) $(MPI_LIBS)
# check_zero runs under mpirun with 1..4 ranks through tests/zero.sh
tests_check_zero_SOURCES = tests/check_zero.c tests/testutil.h
tests_check_zero_CFLAGS = $(DT_CHECK_CFLAGS) $(MPI_CFLAGS)
tests_check_zero_LDADD = $(DT_CHECK_LDADD) $(MPI_LIBS)
tests_check_zero_stages_SOURCES = tests/check_zero_stages.c tests/testutil.h
tests_check_zero_stages_CFLAGS = $(DT_CHECK_CFLAGS) $(MPI_CFLAGS)
tests_check_zero_stages_LDADD = $(DT_CHECK_LDADD) $(MPI_LIBS)
else
check-local:
	@echo "Check (the unit-test library) was not found by configure: install it (./bootstrap) and re-run ./configure" >&2; exit 1
endif

# Shell tests of the programs (flags, errors, exit codes).
TESTS += tests/cli.sh tests/comm.sh tests/dp.sh tests/cuda.sh
EXTRA_DIST += tests/cli.sh tests/comm.sh tests/dp.sh tests/mpi-env.sh tests/cuda.sh
# The NCCL communicator (GPU; skipped without one).
TESTS += tests/nccl.sh
EXTRA_DIST += tests/nccl.sh
# Tensor parallelism under mpirun.
TESTS += tests/tp.sh
EXTRA_DIST += tests/tp.sh
TESTS += tests/sp.sh
EXTRA_DIST += tests/sp.sh
TESTS += tests/fp8.sh
EXTRA_DIST += tests/fp8.sh
TESTS += tests/cp.sh
EXTRA_DIST += tests/cp.sh
# Pipeline parallelism under mpirun; the measured bubble against (p-1)/(m+p-1).
TESTS += tests/pp.sh tests/bubble.sh tests/pp-optim.sh tests/zb.sh
EXTRA_DIST += tests/pp.sh tests/bubble.sh tests/pp-optim.sh tests/zb.sh
# Every technique with every other: the composition matrix (docs/composition.md).
TESTS += tests/compose.sh
EXTRA_DIST += tests/compose.sh
# One trace for the whole job: the merged run.json of a 2-rank pipeline and
# data-parallel run, its flows, and the programs that read it.
TESTS += tests/trace-merge.sh
EXTRA_DIST += tests/trace-merge.sh
tests/trace-merge.log: tests/pp.log
# The parameter server (ps-sync is also in dp.sh).
TESTS += tests/ps.sh
EXTRA_DIST += tests/ps.sh tests/mpi-lib.sh
# A trace's header reproduces its run in dtsim (the slow rank, the machine).
TESTS += tests/replay.sh
EXTRA_DIST += tests/replay.sh
# ZeRO-1, the sharded optimizer, under mpirun.
TESTS += tests/zero.sh
EXTRA_DIST += tests/zero.sh
# The process grid's communicators under mpirun.
TESTS += tests/grid.sh
EXTRA_DIST += tests/grid.sh
# fp16: a non-finite loss is an overflow in every layout; the minimum-scale stop.
TESTS += tests/fp16-overflow.sh
EXTRA_DIST += tests/fp16-overflow.sh
# Check's per-test timeout is 4 s unless a suite sets its own: generous
# limits keep a loaded 2-core CI machine from failing healthy tests.
TESTS_ENVIRONMENT = DT_BUILDDIR='$(abs_top_builddir)' DT_SRCDIR='$(abs_top_srcdir)' \
	CK_DEFAULT_TIMEOUT=120 CK_TIMEOUT_MULTIPLIER=3; \
	export DT_BUILDDIR DT_SRCDIR CK_DEFAULT_TIMEOUT CK_TIMEOUT_MULTIPLIER;

# The multi-rank tests oversubscribe the 2 cores with busy-polling MPI ranks:
# run them after the heavy single-process suites (make -j2 check would
# otherwise run them side by side and slow both to a crawl), one at a time.
# With .sh a test extension, tests/comm.sh logs to tests/comm.log through a
# suffix rule, so these lines add prerequisites instead of overriding rules.
TEST_EXTENSIONS = .sh
tests/comm.log: $(DT_CHECK_SUITES:=.log) tests/cli.log
tests/grid.log: tests/comm.log
tests/dp.log: tests/grid.log
tests/zero.log: tests/dp.log
tests/ps.log: tests/zero.log
tests/fp16-overflow.log: tests/ps.log
tests/pp.log: tests/ps.log
tests/tp.log: tests/pp.log
tests/bubble.log: tests/tp.log
tests/compose.log: tests/bubble.log
# dtbench's GPU commands without a device (exit 1 / 77, one line) or, with
# one, a small checked `dtbench gelu`; tests/gpu/device-check.sh is the
# full GPU check (run by hand on a GPU machine).
TESTS += tests/bench-gpu.sh
EXTRA_DIST += tests/bench-gpu.sh tests/gpu/device-check.sh tests/gpu/bundle.sh tests/gpu/dry-run.sh
# `make gpu-bundle`: gpu-bundle/ in the source tree, what the device check
# needs on a bare GPU image (the generated build files, Debian's packages of
# OpenBLAS, jansson and Check); carry it to the GPU machine (docs/cuda.md).
gpu-bundle:
	$(SHELL) $(abs_top_srcdir)/tests/gpu/bundle.sh $(abs_top_srcdir)/gpu-bundle
.PHONY: gpu-bundle
# The simulator's cost model, hardware files and communication fit.
if HAVE_CHECK
DT_CHECK_SUITES += tests/check_sim_contention
tests_check_sim_contention_SOURCES = tests/check_sim_contention.c tests/simtest.h tests/testutil.h
tests_check_sim_contention_CFLAGS = $(DT_CHECK_CFLAGS) -I$(top_srcdir)/sim $(JANSSON_CFLAGS)
tests_check_sim_contention_LDADD = libdtsim.la $(DT_CHECK_LDADD) $(JANSSON_LIBS)
DT_CHECK_SUITES += tests/check_sim_cost
tests_check_sim_cost_SOURCES = tests/check_sim_cost.c tests/testutil.h
tests_check_sim_cost_CFLAGS = $(DT_CHECK_CFLAGS) -I$(top_srcdir)/sim
tests_check_sim_cost_LDADD = libdtsim.la $(DT_CHECK_LDADD)
endif
# The simulator's engine, collectives and executor against exact formulas.
if HAVE_CHECK
DT_CHECK_SUITES += tests/check_sim
tests_check_sim_SOURCES = tests/check_sim.c tests/testutil.h tests/simtest.h
tests_check_sim_CFLAGS = $(DT_CHECK_CFLAGS) -I$(top_srcdir)/sim
tests_check_sim_LDADD = libdtsim.la $(DT_CHECK_LDADD)
endif
# The simulator's two collective models against each other, the hardware's
# "collectives" choice, and the analytic model's memory (linear in members).
if HAVE_CHECK
DT_CHECK_SUITES += tests/check_sim_coll
tests_check_sim_coll_SOURCES = tests/check_sim_coll.c tests/testutil.h tests/simtest.h
tests_check_sim_coll_CFLAGS = $(DT_CHECK_CFLAGS) -I$(top_srcdir)/sim
tests_check_sim_coll_LDADD = libdtsim.la $(DT_CHECK_LDADD)
endif
# Simulator scenarios: config keys, checks, stages, JSON round trip.
if HAVE_CHECK
DT_CHECK_SUITES += tests/check_sim_scenario
tests_check_sim_scenario_SOURCES = tests/check_sim_scenario.c tests/testutil.h
tests_check_sim_scenario_CFLAGS = $(DT_CHECK_CFLAGS) -I$(top_srcdir)/sim
tests_check_sim_scenario_LDADD = libdtsim.la $(DT_CHECK_LDADD)
endif
# The simulator at scale: the event estimate, the vocabulary split, scattered
# pipeline sends, the memory capacity, the stages' balance.
if HAVE_CHECK
DT_CHECK_SUITES += tests/check_sim_scale
tests_check_sim_scale_SOURCES = tests/check_sim_scale.c tests/testutil.h
tests_check_sim_scale_CFLAGS = $(DT_CHECK_CFLAGS) -I$(top_srcdir)/sim
tests_check_sim_scale_LDADD = libdtsim.la $(DT_CHECK_LDADD)
endif
# dtsim's command line: bad flags and configs (exit 2, one line), run, sweep.
TESTS += tests/sim-cli.sh
EXTRA_DIST += tests/sim-cli.sh
# The simulator's predictions of real 2-rank runs (dtbench simval --quick).
TESTS += tests/sim.sh
EXTRA_DIST += tests/sim.sh
tests/sim.log: tests/compose.log
# dtsim analyze: each rank's step breakdown of real 2-rank runs and their simulations.
TESTS += tests/breakdown.sh
EXTRA_DIST += tests/breakdown.sh
EXTRA_DIST += tests/cli-lib.sh
# The SDL2 viewer: headless renders probed pixel by pixel, trace loading and
# its errors (check_viz), and dtviz's command line (viz-cli.sh).
if HAVE_CHECK
if HAVE_SDL
DT_CHECK_SUITES += tests/check_viz
tests_check_viz_SOURCES = tests/check_viz.c tests/testutil.h tests/simtest.h
tests_check_viz_CFLAGS = $(DT_CHECK_CFLAGS) $(SDL_CFLAGS) -I$(top_srcdir)/sim -I$(top_srcdir)/viz
tests_check_viz_LDADD = libdtviz.la libdtsim.la $(DT_CHECK_LDADD) $(SDL_LIBS)
endif
endif
if HAVE_SDL
TESTS += tests/viz-cli.sh
endif
EXTRA_DIST += tests/viz-cli.sh
# The viewer's loss-scale and memory views: headless renders of hand-made
# traces, probed at the positions the views' geometry helpers give.
if HAVE_CHECK
if HAVE_SDL
DT_CHECK_SUITES += tests/check_viz_views
tests_check_viz_views_SOURCES = tests/check_viz_views.c tests/testutil.h
tests_check_viz_views_CFLAGS = $(DT_CHECK_CFLAGS) $(SDL_CFLAGS) -I$(top_srcdir)/sim -I$(top_srcdir)/viz
tests_check_viz_views_LDADD = libdtviz.la libdtsim.la $(DT_CHECK_LDADD) $(SDL_LIBS)
endif
endif
# The viewer's interactive state (keys, mouse, playback, what-if re-runs)
# without a display, and the SDL loop under SDL_VIDEODRIVER=dummy.
if HAVE_CHECK
if HAVE_SDL
DT_CHECK_SUITES += tests/check_viz_app
tests_check_viz_app_SOURCES = tests/check_viz_app.c tests/testutil.h
tests_check_viz_app_CFLAGS = $(DT_CHECK_CFLAGS) $(SDL_CFLAGS) -I$(top_srcdir)/sim -I$(top_srcdir)/viz
tests_check_viz_app_LDADD = libdtviz.la libdtsim.la $(DT_CHECK_LDADD) $(SDL_LIBS)
endif
endif
# The viewer's ring view: chunks on their links, the bytes each rank sends
# against 2(n-1)/n, the parameter server's staleness histogram.
if HAVE_CHECK
if HAVE_SDL
DT_CHECK_SUITES += tests/check_viz_ring
tests_check_viz_ring_SOURCES = tests/check_viz_ring.c tests/testutil.h
tests_check_viz_ring_CFLAGS = $(DT_CHECK_CFLAGS) $(SDL_CFLAGS) -I$(top_srcdir)/sim -I$(top_srcdir)/viz
tests_check_viz_ring_LDADD = libdtviz.la libdtsim.la $(DT_CHECK_LDADD) $(SDL_LIBS)
endif
endif
# The viewer's sequence- and context-parallel pictures: their kinds in the
# timeline, which key/value block each rank holds at each ring step.
if HAVE_CHECK
if HAVE_SDL
DT_CHECK_SUITES += tests/check_viz_cp
tests_check_viz_cp_SOURCES = tests/check_viz_cp.c tests/testutil.h
tests_check_viz_cp_CFLAGS = $(DT_CHECK_CFLAGS) $(SDL_CFLAGS) -I$(top_srcdir)/sim -I$(top_srcdir)/viz
tests_check_viz_cp_LDADD = libdtviz.la libdtsim.la $(DT_CHECK_LDADD) $(SDL_LIBS)
endif
endif
# The viewer's FP8 scaling view: each step's window of values, the steps
# that saturate, the tensor shown, on hand-made traces.
if HAVE_CHECK
if HAVE_SDL
DT_CHECK_SUITES += tests/check_viz_fp8
tests_check_viz_fp8_SOURCES = tests/check_viz_fp8.c tests/testutil.h
tests_check_viz_fp8_CFLAGS = $(DT_CHECK_CFLAGS) $(SDL_CFLAGS) -I$(top_srcdir)/sim -I$(top_srcdir)/viz
tests_check_viz_fp8_LDADD = libdtviz.la libdtsim.la $(DT_CHECK_LDADD) $(SDL_LIBS)
endif
endif
# The viewer fitting a picture to its data: the last steps where steps would
# be slivers, the height from the rows, per-layer memory samples, box labels
# where their text fits.
if HAVE_CHECK
if HAVE_SDL
DT_CHECK_SUITES += tests/check_viz_fit
tests_check_viz_fit_SOURCES = tests/check_viz_fit.c tests/testutil.h
tests_check_viz_fit_CFLAGS = $(DT_CHECK_CFLAGS) $(SDL_CFLAGS) -I$(top_srcdir)/sim -I$(top_srcdir)/viz
tests_check_viz_fit_LDADD = libdtviz.la libdtsim.la $(DT_CHECK_LDADD) $(SDL_LIBS)
endif
endif
# The fuzzers' harnesses (fuzz/*.c) on the crash inputs make fuzz found
# (fuzz/regress/TARGET, fixed since) and on their seeds (fuzz/corpus):
# docs/sanitizers.md.
if HAVE_CHECK
DT_CHECK_SUITES += tests/check_fuzz_regress
tests_check_fuzz_regress_SOURCES = tests/check_fuzz_regress.c tests/testutil.h programs/args.c programs/args.h
tests_check_fuzz_regress_CFLAGS = $(DT_CHECK_CFLAGS) -I$(top_srcdir)/sim -I$(top_srcdir)/programs
tests_check_fuzz_regress_LDADD = libdtsim.la $(DT_CHECK_LDADD)
endif
# Faults: a hung or killed rank ends the job within --comm-timeout (dp,
# pipeline, parameter server; docs/faults.md). Multi-rank: after the others.
TESTS += tests/faults.sh
EXTRA_DIST += tests/faults.sh
tests/faults.log: tests/sim.log
# The bounded waits' deadline (a stopped process's gap not counted) and
# the timeout message, on one process.
if HAVE_CHECK
DT_CHECK_SUITES += tests/check_comm_wait
tests_check_comm_wait_SOURCES = tests/check_comm_wait.c tests/testutil.h
tests_check_comm_wait_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_comm_wait_LDADD = $(DT_CHECK_LDADD)
endif
# NaN/inf in FP32 training: the first bad layer named, --skip-nonfinite.
if HAVE_CHECK
DT_CHECK_SUITES += tests/check_nonfinite
tests_check_nonfinite_SOURCES = tests/check_nonfinite.c tests/testutil.h
tests_check_nonfinite_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_nonfinite_LDADD = $(DT_CHECK_LDADD)
endif
# The bad-input catalogue: every program's flags, data files, traces, configs
# and hardware files with invalid values (exit 2 or the documented code, one
# stderr line, no crash, hang or partial output); mpirun layouts.
TESTS += tests/badinput.sh tests/badinput-tools.sh tests/badinput-hf.sh
# Hugging Face interop: export/import round trips, imports into layouts, BPE data (docs/interop.md).
# Up to 4 ranks: in the multi-rank chain (after generate.sh, before the tutorials), never beside another.
TESTS += tests/interop.sh
tests/interop.log: tests/generate.log
EXTRA_DIST += tests/interop.sh tests/data/bpe-tiny/vocab.json tests/data/bpe-tiny/merges.txt \
	tools/gen-tiny-bpe.py tools/hf_compare.py
EXTRA_DIST += tests/badinput.sh tests/badinput-tools.sh tests/badinput-hf.sh tests/badinput-lib.sh
tests/badinput.log: tests/faults.log
# The value catalogue: every numeric field of traces, dtsim scenarios and
# hardware files at 0, -1, 1e308, 2^31, 2^62, 2^63-1, NaN, Infinity, 1e999
# (tests/json_mutate splices each value into the file).
check_PROGRAMS += tests/json_mutate
tests_json_mutate_SOURCES = tests/json_mutate.c
tests_json_mutate_CFLAGS = $(DT_LIB_CPPFLAGS) $(AM_CFLAGS)
tests_json_mutate_LDADD = libdtrain_core.la $(OPENBLAS_LIBS) $(JANSSON_LIBS) -lm
TESTS += tests/badvalues.sh
EXTRA_DIST += tests/badvalues.sh
# Checkpoints: the file format, its corruptions and the search for the
# newest valid one (check_checkpoint); exact resume for every layout and
# the kill -9 test (ckpt.sh, under mpirun after the other multi-rank tests).
if HAVE_CHECK
DT_CHECK_SUITES += tests/check_checkpoint
tests_check_checkpoint_SOURCES = tests/check_checkpoint.c tests/testutil.h
tests_check_checkpoint_CFLAGS = $(DT_CHECK_CFLAGS)
tests_check_checkpoint_LDADD = $(DT_CHECK_LDADD)
endif
TESTS += tests/ckpt.sh
EXTRA_DIST += tests/ckpt.sh
# Every write, rename and removal in lib/core and lib/train goes through the
# no-follow helper (dt_dir.h) or a listed exception (source-level).
TESTS += tests/nofollow.sh
EXTRA_DIST += tests/nofollow.sh
tests/ckpt.log: tests/badinput.log
# Generation from a checkpoint (--generate): a learned pattern continued,
# the seed, top-k, temperature, cropping to the context, bad flags; the
# checkpoints of a pipeline, of tensor parallelism and of ZeRO (each read
# back whole) under mpirun, after the other multi-rank tests.
TESTS += tests/generate.sh
EXTRA_DIST += tests/generate.sh
tests/generate.log: tests/ckpt.log
# The emulated multi-node cluster (docs/cluster.md): network namespaces
# joined by a bridge, the inter-node link shaped by tbf; root only (77
# otherwise). After the other multi-rank tests, before the tutorials (09
# brings up a cluster of its own).
TESTS += tests/cluster-check.sh
EXTRA_DIST += tests/cluster-check.sh tests/cluster.sh tests/cluster-rsh.sh
tests/cluster-check.log: tests/generate.log
# Under ./configure --enable-sanitizers (docs/sanitizers.md): ASan, UBSan
# and LeakSanitizer are on in every test process with their defaults (a
# report fails the test); mpirun is wrapped (tests/sanitizers/mpirun) so
# that MPI ranks run with LSAN_OPTIONS=$DT_MPI_LSAN_OPTIONS (default
# detect_leaks=0: Open MPI's own leaks cannot be named once its components
# are unloaded). UBSan prints the stack of what it reports.
# allocator_may_return_null=1: an impossible allocation returns NULL as
# glibc's malloc does (tests/badinput.sh checks the clean error) instead
# of ASan aborting. Check's timeouts are 10x (ASan runs 2-4x slower).
# DT_SANITIZERS=yes: tests/sim.sh then makes its runs once without judging
# their timings (instrumented code does not run at the simulated speeds).
EXTRA_DIST += tests/sanitizers/mpirun
if DT_SANITIZERS
TESTS_ENVIRONMENT += PATH='$(abs_top_srcdir)/tests/sanitizers':"$$PATH" \
	ASAN_OPTIONS="$${ASAN_OPTIONS-allocator_may_return_null=1}" \
	UBSAN_OPTIONS="$${UBSAN_OPTIONS-print_stacktrace=1}" CK_TIMEOUT_MULTIPLIER=10 DT_SANITIZERS=yes; \
	export PATH ASAN_OPTIONS UBSAN_OPTIONS CK_TIMEOUT_MULTIPLIER DT_SANITIZERS;
endif
# Tutorials (tutorials/NN-name/README.md): each one's check.sh runs the
# README's commands (TUTORIAL_QUICK=1 by default: shortened where its README
# says) and checks the outputs it quotes; tutorials.sh also checks that every
# command the README prints was run. After the multi-rank tests.
TESTS += tests/tutorials.sh
EXTRA_DIST += tests/tutorials.sh tests/trace-spans.awk tutorials
tests/tutorials.log: tests/cluster-check.log tests/interop.log
# The tutorials' Open MPI settings, in the build directory (`. ./mpi-env.sh`
# there): a copy of tests/mpi-env.sh, made by `make`.
noinst_DATA = mpi-env.sh
CLEANFILES += mpi-env.sh
mpi-env.sh: $(top_srcdir)/tests/mpi-env.sh
	cp $(top_srcdir)/tests/mpi-env.sh $@.tmp && mv $@.tmp $@
# `make tutorial T=05-pipeline`: one tutorial run exactly as printed
# (TUTORIAL_QUICK=0), from the build directory.
.PHONY: tutorial
tutorial: all
	@test -n "$(T)" || { echo "make tutorial: give T=NN-name (one of: $$(cd $(top_srcdir)/tutorials && ls -d [0-9]*-* | tr '\n' ' '))" >&2; exit 2; }
	@test -f "$(top_srcdir)/tutorials/$(T)/check.sh" || { echo "make tutorial: T=$(T): no tutorials/$(T)/check.sh" >&2; exit 2; }
	TUTORIAL_QUICK=0 TUTORIALS='$(T)' DT_BUILDDIR='$(abs_top_builddir)' DT_SRCDIR='$(abs_top_srcdir)' \
	    $(SHELL) $(top_srcdir)/tests/tutorials.sh

# After a failure, make check prints test-suite.log (the logs of the failed
# tests), so that a CI report showing only the tail of the output still says
# which checks failed and with what figures.
AM_MAKEFLAGS = VERBOSE=yes
