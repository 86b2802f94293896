import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempRepository } from "./helpers/model-repo.js";
import { Stack } from "./helpers/stack.js";

const repo = tempRepository({ digits: {}, "tiny-lm": {} });
// large bodies sent back to back, each held to what its route reads of it: not to a rate
// (KEY_BODY_BYTES_PER_S has a test of its own)
const stack = new Stack({
  env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "digits,tiny-lm" },
  apiEnv: { KEY_BODY_BYTES_PER_S: "0" },
});
beforeAll(() => stack.start());
afterAll(() => stack.stop());

const message = async (res: Response) =>
  ((await res.json()) as { error: { message: string } }).error.message;
const chat = (messages: unknown[]) =>
  stack.post("/v1/chat/completions", { model: "tiny-lm", messages, max_tokens: 4 });

describe("chat messages are counted and measured before any template renders", () => {
  it("200,000 one-character messages (6.5 MB): refused unparsed; 25,000 (0.8 MB): a 400 before any template renders", async () => {
    // rendered through the template before the length check, 200,000 had cost the loop 1.5-1.8
    // s each, and eight at once held a neighbour's predict 9.6 s. So many objects now weigh past
    // the largest body (8 MiB of numbers): a 413 before any is parsed
    const most = Array.from({ length: 200_000 }, () => ({ role: "user", content: "a" }));
    const weighed = await stack.post("/v1/chat/completions", { model: "tiny-lm", messages: most });
    expect(weighed.status).toBe(413);
    expect(await message(weighed)).toMatch(/costs more to read than its route/);
    // 25,000 weigh less and are parsed, then counted before any renders (rendered, they had
    // been refused for the context instead, ~0.2 s of the loop later)
    const many = most.slice(0, 25_000);
    const refused = await stack.post("/v1/chat/completions", {
      model: "tiny-lm",
      messages: many,
      max_tokens: 4,
    });
    expect(refused.status).toBe(400);
    expect(await message(refused)).toMatch(/at most 2048 messages/);
    // and the same on /tokenize, which renders a chat without running it
    const tokenize = await stack.post("/tokenize", { model: "tiny-lm", messages: many });
    expect(tokenize.status).toBe(400);
    expect(await message(tokenize)).toMatch(/at most 2048 messages/);
  });

  it("content parts are counted before any is read: a chat's messages, a response's input items", async () => {
    // 300,000 empty parts (7.8 MB) in one message had each been read and checked by the
    // schema, ~575 ms of the API's loop a request with their garbage, before any count; so
    // many objects are now weighed past the largest body and refused unparsed (a 413), and
    // 10,000 (260 KB), which weigh less, are parsed and counted
    const parts = Array.from({ length: 10_000 }, () => ({ type: "text", text: "" }));
    const res = await chat([{ role: "user", content: parts }]);
    expect(res.status).toBe(400);
    expect(await message(res)).toBe(
      "messages: at most 4096 content parts and tool calls together; these have 10000",
    );
    const heavy = await chat([
      { role: "user", content: Array.from({ length: 30 }, () => parts).flat() },
    ]);
    expect(heavy.status).toBe(413);
    expect(await message(heavy)).toMatch(/costs more to read than its route/);
    const input = Array.from({ length: 10_000 }, () => ({ type: "input_text", text: "" }));
    const response = await stack.post("/v1/responses", {
      model: "tiny-lm",
      input: [{ role: "user", content: input }],
    });
    expect(response.status).toBe(400);
    expect(await message(response)).toMatch(
      /at most 4096 content parts and tool calls together; these have 10000/,
    );
    // an assistant's tool calls count with them (50,000 empty ones, 150 KB, had cost 235 ms
    // of the loop and then a 500 from the schema's issue list)
    const calls = await chat([
      { role: "user", content: "hi" },
      { role: "assistant", content: null, tool_calls: Array.from({ length: 50_000 }, () => ({})) },
    ]);
    expect(calls.status).toBe(400);
    expect(await message(calls)).toBe(
      "messages: at most 4096 content parts and tool calls together; these have 50000",
    );
    // a chat of 2,048 messages of two parts each is within it
    const two = [
      { type: "text", text: "a" },
      { type: "text", text: "b" },
    ];
    const within = await stack.post("/tokenize", {
      model: "tiny-lm",
      messages: Array.from({ length: 8 }, () => ({ role: "user", content: two })),
    });
    expect(within.status).toBe(200);
  });

  it("more messages than the context has tokens are refused before rendering, on a chat and /tokenize alike", async () => {
    // 2,048 empty messages (64 KB, under the byte rate's floor): the template wrote 8,194 tokens
    // for the 256-token window, ~4 ms of the API's loop each, before the context check refused
    // the chat (and /tokenize answered them)
    const empty = Array.from({ length: 2_048 }, (_, k) => ({
      role: k % 2 ? "assistant" : "user",
      content: "",
    }));
    const refusal =
      "This model's maximum context length is 256 tokens; the chat has 2048 messages, each at least a token once its template writes it";
    const res = await chat(empty);
    expect(res.status).toBe(400);
    expect(await message(res)).toBe(refusal);
    const tokenized = await stack.post("/tokenize", { model: "tiny-lm", messages: empty });
    expect(tokenized.status).toBe(400);
    expect(await message(tokenized)).toBe(refusal);
    // as many as the window has tokens are still rendered (and counted by their tokens)
    const fits = await stack.post("/tokenize", { model: "tiny-lm", messages: empty.slice(0, 8) });
    expect(fits.status).toBe(200);
  });

  it("text that cannot fit the context is refused before rendering; a tool message names its call", async () => {
    const long = Array.from({ length: 100 }, () => ({ role: "user", content: "x".repeat(1_000) }));
    const res = await chat(long);
    expect(res.status).toBe(400);
    expect(await message(res)).toMatch(
      /maximum context length is 256 tokens; the prompt has 100000 characters/,
    );
    const orphan = await chat([
      { role: "user", content: "weather?" },
      { role: "tool", content: "sunny" },
    ]);
    expect(orphan.status).toBe(400);
    expect(await message(orphan)).toBe(
      "messages.1.tool_call_id: a tool message needs the tool_call_id of the call it answers",
    );
  });
});

