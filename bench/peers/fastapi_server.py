"""The seed's FastAPI + PyTorch /predict server, rebuilt from the seed text for comparison.

Same network (784-256-10), same request and response shapes. The weights are read from
Ferry's mnist ONNX file so that both servers compute the same function. Run with Debian's
python3-fastapi and python3-uvicorn:

    /usr/bin/python3 bench/peers/fastapi_server.py --port 8100
"""

import argparse
import time

import onnx
import torch
import torch.nn as nn
from fastapi import FastAPI, HTTPException
from onnx import numpy_helper
from pydantic import BaseModel

torch.set_num_threads(1)
model = None


def load_model(path):
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    graph = onnx.load(path).graph
    weights = [torch.from_numpy(numpy_helper.to_array(t).copy()) for t in graph.initializer]
    # the export keeps Linear weights transposed for MatMul, or as Gemm's [out, in]
    mats = sorted((w for w in weights if w.dim() == 2), key=lambda w: -w.numel())
    biases = sorted((w for w in weights if w.dim() == 1), key=lambda w: -w.numel())
    for layer, w, b in zip([model[0], model[2]], mats, biases):
        layer.weight.data = w if w.shape == layer.weight.shape else w.T.contiguous()
        layer.bias.data = b
    return model


app = FastAPI()


# The seed loads the model in a lifespan handler; Debian's FastAPI (0.92) predates the
# lifespan argument, so the same load runs as a startup hook.
@app.on_event("startup")
async def load():
    global model
    model = load_model(app.state.model_path)
    model.eval()


class PredictionRequest(BaseModel):
    features: list[float]


class PredictionResponse(BaseModel):
    prediction: int
    confidence: float
    latency_ms: float
    model_version: str


@app.post("/predict", response_model=PredictionResponse)
async def predict(request: PredictionRequest):
    start = time.perf_counter()
    if len(request.features) != 784:
        raise HTTPException(400, "Expected 784 features")
    tensor = torch.FloatTensor(request.features).unsqueeze(0)
    with torch.no_grad():
        logits = model(tensor)
    probs = torch.softmax(logits, dim=1)
    pred = probs.argmax(dim=1).item()
    conf = probs.max().item()
    latency = (time.perf_counter() - start) * 1000
    return PredictionResponse(prediction=pred, confidence=conf, latency_ms=round(latency, 2), model_version="v1.0.0")


@app.get("/health")
async def health():
    return {"status": "healthy", "model_loaded": model is not None}


if __name__ == "__main__":
    import uvicorn

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8100)
    parser.add_argument("--model", default="models/mnist/1/model.onnx")
    args = parser.parse_args()
    app.state.model_path = args.model
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
