# docs/figures.mk: `make figures` regenerates every picture of the docs into
# $(top_srcdir)/docs/figures/ from real commands run in the build tree
# (docs/figures.sh: real runs of dtrain, their simulations by dtsim, drawn
# headless by dtviz; no display needed). Not part of `make` or `make check`:
# it trains small models and takes a few minutes.
.PHONY: figures
if HAVE_SDL
figures: dtrain$(EXEEXT) dtsim$(EXEEXT) dtviz$(EXEEXT)
	$(SHELL) $(top_srcdir)/docs/figures.sh '$(abs_top_builddir)' '$(abs_top_srcdir)'
else
figures:
	@echo "make figures: needs the SDL2 viewer dtviz (configure found no sdl2/SDL2_ttf/SDL2_image)" >&2; exit 1
endif
