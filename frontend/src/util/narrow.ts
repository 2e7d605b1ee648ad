// Narrowing what comes from outside the page's types (a select's value, a stored
// request, the autosave) to the server's enums (src/generated/request.ts), by
// parsing it with the generated schema, never by a cast.
import type * as z from "zod/mini";

/** `value` as `schema`'s type when the schema accepts it, else null. */
export function parsedOrNull<S extends z.ZodMiniType>(schema: S, value: unknown): z.infer<S> | null {
  const parsed = schema.safeParse(value);
  return parsed.success ? parsed.data : null;
}

/** The items of `values` that `schema` accepts, in order; the rest dropped. */
export function parsedItems<S extends z.ZodMiniType>(schema: S, values: unknown): z.infer<S>[] {
  if (!Array.isArray(values)) return [];
  const out: z.infer<S>[] = [];
  for (const v of values) {
    const parsed = schema.safeParse(v);
    if (parsed.success) out.push(parsed.data);
  }
  return out;
}
