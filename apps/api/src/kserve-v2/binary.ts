import {
  bytesPerElement,
  type Datatype,
  FerryError,
  rawTensorBytes,
  tensorFromBytes,
} from "@ferry/protocol";
import type { V2InferRequest, V2InferResponse } from "./schemas.js";

/**
 * Triton's binary tensor data extension (what tritonclient sends by default): a body that is
 * the JSON request, `Inference-Header-Content-Length` bytes long, followed by the inputs that
 * carry `parameters.binary_data_size`, raw, little-endian, in the order the JSON lists them.
 */

/** Bytes per element as Triton lays a datatype out; BYTES elements are not of one size. */
function elementBytes(datatype: string): number | undefined {
  return datatype === "BYTES" ? undefined : bytesPerElement[datatype as Datatype];
}

/**
 * The JSON request of a binary body, each binary input's `data` read from the bytes after it
 * (flat, row major): what the JSON form of the same request would carry. Whatever does not
 * add up (a length past the body, sizes that disagree with shapes or leave bytes over) is a 400.
 */
export function readBinaryRequest(
  body: Uint8Array,
  headerLength: string,
  /**
   * Told what building the tensors will make (an array element each, a string each of BYTES)
   * before any is built: it throws to refuse them.
   */
  weigh?: (elements: number, texts: number) => void,
): unknown {
  // digits only: Number() also reads "0x15c", "  348  " and "3e2"
  const jsonLength = /^[0-9]{1,15}$/.test(headerLength) ? Number(headerLength) : Number.NaN;
  if (!Number.isInteger(jsonLength) || jsonLength > body.length)
    throw invalid(
      `Inference-Header-Content-Length ${headerLength} does not fit a body of ${body.length} bytes`,
    );
  let request: unknown;
  try {
    request = JSON.parse(Buffer.from(body.buffer, body.byteOffset, jsonLength).toString("utf8"));
  } catch {
    throw invalid("the JSON before the binary tensor data does not parse");
  }
  const inputs = (request as { inputs?: unknown })?.inputs;
  if (!Array.isArray(inputs)) return request; // the schema names what is missing
  weigh?.(...declaredElements(inputs as Array<Record<string, unknown>>));
  let at = jsonLength;
  for (const input of inputs as Array<Record<string, unknown>>) {
    const size = (input?.parameters as { binary_data_size?: unknown } | undefined)
      ?.binary_data_size;
    if (size === undefined) continue;
    const name = String(input.name);
    if (typeof size !== "number" || !Number.isInteger(size) || size < 0)
      throw invalid(`input '${name}': binary_data_size must be a whole number of bytes`);
    const datatype = String(input.datatype);
    const width = elementBytes(datatype);
    if (width === undefined && datatype !== "BYTES")
      throw invalid(`input '${name}': binary data of datatype ${datatype} is not supported`);
    const shape = input.shape;
    if (!Array.isArray(shape) || !shape.every((d) => Number.isInteger(d) && d >= 0))
      throw invalid(`input '${name}': shape must be a list of non-negative whole numbers`);
    const count = shape.reduce((a: number, b: number) => a * b, 1);
    if (width === undefined) {
      // texts (an embedder's): elements of their own lengths
      if (
        typeof size !== "number" ||
        !Number.isInteger(size) ||
        size < 0 ||
        at + size > body.length
      )
        throw invalid(`input '${name}': binary_data_size ${String(size)} does not fit the body`);
      if ("data" in input) throw invalid(`input '${name}' has both data and binary_data_size`);
      input.data = readStrings(name, body.subarray(at, at + size), count);
      at += size;
      continue;
    }
    if (size !== count * width)
      throw invalid(
        `input '${name}': binary_data_size is ${String(size)}, shape [${shape.join(",")}] of ${datatype} needs ${count * width} bytes`,
      );
    if (at + size > body.length)
      throw invalid(`input '${name}': binary_data_size ${size} runs past the end of the body`);
    if ("data" in input) throw invalid(`input '${name}' has both data and binary_data_size`);
    input.data = tensorFromBytes(datatype as Datatype, body.subarray(at, at + size));
    at += size;
  }
  if (at !== body.length)
    throw invalid(
      `the body has ${body.length - at} bytes after the binary tensor data its inputs declare`,
    );
  return request;
}

