export * from "./model-repository.js";
