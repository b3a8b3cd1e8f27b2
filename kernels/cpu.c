/* cpu.c - CPU feature detection and the per-level kernel sets (see cpu.h). */
#include "kernels/cpu.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/f32act.h"
#include "kernels/x86/x86.h"

#ifdef QK_X86
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

static const char *const level_names[QK_CPU_LEVELS] = {"scalar", "avx2", "avx512"};

const char *qk_cpu_level_name(int level)
{
    return level >= 0 && level < QK_CPU_LEVELS ? level_names[level] : NULL;
}

/* ---- detection ----------------------------------------------------------- */

static qk_cpu_level supported = QK_CPU_SCALAR, active = QK_CPU_SCALAR;
static int has_vnni, has_bf16_vbmi, has_amx, use_amx;
static qk_kernels kern[QK_CPU_LEVELS][QK_TYPE_MAX];
static pthread_once_t once = PTHREAD_ONCE_INIT;

#ifdef QK_X86
/* XCR0: which register states the OS saves (XGETBV, needs OSXSAVE). */
static uint64_t xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}

static void detect(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return;
    const int fma = c >> 12 & 1, osxsave = c >> 27 & 1, avx = c >> 28 & 1, f16c = c >> 29 & 1;
    if (!(osxsave && avx && fma && f16c))
        return;
    const uint64_t x = xcr0();
    if ((x & 6) != 6) /* SSE and AVX state */
        return;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return;
    const int avx2 = b >> 5 & 1;
    if (!avx2)
        return;
    supported = QK_CPU_AVX2;
    const int f = b >> 16 & 1, dq = b >> 17 & 1, bw = b >> 30 & 1, vl = b >> 31 & 1;
    if (f && dq && bw && vl && (x & 0xe6) == 0xe6) { /* opmask, ZMM_Hi256, Hi16_ZMM */
        supported = QK_CPU_AVX512;
        has_vnni = c >> 11 & 1;
        const int vbmi = c >> 1 & 1;
        unsigned a1, b1, c1, d1;
        if (vbmi && __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1))
            has_bf16_vbmi = a1 >> 5 & 1; /* AVX512_BF16 */
        /* AMX-TILE and AMX-INT8, XTILECFG and XTILEDATA in XCR0, then
         * Linux's per-process permission for the tile data (arch_prctl
         * ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) */
        if (has_vnni && (d >> 24 & 1) && (d >> 25 & 1) && (x >> 17 & 3) == 3)
            has_amx = syscall(SYS_arch_prctl, 0x1023, 18) == 0;
    }
}
#else
static void detect(void) {}
#endif

/* ---- kernel sets ------------------------------------------------------------- */

static void merge(int level, const qk_simd_ops *ops)
{
    for (; ops->id >= 0; ops++) {
        if (ops->id >= QK_TYPE_MAX)
            continue;
        qk_kernels *k = &kern[level][ops->id];
        if (ops->dot_tile) {
            k->dot_tile = ops->dot_tile;
            k->vec_dot = ops->vec_dot;
            k->level_dot = (signed char)level;
        }
        if (ops->from_float) {
            k->from_float = ops->from_float;
            k->level_from = (signed char)level;
        }
        if (ops->to_float) {
            k->to_float = ops->to_float;
            k->level_to = (signed char)level;
        }
        if (ops->quantize) {
            k->quantize = ops->quantize;
            k->level_quantize = (signed char)level;
        }
    }
}

static void merge_wq(int level, const qk_wq_ops *ops)
{
    for (; ops->id >= 0; ops++) {
        qk_kernels *k = &kern[level][ops->id];
        if (ops->wq_tile)
            k->wq_tile = ops->wq_tile;
        if (ops->wq_act)
            k->wq_act = ops->wq_act;
        if (ops->wq_pack)
            k->wq_pack = ops->wq_pack;
        k->level_wq = (signed char)level;
    }
}

static void merge_pack(int level, const qk_pack_ops *ops)
{
    for (; ops->id >= 0; ops++)
        if (ops->id < QK_TYPE_MAX) {
            if (ops->pack) { /* else the level below's packing */
                kern[level][ops->id].pack_size = ops->pack_size;
                kern[level][ops->id].pack = ops->pack;
            }
            kern[level][ops->id].packed_tile = ops->packed_tile;
            kern[level][ops->id].level_pack = (signed char)level;
            kern[level][ops->id].pack_decode = ops->decode;
            kern[level][ops->id].pack_tile_rows = ops->tile_rows;
            kern[level][ops->id].pack_act_size = ops->pack_act_size;
            kern[level][ops->id].pack_act = ops->pack_act;
            kern[level][ops->id].packed_tile_act = ops->packed_tile_act;
            kern[level][ops->id].pack_act_tokens = ops->act_tokens;
        }
}

