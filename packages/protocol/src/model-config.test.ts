import { describe, expect, it } from "vitest";
import { modelConfigSchema } from "./model-config.js";

const base = {
  name: "m",
  kind: "classifier",
  inputs: [{ name: "input", datatype: "FP32", dims: [4] }],
  outputs: [{ name: "logits", datatype: "FP32", dims: [2] }],
};

describe("model.json inline", () => {
  it("is off unless asked for: batches run on instance threads", () => {
    expect(modelConfigSchema.parse(base).inline).toBe(false);
  });

  it("runs one instance, so it refuses an instance_count above one", () => {
    expect(modelConfigSchema.parse({ ...base, inline: true }).inline).toBe(true);
    const refused = modelConfigSchema.safeParse({ ...base, inline: true, instance_count: 2 });
    expect(refused.success).toBe(false);
    expect(refused.error?.issues[0]?.path).toEqual(["inline"]);
  });
});
