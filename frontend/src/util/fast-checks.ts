// Schemas for the events' big arrays, checked in one loop. zod's schema run per item
// held the page's main thread for ~75 ms on one event of a 1,000-layer MLP (a source
// map of tens of thousands of rows, a gradient's 2,000 leaves of 256 numbers); these
// check the same bounds in a few ms. scripts/gen_event_types.py writes them, from the
// same JSON Schema as every other check, for each array they fit.
import * as z from "zod/mini";

/** A value of `typed`'s type that passes `test`: a predicate the generator compiled from
 * the JSON Schema of an array of JSON scalars (numbers, strings, enums, pairs) — no
 * object, so nothing to strip. `typed` gives the type only. */
export function checked<S extends z.ZodMiniType>(_typed: S, test: (value: unknown) => boolean, what: string) {
  return z.custom<z.output<S>>(test, { error: `expected ${what}` });
}

/** A field: [minimum, maximum, required, nullable]. */
export type IntField = readonly [number, number, boolean, boolean];

/** An array of flat objects of bounded integers (a source map's rows); an unknown field
 * is dropped, as zod's object drops it. */
export function intRows<T>(fields: Record<string, IntField>, maxItems: number) {
  const names = Object.keys(fields);
  const specs = names.map((n) => fields[n]);
  return z.transform<unknown, T[]>((input, ctx) => {
    const fail = (message: string): T[] => {
      ctx.issues.push({ code: "custom", message, input, path: [] } as (typeof ctx.issues)[number]);
      return z.NEVER;
    };
    if (!Array.isArray(input)) return fail("expected an array");
    if (input.length > maxItems) return fail(`more than ${maxItems} items`);
    const out = new Array<T>(input.length);
    for (let i = 0; i < input.length; i++) {
      const row: unknown = input[i];
      if (typeof row !== "object" || row === null || Array.isArray(row)) return fail(`item ${i}: expected an object`);
      const kept: Record<string, number | null> = {};
      for (let f = 0; f < names.length; f++) {
        const name = names[f];
        const [min, max, required, nullable] = specs[f];
        const value = (row as Record<string, unknown>)[name];
        if (value === undefined) {
          if (required) return fail(`item ${i}: ${name} is required`);
          continue;
        }
        if (value === null) {
          if (!nullable) return fail(`item ${i}: ${name} may not be null`);
        } else if (!Number.isInteger(value) || (value as number) < min || (value as number) > max) {
          return fail(`item ${i}: ${name} must be an integer in [${min}, ${max}]`);
        }
        kept[name] = value as number | null;
      }
      out[i] = kept as T;
    }
    return out;
  });
}
