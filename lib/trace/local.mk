# lib/trace/local.mk: the trace format's writer and reader (docs/trace-format.md)
# and the statistics that validation and the viewer share.
libdtrain_core_la_SOURCES += \
	lib/trace/trace_write.c \
	lib/trace/trace_read.c \
	lib/trace/trace_stats.c \
	lib/trace/trace_breakdown.c \
	lib/trace/trace_merge.c \
	lib/trace/trace_internal.h
