"""What the torch runtime does to model objects to run fast on a CPU: oneDNN-packed linear weights, few-row products, logits rows with their own storage, the draft in int8."""
