import { readFileSync } from "node:fs";
import { InProcessSession, type TensorMap } from "@ferry/runtime";

interface Arch {
  n_layer: number;
  n_head: number;
  head_dim: number;
  vocab_size: number;
}

/**
 * Greedy decoding of tiny-lm in this process, one sequence at a time, no padding, no
 * batching, no Ferry: the reference that Ferry's batched engine must match token for token.
 */
export async function referenceGreedy(
  prompt: string | readonly number[],
  maxTokens: number,
): Promise<string> {
  const config = JSON.parse(readFileSync("models/tiny-lm/model.json", "utf8")) as {
    architecture: Arch;
    tokenizer: { eos_token_id: number };
  };
  const arch = config.architecture;
  const session = await InProcessSession.load("models/tiny-lm/1/model.onnx", {
    executionProvider: "cpu",
    intraOpThreads: 1,
  });
  const past: TensorMap = {};
  for (let l = 0; l < arch.n_layer; l++) {
    for (const kind of ["key", "value"])
      past[`past_key_values.${l}.${kind}`] = {
        data: new Float32Array(0),
        dims: [1, arch.n_head, 0, arch.head_dim],
      };
  }
  // the byte-level tokenizer: a text's tokens are its UTF-8 bytes
  let tokens = typeof prompt === "string" ? Array.from(Buffer.from(prompt, "utf8")) : [...prompt];
  let length = 0;
  const out: number[] = [];
  for (let step = 0; step < maxTokens; step++) {
    const s = tokens.length;
    const result = await session.run({
      ...past,
      input_ids: { data: BigInt64Array.from(tokens, BigInt), dims: [1, s] },
      attention_mask: { data: new BigInt64Array(length + s).fill(1n), dims: [1, length + s] },
      position_ids: {
        data: BigInt64Array.from({ length: s }, (_, j) => BigInt(length + j)),
        dims: [1, s],
      },
    });
    length += s;
    for (let l = 0; l < arch.n_layer; l++) {
      for (const kind of ["key", "value"]) {
        const present = result[`present.${l}.${kind}`];
        if (present) past[`past_key_values.${l}.${kind}`] = present;
      }
    }
    const logits = result.logits?.data as Float32Array;
    const last = logits.subarray((s - 1) * arch.vocab_size, s * arch.vocab_size);
    let best = 0;
    for (let k = 1; k < last.length; k++) if ((last[k] ?? 0) > (last[best] ?? 0)) best = k;
    if (best === config.tokenizer.eos_token_id) break;
    out.push(best);
    tokens = [best];
  }
  await session.release();
  return new TextDecoder().decode(Uint8Array.from(out));
}
