import { randomUUID } from "node:crypto";
import { encodeChunkAnswers, FerryError, pause } from "@ferry/protocol";
import pino from "pino";
import { beforeAll, describe, expect, it } from "vitest";
import { testInferenceClient } from "../../../../test/helpers/inference-client.js";
import type { FileService } from "../files/file-service.js";
import type { BatchLineKind } from "../http/batch-line.js";
import { failBatch, finalizeBatch, OK } from "./batch-finalizer.js";
import { answerLine, lineId } from "./batch-lines.js";
import { OpenAiBatchRunner } from "./openai-batch-runner.js";
import { OpenAiBatchService } from "./openai-batch-service.js";

// The runner on a real Redis (its own prefix), with a kind that answers many lines at once and
// notes what it was asked: a batch a runner before this one left partly answered, some chunks
// whole, one a line at a time.
const client = testInferenceClient();
beforeAll(() => client.ready());

const ENDPOINT = "/v1/models/{model}/predict";
const LINE_URL = "/v1/models/m/predict";
const CHUNKS = 3;
const PER_CHUNK = 4;
const FAILING = "c2-1";

/**
 * A kind whose answers echo each line's body, but for FAILING's (a 400); `asked` holds each
 * call's custom_ids.
 */
function echoKind() {
  const asked: string[][] = [];
  const kind: BatchLineKind = {
    endpoint: ENDPOINT,
    run: async () => {
      throw new Error("lines of this kind run many at once");
    },
    openMany: () => ({
      run: async (lines) => {
        asked.push(lines.map((l) => (l.body as { tag: string }).tag));
        return lines.map((l) => {
          const tag = (l.body as { tag: string }).tag;
          return tag === FAILING
            ? { error: new FerryError("INVALID_INPUT", `bad ${tag}`) }
            : { value: { echo: tag } };
        });
      },
      close: async () => {},
    }),
  };
  return { kind, asked };
}

type InputLine = { custom_id: string; method: string; url: string; body: unknown };

/** CHUNKS chunks of PER_CHUNK lines, each tagged with its place (`c<chunk>-<line>`). */
function taggedChunks(): InputLine[][] {
  return Array.from({ length: CHUNKS }, (_, c) =>
    Array.from({ length: PER_CHUNK }, (_, k) => {
      const tag = `c${c}-${k}`;
      return { custom_id: tag, method: "POST", url: LINE_URL, body: { tag } };
    }),
  );
}

/** An input file stored as `chunks` (each a stored chunk of lines), and a batch over it. */
async function batchOver(
  chunks: InputLine[][] = taggedChunks(),
  windowS = 86_400,
  owner = "",
): Promise<{ id: string; customIds: string[] }> {
  const fileId = `file-${randomUUID()}`;
  await client.files.begin({ id: fileId, owner, filename: "in.jsonl", purpose: "batch" });
  const customIds: string[] = [];
  for (const lines of chunks) {
    for (const line of lines) customIds.push(line.custom_id);
    const text = `${lines.map((line) => JSON.stringify(line)).join("\n")}\n`;
    await client.files.append(fileId, Buffer.from(text), lines.length);
  }
  await client.files.finish(fileId, owner, [LINE_URL]);
  const id = `batch_${randomUUID().replaceAll("-", "")}`;
  const now = Math.floor(Date.now() / 1000);
  await client.openAiBatches.create(
    {
      id,
      owner,
      endpoint: ENDPOINT,
      input_file_id: fileId,
      completion_window: "24h",
      created_at: now,
      expires_at: now + windowS,
      total: customIds.length,
      metadata: null,
    },
    600,
  );
  return { id, customIds };
}

/** A line's answer as an earlier runner rendered it. */
const earlier = (id: string, index: number, tag: string) =>
  answerLine(lineId(id, index), tag, 200, "req_earlier", { echo: tag, earlier: true });

