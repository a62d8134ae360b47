/* vizbench_none.c: `dtbench viz` in a build without the SDL2 viewer (see
 * bench/vizbench.c for the real one): it says so and fails. */
#include <stdio.h>

int dt_bench_viz(int argc, char **argv);

int dt_bench_viz(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "dtbench viz: this build has no SDL2 viewer (configure found no sdl2/SDL2_ttf/SDL2_image)\n");
    return 1;
}
