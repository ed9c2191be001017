import fc from "fast-check";

/** Valid ids, biased towards the characters a key or member encoding could trip over. */
export const id = fc
  .string({
    unit: fc.constantFrom("a", "b", ":", "{", "}", " ", "[", "(", "é", "😀", "\u00a0", "-"),
    minLength: 1,
    maxLength: 6,
  })
  .filter((s) => s.isWellFormed());
