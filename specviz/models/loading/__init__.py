"""A pair loaded once per process: device, precision and placement chosen, the models loaded (torch modules or llama.cpp GGUF files), the pair assembled."""
