# lib/optim/local.mk: optimizers, the LR schedule, the loss scaler and the
# one update (unscale, norm, clip, step) every strategy applies.
libdtrain_core_la_SOURCES += \
	lib/optim/optim.c \
	lib/optim/lr.c \
	lib/optim/loss_scaler.c \
	lib/optim/update.c
noinst_HEADERS += lib/optim/update.h
