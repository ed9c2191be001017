import { createHash } from "node:crypto";

/**
 * A message from a room's channel without its "mac" field, if that is the signature of the
 * message by `key` (see lua/include/events.lua: the SHA-1 of the key, the message before the
 * field, closed, and the key again); else null.
 */
export function signedBy(message: string, key: string): string | null {
  const at = message.lastIndexOf(',"mac":"');
  if (at < 0 || !message.endsWith('"}')) return null;
  const signed = `${message.slice(0, at)}}`;
  const mac = createHash("sha1")
    .update(key + signed + key)
    .digest("hex");
  return message.slice(at + 8, -2) === mac ? signed : null;
}