describe("an OpenAI batch's runner, many lines at once", () => {
  it("answers each chunk whole once; a runner taking over skips what was kept and finishes a half-answered chunk a line at a time", async () => {
    const { id, customIds } = await batchOver();
    const store = client.openAiBatches;
    // the runner before: chunk 0 answered whole, two lines of chunk 1 answered alone
    const chunk0 = Array.from({ length: PER_CHUNK }, (_, k) => earlier(id, k, `c0-${k}`));
    expect(await store.recordChunk(id, 0, PER_CHUNK, 0, encodeChunkAnswers(chunk0, []))).toBe(true);
    await store.recordMany(id, [
      { index: PER_CHUNK, ok: true, line: `${OK}${earlier(id, PER_CHUNK, "c1-0")}` },
      { index: PER_CHUNK + 2, ok: true, line: `${OK}${earlier(id, PER_CHUNK + 2, "c1-2")}` },
    ]);
    const { kind, asked } = echoKind();
    const runner = new OpenAiBatchRunner(client, [kind], 600, pino({ level: "silent" }), 4);
    await runner.run(id, new AbortController().signal);

    // chunk 1's two open lines, then chunk 2 whole; chunk 0 never again
    expect(asked).toEqual([
      ["c1-1", "c1-3"],
      ["c2-0", "c2-1", "c2-2", "c2-3"],
    ]);
    const batch = await store.get(id);
    expect(batch?.status).toBe("completed");
    expect([batch?.completed, batch?.failed]).toEqual([CHUNKS * PER_CHUNK - 1, 1]);
    type Line = { id: string; custom_id: string; response: { status_code: number; body: unknown } };
    const read = async (file: string | undefined) => {
      const lines: Line[] = [];
      for await (const chunk of client.files.lines(file ?? ""))
        for (const l of chunk) lines.push(JSON.parse(l));
      return lines;
    };
    const output = await read(batch?.output_file_id);
    const answered = customIds.filter((c) => c !== FAILING);
    expect(output.map((l) => l.custom_id)).toEqual(answered);
    expect(output.map((l) => l.id)).toEqual(answered.map((c) => lineId(id, customIds.indexOf(c))));
    const errors = await read(batch?.error_file_id);
    expect(errors.map((l) => [l.custom_id, l.response.status_code])).toEqual([[FAILING, 400]]);
    expect((await client.files.get(batch?.output_file_id ?? ""))?.lines).toBe(answered.length);
    // both files count in their owner's file storage, at their size
    for (const file of [batch?.output_file_id, batch?.error_file_id])
      expect(await client.storage.held("", file ?? "")).toBe(
        (await client.files.get(file ?? ""))?.bytes,
      );
    expect(output[0]?.response.body).toEqual({ echo: "c0-0", earlier: true });
    expect(output[PER_CHUNK + 1]?.response.body).toEqual({ echo: "c1-1" });
    // a chunk's answers are kept once: a second record of it changes nothing
    expect(await store.recordChunk(id, 2, PER_CHUNK, 0, Buffer.alloc(0))).toBe(false);
  });

  it("a first run links the files to each chunk it keeps, read in the input's order however the chunks finish, and the finalizer reads no kept answer back", async () => {
    const { id, customIds } = await batchOver();
    const store = client.openAiBatches;
    // chunk 0 answers last: the files read the kept chunks in the input's order all the same
    const { kind } = echoKind();
    const many = kind.openMany?.("") as NonNullable<ReturnType<NonNullable<typeof kind.openMany>>>;
    const slowFirst: BatchLineKind = {
      ...kind,
      openMany: () => ({
        ...many,
        run: async (lines, opts, signal) => {
          if ((lines[0]?.body as { tag?: string } | undefined)?.tag === "c0-0") await pause(300);
          return many.run(lines, opts, signal);
        },
      }),
    };
    const reads = { count: 0 };
    const chunkAnswers = store.chunkAnswers.bind(store);
    store.chunkAnswers = (batch, chunk) => {
      reads.count++;
      return chunkAnswers(batch, chunk);
    };
    try {
      const runner = new OpenAiBatchRunner(client, [slowFirst], 600, pino({ level: "silent" }), 4);
      await runner.run(id, new AbortController().signal);
    } finally {
      store.chunkAnswers = chunkAnswers;
    }
    expect(reads.count).toBe(0);
    const batch = await store.get(id);
    expect(batch?.status).toBe("completed");
    const idsOf = async (file: string | undefined) => {
      const ids: string[] = [];
      for await (const chunk of client.files.lines(file ?? ""))
        for (const l of chunk) ids.push((JSON.parse(l) as { custom_id: string }).custom_id);
      return ids;
    };
    expect(await idsOf(batch?.output_file_id)).toEqual(customIds.filter((c) => c !== FAILING));
    expect(await idsOf(batch?.error_file_id)).toEqual([FAILING]);
    for (const file of [batch?.output_file_id, batch?.error_file_id])
      expect(await client.storage.held("", file ?? "")).toBe(
        (await client.files.get(file ?? ""))?.bytes,
      );
  });

  it("an input file deleted before every line ran: the batch fails with every answer kept in its files, counted as they are", async () => {
    const { id } = await batchOver();
    const store = client.openAiBatches;
    // the runner before: chunks 0 and 2 answered whole (2 with a failed line), two lines of 1
    const chunk0 = Array.from({ length: PER_CHUNK }, (_, k) => earlier(id, k, `c0-${k}`));
    await store.recordChunk(id, 0, PER_CHUNK, 0, encodeChunkAnswers(chunk0, []));
    const chunk2 = [0, 2, 3].map((k) => earlier(id, 2 * PER_CHUNK + k, `c2-${k}`));
    const bad = answerLine(lineId(id, 2 * PER_CHUNK + 1), FAILING, 400, "req_earlier", {});
    await store.recordChunk(id, 2, 3, 1, encodeChunkAnswers(chunk2, [bad]));
    await store.recordMany(id, [
      { index: PER_CHUNK, ok: true, line: `${OK}${earlier(id, PER_CHUNK, "c1-0")}` },
      { index: PER_CHUNK + 2, ok: true, line: `${OK}${earlier(id, PER_CHUNK + 2, "c1-2")}` },
    ]);
    await client.files.delete((await store.get(id))?.input_file_id ?? "");
    const { kind, asked } = echoKind();
    const runner = new OpenAiBatchRunner(client, [kind], 600, pino({ level: "silent" }), 4);
    await runner.run(id, new AbortController().signal);

    expect(asked).toEqual([]);
    const batch = await store.get(id);
    expect(batch?.status).toBe("failed");
    expect(JSON.stringify(batch?.errors)).toMatch(/was deleted before every line had run/);
    // kept: chunk 0 whole, two lines of chunk 1, chunk 2's four; the rest counted in the error
    const missing = CHUNKS * PER_CHUNK - (PER_CHUNK + 2 + 4);
    expect(JSON.stringify(batch?.errors)).toContain(
      `${missing} of its ${CHUNKS * PER_CHUNK} lines were not run and are in neither file`,
    );
    const idsOf = async (file: string | undefined) => {
      const ids: string[] = [];
      for await (const chunk of client.files.lines(file ?? ""))
        for (const l of chunk) ids.push((JSON.parse(l) as { custom_id: string }).custom_id);
      return ids;
    };
    const output = await idsOf(batch?.output_file_id);
    expect(output).toEqual([
      "c0-0",
      "c0-1",
      "c0-2",
      "c0-3",
      "c1-0",
      "c1-2",
      "c2-0",
      "c2-2",
      "c2-3",
    ]);
    expect(await idsOf(batch?.error_file_id)).toEqual([FAILING]);
    expect([batch?.completed, batch?.failed]).toEqual([output.length, 1]);
  });

  it("a batch cancelled after its input file was deleted ends cancelled, its errors counting the lines in neither file", async () => {
    const { id, customIds } = await batchOver();
    const store = client.openAiBatches;
    // two lines answered, then the input deleted, then the cancel
    await store.recordMany(
      id,
      [0, 1].map((index) => ({
        index,
        ok: true,
        line: `${OK}${earlier(id, index, customIds[index] ?? "")}`,
      })),
    );
    await client.files.delete((await store.get(id))?.input_file_id ?? "");
    await store.transition(id, ["validating", "in_progress"], "cancelling");
    await finalizeBatch(client, id, 600, failBatch(client, 600));
    const batch = await store.get(id);
    expect(batch?.status).toBe("cancelled");
    expect(batch?.completed).toBe(2);
    expect((await client.files.get(batch?.output_file_id ?? ""))?.lines).toBe(2);
    // it had ended cancelled with nothing to say of the rest
    expect(JSON.stringify(batch?.errors)).toMatch(
      new RegExp(
        `${customIds.length - 2} of its ${customIds.length} lines were not run and are in neither file`,
      ),
    );
  });

  it("a batch answered whole a line at a time, its input deleted before it was written out, completes", async () => {
    const { id, customIds } = await batchOver();
    const store = client.openAiBatches;
    await store.recordMany(
      id,
      customIds.map((tag, index) => ({ index, ok: true, line: `${OK}${earlier(id, index, tag)}` })),
    );
    await client.files.delete((await store.get(id))?.input_file_id ?? "");
    const { kind, asked } = echoKind();
    await new OpenAiBatchRunner(client, [kind], 600, pino({ level: "silent" }), 4).run(
      id,
      new AbortController().signal,
    );
    expect(asked).toEqual([]);
    const batch = await store.get(id);
    expect(batch?.status).toBe("completed");
    expect(batch?.completed).toBe(customIds.length);
    expect((await client.files.get(batch?.output_file_id ?? ""))?.lines).toBe(customIds.length);
  });

  it("a batch no runner has begun (every runner busy) is ended by its cancel, not left cancelling; a runner that takes it later runs none of it", async () => {
    const { id, customIds } = await batchOver();
    const store = client.openAiBatches;
    const service = new OpenAiBatchService(client, {} as FileService, 600);
    const tenant = { id: "", admin: false };
    expect(["cancelling", "cancelled"]).toContain((await service.cancel(id, tenant)).status);
    for (let i = 0; i < 100 && (await store.status(id)) !== "cancelled"; i++) await pause(50);
    const batch = await store.get(id);
    expect(batch?.status).toBe("cancelled");
    const errors: Array<{ custom_id: string; error: { code: string } }> = [];
    for await (const chunk of client.files.lines(batch?.error_file_id ?? ""))
      for (const l of chunk) errors.push(JSON.parse(l));
    expect(errors.map((l) => l.custom_id)).toEqual(customIds);
    expect(new Set(errors.map((l) => l.error.code))).toEqual(new Set(["batch_cancelled"]));
    const { kind, asked } = echoKind();
    await new OpenAiBatchRunner(client, [kind], 600, pino({ level: "silent" }), 4).run(
      id,
      new AbortController().signal,
    );
    expect(asked).toEqual([]);
    expect((await store.get(id))?.status).toBe("cancelled");
  });

  it("a batch still waiting for a runner past its window is expired when it is looked at, not left validating", async () => {
    const { id, customIds } = await batchOver(taggedChunks(), -1);
    const service = new OpenAiBatchService(client, {} as FileService, 600);
    const tenant = { id: "", admin: false };
    let status = (await service.get(id, tenant)).status;
    for (let i = 0; i < 100 && status !== "expired"; i++) {
      await pause(50);
      status = (await service.get(id, tenant)).status;
    }
    expect(status).toBe("expired");
    const batch = await client.openAiBatches.get(id);
    const errors: Array<{ custom_id: string; error: { code: string } }> = [];
    for await (const chunk of client.files.lines(batch?.error_file_id ?? ""))
      for (const l of chunk) errors.push(JSON.parse(l));
    expect(errors.map((l) => l.custom_id)).toEqual(customIds);
    expect(new Set(errors.map((l) => l.error.code))).toEqual(new Set(["batch_expired"]));
  });

  it("a finalizer a later one followed ends nothing: the batch is the later one's to end", async () => {
    const { id } = await batchOver();
    const store = client.openAiBatches;
    await store.transition(id, ["validating", "in_progress"], "finalizing");
    const first = await store.finalizer(id);
    const second = await store.finalizer(id);
    await expect(store.finish(id, "completed", {}, 600, first)).rejects.toThrow(/another writer/);
    expect((await store.get(id))?.status).toBe("finalizing");
    await store.finish(id, "completed", {}, 600, second);
    expect((await store.get(id))?.status).toBe("completed");
  });
});

