import { createServer } from "node:net";
import { once } from "node:events";

const HOST = "127.0.0.1";

/** Whether a TCP port of 127.0.0.1 can be listened on right now. */
export async function portIsFree(port: number): Promise<boolean> {
  const server = createServer();
  try {
    await once(server.listen(port, HOST), "listening");
  } catch {
    return false;
  }
  await new Promise((resolve) => server.close(resolve));
  return true;
}

/** A port of 127.0.0.1 that nothing listens on right now (the system picks it). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await once(server.listen(0, HOST), "listening");
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (address === null || typeof address === "string") throw new Error("no TCP address");
  return address.port;
}
