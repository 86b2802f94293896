"""Train and export `digits` v1 and v2 (the 28x28 classifiers, on real MNIST digits, are
build_mnist.py's and build_cnn.py's).

Data: scikit-learn's bundled 8x8 digits (Debian's python3-sklearn ships it, nothing is
downloaded). Every graph takes raw pixel values and does its own scaling, so clients never
need to know how the model was trained. Run with Debian's interpreter:

    /usr/bin/python3 models/build/build_classifiers.py
"""

import json
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from common import export_onnx, write_model_json, MODELS_DIR

torch.manual_seed(0)
np.random.seed(0)
torch.set_num_threads(int(os.environ.get("TORCH_THREADS", "2")))


class Scaled(nn.Module):
    """Divides the raw input by a constant inside the graph (digits pixels are 0..16)."""

    def __init__(self, net: nn.Module, scale: float):
        super().__init__()
        self.net = net
        self.scale = scale

    def forward(self, x):
        return self.net(x / self.scale)


def train(model, x_train, y_train, epochs, lr=1e-3, batch=64, weight_decay=1e-4):
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    n = x_train.shape[0]
    for _ in range(epochs):
        model.train()
        perm = torch.randperm(n)
        for i in range(0, n, batch):
            idx = perm[i : i + batch]
            loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    return model


def accuracy(model, x, y):
    with torch.no_grad():
        return float((model(x).argmax(dim=1) == y).float().mean())


def main():
    digits = load_digits()
    x = digits.data.astype(np.float32)
    y = digits.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.25, random_state=42, stratify=y)
    xt, yt = torch.from_numpy(x_tr), torch.from_numpy(y_tr)
    xv, yv = torch.from_numpy(x_te), torch.from_numpy(y_te)
    labels = [str(i) for i in range(10)]
    majority = int(np.bincount(y_tr).argmax())

    specs = {
        "1": nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)),
        "2": nn.Sequential(
            nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10)
        ),
    }
    versions = {}
    for version, net in specs.items():
        model = train(Scaled(net, 16.0), xt, yt, epochs=60)
        acc = accuracy(model, xv, yv)
        print(f"digits v{version}: held-out accuracy {acc:.4f}")
        if acc < 0.95:
            sys.exit(f"digits v{version} below 95% accuracy")
        export_onnx(model, torch.zeros(1, 64), f"digits/{version}/model.onnx")
        versions[version] = {"accuracy": round(acc, 4), "params": sum(p.numel() for p in net.parameters())}

    write_model_json(
        "digits",
        {
            "description": "MLP on scikit-learn's 8x8 digits; input is raw pixel values 0..16",
            "inputs": [{"name": "input", "datatype": "FP32", "dims": [64]}],
            "outputs": [{"name": "logits", "datatype": "FP32", "dims": [10]}],
            "labels": labels,
            "versions": versions,
            "stable_version": "2",
            "fallback": {"enabled": True, "default_prediction": majority},
        },
    )

    # A fixed sample of held-out inputs with their labels, for tests and benches that need
    # realistic rows without Python; the other keys are the other build scripts'.
    path = os.path.join(MODELS_DIR, "samples.json")
    with open(path) as f:
        samples = json.load(f)
    samples["digits"] = {"inputs": x_te[:64].tolist(), "labels": y_te[:64].tolist()}
    with open(path, "w") as f:
        json.dump(samples, f)


if __name__ == "__main__":
    main()
