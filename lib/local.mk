# lib/local.mk: the core library and its CPU backend, one fragment per
# folder (lib/<folder>/local.mk), in dependency order.
# libdtrain_core.la is a convenience library holding every object (tests link
# it to reach internal dt__ symbols); libdtrain.la is the installed shared
# library built from it, exporting only DT_API symbols (-fvisibility=hidden).
#
# Include paths (docs/architecture.md): everything is compiled with
# -I include (the public headers, AM_CPPFLAGS); library objects, tests and
# the CUDA backend also see every lib/ folder (DT_LIB_CPPFLAGS); the
# simulator sees only lib/shared (DT_SHARED_CPPFLAGS) besides include/.
DT_LIB_CPPFLAGS = -I$(top_srcdir)/lib/core -I$(top_srcdir)/lib/backend -I$(top_srcdir)/lib/backend/cpu \
	-I$(top_srcdir)/lib/model -I$(top_srcdir)/lib/optim -I$(top_srcdir)/lib/data -I$(top_srcdir)/lib/comm \
	-I$(top_srcdir)/lib/parallel -I$(top_srcdir)/lib/trace -I$(top_srcdir)/lib/train -I$(top_srcdir)/lib/shared
DT_SHARED_CPPFLAGS = -I$(top_srcdir)/lib/shared

noinst_LTLIBRARIES += libdtrain_core.la
libdtrain_core_la_SOURCES =
libdtrain_core_la_CPPFLAGS = $(AM_CPPFLAGS) $(DT_LIB_CPPFLAGS) -DDT_BUILDING_LIBRARY
libdtrain_core_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden $(OPENBLAS_CFLAGS) $(DNNL_CFLAGS) $(JANSSON_CFLAGS)
libdtrain_core_la_LIBADD = $(OPENBLAS_LIBS) $(DNNL_LIBS) $(JANSSON_LIBS) -lm

include include/local.mk
include lib/core/local.mk
include lib/backend/local.mk
include lib/model/local.mk
include lib/data/local.mk
include lib/optim/local.mk
include lib/comm/local.mk
include lib/trace/local.mk
include lib/parallel/local.mk
include lib/train/local.mk

# the one internal header the simulator may include
noinst_HEADERS += lib/shared/dt_rules.h

lib_LTLIBRARIES += libdtrain.la
libdtrain_la_SOURCES =
libdtrain_la_LIBADD = libdtrain_core.la $(OPENBLAS_LIBS) $(DNNL_LIBS) $(JANSSON_LIBS) $(MPI_LIBS) -lm
libdtrain_la_LDFLAGS = -version-info 0:0:0 $(OPENMP_CFLAGS)
