// ONNX Runtime 1.29 and later, outside Windows, starts Microsoft's telemetry uploader (1DS,
// to its OneCollector endpoint) when its environment is created, unless ORT_DISABLE_TELEMETRY
// is 1: every worker start left a `mat-debug-<pid>.log` in the temp directory, and would send
// usage events off the machine. A server run offline and inside people's own clusters sends
// nothing they did not ask for: off, unless the operator set the variable. Set in the
// process's own environment, which the native library reads, by a module imported before
// onnxruntime-node (ES modules run in the order they are imported).
process.env.ORT_DISABLE_TELEMETRY ??= "1";
