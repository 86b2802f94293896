import { readFileSync } from "node:fs";
import { InProcessSession, type TensorMap } from "@ferry/runtime";
import { byteAlphabet } from "./byte-level-tokenizer.js";

/** models/build/build_qwen_tiny.py's model, in a repository of its own. */
export const QWEN_TINY = "models/examples/qwen-tiny";

/** One prompt of the fixture and PyTorch's greedy continuation of it. */
export interface GreedyCase {
  name: string;
  kind: "text" | "chat";
  text?: string;
  messages?: Array<{ role: "system" | "user" | "assistant"; content: string }>;
  /** The chat as Hugging Face documents Qwen3's template: what the worker must be given. */
  rendered?: string;
  max_tokens: number;
  prompt_ids: number[];
  ids: number[];
  finish_reason: "length" | "stop";
}

export const fixture = JSON.parse(readFileSync("test/fixtures/qwen-tiny-greedy.json", "utf8")) as {
  eos_token_id: number;
  prompts: GreedyCase[];
};

export const greedyCase = (name: string): GreedyCase => {
  const found = fixture.prompts.find((p) => p.name === name);
  if (!found) throw new Error(`no prompt '${name}' in the fixture`);
  return found;
};

/**
 * Token ids from the bytes each answer token spells, as logprobs report them: Qwen3's vocabulary
 * is byte-level BPE, so each of its tokens spells bytes no other one does (checked here), and
 * the bytes name the id. Special tokens spell their text.
 */
export class IdsByBytes {
  private readonly ids = new Map<string, number>();

  constructor(tokenizerJson = `${QWEN_TINY}/tokenizer.json`) {
    const json = JSON.parse(readFileSync(tokenizerJson, "utf8")) as {
      model: { vocab: Record<string, number> };
      added_tokens: Array<{ id: number; content: string }>;
    };
    const byteOf = new Map(byteAlphabet().map((c, b) => [c, b]));
    for (const [piece, id] of Object.entries(json.model.vocab))
      this.add(
        [...piece].map((c) => byteOf.get(c) ?? -1),
        id,
      );
    for (const { id, content } of json.added_tokens) this.add([...Buffer.from(content)], id);
  }

  id(bytes: readonly number[]): number {
    return this.ids.get(Buffer.from(bytes).toString("hex")) ?? -1;
  }

  /** A completions logprobs token: its text, or `bytes:\xNN...` for part of a character. */
  idOfText(token: string): number {
    const bytes = token.startsWith("bytes:")
      ? token
          .slice(6)
          .split("\\x")
          .slice(1)
          .map((hex) => Number.parseInt(hex, 16))
      : [...Buffer.from(token, "utf8")];
    return this.id(bytes);
  }

  private add(bytes: number[], id: number): void {
    const key = Buffer.from(bytes).toString("hex");
    if (bytes.includes(-1) || this.ids.has(key))
      throw new Error(`token ${id} does not spell bytes of its own`);
    this.ids.set(key, id);
  }
}

/** How a cache can be fed wrong: decode positions one past the truth, or its KV heads swapped. */
export type Fault = "none" | "positions" | "heads";

/**
 * Greedy decoding of qwen-tiny's graph, one sequence, fed as Optimum's layout wants, or with
 * a fault: what a runtime that got positions or grouped-query heads wrong would answer.
 */
export async function onnxGreedy(ids: number[], maxTokens: number, fault: Fault = "none") {
  const config = JSON.parse(readFileSync(`${QWEN_TINY}/model.json`, "utf8")) as {
    architecture: { n_layer: number; n_kv_head: number; head_dim: number; vocab_size: number };
  };
  const { n_layer: layers, n_kv_head: heads, head_dim: d, vocab_size: vocab } = config.architecture;
  const session = await InProcessSession.load(`${QWEN_TINY}/1/model.onnx`, {
    executionProvider: "cpu",
    intraOpThreads: 1,
  });
  const past: TensorMap = {};
  for (let l = 0; l < layers; l++)
    for (const kind of ["key", "value"])
      past[`past_key_values.${l}.${kind}`] = { data: new Float32Array(0), dims: [1, heads, 0, d] };
  const out: number[] = [];
  let tokens = ids;
  let length = 0;
  try {
    while (out.length < maxTokens) {
      const s = tokens.length;
      const shift = fault === "positions" && length > 0 ? 1 : 0;
      const result = await session.run({
        ...past,
        input_ids: { data: BigInt64Array.from(tokens, BigInt), dims: [1, s] },
        attention_mask: { data: new BigInt64Array(length + s).fill(1n), dims: [1, length + s] },
        position_ids: {
          data: BigInt64Array.from({ length: s }, (_, j) => BigInt(length + j + shift)),
          dims: [1, s],
        },
      });
      length += s;
      for (let l = 0; l < layers; l++)
        for (const kind of ["key", "value"]) {
          const present = result[`present.${l}.${kind}`];
          if (!present) continue;
          const data = present.data as Float32Array;
          past[`past_key_values.${l}.${kind}`] =
            fault === "heads"
              ? { data: swapHeads(data, heads, length * d), dims: present.dims }
              : present;
        }
      const all = result.logits?.data as Float32Array | undefined;
      const logits = all?.subarray((s - 1) * vocab, s * vocab) ?? new Float32Array(vocab);
      let best = 0;
      for (let k = 1; k < vocab; k++) if ((logits[k] ?? 0) > (logits[best] ?? 0)) best = k;
      if (best === fixture.eos_token_id) break;
      out.push(best);
      tokens = [best];
    }
  } finally {
    await session.release();
  }
  return out;
}

/** [heads, n] with its heads in reverse order. */
function swapHeads(data: Float32Array, heads: number, n: number): Float32Array {
  const out = new Float32Array(data.length);
  for (let h = 0; h < heads; h++) out.set(data.subarray(h * n, (h + 1) * n), (heads - 1 - h) * n);
  return out;
}
