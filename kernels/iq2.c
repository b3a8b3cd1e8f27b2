/* iq2.c - kernel family (see types.h).  Rows are added as kernels land. */
#include "types.h"

const qk_kernel_ops qk_ops_iq2[] = {
    {.id = -1},
};
