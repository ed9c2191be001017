import { RedisCallError } from "./errors.js";
import { Layout } from "./layout.js";
import type { Client } from "./script.js";

/** Where a deployment keeps its settings: the key names no bucket, so any bucket count builds it. */
export function deploymentKey(prefix: string): string {
  return new Layout(prefix, 1).deployment;
}

/** The settings a deployment stored (field, value, …), empty when no instance has stored any. */
export async function storedSettings(client: Client, prefix: string): Promise<string[]> {
  const key = deploymentKey(prefix);
  try {
    return Object.entries(await client.hgetall(key)).flat();
  } catch (error) {
    throw new RedisCallError(`read of ${key}`, error);
  }
}

/**
 * Deletes the settings a deployment stored, so that the next instance to start stores its own;
 * false when there were none. Whether instances still run on them is the caller's to check.
 */
export async function deleteSettings(client: Client, prefix: string): Promise<boolean> {
  const key = deploymentKey(prefix);
  try {
    return (await client.unlink(key)) === 1;
  } catch (error) {
    throw new RedisCallError(`delete of ${key}`, error);
  }
}
