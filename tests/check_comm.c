/* check_comm.c: placeholder (skipped). */
#include "testutil.h"
int main(void) { return 77; }
