"""Train and export `digits-cnn`: a classifier whose compute, not the serving path, dominates.

The MLPs Ferry ships cost a few microseconds a row, so on a CPU the queue hop hides whatever
batching saves. This one is a small CNN (one strided convolution) with a wide fully connected
head, 4.7M weights, on the same 28x28 input as `mnist` (scikit-learn's digits upsampled, pixels
0..1): at batch 1 its head is a matrix-vector product that streams all of its weights from
memory for one row; at batch 32 the same weights serve 32 rows, which is where dynamic batching
pays on a CPU.

The weights are stored in half precision (a Cast to float32 in front of each, which ONNX
Runtime folds when it loads the model), so the file stays under 10 MB while the weights in
memory, 19 MB of float32, do not fit the development VM's cache: with the earlier 1400-wide head
(8.8 MB, float32) batch 1 read its weights from the cache and batch 32 ran only 3.2-3.7x more
rows/s there, against 5.0-6.8x for this head in seven of eight runs (3.6x in one, when the cache
held more of it; `npm run bench -- classifier`, table (a)).
Accuracy is measured on the rounded weights, so it is the exported model's.

Run with Debian's interpreter (python3-torch, python3-onnx, python3-sklearn):

    /usr/bin/python3 models/build/build_cnn.py
"""

import os
import sys

import numpy as np
import torch
import torch.nn as nn
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from build_classifiers import accuracy, train, upsample
from common import export_onnx, store_weights_half, write_model_json

torch.manual_seed(0)
torch.set_num_threads(int(os.environ.get("TORCH_THREADS", "2")))

HEAD = 3000


class DigitsCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, stride=2, padding=1), nn.ReLU(),
        )
        self.head = nn.Sequential(nn.Linear(8 * 14 * 14, HEAD), nn.ReLU(), nn.Linear(HEAD, 10))

    def forward(self, x):
        return self.head(self.features(x.reshape(-1, 1, 28, 28)).flatten(1))


def main():
    digits = load_digits()
    x = digits.data.astype(np.float32)
    y = digits.target.astype(np.int64)
    # the same split as build_classifiers.py, so held-out accuracies compare
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.25, random_state=42, stratify=y)
    xt, xv = upsample(x_tr), upsample(x_te)
    yt, yv = torch.from_numpy(y_tr), torch.from_numpy(y_te)
    model = train(DigitsCnn(), xt, yt, epochs=int(os.environ.get("EPOCHS", "24")))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.half().float())
    acc = accuracy(model, xv, yv)
    print(f"digits-cnn v1: held-out accuracy {acc:.4f}")
    if acc < 0.95:
        sys.exit("digits-cnn below 95% accuracy")
    path = export_onnx(model, torch.zeros(1, 784), "digits-cnn/1/model.onnx", check_size=False)
    store_weights_half(path)
    params = sum(p.numel() for p in model.parameters())
    write_model_json(
        "digits-cnn",
        {
            "description": "Small CNN with a wide head (weights stored in half precision) on the digits upsampled to 28x28 (pixels 0..1, as mnist): compute-bound, so batching pays on a CPU",
            # a batch of 32 computes in ~4 ms: on the worker's event loop, not a thread (side
            # by side with a thread: the same req/s at 64 clients and in the seed's exercise)
            "inline": True,
            "inputs": [{"name": "input", "datatype": "FP32", "dims": [784]}],
            "outputs": [{"name": "logits", "datatype": "FP32", "dims": [10]}],
            "labels": [str(i) for i in range(10)],
            "versions": {"1": {"accuracy": round(acc, 4), "params": params}},
            "stable_version": "1",
            "fallback": {"enabled": True, "default_prediction": int(np.bincount(y_tr).argmax())},
        },
    )


if __name__ == "__main__":
    main()