static void init(void)
{
    detect();
    active = supported;
    const char *amx = getenv("QK_AMX");
    use_amx = has_amx && !(amx && strcmp(amx, "0") == 0);
    const char *env = getenv("QK_CPU");
    for (int l = 0; env && l < QK_CPU_LEVELS; l++)
        if (strcmp(env, level_names[l]) == 0 && l < (int)supported)
            active = (qk_cpu_level)l;

    for (int id = 0; id < QK_TYPE_MAX; id++) {
        const qk_type_traits *t = qk_type_get(id);
        qk_kernels *k = &kern[QK_CPU_SCALAR][id];
        k->id = id;
        k->level_pack = -1;
        if (t) {
            k->vec_dot = t->vec_dot;
            k->from_float = t->from_float;
            k->to_float = t->to_float;
            k->quantize = t->quantize;
            k->wq_rows = t->wq_rows;
            k->wq_tile = t->wq_tile;
            k->wq_act = t->wq_act;
            if (t->to_float && qk_fdot_chunk(t->blck))
                k->fdot_tile = qk_fdot_tile_ref;
        }
    }
    for (int l = 1; l < QK_CPU_LEVELS; l++) {
        memcpy(kern[l], kern[l - 1], sizeof kern[l]);
#ifdef QK_X86
        if (l == QK_CPU_AVX2) {
            merge(l, qk_x86_avx2_float);
            merge(l, qk_x86_avx2_legacy);
            merge(l, qk_x86_avx2_kquants);
            merge_pack(l, qk_x86_avx2_packed);
            merge_pack(l, qk_x86_avx2_packed_k4);
            merge_pack(l, qk_x86_avx2_packed_k6);
            merge_pack(l, qk_x86_avx2_packed_sum);
            merge_pack(l, qk_x86_avx2_packed_f);
            merge_wq(l, qk_x86_avx2_wq);
            merge(l, qk_x86_avx2_f32act);
            for (int id = 0; id < QK_TYPE_MAX; id++)
                if (kern[l][id].fdot_tile) {
                    kern[l][id].fdot_tile = qk_x86_avx2_fdot_tile;
                    kern[l][id].level_fdot = (signed char)l;
                }
        } else if (l == QK_CPU_AVX512) {
            merge(l, qk_x86_avx512);
            merge(l, qk_x86_avx512_f32act);
            merge_wq(l, qk_x86_avx512_wq);
            for (int id = 0; id < QK_TYPE_MAX; id++)
                if (kern[l][id].fdot_tile == qk_x86_avx2_fdot_tile) {
                    kern[l][id].fdot_tile = qk_x86_avx512_fdot_tile;
                    kern[l][id].level_fdot = (signed char)l;
                }
            merge_pack(l, qk_x86_avx512_packed_f);
            if (has_vnni) {
                merge_pack(l, qk_x86_avx512_packed);
                merge_pack(l, qk_x86_avx512_packed_k);
            }
        }
#endif
    }
}

static int level_ok(int level) { return level >= 0 && level <= (int)supported; }

const qk_kernels *qk_kernels_at(int id, int level)
{
    pthread_once(&once, init);
    if (id < 0 || id >= QK_TYPE_MAX || !qk_type_get(id) || !level_ok(level))
        return NULL;
    return &kern[level][id];
}

const qk_kernels *qk_kernels_for(int id)
{
    pthread_once(&once, init);
    return qk_kernels_at(id, active);
}

qk_cpu_level qk_cpu_supported(void)
{
    pthread_once(&once, init);
    return supported;
}

qk_cpu_level qk_cpu_level_active(void)
{
    pthread_once(&once, init);
    return active;
}

int qk_cpu_has_vnni(void)
{
    pthread_once(&once, init);
    return has_vnni;
}

int qk_cpu_has_bf16_vbmi(void)
{
    pthread_once(&once, init);
    return has_bf16_vbmi;
}

int qk_cpu_has_amx(void)
{
    pthread_once(&once, init);
    return use_amx;
}

void qk_cpu_set_amx(int on)
{
    pthread_once(&once, init);
    use_amx = on && has_amx;
}

void qk_dot_tile(const qk_kernels *k, int64_t n, const void *x, size_t xs, int nr, const void *y,
                 size_t ys, int nt, float *out, size_t ldo)
{
    if (k->dot_tile) {
        k->dot_tile(n, x, xs, nr, y, ys, nt, out, ldo);
        return;
    }
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < nr; r++)
            out[(size_t)t * ldo + (size_t)r] =
                k->vec_dot(n, (const uint8_t *)x + (size_t)r * xs, (const uint8_t *)y + (size_t)t * ys);
}
