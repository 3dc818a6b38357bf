// test_extensions.c — the training extensions of a build with every stage, against
// the course's catalogue (common/train_ext.c), which a program linked without a stage
// reads to name the stage that teaches a flag it does not have. Every flag and every
// recipe algorithm an extension registers must be catalogued with that extension's
// stage, and every catalogue entry must belong to an extension: a flag renamed,
// added or moved fails here, not in a learner's terminal.
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "train_ext.h"

// Does some extension register `name` as a flag or an algorithm it provides?
static const TrainExtension *owner(const TrainExtension **ext, int n, const char *name) {
    for (int i = 0; i < n; i++) {
        Flag rows[TRAIN_EXT_MAX_FLAGS];
        void *args = xcalloc(1, ext[i]->args_size ? ext[i]->args_size : 1);
        int k = ext[i]->flags ? ext[i]->flags(args, rows) : 0;
        free(args);
        for (int f = 0; f < k; f++)
            if (strcmp(rows[f].name, name) == 0) return ext[i];
        const char *p = ext[i]->provides;
        size_t len = strlen(name);
        for (; p && (p = strstr(p, name)); p += len)
            if ((p == ext[i]->provides || p[-1] == '|') && (p[len] == 0 || p[len] == '|'))
                return ext[i];
    }
    return NULL;
}

// Every flag and algorithm of extension x, catalogued with x's stage.
static int check_registered(const TrainExtension *x, char *bad, size_t n) {
    Flag rows[TRAIN_EXT_MAX_FLAGS];
    void *args = xcalloc(1, x->args_size ? x->args_size : 1);
    int k = x->flags ? x->flags(args, rows) : 0, wrong = 0;
    free(args);
    for (int f = 0; f < k; f++) {
        const char *st = train_catalogue_stage(rows[f].name);
        if (!st || strcmp(st, x->stage) != 0) {
            snprintf(bad, n, "%s's flag %s is catalogued as %s", x->name, rows[f].name,
                     st ? st : "nothing");
            wrong++;
        }
    }
    char provides[256];
    snprintf(provides, sizeof provides, "%s", x->provides ? x->provides : "");
    for (char *tok = strtok(provides, "|"); tok; tok = strtok(NULL, "|")) {
        const char *st = train_catalogue_stage(tok);
        if (!st || strcmp(st, x->stage) != 0) {
            snprintf(bad, n, "%s provides '%s', catalogued as %s", x->name, tok, st ? st : "nothing");
            wrong++;
        }
    }
    return wrong;
}

int main(void) {
    TestState ts = {0};
    const TrainExtension *ext[TRAIN_MAX_EXTENSIONS];
    int n = train_extensions(ext);
    int ordered = n == 2 && strcmp(ext[0]->stage, "06_mixed_precision") == 0 &&
                  strcmp(ext[1]->stage, "07_fault_tolerance") == 0;
    test_report(&ts, ordered, "ext.registered", "%d extension%s linked: %s%s%s (want stage 06's, "
                "then stage 07's)", n, n == 1 ? "" : "s", n > 0 ? ext[0]->stage : "",
                n > 1 ? ", " : "", n > 1 ? ext[1]->stage : "");
    char bad[256] = "";
    int wrong = 0;
    for (int i = 0; i < n; i++) wrong += check_registered(ext[i], bad, sizeof bad);
    test_report(&ts, wrong == 0, "ext.catalogue.covers_extensions", "%s",
                wrong ? bad : "every flag and algorithm of every extension, with its stage");
    const char *name, *stage;
    int stale = 0;
    for (int i = 0; train_catalogue_entry(i, &name, &stage); i++) {
        const TrainExtension *x = owner(ext, n, name);
        if (!x || strcmp(x->stage, stage) != 0) {
            snprintf(bad, sizeof bad, "the catalogue's %s (%s) is %s", name, stage,
                     x ? x->stage : "no extension's");
            stale++;
        }
    }
    test_report(&ts, stale == 0, "ext.catalogue.no_stale_entries", "%s",
                stale ? bad : "every entry is some extension's, of the stage it names");
    return ts.failed > 0;
}
