# lib/model/local.mk: the GPT (embedding, blocks, head), its sampler and
# generation loop (sample.c), and the BatchNorm MLP.
libdtrain_core_la_SOURCES += \
	lib/model/embedding.c \
	lib/model/block.c \
	lib/model/fp8.c \
	lib/model/runner.c \
	lib/model/runner_backward.c \
	lib/model/head.c \
	lib/model/gpt.c \
	lib/model/sample.c \
	lib/model/mlp.c
noinst_HEADERS += lib/model/fp8.h lib/model/gpt_layers.h lib/model/runner.h lib/model/runner_impl.h
