/* check_data.c: placeholder while the suite is written. */
#include "testutil.h"
int main(void) { return 77; }
