# lib/parallel/local.mk: the parallelisms as mechanisms: the process grid,
# schedules (the one generator), pipeline stages and their runtime, tensor parallelism, ZeRO (the sharded optimizer;
# the sharded GPT of stages 2 and 3),
# the parameter server.
libdtrain_core_la_SOURCES += \
	lib/parallel/grid.c \
	lib/parallel/schedule.c \
	lib/parallel/schedule_order.c \
	lib/parallel/stage.c \
	lib/parallel/pipeline.c \
	lib/parallel/pipeline_optim.c \
	lib/parallel/pipeline_eval.c \
	lib/parallel/pipeline_shard.c \
	lib/parallel/tp.c \
	lib/parallel/sp.c \
	lib/parallel/cp.c \
	lib/parallel/zero.c \
	lib/parallel/zero_shard.c \
	lib/parallel/zero_gpt.c \
	lib/parallel/zero_queue.c \
	lib/parallel/ps.c
noinst_HEADERS += \
	lib/parallel/schedule_internal.h \
	lib/parallel/stage.h \
	lib/parallel/pipeline.h \
	lib/parallel/pipeline_impl.h \
	lib/parallel/tp.h \
	lib/parallel/sp.h \
	lib/parallel/cp.h \
	lib/parallel/zero.h \
	lib/parallel/zero_shard.h \
	lib/parallel/zero_gpt.h \
	lib/parallel/zero_queue.h \
	lib/parallel/ps.h