describe("logit_bias is counted and each token id read once, before anything is queued", () => {
  it("20,000 spellings of one id (2.7 MB) are a 400 naming the budget; a neighbour's completion is unaffected", async () => {
    // "1", "01", "001", ...: one token, once added at every step of every sequence per spelling
    // (61,000 of them, 20 tokens took 7.6 s, and another key's completion on the same worker
    // waited 50 s; so many properties now weigh past any body, a 413 before they are parsed)
    const spelled: Record<string, number> = {};
    for (let i = 0; i < 61_000; i++)
      spelled[`${"0".repeat(i % 250)}${1 + Math.floor(i / 250)}`] = 1;
    const spelledAs = (count: number) =>
      stack.post("/v1/completions", {
        model: "tiny-lm",
        prompt: "Once",
        max_tokens: 20,
        n: 4,
        logit_bias: Object.fromEntries(Object.entries(spelled).slice(0, count)),
      });
    expect((await spelledAs(61_000)).status).toBe(413);
    const res = await spelledAs(20_000);
    expect(res.status).toBe(400);
    expect(await message(res)).toBe("logit_bias names 20000 token ids; at most 300");
    const twice = await stack.post("/v1/completions", {
      model: "tiny-lm",
      prompt: "Once",
      max_tokens: 4,
      logit_bias: { "5": 1, "005": 2 },
    });
    expect(twice.status).toBe(400);
    expect(await message(twice)).toBe('logit_bias names token id 5 twice ("005")');
    const started = performance.now();
    const neighbour = await stack.post("/v1/completions", {
      model: "tiny-lm",
      prompt: "Once",
      max_tokens: 20,
      logit_bias: { "5": -100 },
    });
    expect(neighbour.status).toBe(200);
    expect(performance.now() - started).toBeLessThan(5_000);
  });
});

