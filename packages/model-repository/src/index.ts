export * from "./embedding-tokens.js";
export * from "./hf-tokenizer.js";
export * from "./load-tokenizer.js";
export * from "./model-repository.js";
export * from "./tokenizer.js";
export * from "./tokenizer-config.js";
