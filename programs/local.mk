# programs/local.mk: command-line programs, built at the top of the tree.
bin_PROGRAMS += dtrain
dtrain_SOURCES = programs/dtrain.c programs/args.c programs/args.h
dtrain_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)
dtrain_LDADD = libdtrain_core.la $(OPENBLAS_LIBS) $(JANSSON_LIBS) -lm
