"""Fine-tuning on the user's own bars (``marketcast finetune``): per-model objectives, one training loop with
resumable checkpoints, and the ``tuning.json`` that keeps tuned weights from being scored on their training bars
(:mod:`marketcast.forecast.tuning`)."""
