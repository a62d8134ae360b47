# lib/comm/local.mk: communicators and the collectives written on them.
libdtrain_core_la_SOURCES += \
	lib/comm/comm.c \
	lib/comm/collectives.c \
	lib/comm/clock.c
noinst_HEADERS += lib/comm/comm_internal.h

# The MPI communicator when configure found MPI; otherwise a stand-in whose
# dt_comm_mpi_world says clearly that this build has no MPI.
if HAVE_MPI
libdtrain_core_la_SOURCES += lib/comm/comm_mpi.c
libdtrain_core_la_CFLAGS += $(MPI_CFLAGS)
libdtrain_core_la_LIBADD += $(MPI_LIBS)
else
libdtrain_core_la_SOURCES += lib/comm/comm_mpi_none.c
endif
