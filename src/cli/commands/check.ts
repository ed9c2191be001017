import { deploymentKey, storedSettings } from "../../engine/deployment.js";
import { deploymentFields, differences, resolveSettings } from "../../engine/settings.js";
import { InvalidInputError } from "../../protocol/errors.js";
import type { Command } from "../args.js";
import { withClient } from "../connect.js";
import { badValue } from "../errors.js";
import { paint, print } from "../format.js";

/**
 * `check [SETTINGS]`: the given settings (the library's defaults for the rest) against the
 * deployment's, storing nothing. Nothing stored yet is a pass: the first instance to start
 * stores its own, so any valid settings would be accepted.
 */
export async function check({ settings, target }: Command): Promise<number> {
  let ours: string[];
  try {
    ours = deploymentFields(resolveSettings({ ...settings, prefix: target.prefix }));
  } catch (error) {
    if (error instanceof InvalidInputError) throw badValue(error.message);
    throw error;
  }
  const stored = await withClient(target, (client) => storedSettings(client, target.prefix));
  const key = deploymentKey(target.prefix);
  if (stored.length === 0) {
    print(`nothing stored in ${key} yet: the first instance to start stores its settings`);
    return 0;
  }
  const found = differences(stored, ours);
  if (found.length === 0) {
    print(paint("green", `the settings agree with ${key}`));
    return 0;
  }
  print(paint("red", `the settings differ from ${key} ("there" is stored, "here" given):`));
  found.forEach((difference) => print(`  ${difference}`));
  return 1;
}
