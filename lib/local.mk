# lib/local.mk: the core library and its CPU backend.
# libdtrain_core.la is a convenience library holding every object (tests link
# it to reach internal dt__ symbols); libdtrain.la is the installed shared
# library built from it, exporting only DT_API symbols (-fvisibility=hidden).
noinst_LTLIBRARIES += libdtrain_core.la
libdtrain_core_la_SOURCES = \
	lib/status.c \
	lib/tensor.c \
	lib/rng.c \
	lib/time.c \
	lib/backend.c \
	lib/cpu_backend.c \
	lib/cpu_gemm.c \
	lib/cpu_layers.c \
	lib/cpu_attention.c \
	lib/cpu_optim.c \
	lib/cpu_half.c \
	lib/cpu_batchnorm.c \
	lib/embedding.c \
	lib/block.c \
	lib/head.c \
	lib/gpt.c \
	lib/optim.c \
	lib/lr.c \
	lib/data_tasks.c \
	lib/data_text.c \
	lib/trace_write.c \
	lib/trace_read.c \
	lib/trace_stats.c \
	lib/train/config.c \
	lib/train/config_json.c \
	lib/train/trainer.c \
	lib/train/model_gpt.c \
	lib/train/model_mlp.c \
	lib/train/step_dp.c \
	lib/train/step_zero.c \
	lib/train/step_ps.c \
	lib/train/step_pipe.c \
	lib/train/nonfinite.c \
	lib/train/eval.c \
	lib/train/trace_hooks.c \
	lib/train/summary.c \
	lib/train/checkpoint_io.c \
	lib/update.c \
	lib/ps.c \
	lib/zero.c \
	lib/schedule.c \
	lib/stage.c \
	lib/pipeline.c \
	lib/tp.c \
	lib/half.c \
	lib/loss_scaler.c \
	lib/mlp.c \
	lib/data_blobs.c \
	lib/comm.c \
	lib/collectives.c
# checkpoints: the file format, the crash-safe commit, CRC32C (docs/checkpoints.md)
libdtrain_core_la_SOURCES += lib/checkpoint.c lib/crc32c.c
include_HEADERS += lib/dt_checkpoint.h
libdtrain_core_la_CPPFLAGS = $(AM_CPPFLAGS) -DDT_BUILDING_LIBRARY
libdtrain_core_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden $(OPENBLAS_CFLAGS) $(JANSSON_CFLAGS)
libdtrain_core_la_LIBADD = $(OPENBLAS_LIBS) $(JANSSON_LIBS) -lm

# The MPI communicator when configure found MPI; otherwise a stand-in whose
# dt_comm_mpi_world says clearly that this build has no MPI.
if HAVE_MPI
libdtrain_core_la_SOURCES += lib/comm_mpi.c
libdtrain_core_la_CFLAGS += $(MPI_CFLAGS)
libdtrain_core_la_LIBADD += $(MPI_LIBS)
else
libdtrain_core_la_SOURCES += lib/comm_mpi_none.c
endif

lib_LTLIBRARIES += libdtrain.la
libdtrain_la_SOURCES =
libdtrain_la_LIBADD = libdtrain_core.la $(OPENBLAS_LIBS) $(JANSSON_LIBS) $(MPI_LIBS) -lm
libdtrain_la_LDFLAGS = -version-info 0:0:0 $(OPENMP_CFLAGS)

include_HEADERS += \
	lib/dtrain.h \
	lib/dt_status.h \
	lib/dt_tensor.h \
	lib/dt_rng.h \
	lib/dt_time.h \
	lib/dt_backend.h \
	lib/dt_gpt.h \
	lib/dt_optim.h \
	lib/dt_data.h \
	lib/dt_trace.h \
	lib/dt_trace_stats.h \
	lib/dt_train.h \
	lib/dt_half.h \
	lib/dt_loss_scaler.h \
	lib/dt_mlp.h \
	lib/dt_blobs.h \
	lib/dt_comm.h \
	lib/dt_schedule.h
noinst_HEADERS += \
	lib/dt_internal.h \
	lib/data_internal.h \
	lib/dt_math_hd.h \
	lib/cpu_backend.h \
	lib/gpt_layers.h \
	lib/comm_internal.h \
	lib/update.h \
	lib/ps.h \
	lib/zero.h \
	lib/stage.h \
	lib/pipeline.h \
	lib/tp.h \
	lib/train/trainer_internal.h
