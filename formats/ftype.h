/* ftype.h - llama.cpp's file types (general.file_type, LLAMA_FTYPE_*). */
#ifndef QK_FTYPE_H
#define QK_FTYPE_H

/* "MOSTLY_Q4_K_M" etc., or NULL for an unknown value. */
const char *qk_ftype_name(long ftype);

#endif
