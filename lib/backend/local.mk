# lib/backend/local.mk: the op table's checked front (backend.c) and the
# CPU backend, the reference every other backend is tested against.
libdtrain_core_la_SOURCES += \
	lib/backend/backend.c \
	lib/backend/cpu/cpu_backend.c \
	lib/backend/cpu/cpu_gemm.c \
	lib/backend/cpu/cpu_layers.c \
	lib/backend/cpu/cpu_attention.c \
	lib/backend/cpu/cpu_optim.c \
	lib/backend/cpu/cpu_half.c \
	lib/backend/cpu/cpu_fp8.c \
	lib/backend/cpu/cpu_batchnorm.c
# bf16 GEMMs on the CPU's matrix units (oneDNN) where configure found it
if HAVE_DNNL
libdtrain_core_la_SOURCES += lib/backend/cpu/cpu_dnnl.c
else
libdtrain_core_la_SOURCES += lib/backend/cpu/cpu_dnnl_none.c
endif
noinst_HEADERS += lib/backend/cpu/cpu_backend.h
