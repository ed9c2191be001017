import { expect } from "chai";
import { SignJWT } from "jose";
import { checkJwtOptions, jwtVerifier } from "../../src/gateway/jwt.js";

const SECRET = "a unit test secret that is long enough for HS512 tokens too, and more";

function sign(alg: string, user: string, secret = SECRET): Promise<string> {
  return new SignJWT({ rooms: ["*"] })
    .setProtectedHeader({ alg })
    .setSubject(user)
    .setExpirationTime("1h")
    .sign(new TextEncoder().encode(secret));
}

async function outcome(verify: (token: string) => Promise<{ user: string }>, token: string) {
  return verify(token).then(
    (identity) => identity.user,
    (error: { reason?: string }) => `refused: ${error.reason}`,
  );
}

describe("the gateway's JWT verifier with a shared secret", () => {
  it("verifies each allowed HMAC algorithm with its own key, imported once, and refuses the others", async () => {
    const verify = await jwtVerifier(
      checkJwtOptions({ secret: SECRET, algorithms: ["HS256", "HS512"] }),
    );
    // Many at once: the first verify of each algorithm imports its key, the others wait for it.
    const tokens = await Promise.all(
      Array.from({ length: 20 }, (_, i) => sign(i % 2 === 0 ? "HS256" : "HS512", `u${i}`)),
    );
    const users = await Promise.all(tokens.map((token) => outcome(verify, token)));
    expect(users).to.deep.equal(tokens.map((_, i) => `u${i}`));
    expect(await outcome(verify, await sign("HS384", "ann"))).to.equal("refused: invalid-token");
    expect(await outcome(verify, await sign("HS256", "ann", `${SECRET}!`))).to.equal(
      "refused: invalid-token",
    );
  });

  it("allows HS256 alone by default, the secret given as bytes or as text", async () => {
    const bytes = await jwtVerifier(checkJwtOptions({ secret: new TextEncoder().encode(SECRET) }));
    const text = await jwtVerifier(checkJwtOptions({ secret: SECRET }));
    for (const verify of [bytes, text]) {
      expect(await outcome(verify, await sign("HS256", "bob"))).to.equal("bob");
      expect(await outcome(verify, await sign("HS512", "bob"))).to.equal("refused: invalid-token");
    }
  });
});
