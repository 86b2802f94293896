export * from "./batch-runner.js";
export * from "./in-process-session.js";
export * from "./lm-messages.js";
export * from "./lm-runtime.js";
export * from "./logits.js";
export * from "./model-runtime.js";
export * from "./tensor.js";
