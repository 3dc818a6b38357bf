// gpt_dump.c — runs our GPT once and writes everything PyTorch needs to check it.
//
//   gpt_dump --layers 3 --width 72 --heads 6 --seq 13 --vocab 97 --batch 3 --out x.safetensors
//   python3 tests/torch_gpt.py check x.safetensors
//
// The file holds the initial weights, a batch, our logits, loss and every
// parameter gradient, then the losses of K AdamW steps on that batch and the
// weights after them. tests/torch_gpt.py rebuilds the model in PyTorch from the
// same weights and compares each.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "flags.h"
#include "model.h"
#include "ops.h"
#include "optim.h"
#include "rng.h"
#include "safetensors.h"

int main(int argc, char **argv) {
    GPTConfig c = {2, 64, 4, 32, 256};
    int B = 2, steps = 10;
    double lr = 1e-2, wd = 0.5, clip = 1.0;
    unsigned long long seed = 7;
    const char *out = NULL, *device = "cpu";
    Flag flags[] = {
        F_INT("--layers", &c.n_layer, 1, 64, "L"),
        F_INT("--width", &c.n_embd, 1, 4096, "C"),
        F_INT("--heads", &c.n_head, 1, 256, "NH"),
        F_INT("--seq", &c.seq_len, 1, 4096, "T"),
        F_INT("--vocab", &c.vocab, 2, 1 << 20, "V"),
        F_INT("--batch", &B, 1, 1024, "B"),
        F_INT("--steps", &steps, 1, 1000, "AdamW steps to record"),
        F_DOUBLE("--lr", &lr, 0, 10, "learning rate (large, so optimizer bugs show)"),
        F_DOUBLE("--weight-decay", &wd, 0, 10, "weight decay (large, so a wrong decay mask shows)"),
        F_DOUBLE("--grad-clip", &clip, 0, 1e6, "max gradient norm"),
        F_U64("--seed", &seed, 0, 1.8e19, "seed"),
        F_CHOICE("--device", &device, "cpu|cuda", "where to compute"),
        F_STRING("--out", &out, "output .safetensors path (required)"),
    };
    flags_parse(flags, FLAG_COUNT(flags), argc, argv, "gpt_dump [flags] --out FILE",
                "Writes our GPT's weights, outputs and gradients for tests/torch_gpt.py.");
    if (!out) flags_fail("--out is required");
    char err[200];
    if (gpt_config_error(&c, err, sizeof err)) flags_fail("%s", err);
    Device dev;
    device_parse(device, &dev);
    int T = c.seq_len;
    size_t BT = (size_t)B * T;

    Ctx ctx;
    ctx_init(&ctx, dev, 1, 0);
    GPT g;
    gpt_init(&g, &ctx, &c, seed);
    gpt_alloc_grads(&g);
    gpt_alloc_acts(&g, B, T);
    size_t P = g.n_params;

    int *tokens = xmalloc(BT * sizeof(int)), *targets = xmalloc(BT * sizeof(int));
    Rng rng;
    rng_seed(&rng, seed + 1);
    for (size_t i = 0; i < BT; i++) {
        tokens[i] = (int)rng_below(&rng, (uint32_t)c.vocab);
        targets[i] = (int)rng_below(&rng, (uint32_t)c.vocab);
    }
    float *params0 = xmalloc(P * sizeof(float)), *grads = xmalloc(P * sizeof(float));
    float *final = xmalloc(P * sizeof(float)), *logits = xmalloc(BT * c.vocab * sizeof(float));
    float *losses = xmalloc(steps * sizeof(float));
    ctx.ops->to_host(&ctx, params0, g.params, P * sizeof(float));

    // Step 0's forward and backward give the logits, loss and gradients to compare.
    AdamWConfig oc = {.lr = (float)lr, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                      .weight_decay = (float)wd, .grad_clip = (float)clip};
    AdamW opt;
    adamw_init(&opt, &g, &oc, 0, P);
    float loss0 = 0;
    for (int s = 0; s < steps; s++) {
        gpt_zero_grad(&g);
        losses[s] = gpt_forward(&g, tokens, targets, B, T);
        if (s == 0) {
            loss0 = losses[0];
            ctx.ops->to_host(&ctx, logits, g.acts.logits, BT * c.vocab * sizeof(float));
        }
        gpt_backward(&g, 1.0f);
        if (s == 0) ctx.ops->to_host(&ctx, grads, g.grads, P * sizeof(float));
        adamw_step(&opt, &g, grad_global_norm(&g));
    }
    ctx.ops->to_host(&ctx, final, g.params, P * sizeof(float));

    // Tensors: 3 per parameter (initial, grad., final.) plus 5.
    int nt = 3 * g.n_slices + 5, k = 0;
    StTensor *t = xcalloc(nt, sizeof *t);
    char (*names)[96] = xcalloc(nt, 96);
#define ADD(nm, dt, data_, nb, nd, d0, d1, d2)                                             \
    do {                                                                                   \
        snprintf(t[k].name, sizeof t[k].name, "%s", nm);                                   \
        t[k].dtype = dt; t[k].data = data_; t[k].nbytes = nb; t[k].ndim = nd;              \
        t[k].shape[0] = d0; t[k].shape[1] = d1; t[k].shape[2] = d2; k++;                   \
    } while (0)
    const char *prefix[3] = {"", "grad.", "final."};
    float *bufs[3] = {params0, grads, final};
    for (int w = 0; w < 3; w++)
        for (int i = 0; i < g.n_slices; i++) {
            const ParamSlice *s = &g.slices[i];
            snprintf(names[k], 96, "%s%s", prefix[w], s->name);
            if (s->rows > 1) ADD(names[k], DT_F32, bufs[w] + s->offset, s->numel * 4, 2, s->rows, s->cols, 0);
            else ADD(names[k], DT_F32, bufs[w] + s->offset, s->numel * 4, 1, s->cols, 0, 0);
        }
    ADD("tokens", DT_I32, tokens, BT * 4, 2, B, T, 0);
    ADD("targets", DT_I32, targets, BT * 4, 2, B, T, 0);
    ADD("logits", DT_F32, logits, BT * c.vocab * 4, 3, B, T, c.vocab);
    ADD("loss", DT_F32, &loss0, 4, 1, 1, 0, 0);
    ADD("adamw_losses", DT_F32, losses, steps * 4, 1, steps, 0, 0);
#undef ADD
    char v[14][32];
    snprintf(v[0], 32, "%d", c.n_layer); snprintf(v[1], 32, "%d", c.n_embd);
    snprintf(v[2], 32, "%d", c.n_head); snprintf(v[3], 32, "%d", c.seq_len);
    snprintf(v[4], 32, "%d", c.vocab); snprintf(v[5], 32, "%d", B); snprintf(v[6], 32, "%d", T);
    snprintf(v[7], 32, "%.9g", (float)lr); snprintf(v[8], 32, "%.9g", 0.9f);
    snprintf(v[9], 32, "%.9g", 0.95f); snprintf(v[10], 32, "%.9g", 1e-8f);
    snprintf(v[11], 32, "%.9g", (float)wd); snprintf(v[12], 32, "%.9g", (float)clip);
    snprintf(v[13], 32, "%d", steps);
    StMeta meta[] = {{"n_layer", v[0]}, {"n_embd", v[1]}, {"n_head", v[2]}, {"seq_len", v[3]},
                     {"vocab", v[4]}, {"B", v[5]}, {"T", v[6]}, {"lr", v[7]}, {"beta1", v[8]},
                     {"beta2", v[9]}, {"eps", v[10]}, {"weight_decay", v[11]},
                     {"grad_clip", v[12]}, {"steps", v[13]}, {"device", device}};
    CHECK(st_save(out, t, k, meta, (int)(sizeof meta / sizeof meta[0]), err, sizeof err) == 0, "%s",
          err);
    printf("wrote %s: %d tensors, loss %.6f -> %.6f over %d AdamW steps\n", out, k, loss0,
           losses[steps - 1], steps);

    free(t); free(names); free(tokens); free(targets); free(params0); free(grads); free(final);
    free(logits); free(losses);
    adamw_free(&opt, &g);
    gpt_free(&g);
    ctx_destroy(&ctx);
    return 0;
}