describe("what one request asks to be scored is bounded before anything is queued", () => {
  it("64 choices of 200 tokens with 20 alternatives and an echoed prompt: a 400 naming the budget, nothing queued; within it, scored", async () => {
    // each cap alone allowed it: an 8 MB answer and ~44 MB of event logs from 2 KB
    const huge = {
      model: "tiny-lm",
      prompt: "Once upon a time",
      max_tokens: 200,
      n: 64,
      logprobs: 20,
      echo: true,
      prompt_logprobs: 20,
    };
    const res = await stack.post("/v1/completions", huge);
    expect(res.status).toBe(400);
    expect(await message(res)).toMatch(
      /asks for up to \d+ log-probability entries .* at most 65536 a request/,
    );
    // the streamed chat of as many choices too (its choices are queued together)
    const streamed = await stack.post("/v1/chat/completions", {
      model: "tiny-lm",
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 200,
      n: 32,
      logprobs: true,
      top_logprobs: 20,
      stream: true,
    });
    expect(streamed.status).toBe(400);
    expect(await message(streamed)).toMatch(/at most 65536 a request/);
    // nothing of them was queued: a request within the budget runs at once after them
    const started = performance.now();
    const within = await stack.post("/v1/completions", { ...huge, max_tokens: 4, n: 2 });
    expect(within.status).toBe(200);
    expect(performance.now() - started).toBeLessThan(5_000);
    const { choices } = (await within.json()) as {
      choices: Array<{ logprobs: { top_logprobs: unknown[] } }>;
    };
    expect(choices).toHaveLength(2);
    expect(choices[0]?.logprobs.top_logprobs.length).toBeGreaterThan(4);
  });

  it("a stream's chunks count: 64 streamed choices of 248 tokens with 3 alternatives (an 8.9 MB answer) are a 400; a chat of 64 choices without max_tokens is lowered to fit, not refused", async () => {
    const chat = { model: "tiny-lm", messages: [{ role: "user", content: "hi" }], n: 64 };
    const streamed = await stack.post("/v1/chat/completions", {
      ...chat,
      max_tokens: 248,
      logprobs: true,
      top_logprobs: 3,
      stream: true,
    });
    expect(streamed.status).toBe(400);
    expect(await message(streamed)).toMatch(/more for each token's chunk when streamed/);
    // no max_tokens: each choice's default is its share of the budget (it was the whole
    // budget each, and the 64 together were refused for a limit the caller never set)
    const lowered = await stack.post("/v1/chat/completions", {
      ...chat,
      logprobs: true,
      top_logprobs: 20,
      ignore_eos: true,
    });
    expect(lowered.status).toBe(200);
    const { choices, usage } = (await lowered.json()) as {
      choices: unknown[];
      usage: { completion_tokens: number };
    };
    expect(choices).toHaveLength(64);
    expect(usage.completion_tokens * 21).toBeLessThanOrEqual(65_536);
  }, 60_000);
});

describe("what a stored response keeps is bounded before anything is queued", () => {
  it("metadata as OpenAI's (16 pairs, 64 and 512 characters), caller tags, tool descriptions and tools' size: a 400 each", async () => {
    const respond = (extra: Record<string, unknown>) =>
      stack.post("/v1/responses", {
        model: "tiny-lm",
        input: "hi",
        max_output_tokens: 4,
        ...extra,
      });
    const pairs = (n: number, value = "v") =>
      Object.fromEntries(Array.from({ length: n }, (_, k) => [`k${k}`, value]));
    const tool = (description: string, k = 0) => ({
      type: "function",
      name: `f${k}`,
      description,
      parameters: { type: "object", properties: {} },
    });
    const refused: Array<[Record<string, unknown>, RegExp]> = [
      // 7,000 pairs of 1 KB were 22 MB of Redis for a day, from one request
      [{ metadata: pairs(7_000, "x".repeat(1_000)) }, /metadata/],
      [{ metadata: pairs(17) }, /metadata holds at most 16 pairs/],
      [{ metadata: { k: "x".repeat(513) } }, /metadata/],
      [{ metadata: { ["k".repeat(65)]: "v" } }, /metadata/],
      [{ user: "u".repeat(257) }, /user/],
      [{ safety_identifier: "s".repeat(257) }, /safety_identifier/],
      [{ prompt_cache_key: "p".repeat(257) }, /prompt_cache_key/],
      [{ tools: [tool("d".repeat(8_193))], tool_choice: "none" }, /description/],
      [
        {
          tools: Array.from({ length: 40 }, (_, k) => tool("d".repeat(8_000), k)),
          tool_choice: "none",
        },
        /tools hold at most 262144 characters of JSON/,
      ],
    ];
    for (const [extra, why] of refused) {
      const res = await respond(extra);
      expect(res.status, JSON.stringify(Object.keys(extra))).toBe(400);
      expect(await message(res)).toMatch(why);
    }
    // within them, taken
    const ok = await respond({
      metadata: pairs(16, "x".repeat(512)),
      user: "u".repeat(256),
      tools: [tool("d".repeat(8_192))],
      tool_choice: "none",
    });
    expect(ok.status).toBe(200);
    // the same caps on chat completions' tools and user
    const chatRefused = await stack.post("/v1/chat/completions", {
      model: "tiny-lm",
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 4,
      user: "u".repeat(257),
    });
    expect(chatRefused.status).toBe(400);
    const chatTools = await stack.post("/v1/chat/completions", {
      model: "tiny-lm",
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 4,
      tools: Array.from({ length: 40 }, (_, k) => ({
        type: "function",
        function: { name: `f${k}`, description: "d".repeat(8_000), parameters: {} },
      })),
      tool_choice: "none",
    });
    expect(chatTools.status).toBe(400);
    expect(await message(chatTools)).toMatch(/tools hold at most 262144 characters of JSON/);
    // 5,000 levels in a 30 KB body overflowed JSON.stringify's stack: a 500, now a 400 (the
    // bodies written out here: this process's own stringify would overflow too)
    const raw = (text: string) =>
      fetch(stack.url("/v1/chat/completions"), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: `{"model":"tiny-lm","messages":[{"role":"user","content":"hi"}],"max_tokens":4,${text}}`,
      });
    const levels = 5_000;
    const deepSchema = `${'{"type":"object","properties":{"a":'.repeat(levels)}{"type":"string"}${"}}".repeat(levels)}`;
    const deepTools = await raw(
      `"tools":[{"type":"function","function":{"name":"f","parameters":${deepSchema}}}]`,
    );
    expect(deepTools.status).toBe(400);
    expect(await message(deepTools)).toMatch(/nested at most 64 levels/);
    const deepKwargs = await raw(
      `"chat_template_kwargs":{"x":${"[".repeat(levels)}1${"]".repeat(levels)}}`,
    );
    expect(deepKwargs.status).toBe(400);
    expect(await message(deepKwargs)).toMatch(/nested at most 64 levels/);
    // in a schema's enum: it passed the guided budgets, then overflowed writing the job (a 503
    // "Redis error" that clients and batch runners retried)
    const deepEnum = await raw(
      `"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"enum":[${"[".repeat(levels)}1${"]".repeat(levels)}]}}}`,
    );
    expect(deepEnum.status).toBe(400);
    expect(await message(deepEnum)).toMatch(/deeper than 128 levels of JSON/);
    // in a field Ferry refuses unless it is its no-op: compared by value, it had been
    // written out first (a 500)
    const deepUnsupported = await raw(
      `"web_search_options":${"[".repeat(levels)}1${"]".repeat(levels)}`,
    );
    expect(deepUnsupported.status).toBe(400);
    expect(await message(deepUnsupported)).toMatch(/web_search_options is not supported/);
  });
});

