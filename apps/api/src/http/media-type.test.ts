import { describe, expect, it } from "vitest";
import { isJson, isNdjson, mediaType } from "./media-type.js";

describe("media types", () => {
  it("reads the type without its parameters, lower-cased", () => {
    expect(mediaType(" Application/JSON; charset=utf-8")).toBe("application/json");
    expect(mediaType(undefined)).toBe("");
  });

  it("JSON is application/json or a +json structured type, nothing that merely says json", () => {
    for (const type of ["application/json", "application/vnd.api+json; charset=utf-8"])
      expect(isJson(type), type).toBe(true);
    for (const type of ["application/json5", "text/json", "application/x-ndjson", "", "json"])
      expect(isJson(type), type).toBe(false);
    // a parameter never makes JSON NDJSON, nor the other way round
    expect(isNdjson("application/json; x=ndjson")).toBe(false);
    expect(isJson("application/x-ndjson; x=json")).toBe(false);
  });
});
