import { describe, expect, it } from "vitest";
import { endpointOf } from "./batch-endpoints.js";

describe("endpointOf", () => {
  it("names predict's model, decoded as the live route decodes it; a malformed escape stays as sent", () => {
    expect(endpointOf("/v1/models/digits/predict")).toEqual({
      endpoint: "/v1/models/{model}/predict",
      model: "digits",
    });
    expect(endpointOf("/v1/models/a%20b/predict")?.model).toBe("a b");
    expect(endpointOf("/v1/models/%E0/predict")?.model).toBe("%E0");
    expect(endpointOf("/v1/chat/completions")).toEqual({ endpoint: "/v1/chat/completions" });
    expect(endpointOf("/v1/models/digits/predict/x")).toBeUndefined();
  });
});
