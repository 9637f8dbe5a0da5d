"""The embedding model, loaded the same way by embedding (passages) and inference (queries):
the model id and its files (`model`), the runtime choice torch/ONNX/CUDA (`runtime`, `onnx`),
the tokenizer, the passage text a chunk is embedded as (`passage`) and the `embedder`."""
