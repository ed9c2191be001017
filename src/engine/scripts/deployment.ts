import type { Script } from "../script.js";

/** Stores these settings if the deployment has none; else returns the stored ones (name, value…). */
export const deployment: Script<{ fields: string[] }, string[]> = {
  name: "deployment",
  args: ({ fields }) => fields,
  decode: (reply) => reply.values.map((_, i) => reply.str(i)),
};
