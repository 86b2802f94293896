import { FerryError } from "@ferry/protocol";

/** What a multipart/form-data body is read as: each part's start, its data, its end. */
export type MultipartEvent =
  | { type: "part"; name: string; filename: string | undefined }
  | { type: "data"; data: Uint8Array }
  | { type: "end" };

/** Bytes of one part's headers, and of the preamble before the first boundary. */
const MAX_HEAD_BYTES = 16 * 1024;

/** The boundary of a multipart/form-data body (RFC 7578), from its Content-Type. */
export function boundaryOf(contentType: string | undefined): string {
  const type = contentType ?? "";
  if (!/^multipart\/form-data\s*(;|$)/i.test(type))
    throw new FerryError(
      "UNSUPPORTED_MEDIA_TYPE",
      "Send the file as multipart/form-data (fields `file` and `purpose`)",
    );
  const boundary = /;\s*boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(type);
  const value = boundary?.[1] ?? boundary?.[2];
  if (!value || value.length > 70)
    throw new FerryError("INVALID_INPUT", "multipart/form-data needs a boundary (1-70 chars)");
  return value;
}

type State = "preamble" | "boundary" | "headers" | "body" | "done";

/**
 * Reads a multipart/form-data body as it streams (RFC 7578 over RFC 2046): part by part,
 * each part's data handed on as it arrives, so a part of any size passes in bounded memory.
 * What is held back at any time is at most a boundary's length (a delimiter may straddle two
 * chunks) or one part's headers.
 */
export async function* multipartEvents(
  body: AsyncIterable<Uint8Array>,
  boundary: string,
): AsyncGenerator<MultipartEvent> {
  const first = Buffer.from(`--${boundary}`);
  const delimiter = Buffer.from(`\r\n--${boundary}`);
  let buf: Buffer = Buffer.alloc(0);
  let state: State = "preamble";
  for await (const chunk of body) {
    // what follows the closing boundary (RFC 2046's epilogue) is read and dropped: kept, each
    // chunk had copied all of it again, 80 MB taking the API's loop 28 s
    if (state === "done") continue;
    const piece = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    buf = buf.length === 0 ? piece : Buffer.concat([buf, piece]);
    for (;;) {
      if (state === "preamble") {
        const at = buf.indexOf(first);
        if (at < 0) {
          if (buf.length > MAX_HEAD_BYTES) throw malformed("no boundary where the body starts");
          break;
        }
        buf = buf.subarray(at + first.length);
        state = "boundary";
      } else if (state === "boundary") {
        // after a boundary: "--" closes the body, else the line ends and a part's headers follow
        if (buf.length < 2) break;
        if (buf[0] === 0x2d && buf[1] === 0x2d) {
          state = "done";
          buf = Buffer.alloc(0);
          break;
        }
        const eol = buf.indexOf("\r\n");
        if (eol < 0) {
          if (buf.length > MAX_HEAD_BYTES) throw malformed("a boundary line does not end");
          break;
        }
        buf = buf.subarray(eol + 2);
        state = "headers";
      } else if (state === "headers") {
        const end = buf.subarray(0, 2).toString() === "\r\n" ? 0 : buf.indexOf("\r\n\r\n");
        if (end < 0) {
          if (buf.length > MAX_HEAD_BYTES) throw malformed("a part's headers are too long");
          break;
        }
        yield partOf(buf.subarray(0, end).toString("utf8"));
        buf = buf.subarray(end === 0 ? 2 : end + 4);
        state = "body";
      } else if (state === "body") {
        const at = buf.indexOf(delimiter);
        if (at < 0) {
          // all but what could be the start of a delimiter split across chunks
          const keep = delimiter.length - 1;
          if (buf.length > keep) {
            yield { type: "data", data: buf.subarray(0, buf.length - keep) };
            buf = buf.subarray(buf.length - keep);
          }
          break;
        }
        if (at > 0) yield { type: "data", data: buf.subarray(0, at) };
        yield { type: "end" };
        buf = buf.subarray(at + delimiter.length);
        state = "boundary";
      } else break;
    }
  }
  if (state !== "done") throw malformed("the body ends before its closing boundary");
}

/** A part's start, from its headers: its field name and, for a file, its file name. */
function partOf(head: string): MultipartEvent {
  let disposition = "";
  for (const line of head.split("\r\n")) {
    const colon = line.indexOf(":");
    if (colon > 0 && line.slice(0, colon).trim().toLowerCase() === "content-disposition")
      disposition = line.slice(colon + 1);
  }
  const name = paramOf(disposition, "name");
  if (name === undefined) throw malformed("a part has no Content-Disposition name");
  return { type: "part", name, filename: paramOf(disposition, "filename") };
}

/** A Content-Disposition parameter, quoted (with backslash escapes) or bare. */
function paramOf(disposition: string, param: string): string | undefined {
  const found = new RegExp(`;\\s*${param}="((?:[^"\\\\]|\\\\.)*)"|;\\s*${param}=([^;\\s]+)`, "i")
    .exec(disposition)
    ?.slice(1);
  const quoted = found?.[0];
  return quoted !== undefined ? quoted.replace(/\\(.)/g, "$1") : found?.[1];
}

function malformed(problem: string): FerryError {
  return new FerryError("INVALID_INPUT", `malformed multipart/form-data body: ${problem}`);
}
