import type { IncomingHttpHeaders } from "node:http";
import { describe, expect, it } from "vitest";
import { takes } from "./predict-fast-path.js";

const LIMIT = 1_000;
const request = (
  headers: IncomingHttpHeaders,
  url = "/v1/models/mnist/predict",
  method = "POST",
) => ({
  method,
  url,
  headers: { "content-type": "application/json", "content-length": "100", ...headers },
});

describe("the predict fast path", () => {
  it("takes a JSON predict body of declared length within the limit", () => {
    expect(takes(request({}), LIMIT)).toBe("mnist");
    expect(takes(request({ "content-type": "Application/JSON; charset=utf-8" }), LIMIT)).toBe(
      "mnist",
    );
    expect(takes(request({ "content-length": String(LIMIT) }), LIMIT)).toBe("mnist");
    expect(takes(request({}, "/v1/models/digits-cnn/predict"), LIMIT)).toBe("digits-cnn");
  });

  it("leaves every other form to Hono's route", () => {
    expect(takes(request({}, "/v1/models/mnist/predict", "GET"), LIMIT)).toBeUndefined();
    expect(takes(request({}, "/v1/models/mnist/predict?x=1"), LIMIT)).toBeUndefined();
    expect(takes(request({}, "/v1/models/mn%69st/predict"), LIMIT)).toBeUndefined();
    expect(takes(request({}, "/v1/models/mnist/predict/"), LIMIT)).toBeUndefined();
    expect(takes(request({}, "/v2/models/mnist/infer"), LIMIT)).toBeUndefined();
    expect(takes(request({ "content-type": "text/plain" }), LIMIT)).toBeUndefined();
    expect(takes(request({ "content-type": undefined }), LIMIT)).toBeUndefined();
    expect(takes(request({ "content-length": String(LIMIT + 1) }), LIMIT)).toBeUndefined();
    expect(takes(request({ "content-length": "0" }), LIMIT)).toBeUndefined();
    expect(
      takes(request({ "content-length": undefined, "transfer-encoding": "chunked" }), LIMIT),
    ).toBeUndefined();
  });
});
