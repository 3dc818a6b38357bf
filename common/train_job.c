// train_job.c — the start every driver shares (trainer.h): the command line, the
// ranks, the check that every rank was started alike, the context.
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "comm_cuda.h"
#include "train_ext.h"

// A flag this table does not have but a later stage adds (the course's catalogue):
// named with its stage, before flags_parse would call it unknown.
static void refuse_absent_stages(const Flag *table, int n, int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--", 2) != 0) continue;
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(argv[i], "="), argv[i]);
        int known = 0;
        for (int k = 0; k < n && !known; k++) known = strcmp(table[k].name, name) == 0;
        const char *stage = known ? NULL : train_catalogue_stage(name);
        if (stage)
            flags_fail("%s is taught in %s, and this program was linked without that stage "
                       "(make stage-N links the stages up to N; make links them all)", name, stage);
    }
}

void train_job_parse(TrainJob *j, int argc, char **argv, const Flag *extra, int n,
                     const char *usage, const char *about) {
    memset(j, 0, sizeof *j);
    train_args_default(&j->a);
    j->nf = train_flags(&j->a, j->flags);
    if (n > 0) j->nf = flags_append(j->flags, j->nf, FLAG_COUNT(j->flags), extra, n);
    refuse_absent_stages(j->flags, j->nf, argc, argv);
    flags_parse(j->flags, j->nf, argc, argv, usage, about);
    train_resolve(&j->a, &j->cfg);  // every flag checked before anything is allocated
    device_parse(j->a.device, &j->dev);
}

void train_job_launch(TrainJob *j, CommConfig *cc, const char *words) {
    const TrainArgs *a = &j->a;
    CommConfig alone = {.np = 1, .timeout_s = 60};
    int single = cc == NULL;
    if (single) cc = &alone;
    train_validate_extensions(a, &j->cfg);
    for (int i = 0; i < a->n_ext; i++)  // a supervisor's restarts (stage 07)
        if (a->ext[i]->launch) a->ext[i]->launch(a->ext_args[i], cc);
    if (single && cc->elastic) flags_fail("--elastic: one process has no rank to give up");
    if (!single && j->dev == DEV_CUDA) gpu_check_launch(cc->np);  // once, before the fork
    // One process runs alone unless a supervisor is to start it again when it dies.
    j->comm = single && !cc->max_restarts ? NULL : comm_launch(cc);
    if (!j->comm) log_report_crashes();  // nobody supervises this process
    if (!single) {  // from here on, one rank of many
        char conf[COMM_CONFIG_BYTES];
        train_config_words(a, &j->cfg, conf, sizeof conf);
        size_t len = strlen(conf);
        snprintf(conf + len, sizeof conf - len, " --np=%d %s", comm_size(j->comm),
                 words ? words : "");
        comm_check_same_config(j->comm, conf);
    }
    // CUDA is touched only now, in each rank: it does not survive the launcher's fork.
    if (!single && j->dev == DEV_CUDA)
        ctx_init_device(&j->ctx, DEV_CUDA, gpu_pick_device(j->comm), a->threads, a->device_mem);
    else
        ctx_init(&j->ctx, j->dev, a->threads, a->device_mem);
    j->ctx.rank = train_job_rank(j);
    j->ctx.world = train_job_world(j);
}

int train_job_rank(const TrainJob *j) { return j->comm ? comm_rank(j->comm) : 0; }
int train_job_world(const TrainJob *j) { return j->comm ? comm_size(j->comm) : 1; }

void train_job_end(TrainJob *j) {
    ctx_destroy(&j->ctx);
    comm_finalize(j->comm);
    train_args_free(&j->a);
}