describe("the answers kept past a point (an input file deleted midway)", () => {
  it("come a page at a time in order: lines' own by index, then chunks' whole ones by chunk, none twice", async () => {
    const { id } = await batchOver();
    const store = client.openAiBatches;
    // 700 lines' own answers, recorded out of order with gaps, and three chunks whole
    const indexes = Array.from({ length: 700 }, (_, k) => k * 2).reverse();
    for (let at = 0; at < indexes.length; at += 100)
      await store.recordMany(
        id,
        indexes
          .slice(at, at + 100)
          .map((index) => ({ index, ok: true, line: `${OK}line ${index}` })),
      );
    for (const chunk of [5, 1, 3])
      await store.recordChunk(id, chunk, 1, 0, encodeChunkAnswers([`chunk ${chunk}`], []));
    const read: string[] = [];
    for await (const answer of store.answersAfter(id, 101, 1))
      read.push(
        "line" in answer ? answer.line.slice(1) : (answer.chunk.toString().split("\n")[1] ?? ""),
      );
    const lines = indexes.filter((k) => k >= 101).sort((a, b) => a - b);
    expect(read).toEqual([...lines.map((k) => `line ${k}`), "chunk 3", "chunk 5"]);
  });
});

describe("a line past the hour one call may wait, its batch's window still open", () => {
  const late = () => new FerryError("DEADLINE_EXCEEDED", "Deadline exceeded");
  type Line = { custom_id: string; response: { status_code: number } };
  const output = async (id: string) => {
    const batch = await client.openAiBatches.get(id);
    const read = async (file: string | undefined) => {
      const lines: Line[] = [];
      if (file)
        for await (const chunk of client.files.lines(file))
          for (const l of chunk) lines.push(JSON.parse(l));
      return lines;
    };
    return {
      batch,
      ok: await read(batch?.output_file_id),
      errors: await read(batch?.error_file_id),
    };
  };

  it("many at once: a chunk whose every line ran out of its call's hour runs again, not a 504 each", async () => {
    const { id, customIds } = await batchOver();
    let calls = 0;
    const kind: BatchLineKind = {
      endpoint: ENDPOINT,
      run: async () => {
        throw new Error("many at once");
      },
      openMany: () => ({
        run: async (lines, opts) => {
          calls++;
          expect(opts.timeoutMs).toBe(3_600_000);
          // the first chunk's first call: every line out of its hour
          if (calls === 1) return lines.map(() => ({ error: late() }));
          return lines.map((l) => ({ value: { echo: (l.body as { tag: string }).tag } }));
        },
        close: async () => {},
      }),
    };
    await new OpenAiBatchRunner(client, [kind], 600, pino({ level: "silent" }), 4).run(
      id,
      new AbortController().signal,
    );
    const { batch, ok, errors } = await output(id);
    expect(batch?.status).toBe("completed");
    expect(ok.map((l) => l.custom_id)).toEqual(customIds);
    expect(errors).toEqual([]);
    expect(calls).toBe(CHUNKS + 1);
  });

  it("a line at a time: sent again after its call's hour; a line whose own timeout_ms ran out is its 504", async () => {
    const { id } = await batchOver([
      [
        { custom_id: "waits", method: "POST", url: LINE_URL, body: { tag: "waits" } },
        { custom_id: "own", method: "POST", url: LINE_URL, body: { tag: "own", timeout_ms: 50 } },
      ],
    ]);
    const tries = new Map<string, number>();
    const kind: BatchLineKind = {
      endpoint: ENDPOINT,
      run: async (_url, body) => {
        const tag = (body as { tag: string }).tag;
        tries.set(tag, (tries.get(tag) ?? 0) + 1);
        if (tag === "own" || tries.get(tag) === 1) throw late();
        return { echo: tag };
      },
    };
    await new OpenAiBatchRunner(client, [kind], 600, pino({ level: "silent" }), 4).run(
      id,
      new AbortController().signal,
    );
    const { batch, ok, errors } = await output(id);
    expect(batch?.status).toBe("completed");
    expect(ok.map((l) => [l.custom_id, l.response.status_code])).toEqual([["waits", 200]]);
    expect(errors.map((l) => [l.custom_id, l.response.status_code])).toEqual([["own", 504]]);
    expect(Object.fromEntries(tries)).toEqual({ waits: 2, own: 1 });
  });
});

