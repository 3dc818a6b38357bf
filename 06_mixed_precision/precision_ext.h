// precision_ext.h — stage 06 in the training loop (precision_ext.c): what a later
// stage reads of it.
#pragma once
#include "precision.h"
#include "train_ext.h"

extern const TrainExtension precision_extension;
// The run's dynamic loss scaler (mixed-fp16's; the default one otherwise): a
// checkpoint saves it and a resume puts it back (stage 07). NULL in a run without
// this extension.
LossScaler *precision_loss_scaler(TrainLoop *L);
