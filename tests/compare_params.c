// compare_params.c — two weight dumps (--save-params) against each other.
//
//   compare_params A.safetensors B.safetensors TOL NAME
//
// Prints one line, "PASS NAME ..." or "FAIL NAME ...", with ||a - b|| / ||b|| over
// the "params" tensors (computed in double) against TOL, and the element that
// differs most (index, the layer it belongs to is in the model's slice table).
// TOL 0 asks for bit-for-bit equality. Exit status 0 when they compare (the line is
// the verdict); 2 if a file cannot be read, after a FAIL line that says why (a run
// that crashed before saving fails its check, whatever the caller does with the
// status).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"

static const StTensor *params(const char *path, StFile *f, const char *name) {
    char err[512];
    if (st_load(path, f, err, sizeof err) != 0) {
        printf("FAIL %s  cannot compare: %s\n", name, err);
        exit(2);
    }
    const StTensor *t = st_find(f, "params");
    if (!t || t->dtype != DT_F32) {
        printf("FAIL %s  cannot compare: %s has no fp32 tensor named \"params\"\n", name, path);
        exit(2);
    }
    return t;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: compare_params A.safetensors B.safetensors TOL NAME\n");
        return 2;
    }
    double tol = atof(argv[3]);
    const char *name = argv[4];
    StFile fa, fb;
    const StTensor *ta = params(argv[1], &fa, name), *tb = params(argv[2], &fb, name);
    size_t n = ta->nbytes / sizeof(float), nb = tb->nbytes / sizeof(float);
    if (n != nb) {
        printf("FAIL %s  %zu params against %zu\n", name, n, nb);
        return 0;
    }
    const float *a = ta->data, *b = tb->data;
    double num = 0, den = 0, worst = -1;
    size_t at = 0, differ = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
        differ += memcmp(&a[i], &b[i], sizeof(float)) != 0;
        if (!isnan(worst) && !(fabs(d) <= worst)) { worst = fabs(d); at = i; }  // NaN stays worst
    }
    double err = den > 0 ? sqrt(num / den) : (num > 0 ? INFINITY : 0);
    if (!isfinite(num)) err = INFINITY;
    int ok = tol == 0 ? differ == 0 : err <= tol;
    printf("%s %s  rel_err %.3e (tol %s, %zu params)", ok ? "PASS" : "FAIL", name, err,
           tol == 0 ? "0: bit for bit" : argv[3], n);
    if (differ) printf("; %zu elements differ, most at %zu: %.9g against %.9g", differ, at,
                       (double)a[at], (double)b[at]);
    // Equal to rounding, not to the bit: the code computes the same thing in another
    // order (fp32 addition is not associative), which a bit-for-bit check refuses.
    if (!ok && tol == 0 && err < 1e-5)
        printf("; equal to rounding but not bit for bit: this check wants the reference's "
               "order of operations exactly (the starter and the lesson say which)");
    printf("\n");
    st_close(&fa);
    st_close(&fb);
    return 0;
}
