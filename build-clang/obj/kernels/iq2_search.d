build-clang/obj/kernels/iq2_search.o: kernels/iq2_search.c \
  kernels/iq2_grids.h kernels/types.h

kernels/iq2_grids.h:

kernels/types.h:
