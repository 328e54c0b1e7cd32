"""The llama.cpp runtime: the GGUF files as llama.cpp runs them, through llama-cpp-python's batch API."""
