"""What Ferry computes, computed by the same libraries from a build script: node runs them.

`encode` is @huggingface/tokenizers (Ferry's tokenizer), `ort_greedy` onnxruntime-node (the
session the worker runs), both from the repository's node_modules.
"""

import json
import os
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

ENCODE_JS = """
import { readFileSync } from "node:fs";
import { Tokenizer } from "@huggingface/tokenizers";
const dir = process.argv[1];
const read = (name) => JSON.parse(readFileSync(`${dir}/${name}`, "utf8"));
const tok = new Tokenizer(read("tokenizer.json"), read("tokenizer_config.json"));
const texts = JSON.parse(readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(texts.map((t) => tok.encode(t, { add_special_tokens: false }).ids)));
"""

# greedy decoding of one sequence with the KV cache, in ONNX Runtime as the worker loads it
DECODE_JS = """
import { readFileSync } from "node:fs";
import ort from "onnxruntime-node";
const [path, layers, kvHeads, headDim, eos] = process.argv.slice(1).map((a, i) => (i ? Number(a) : a));
const session = await ort.InferenceSession.create(path, { intraOpNumThreads: 1 });
const jobs = JSON.parse(readFileSync(0, "utf8"));
const results = [];
for (const { ids, max_tokens } of jobs) {
  const feeds = {};
  for (let l = 0; l < layers; l++)
    for (const t of ["key", "value"])
      feeds[`past_key_values.${l}.${t}`] = new ort.Tensor("float32", new Float32Array(0), [1, kvHeads, 0, headDim]);
  let tokens = ids;
  let length = 0;
  const out = [];
  for (let step = 0; step < max_tokens; step++) {
    const s = tokens.length;
    feeds.input_ids = new ort.Tensor("int64", BigInt64Array.from(tokens, BigInt), [1, s]);
    feeds.attention_mask = new ort.Tensor("int64", new BigInt64Array(length + s).fill(1n), [1, length + s]);
    feeds.position_ids = new ort.Tensor("int64", BigInt64Array.from({ length: s }, (_, j) => BigInt(length + j)), [1, s]);
    const res = await session.run(feeds);
    length += s;
    for (let l = 0; l < layers; l++)
      for (const t of ["key", "value"]) feeds[`past_key_values.${l}.${t}`] = res[`present.${l}.${t}`];
    const vocab = res.logits.dims[2];
    const last = res.logits.data.subarray((s - 1) * vocab, s * vocab);
    let best = 0;
    for (let k = 1; k < vocab; k++) if (last[k] > last[best]) best = k;
    if (best === eos) break;
    out.push(best);
    tokens = [best];
  }
  results.push(out);
}
process.stdout.write(JSON.stringify(results));
"""


def _node(script, args, payload):
    out = subprocess.run(
        ["node", "--input-type=module", "-e", script, *map(str, args)],
        input=json.dumps(payload).encode(),
        capture_output=True,
        cwd=ROOT,
        check=True,
    ).stdout
    return json.loads(out)



def encode(tokenizer_dir, texts):
    """Each text's ids, no special tokens added (a chat template writes its own)."""
    return _node(ENCODE_JS, [tokenizer_dir], texts)


def ort_greedy(path, layers, kv_heads, head_dim, eos, jobs):
    """Greedy ids of each job ({ids, max_tokens}), one sequence at a time."""
    return _node(DECODE_JS, [path, layers, kv_heads, head_dim, eos], jobs)
