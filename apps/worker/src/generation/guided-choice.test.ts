import { ByteTokenizer, type Tokenizer } from "@ferry/model-repository";
import { describe, expect, it } from "vitest";
import { ChoiceGuide } from "./guided-choice.js";

/** The ids `guide` leaves drawable, after the tokens `drawn`. */
function allowedAfter(guide: ChoiceGuide, drawn: number[], vocab: number): number[] {
  for (const id of drawn) guide.advance(id);
  const logits = new Float32Array(vocab);
  guide.mask(logits);
  return [...logits.keys()].filter((id) => logits[id] === 0);
}

const bytes = (text: string) => [...Buffer.from(text)];

describe("ChoiceGuide", () => {
  it("byte tokens: the next byte of every choice begun, and the end of text once one is whole", () => {
    const tokenizer = new ByteTokenizer();
    const guide = () => new ChoiceGuide(["yes", "no", "yesterday"], tokenizer, 257);
    expect(allowedAfter(guide(), [], 257)).toEqual(bytes("ny"));
    expect(allowedAfter(guide(), bytes("yes"), 257)).toEqual([...bytes("t"), 256]);
    expect(allowedAfter(guide(), bytes("no"), 257)).toEqual([256]);
  });

  it("longer tokens: only those after which tokens can still spell the rest of a choice", () => {
    // "s" alone is no token: "ye" would strand the text, "yes" and "y" (then "es") do not
    const vocab = ["y", "ye", "yes", "es", "n", "no", "o"];
    const tokenizer: Tokenizer = {
      encode: () => [],
      count: () => 0,
      decoder: () => ({ push: () => "", flush: () => "" }),
      tokenText: (id) => ({ token: vocab[id] ?? "", bytes: bytes(vocab[id] ?? "") }),
      eosTokenId: 7,
      exactTokenBytes: true,
    };
    const guide = () => new ChoiceGuide(["yes", "no"], tokenizer, 8);
    expect(allowedAfter(guide(), [], 8)).toEqual([0, 2, 4, 5]);
    expect(allowedAfter(guide(), [0], 8)).toEqual([3]);
    expect(allowedAfter(guide(), [4], 8)).toEqual([6]);
    expect(allowedAfter(guide(), [2], 8)).toEqual([7]);
  });
});
