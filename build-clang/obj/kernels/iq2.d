build-clang/obj/kernels/iq2.o: kernels/iq2.c kernels/iq2_grids.h \
  kernels/quant_common.h kernels/half.h kernels/types.h

kernels/iq2_grids.h:

kernels/quant_common.h:

kernels/half.h:

kernels/types.h:
