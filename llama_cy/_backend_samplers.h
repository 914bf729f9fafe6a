/* Backend samplers of llama_cy's own: what llama.cpp's graph sampling costs that it
 * need not.
 *
 * token_only: llama.cpp copies to the host, for each sampled row, whatever the backend
 * chain left in its data. A greedy chain leaves the whole row of logits beside the token
 * (n_vocab floats: 1 MB at Gemma's 262,144), a temp/dist chain the probabilities too.
 * Last in a chain, this sampler drops them once a token is picked, so the token alone is
 * copied. Before a pick, and on the CPU, it does nothing.
 *
 * split greedy: llama.cpp's greedy sampler, except for its graph on a device. ggml's
 * argmax gives a row one GPU block, so a 262,144-logit row is one block's serial scan
 * (tens of microseconds on an H200, a tenth of a small model's token). Split into R rows
 * of C logits, the argmax runs one block per row; each row's maximum becomes a token id
 * (row * C + column, in float32: exact below 2^24), a gather reads the maxima, and a
 * second argmax over them picks the row. Where one scan keeps the first largest logit
 * (the CPU), so does this.
 * Host buffers, small rows, rows with no divisor in range and rows that an earlier stage
 * narrowed to candidates keep llama.cpp's graph.
 */
#ifndef LLAMA_CY_BACKEND_SAMPLERS_H
#define LLAMA_CY_BACKEND_SAMPLERS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

/* ---- token_only ------------------------------------------------------------------- */

static struct llama_sampler_i llama_cy_token_only_i;

static const char *llama_cy_token_only_name(const struct llama_sampler *smpl) {
    (void) smpl;
    return "token-only";
}

static void llama_cy_token_only_apply(struct llama_sampler *smpl, llama_token_data_array *cur_p) {
    (void) smpl;
    (void) cur_p;
}

static struct llama_sampler *llama_cy_token_only_clone(const struct llama_sampler *smpl) {
    (void) smpl;
    return llama_sampler_init(&llama_cy_token_only_i, NULL);
}

static bool llama_cy_token_only_backend_init(struct llama_sampler *smpl,
                                             ggml_backend_buffer_type_t buft, uint32_t n) {
    (void) smpl;
    (void) buft;
    (void) n;
    return true; /* it adds no operation to the graph */
}

static void llama_cy_token_only_backend_apply(struct llama_sampler *smpl, struct ggml_context *ctx,
                                              struct ggml_cgraph *gf,
                                              struct llama_sampler_data *data) {
    (void) smpl;
    (void) ctx;
    (void) gf;
    if (data->sampled != NULL) {
        data->logits = NULL;
        data->probs = NULL;
        data->candidates = NULL;
    }
}

static struct llama_sampler *llama_cy_token_only_init(void) {
    struct llama_sampler_i *i = &llama_cy_token_only_i;
    if (i->apply == NULL) {
        memset(i, 0, sizeof(*i));
        i->name = llama_cy_token_only_name;
        i->apply = llama_cy_token_only_apply;
        i->clone = llama_cy_token_only_clone;
        i->backend_init = llama_cy_token_only_backend_init;
        i->backend_apply = llama_cy_token_only_backend_apply;
    }
    return llama_sampler_init(i, NULL);
}

/* ---- split greedy ----------------------------------------------------------------- */

/* Rows of at least this many logits are split (llama3's 128,256 and up). Tests lower it,
 * and let host buffers split too, to check the graph on the CPU backend. */
static int64_t llama_cy_split_greedy_min = 100000;
static bool llama_cy_split_greedy_on_host = false;
/* Split graphs built so far (a graph is built per decode unless llama.cpp reuses it):
 * how the tests know the split ran. */
static int64_t llama_cy_split_greedy_built = 0;

typedef struct {
    struct llama_sampler *inner; /* llama.cpp's greedy: the CPU pick, the unsplit graph */
    bool split;                  /* set up for a device buffer (or forced on the host) */
} llama_cy_split_greedy;

static struct llama_sampler_i llama_cy_split_greedy_i;

static struct llama_sampler *llama_cy_split_greedy_inner(const struct llama_sampler *smpl) {
    return ((const llama_cy_split_greedy *) smpl->ctx)->inner;
}

/* R: the divisor of n in [64, 1024] nearest sqrt(n), or 0 (R rows of n / R logits). */
static int64_t llama_cy_split_rows(int64_t n) {
    if (n < llama_cy_split_greedy_min || n >= (1 << 24)) {
        return 0;
    }
    const double root = sqrt((double) n);
    int64_t best = 0;
    for (int64_t r = 64; r <= 1024; ++r) {
        if (n % r == 0 && (best == 0 || fabs((double) r - root) < fabs((double) best - root))) {
            best = r;
        }
    }
    return best;
}

static const char *llama_cy_split_greedy_name(const struct llama_sampler *smpl) {
    (void) smpl;
    return "greedy";
}

static void llama_cy_split_greedy_apply(struct llama_sampler *smpl, llama_token_data_array *cur_p) {
    struct llama_sampler *inner = llama_cy_split_greedy_inner(smpl);
    inner->iface->apply(inner, cur_p);
}

static void llama_cy_split_greedy_reset(struct llama_sampler *smpl) {
    struct llama_sampler *inner = llama_cy_split_greedy_inner(smpl);
    if (inner->iface->reset) {
        inner->iface->reset(inner);
    }
}

static struct llama_sampler *llama_cy_split_greedy_wrap(struct llama_sampler *inner) {
    if (inner == NULL) {
        return NULL;
    }
    llama_cy_split_greedy *ctx = (llama_cy_split_greedy *) calloc(1, sizeof(*ctx));
    if (ctx == NULL) {
        llama_sampler_free(inner);
        return NULL;
    }
    ctx->inner = inner;
    return llama_sampler_init(&llama_cy_split_greedy_i, ctx);
}

