import { deploymentKey, storedSettings } from "../../engine/deployment.js";
import { memoryPolicies, policyWarning } from "../../engine/memoryPolicy.js";
import { deploymentFields, differences, resolveSettings } from "../../engine/settings.js";
import { InvalidInputError } from "../../protocol/errors.js";
import type { Command } from "../args.js";
import { deploymentRollcall, withClient } from "../connect.js";
import { badValue } from "../errors.js";
import { paint, print } from "../format.js";
import { sum } from "./stats.js";

/**
 * `check [SETTINGS] [--reconcile]`: the given settings (the library's defaults for the rest)
 * against the deployment's, storing nothing. Nothing stored yet is a pass: the first instance to
 * start stores its own, so any valid settings would be accepted. Then Redis itself: every
 * master's maxmemory-policy must be noeviction. With --reconcile, the counts are then brought
 * back to what the rooms hold.
 */
export async function check(command: Command): Promise<number> {
  const status = await compare(command);
  const evicting = await checkMemoryPolicy(command);
  if (command.reconcile && status !== 2) await reconcile(command);
  return status === 1 || evicting ? 1 : 0;
}

/**
 * Whether Redis may evict rollcall's keys (said why); silent when every master is noeviction.
 * A policy that cannot be read is a note, not a failure: CONFIG and INFO may both be refused.
 */
async function checkMemoryPolicy({ target }: Command): Promise<boolean> {
  const warning = policyWarning(await withClient(target, memoryPolicies));
  if (!warning) return false;
  if (warning.code === "UNKNOWN_POLICY") {
    print(paint("yellow", `note: ${warning.message}`));
    return false;
  }
  print(paint("red", warning.message));
  return true;
}

/** 0: the settings agree; 1: they differ; 2: nothing is stored. */
async function compare({ settings, target }: Command): Promise<number> {
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
    return 2;
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

async function reconcile({ target }: Command): Promise<void> {
  await withClient(target, async (client) => {
    const rollcall = await deploymentRollcall(client, target.prefix);
    const before = sum(await rollcall.stats());
    const buckets = await rollcall.reconcile();
    const after = sum(await rollcall.stats());
    const line = (c: typeof before) =>
      `${c.rooms} rooms, ${c.users} users, ${c.connections} connections, ${c.typing} typing`;
    print(`counts reconciled in ${buckets} of ${rollcall.settings.buckets} buckets`);
    print(`  before: ${line(before)}`);
    print(`  after:  ${line(after)}`);
  });
}
