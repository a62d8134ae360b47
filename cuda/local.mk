# cuda/local.mk: the GPU backend (kernels, cuBLAS). configure detects the
# toolkit (HAVE_CUDA, NVCC, NVCC_ARCH_FLAGS, NVCCFLAGS, CUDA_CFLAGS,
# CUDA_LIBS); docs/cuda.md describes the backend.
#
# With CUDA, the .cu files below go into libdtrain_core.la (and through it
# the shared libdtrain.la) as libtool objects: the suffix rule `.cu.lo`
# runs nvcc under `libtool --mode=compile`, through cuda/nvcc-libtool.sh,
# which hands libtool's -fPIC to nvcc as `-Xcompiler -fPIC`. Without CUDA,
# cuda/cuda_none.c stands in: dt_backend_cuda_create says the build has no
# CUDA. Core code never tests for CUDA.
DT_CUDA_SRCS = \
	cuda/backend.cu \
	cuda/gemm.cu \
	cuda/encoder.cu \
	cuda/layernorm.cu \
	cuda/attention.cu \
	cuda/elementwise.cu \
	cuda/crossentropy.cu \
	cuda/optim.cu \
	cuda/half.cu \
	cuda/stats.cu \
	cuda/batchnorm.cu \
	cuda/fp8.cu
DT_CUDA_HDRS = cuda/cuda_internal.h cuda/cuda_plan.h cuda/dt_cuda.h cuda/cuda_fp8.h

if HAVE_CUDA
# the NCCL communicator is plain C on the CUDA/NCCL headers
libdtrain_core_la_SOURCES += $(DT_CUDA_SRCS) cuda/comm_nccl.c cuda/cublas_dl.c
libdtrain_core_la_CFLAGS += $(CUDA_CFLAGS)
libdtrain_core_la_LIBADD += $(CUDA_LIBS)
libdtrain_la_LIBADD += $(CUDA_LIBS)
else
libdtrain_core_la_SOURCES += cuda/cuda_none.c
EXTRA_DIST += cuda/comm_nccl.c cuda/cublas_dl.c
endif
noinst_HEADERS += $(DT_CUDA_HDRS) cuda/cublas_dl.h
EXTRA_DIST += cuda/nvcc-libtool.sh

# nvcc sees the library's include paths and its visibility rule (only DT_API
# symbols leave libdtrain.so); the host side is compiled as C++17 by nvcc's
# host compiler. No --use_fast_math: divisions and square roots stay IEEE,
# so the kernels match the CPU backend within the tolerances of
# tests/check_cuda.c.
DT_NVCC_FLAGS = $(NVCC_ARCH_FLAGS) -std=c++17 -DDT_BUILDING_LIBRARY -DHAVE_CONFIG_H \
	-I$(top_builddir) -I$(top_srcdir)/include $(DT_LIB_CPPFLAGS) -I$(top_srcdir)/cuda $(CUDA_CFLAGS) \
	--compiler-options=-fvisibility=hidden,-Wall $(NVCCFLAGS)

SUFFIXES = .cu
DT_V_NVCC = $(dt__v_NVCC_@AM_V@)
dt__v_NVCC_ = $(dt__v_NVCC_@AM_DEFAULT_V@)
dt__v_NVCC_0 = @echo "  NVCC     $@";
dt__v_NVCC_1 =
# Each object depends on every CUDA and library header (nvcc's own
# dependency output is not wired into Automake's depcomp).
.cu.lo:
	$(DT_V_NVCC)$(MKDIR_P) $(@D) && \
	$(LIBTOOL) $(AM_V_lt) --tag=CC $(AM_LIBTOOLFLAGS) $(LIBTOOLFLAGS) --mode=compile \
	$(SHELL) $(top_srcdir)/cuda/nvcc-libtool.sh $(NVCC) $(DT_NVCC_FLAGS) -c -o $@ $<
$(DT_CUDA_SRCS:.cu=.lo): $(DT_CUDA_HDRS) $(top_srcdir)/include/dt_backend.h $(top_srcdir)/include/dt_status.h \
	$(top_srcdir)/include/dt_tensor.h $(top_srcdir)/include/dt_half.h $(top_srcdir)/include/dt_fp8.h \
	$(top_srcdir)/lib/core/dt_math_hd.h $(top_srcdir)/cuda/cublas_dl.h