describe("Triton's binary header length is read strictly", () => {
  it("only plain digits: hex, signed or exponent forms are a 400", async () => {
    const json = JSON.stringify({
      inputs: [{ name: "input", shape: [1, 64], datatype: "FP32", data: new Array(64).fill(0) }],
    });
    // (surrounding blanks are HTTP's own optional whitespace: the parser strips them)
    for (const given of [
      `0x${json.length.toString(16)}`,
      `${json.length / 10}e1`,
      `+${json.length}`,
    ]) {
      const res = await fetch(stack.url("/v2/models/digits/infer"), {
        method: "POST",
        headers: {
          "Content-Type": "application/octet-stream",
          "Inference-Header-Content-Length": given,
        },
        body: json,
      });
      expect(res.status, given).toBe(400);
    }
    const ok = await fetch(stack.url("/v2/models/digits/infer"), {
      method: "POST",
      headers: {
        "Content-Type": "application/octet-stream",
        "Inference-Header-Content-Length": String(json.length),
      },
      body: json,
    });
    expect(ok.status).toBe(200);
  });
});

describe("a classifier's body is held to what its inputs could need, before any of it is read", () => {
  it("8 MB for a 64-value model: a 413 naming the budget on predict and v2 infer, declared or chunked; a full batch pretty-printed still fits", async () => {
    // digits: 32 rows of 64 values; 96 bytes a value and 64 KiB beside them
    const budget = 64 * 1024 + 96 * 32 * 64;
    const zeros = new Array(4_000_000).fill(0);
    const bodies = {
      "/v1/models/digits/predict": JSON.stringify({ features: zeros }),
      "/v2/models/digits/infer": JSON.stringify({
        inputs: [{ name: "input", shape: [1, 64], datatype: "FP32", data: zeros }],
      }),
    };
    for (const [path, body] of Object.entries(bodies))
      for (const chunked of [false, true]) {
        const res = await fetch(stack.url(path), {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: chunked
            ? new ReadableStream({
                start(controller) {
                  controller.enqueue(new TextEncoder().encode(body));
                  controller.close();
                },
              })
            : body,
          ...(chunked ? { duplex: "half" } : {}),
        } as RequestInit);
        // before, the whole of it was parsed and walked (2-7 s of the API's loop for v2)
        expect(res.status, `${path} chunked ${chunked}`).toBe(413);
        expect(JSON.stringify(await res.json())).toMatch(
          new RegExp(`exceeds ${budget} bytes, the most model 'digits' takes`),
        );
      }
    // a client that declares 7 MB and sends 300 KB of it: answered at once, not once the whole
    // was read (it had had no answer in 6 s, its place in the queue held)
    const { hostname, port } = new URL(stack.url("/"));
    const socket = connect(Number(port), hostname);
    const heard = new Promise<string>((resolve) => {
      let text = "";
      socket.on("data", (d: Buffer) => {
        text += d.toString();
        if (text.includes("\r\n\r\n")) resolve(text);
      });
    });
    socket.write(
      "POST /v2/models/digits/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 7000000\r\n\r\n",
    );
    socket.write(Buffer.alloc(300_000, 0x20));
    const early = await Promise.race([
      heard,
      new Promise<string>((resolve) => setTimeout(() => resolve("no answer in 3 s"), 3_000)),
    ]);
    socket.destroy();
    expect(early).toMatch(/^HTTP\/1\.1 413 /);
    // a full batch as Python's json.dumps(indent=4) writes it, every value's digits spelled out
    const row = Array.from({ length: 64 }, (_, k) => k / 3);
    const full = JSON.stringify(
      { inputs: [{ name: "input", shape: [32, 64], datatype: "FP32", data: Array(32).fill(row) }] },
      null,
      4,
    );
    expect(full.length).toBeLessThan(budget);
    const ok = await fetch(stack.url("/v2/models/digits/infer"), {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: full,
    });
    expect(ok.status).toBe(200);
  });
});