/**
 * The elements the binary inputs' shapes declare (those of BYTES apart): what decoding them
 * makes, whatever their bytes turn out to say (a shape that disagrees is refused unbuilt).
 */
function declaredElements(inputs: Array<Record<string, unknown>>): [number, number] {
  let elements = 0;
  let texts = 0;
  for (const input of inputs) {
    const size = (input?.parameters as { binary_data_size?: unknown } | undefined)
      ?.binary_data_size;
    const shape = input?.shape;
    if (size === undefined || !Array.isArray(shape)) continue;
    const count = shape.reduce(
      (a: number, b: unknown) => a * (Number.isInteger(b) ? Number(b) : 0),
      1,
    );
    if (input.datatype === "BYTES") texts += count;
    else elements += count;
  }
  return [elements, texts];
}

/** A BYTES element's text, refused rather than repaired where it is not UTF-8. */
const UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * A BYTES tensor's elements as Triton lays them out (each a 4-byte little-endian length, then
 * its bytes), read as UTF-8 texts; `count` of them, filling `bytes` exactly.
 */
function readStrings(name: string, bytes: Uint8Array, count: number): string[] {
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const texts: string[] = [];
  let at = 0;
  while (texts.length < count) {
    if (at + 4 > view.length) break;
    const length = view.readUInt32LE(at);
    if (at + 4 + length > view.length) break;
    // texts are UTF-8, strictly: a byte that is not had become U+FFFD, embedded unsaid
    try {
      texts.push(UTF8.decode(view.subarray(at + 4, at + 4 + length)));
    } catch {
      throw invalid(`input '${name}': element ${texts.length} is not UTF-8 text`);
    }
    at += 4 + length;
  }
  if (texts.length !== count || at !== view.length)
    throw invalid(
      `input '${name}': binary_data_size ${view.length} does not hold exactly ${count} length-prefixed BYTES elements`,
    );
  return texts;
}

/**
 * The answer as Triton sends it when some of its outputs are asked for as binary (an output's
 * `parameters.binary_data`, else the request's `parameters.binary_data_output`): the JSON, whose
 * binary outputs carry `binary_data_size` and no data, then their bytes, in output order.
 * Undefined when every output goes as JSON.
 */
export function binaryAnswer(
  request: V2InferRequest,
  answer: V2InferResponse,
): { body: Buffer; headerLength: number } | undefined {
  const everyOutput = request.parameters?.binary_data_output === true;
  const asked = new Map(
    (request.outputs ?? []).map((o) => [o.name, o.parameters?.binary_data === true]),
  );
  const chunks: Buffer[] = [];
  const outputs = answer.outputs.map((output) => {
    if (!(asked.get(output.name) ?? everyOutput)) return output;
    const bytes = tensorBytes(output.datatype, output.data ?? []);
    chunks.push(bytes);
    const { data: _data, ...rest } = output;
    return { ...rest, parameters: { binary_data_size: bytes.length } };
  });
  if (chunks.length === 0) return undefined;
  const header = Buffer.from(JSON.stringify({ ...answer, outputs }));
  return { body: Buffer.concat([header, ...chunks]), headerLength: header.length };
}

/** A tensor's values as Triton's binary layout writes them (BYTES: a 4-byte length, then the bytes). */
function tensorBytes(datatype: string, data: ReadonlyArray<number | string>): Buffer {
  if (datatype !== "BYTES") return rawTensorBytes(datatype as Datatype, data as number[]);
  return Buffer.concat(
    data.map((s) => {
      const text = Buffer.from(String(s));
      const length = Buffer.alloc(4);
      length.writeUInt32LE(text.length);
      return Buffer.concat([length, text]);
    }),
  );
}

function invalid(message: string): FerryError {
  return new FerryError("INVALID_INPUT", message);
}
