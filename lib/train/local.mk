# lib/train/local.mk: the trainer (a short core, model kinds, one file per
# strategy and concern: trainer_internal.h) and checkpoints (the file
# format and crash-safe commit: checkpoint.c; docs/checkpoints.md), and a
# checkpoint loaded on one process for generation (generate.c).
libdtrain_core_la_SOURCES += \
	lib/train/config.c \
	lib/train/config_json.c \
	lib/train/trainer.c \
	lib/train/model_gpt.c \
	lib/train/model_mlp.c \
	lib/train/model_gpt_zero.c \
	lib/train/step_dp.c \
	lib/train/step_zero.c \
	lib/train/step_ps.c \
	lib/train/step_pipe.c \
	lib/train/nonfinite.c \
	lib/train/eval.c \
	lib/train/fp8_train.c \
	lib/train/safetensors.c \
	lib/train/export_hf.c \
	lib/train/import_hf.c \
	lib/train/thread_tune.c \
	lib/train/trace_hooks.c \
	lib/train/trace_gather.c \
	lib/train/summary.c \
	lib/train/checkpoint_io.c \
	lib/train/checkpoint.c \
	lib/train/checkpoint_lock.c \
	lib/train/generate.c \
	lib/train/generate_zero.c
noinst_HEADERS += lib/train/trainer_internal.h lib/train/thread_tune.h lib/train/hf.h lib/train/generate_zero.h
