// The matmul precision a run's values were computed at, said beside the worker where
// it changes them: JAX's default precision on a TPU passes float32 matrix products
// through bfloat16 (about 3 significant digits), and on a recent NVIDIA GPU may use
// TensorFloat-32, where a CPU computes float32's 7 (issue 50; measured on a TPU v5e:
// docs/deploy.md, "The engine on a real TPU").

/** What the `accepted` event's worker says (sandbox/protocol/events.py WorkerIdentity). */
export interface PrecisionOf {
  platform?: string | null;
  matmul_precision?: string | null;
}

/** The worker line's precision phrase: "" on a CPU (float32 is float32 there) and for
 * a worker that does not say. The run's `config` setting it decides over the worker's. */
export function precisionNote(w: PrecisionOf | null | undefined, config?: Record<string, unknown> | null): string {
  const platform = (w?.platform ?? "").toLowerCase();
  const asked = config?.["jax_default_matmul_precision"];
  const precision = asked != null ? String(asked) : w?.matmul_precision;
  if (!precision || !platform || platform === "cpu") return "";
  if (precision !== "default") return `matmul precision ${precision}`;
  if (platform === "tpu") return "default matmul precision: float32 products in bfloat16 passes (~3 digits; jax.default_matmul_precision('highest') for float32's)";
  return "default matmul precision: float32 products may use TensorFloat-32 (~3 digits; jax.default_matmul_precision('highest') for float32's)";
}
