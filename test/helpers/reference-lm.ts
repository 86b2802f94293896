import { readFileSync } from "node:fs";
import { InProcessSession, type TensorMap } from "@ferry/runtime";

interface Arch {
  n_layer: number;
  n_head: number;
  head_dim: number;
  vocab_size: number;
}

/**
 * Logit changes as OpenAI and vLLM document them, applied before each greedy pick: bias
 * added, then the repetition penalty over prompt and completion (a positive logit divided, a
 * negative one multiplied), then frequency (per appearance) and presence (once) penalties
 * over the completion.
 */
export interface ReferencePenalties {
  logit_bias?: Record<string, number>;
  repetition_penalty?: number;
  frequency_penalty?: number;
  presence_penalty?: number;
  /** vLLM's bad words as token ids: a word's last token barred after the rest of it. */
  bad_words?: number[][];
}

/** One step of greedy decoding: the token picked, and the model's own log-softmax there. */
export interface ReferenceStep {
  token: number;
  logprobs: Float64Array;
}

/**
 * Greedy decoding of tiny-lm in this process, one sequence at a time, no padding, no
 * batching, no Ferry: the reference that Ferry's batched engine must match token for token.
 */
export async function referenceGreedy(
  prompt: string | readonly number[],
  maxTokens: number,
  penalties: ReferencePenalties = {},
): Promise<string> {
  const steps = await referenceSteps(prompt, maxTokens, penalties);
  return new TextDecoder().decode(Uint8Array.from(steps, (step) => step.token));
}

/** The steps of `referenceGreedy`, each with the model's log probabilities before any change. */
export async function referenceSteps(
  prompt: string | readonly number[],
  maxTokens: number,
  penalties: ReferencePenalties = {},
): Promise<ReferenceStep[]> {
  return (await referenceRun(prompt, maxTokens, penalties)).steps;
}

/** Each prompt token's log probability after the first, under the positions before it. */
export async function referencePromptLogprobs(prompt: readonly number[]): Promise<number[]> {
  return (await referenceRun(prompt, 1, {})).promptLogprobs;
}

/** The model's log-softmax over the vocabulary before each prompt token after the first. */
export async function referencePromptDistributions(
  prompt: string | readonly number[],
): Promise<Float64Array[]> {
  return (await referenceRun(prompt, 1, {})).promptDistributions;
}

async function referenceRun(
  prompt: string | readonly number[],
  maxTokens: number,
  penalties: ReferencePenalties,
): Promise<{
  steps: ReferenceStep[];
  promptLogprobs: number[];
  promptDistributions: Float64Array[];
}> {
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
  const promptIds =
    typeof prompt === "string" ? Array.from(Buffer.from(prompt, "utf8")) : [...prompt];
  let tokens = promptIds;
  let length = 0;
  const out: number[] = [];
  const steps: ReferenceStep[] = [];
  const promptLogprobs: number[] = [];
  const promptDistributions: Float64Array[] = [];
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
    if (step === 0)
      for (let j = 0; j + 1 < s; j++) {
        const at = logits.subarray(j * arch.vocab_size, (j + 1) * arch.vocab_size);
        const top = Math.max(...at);
        const z = top + Math.log(at.reduce((sum, v) => sum + Math.exp(v - top), 0));
        promptLogprobs.push((at[promptIds[j + 1] ?? 0] ?? 0) - z);
        promptDistributions.push(Float64Array.from(at, (v) => v - z));
      }
    // a copy in float32, as the worker changes its logits in place
    const last = logits.slice((s - 1) * arch.vocab_size, s * arch.vocab_size);
    const max = Math.max(...last);
    const logZ = max + Math.log(last.reduce((sum, v) => sum + Math.exp(v - max), 0));
    const logprobs = Float64Array.from(last, (v) => v - logZ);
    for (const [id, bias] of Object.entries(penalties.logit_bias ?? {}))
      last[Number(id)] = (last[Number(id)] ?? 0) + bias;
    const repetition = penalties.repetition_penalty ?? 1;
    for (const id of new Set([...promptIds, ...out])) {
      const v = last[id] ?? 0;
      last[id] = v > 0 ? v / repetition : v * repetition;
    }
    for (const id of new Set(out)) {
      const count = out.filter((t) => t === id).length;
      last[id] =
        (last[id] ?? 0) -
        count * (penalties.frequency_penalty ?? 0) -
        (penalties.presence_penalty ?? 0);
    }
    for (const word of penalties.bad_words ?? []) {
      const rest = word.slice(0, -1);
      if (
        rest.every((id, i) => out[out.length - rest.length + i] === id) &&
        rest.length <= out.length
      )
        last[word.at(-1) ?? 0] = Number.NEGATIVE_INFINITY;
    }
    let best = 0;
    for (let k = 1; k < last.length; k++) if ((last[k] ?? 0) > (last[best] ?? 0)) best = k;
    if (best === config.tokenizer.eos_token_id) break;
    out.push(best);
    steps.push({ token: best, logprobs });
    tokens = [best];
  }
  await session.release();
  return { steps, promptLogprobs, promptDistributions };
}
