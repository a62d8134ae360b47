# cuda/local.mk: the GPU backend (kernels, cuBLAS, NCCL). configure detects
# the toolkit (HAVE_CUDA, NVCC, CUDA_CFLAGS, CUDA_LIBS); the backend itself is
# the subject of a later issue and adds its sources here.