describe("a running batch's seat among its tenant's", () => {
  it("lost while it ran (its lease lapsed and another of the tenant's batches took it): the batch stops where it is and waits its turn, never one more than the tenant may run", async () => {
    const owner = `k-${randomUUID().slice(0, 8)}`;
    const { id } = await batchOver(taggedChunks(), 86_400, owner);
    let started = 0;
    // lines that run until their batch stops them
    const kind: BatchLineKind = {
      endpoint: ENDPOINT,
      run: async () => {
        throw new Error("lines of this kind run many at once");
      },
      openMany: () => ({
        run: async (_lines, _opts, signal) => {
          started++;
          await new Promise((resolve) => signal.addEventListener("abort", resolve));
          return undefined;
        },
        close: async () => {},
      }),
    };
    const runner = new OpenAiBatchRunner(client, [kind], 600, pino({ level: "silent" }), 1, {
      seatLeaseMs: 300,
    });
    const running = client.runningBatches;
    const run = runner.run(id, new AbortController().signal);
    for (let i = 0; i < 100 && started === 0; i++) await pause(10);
    expect(started).toBeGreaterThan(0);
    expect(await running.count(owner)).toBe(1);
    // as if this runner stalled past its lease: the seat lapsed and the tenant's next took it
    await running.leave(owner, id);
    expect(await running.enter(owner, "batch_next", 1, 60_000)).toBe(true);

    const outcome = await Promise.race([
      run.then(
        () => "ended",
        (err: Error) => err.name,
      ),
      pause(3_000),
    ]);
    expect(outcome).toBe("PostponedRun");
    expect(await client.openAiBatches.status(id)).toBe("in_progress");
    expect(await running.count(owner)).toBe(1);
    await running.leave(owner, "batch_next");
  });
});
