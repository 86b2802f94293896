import { describe, expect, it } from "vitest";
import { invalidInput } from "../http/errors.js";
import { chatCompletionRequestSchema, completionRequestSchema } from "./schemas.js";

describe("a JSON schema sent as its text", () => {
  it("is weighed before it is parsed, as a body is, and read when within its weight", () => {
    // a body weighs a string as its characters: 8 MB of `{}` inside one had cost the loop ~1.2 s
    const junk = JSON.stringify({ a: Array.from({ length: 40_000 }, () => ({})) });
    const refused = completionRequestSchema.safeParse({
      model: "m",
      prompt: "Q:",
      guided_json: junk,
    });
    expect(refused.success).toBe(false);
    // the 400 names the budget, not the union's "Invalid input"
    expect(invalidInput(refused.error?.issues ?? []).message).toMatch(
      /^guided_json: a JSON schema's text may cost at most/,
    );
    const format = (schema: string) =>
      chatCompletionRequestSchema.safeParse({
        model: "m",
        messages: [{ role: "user", content: "hi" }],
        response_format: { type: "json_schema", json_schema: { name: "x", schema } },
      });
    expect(format(junk).success).toBe(false);
    // 2,000 properties of their own description each, as text: read
    const large = JSON.stringify({
      type: "object",
      properties: Object.fromEntries(
        Array.from({ length: 2_000 }, (_, k) => [`p${k}`, { type: "string", description: "a" }]),
      ),
    });
    const read = completionRequestSchema.parse({ model: "m", prompt: "Q:", guided_json: large });
    expect(Object.keys((read.guided_json as { properties: object }).properties)).toHaveLength(
      2_000,
    );
    expect(format(large).success).toBe(true);
  });
});
