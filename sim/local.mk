# sim/local.mk: the discrete-event simulator (libdtsim.la, used by dtsim,
# dtbench and the tests). It links the core library for the schedule
# generator, the trace reader/writer, the trace statistics and the loss
# scaler: one piece of code for each, shared with the real runtime.
noinst_LTLIBRARIES += libdtsim.la
libdtsim_la_SOURCES = sim/dts_engine.h sim/engine.c
libdtsim_la_CPPFLAGS = $(AM_CPPFLAGS) $(DT_SHARED_CPPFLAGS) -I$(top_srcdir)/sim
libdtsim_la_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)
libdtsim_la_LIBADD = $(JANSSON_LIBS) -lm
EXTRA_DIST += sim/hw/cpu-2core.json sim/hw/h100-ib.json sim/hw/h200-nvlink.json sim/hw/a100-ib.json
# the mixed-precision numerics model (grad_amax fit, loss-scaler replay)
libdtsim_la_SOURCES += sim/dts_amp.h sim/amp.c
# the FP8 numerics model (saturated and flushed values under other FP8 settings)
libdtsim_la_SOURCES += sim/dts_fp8.h sim/fp8.c
# The typed JSON getters that the hardware and scenario readers share.
libdtsim_la_SOURCES += sim/dts_json.h sim/json_util.c
# The cost model, hardware descriptions and communication fit.
libdtsim_la_SOURCES += sim/dts_hw.h sim/hw.c sim/dts_cost.h sim/cost.c sim/dts_fit.h sim/fit.c sim/fit_contention.c
# Scenarios: defaults, dtsim config files and dtrain's run configs, checks.
libdtsim_la_SOURCES += sim/scenario.c sim/scenario_json.c sim/scenario_run.c sim/dts_scenario.h
libdtsim_la_SOURCES += sim/dts_net.h sim/net.c sim/dts_coll.h sim/coll_internal.h sim/coll.c sim/coll_analytic.c sim/dts_run.h sim/run_internal.h sim/run.c \
	sim/run_unit.c sim/run_coll.c sim/run_cp.c sim/run_tp.c sim/run_step.c sim/run_ps.c sim/run_dp.c sim/run_pipe.c sim/summary.c sim/estimate.c \
	sim/dts_validate.h sim/validate.c
