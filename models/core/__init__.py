"""The model core, which names no task, target, family or column: the Task and its actions, targets and
their scales, the Predictor with its calibration, envelope and adaptation, training, evaluation and
inference."""
