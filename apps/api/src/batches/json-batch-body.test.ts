import { describe, expect, it } from "vitest";
import { bodyFingerprint } from "../http/body-fingerprint.js";
import { parseJsonBatch } from "./json-batch-body.js";

const bytes = (body: unknown) => new TextEncoder().encode(JSON.stringify(body));

describe("parseJsonBatch", () => {
  it("reads the items' keys and their features back to back, with each item's width", () => {
    const body = {
      model: "digits",
      version: "2",
      items: [
        { key: "a", features: [1, 2.5, -3] },
        { key: "b", features: [4] },
      ],
    };
    const parsed = parseJsonBatch(bytes(body));
    expect(parsed.problem).toBeUndefined();
    expect(parsed.model).toBe("digits");
    expect(parsed.version).toBe("2");
    expect(parsed.keys).toEqual(["a", "b"]);
    expect([...parsed.values]).toEqual([1, 2.5, -3, 4]);
    expect([...parsed.widths]).toEqual([3, 1]);
    expect(parsed.fingerprint).toBeUndefined();
  });

  it("fingerprints the body as the route's own fingerprint does, keys in any order", () => {
    const head = "POST /v1/batches\n";
    const body = { items: [{ features: [1], key: "a" }], model: "digits" };
    const reordered = { model: "digits", items: [{ key: "a", features: [1] }] };
    expect(parseJsonBatch(bytes(body), head).fingerprint).toBe(bodyFingerprint(head, body));
    expect(parseJsonBatch(bytes(reordered), head).fingerprint).toBe(bodyFingerprint(head, body));
  });

  it("names what is wrong with a body that is no batch", () => {
    const problem = (body: Uint8Array) => parseJsonBatch(body).problem;
    expect(problem(new TextEncoder().encode("{"))).toBe("batch: the body is not JSON (UTF-8)");
    expect(problem(new Uint8Array([0x7b, 0x22, 0xff, 0x22]))).toMatch(/not JSON \(UTF-8\)/);
    expect(problem(bytes([1]))).toBe("batch: the body is not a JSON object");
    expect(problem(bytes({ items: [] }))).toBe("batch: model: expected a string");
    expect(problem(bytes({ model: "m", version: 2, items: [] }))).toBe(
      "batch: version: expected a string",
    );
    expect(problem(bytes({ model: "m", items: [] }))).toBe(
      "batch: items: expected a list of at least 1 item",
    );
    // an item's key is the model's-width check's to order: it comes back as the bad item
    const keyless = parseJsonBatch(
      bytes({ model: "m", items: [{ key: "a", features: [] }, null] }),
    );
    expect(keyless.problem).toBeUndefined();
    expect(keyless.bad).toEqual({ item: 2, problem: "needs a string key" });
    expect(keyless.keys).toEqual(["a"]);
  });

  it("stops at the first item whose features are not finite numbers, keeping those before it", () => {
    const parsed = parseJsonBatch(
      bytes({
        model: "m",
        items: [
          { key: "a", features: [1] },
          { key: "b", features: [1, "2"] },
          { key: "c", features: [1] },
        ],
      }),
    );
    expect(parsed.problem).toBeUndefined();
    expect(parsed.bad).toEqual({ item: 2 });
    expect(parsed.keys).toEqual(["a"]);
    // a number JSON cannot hold (1e400 parses as Infinity) is not finite either
    const huge = new TextEncoder().encode('{"model":"m","items":[{"key":"a","features":[1e400]}]}');
    expect(parseJsonBatch(huge).bad).toEqual({ item: 1 });
  });

  it("refuses a body denser in objects and lists than any batch before parsing it", () => {
    // 8 MB of `{}` took the thread ~1 s and most of its heap (a keyed one's fingerprint ran it out)
    const junk = new TextEncoder().encode(
      `{"model":"m","items":[{"key":"a","features":[1]}],"junk":[${"{},".repeat(100_000)}{}]}`,
    );
    expect(parseJsonBatch(junk).problem).toMatch(
      /^batch: the body holds more than \d+ JSON objects and lists, the most a batch of \d+ bytes can hold/,
    );
    // the densest batch there is, one-character keys and one feature each, is read; braces in
    // strings are text
    const dense = {
      model: "m",
      items: Array.from({ length: 10_000 }, (_, k) => ({
        key: String.fromCharCode(97 + (k % 26)),
        features: [k % 10],
      })),
    };
    expect(parseJsonBatch(bytes(dense)).keys).toHaveLength(10_000);
    const braces = { model: "m", items: [{ key: "{[{[{[{[{[{[{[{[".repeat(30), features: [1] }] };
    expect(parseJsonBatch(bytes(braces)).problem).toBeUndefined();
  });
});