static struct llama_sampler *llama_cy_split_greedy_clone(const struct llama_sampler *smpl) {
    return llama_cy_split_greedy_wrap(llama_sampler_clone(llama_cy_split_greedy_inner(smpl)));
}

static void llama_cy_split_greedy_free(struct llama_sampler *smpl) {
    llama_cy_split_greedy *ctx = (llama_cy_split_greedy *) smpl->ctx;
    llama_sampler_free(ctx->inner);
    free(ctx);
}

/* The token id of the first maximum of `logits` (n = rows * cols), as an I32 [1] tensor. */
static struct ggml_tensor *llama_cy_split_argmax(struct ggml_context *gctx,
                                                 struct ggml_tensor *logits, int64_t rows) {
    const int64_t n = ggml_nelements(logits);
    const int64_t cols = n / rows;
    /* x[c, r] is logit r * cols + c; col[r] the first maximum of row r */
    struct ggml_tensor *col = ggml_argmax(gctx, ggml_reshape_2d(gctx, logits, cols, rows));
    /* ids[r] = r * cols + col[r]: each row's maximum, as a token id */
    struct ggml_tensor *ids = ggml_cast(
        gctx,
        ggml_add(gctx, ggml_cast(gctx, col, GGML_TYPE_F32),
                 ggml_arange(gctx, 0.0f, (float) n, (float) cols)),
        GGML_TYPE_I32);
    struct ggml_tensor *maxima = ggml_get_rows(gctx, ggml_reshape_2d(gctx, logits, 1, n), ids);
    struct ggml_tensor *row = ggml_argmax(gctx, ggml_reshape_2d(gctx, maxima, rows, 1));
    struct ggml_tensor *token = ggml_get_rows(gctx, ggml_reshape_2d(gctx, ids, 1, rows), row);
    return ggml_reshape_1d(gctx, token, 1);
}

/* Whether `dev` runs every operation of the split graph (else the scheduler would move
 * some to the CPU, slower than one argmax): a graph on 131,072 logits, as llama.cpp
 * probes its own samplers. */
static bool llama_cy_split_supported(ggml_backend_dev_t dev) {
    struct ggml_init_params params = {
        /*.mem_size   =*/ 32 * ggml_tensor_overhead() + ggml_graph_overhead(),
        /*.mem_buffer =*/ NULL,
        /*.no_alloc   =*/ true,
    };
    struct ggml_context *gctx = ggml_init(params);
    if (gctx == NULL) {
        return false;
    }
    const int64_t n = 131072;
    struct ggml_tensor *out =
        llama_cy_split_argmax(gctx, ggml_new_tensor_1d(gctx, GGML_TYPE_F32, n), 256);
    struct ggml_cgraph *gf = ggml_new_graph(gctx);
    ggml_build_forward_expand(gf, out);
    bool ok = true;
    for (int i = 0; ok && i < ggml_graph_n_nodes(gf); ++i) {
        ok = ggml_backend_dev_supports_op(dev, ggml_graph_node(gf, i));
    }
    ggml_free(gctx);
    return ok;
}

static void llama_cy_split_greedy_backend_apply(struct llama_sampler *smpl, struct ggml_context *gctx,
                                                struct ggml_cgraph *gf,
                                                struct llama_sampler_data *data) {
    llama_cy_split_greedy *ctx = (llama_cy_split_greedy *) smpl->ctx;
    /* a row of the output, contiguous; an earlier stage's candidates keep llama.cpp's graph */
    const int64_t rows =
        ctx->split && data->candidates == NULL ? llama_cy_split_rows(ggml_nelements(data->logits)) : 0;
    if (rows == 0) {
        ctx->inner->iface->backend_apply(ctx->inner, gctx, gf, data);
        return;
    }
    ++llama_cy_split_greedy_built;
    data->sampled = llama_cy_split_argmax(gctx, data->logits, rows);
    ggml_set_name(data->sampled, "greedy_split_argmax");
}

static bool llama_cy_split_greedy_backend_init(struct llama_sampler *smpl,
                                               ggml_backend_buffer_type_t buft, uint32_t n) {
    llama_cy_split_greedy *ctx = (llama_cy_split_greedy *) smpl->ctx;
    ggml_backend_dev_t dev = ggml_backend_buft_get_device(buft);
    ctx->split = llama_cy_split_greedy_on_host ||
                 (!ggml_backend_buft_is_host(buft) && dev != NULL && llama_cy_split_supported(dev));
    return ctx->inner->iface->backend_init(ctx->inner, buft, n);
}

static void llama_cy_split_greedy_copy_state(const struct llama_sampler *src,
                                             struct llama_sampler *dst) {
    struct llama_sampler *inner = llama_cy_split_greedy_inner(dst);
    if (inner->iface->copy_state) {
        inner->iface->copy_state(llama_cy_split_greedy_inner(src), inner);
    }
}

static struct llama_sampler *llama_cy_split_greedy_init(void) {
    struct llama_sampler_i *i = &llama_cy_split_greedy_i;
    if (i->apply == NULL) {
        memset(i, 0, sizeof(*i));
        i->name = llama_cy_split_greedy_name;
        i->apply = llama_cy_split_greedy_apply;
        i->reset = llama_cy_split_greedy_reset;
        i->clone = llama_cy_split_greedy_clone;
        i->free = llama_cy_split_greedy_free;
        i->backend_init = llama_cy_split_greedy_backend_init;
        i->backend_apply = llama_cy_split_greedy_backend_apply;
        i->copy_state = llama_cy_split_greedy_copy_state;
    }
    return llama_cy_split_greedy_wrap(llama_sampler_init_greedy());
}

#endif
