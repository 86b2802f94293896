"""Shared helpers for the model build scripts: ONNX export and model.json writing."""

import json
import os

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

MODELS_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))

# Serving defaults for classifiers, in the shape of Triton's config.pbtxt. No queue delay (as
# Triton's default): a small MLP computes a batch in well under a millisecond, so under load
# rows gather while the instance is busy, and at light load nobody waits for company
# (`npm run bench` measured 3.5 ms vs 7 ms p50 at one client, equal throughput at 64).
CLASSIFIER_DEFAULTS = {
    "kind": "classifier",
    "platform": "onnxruntime_onnx",
    "max_batch_size": 32,
    "dynamic_batching": {"preferred_batch_sizes": [16, 32], "max_queue_delay_ms": 0},
    "instance_count": 1,
    "intra_op_threads": 1,
    "max_queue_size": 2000,
    "default_timeout_ms": 30000,
    "cache": {"enabled": True, "ttl_s": 3600, "max_entries": 100000},
}


def export_onnx(model, example, rel_path, input_name="input", output_name="logits", check_size=True):
    path = os.path.join(MODELS_DIR, rel_path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    model.eval()
    torch.onnx.export(
        model,
        example,
        path,
        input_names=[input_name],
        output_names=[output_name],
        dynamic_axes={input_name: {0: "batch"}, output_name: {0: "batch"}},
        opset_version=17,
        do_constant_folding=True,
    )
    onnx.checker.check_model(onnx.load(path))
    if check_size:
        assert_committable(path)
    return path


def assert_committable(path):
    size = os.path.getsize(path)
    assert size < 10 * 1024 * 1024, f"{path} is {size} bytes, over the 10 MB limit"


def store_weights_half(path, min_elements=65536):
    """Rewrites an exported model so that its large float32 weights are stored as float16.

    Each becomes a float16 initializer and a Cast back to float32; ONNX Runtime folds the Cast
    when it loads the model, so inference runs in float32 on the rounded weights and the file
    is half the size. The caller evaluates the model on weights already rounded to float16,
    so the accuracy it reports is the exported model's.
    """
    model = onnx.load(path)
    graph = model.graph
    casts, kept = [], []
    for init in graph.initializer:
        if init.data_type != TensorProto.FLOAT or int(np.prod(init.dims)) < min_elements:
            kept.append(init)
            continue
        half = numpy_helper.to_array(init).astype(np.float16)
        kept.append(numpy_helper.from_array(half, init.name + ".fp16"))
        casts.append(
            helper.make_node("Cast", [init.name + ".fp16"], [init.name], to=TensorProto.FLOAT)
        )
    del graph.initializer[:]
    graph.initializer.extend(kept)
    nodes = casts + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.checker.check_model(model)
    onnx.save(model, path)
    assert_committable(path)
    return path


def write_model_json(name, fields, defaults=CLASSIFIER_DEFAULTS):
    config = {"name": name, **defaults, **fields}
    path = os.path.join(MODELS_DIR, name, "model.json")
    with open(path, "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    return path
