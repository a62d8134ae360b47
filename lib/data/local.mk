# lib/data/local.mk: the built-in byte tasks, text files (bytes or GPT-2 BPE
# tokens) and Gaussian blobs.
libdtrain_core_la_SOURCES += \
	lib/data/data_tasks.c \
	lib/data/data_text.c \
	lib/data/data_tokens.c \
	lib/data/data_blobs.c \
	lib/data/bpe.c \
	lib/data/bpe_load.c \
	lib/data/bpe_pretok.c \
	lib/data/unicode_class.c
noinst_HEADERS += lib/data/data_internal.h lib/data/bpe_internal.h
# lib/data/unicode_class.c is generated (committed): python3 tools/gen-unicode-class.py
EXTRA_DIST += tools/gen-unicode-class.py
