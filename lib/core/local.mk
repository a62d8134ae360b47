# lib/core/local.mk: status, tensors and layouts, RNG, time, half/bf16,
# CRC32C, and the per-element math every backend shares. Uses nothing else.
libdtrain_core_la_SOURCES += \
	lib/core/status.c \
	lib/core/tensor.c \
	lib/core/rng.c \
	lib/core/time.c \
	lib/core/half.c \
	lib/core/fp8.c \
	lib/core/crc32c.c \
	lib/core/file.c \
	lib/core/file_in.c \
	lib/core/escape.c \
	lib/core/file_dir.c
noinst_HEADERS += lib/core/dt_internal.h lib/core/dt_math_hd.h
