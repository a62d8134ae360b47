# lib/data/local.mk: the built-in byte tasks, text files and Gaussian blobs.
libdtrain_core_la_SOURCES += \
	lib/data/data_tasks.c \
	lib/data/data_text.c \
	lib/data/data_blobs.c
noinst_HEADERS += lib/data/data_internal.h