describe("a chunked body past its limit, from a client that reads only once it has sent", () => {
  it("gets the 413 once its body is sent, not a reset connection", async () => {
    // Python's http.client and requests with a generator send the whole body, then read: the
    // refused body must be read out for them to get that far (it had stopped being read, and
    // the connection was cut 5 s later under a sender still blocked on a full socket)
    const { hostname, port } = new URL(stack.url("/"));
    const socket = connect(Number(port), hostname);
    const received: Buffer[] = [];
    const closed = new Promise<string>((resolve) => {
      socket.on("data", (d: Buffer) => received.push(d));
      socket.on("error", (err) => resolve(`error ${err.message}`));
      socket.on("close", () => resolve("closed"));
    });
    socket.pause(); // reads nothing until the body is sent
    const sent = new Promise<string>((resolve) => {
      socket.write(
        "POST /v1/models/digits/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
      );
      const piece = Buffer.alloc(256 * 1024, 0x20);
      for (let k = 0; k < 32; k++) {
        socket.write(`${piece.length.toString(16)}\r\n`);
        socket.write(piece);
        socket.write("\r\n");
      }
      socket.write("0\r\n\r\n", () => resolve("sent"));
    });
    const outcome = await Promise.race([
      sent,
      closed,
      new Promise<string>((resolve) => setTimeout(() => resolve("still sending after 8 s"), 8_000)),
    ]);
    expect(outcome).toBe("sent");
    socket.resume();
    await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 5_000))]);
    socket.destroy();
    expect(Buffer.concat(received).toString()).toMatch(
      /^HTTP\/1\.1 413 [\s\S]*the most model 'digits' takes/,
    );
    // one within its limit, sent the same way, is answered
    const row = JSON.stringify({ features: Array.from({ length: 64 }, (_, k) => k % 16) });
    const ok = await fetch(stack.url("/v1/models/digits/predict"), {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: new ReadableStream({
        start(controller) {
          const bytes = new TextEncoder().encode(row);
          controller.enqueue(bytes.subarray(0, 100));
          controller.enqueue(bytes.subarray(100));
          controller.close();
        },
      }),
      duplex: "half",
    } as RequestInit);
    expect(ok.status).toBe(200);
  });
});
