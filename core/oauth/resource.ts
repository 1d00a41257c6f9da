import { oauthError } from './errors.js';

/** The path of the MCP endpoint: its URL under PUBLIC_URL is the resource an MCP client asks a token for. */
export const MCP_RESOURCE_PATH = '/mcp';

const normalize = (url: string) => {
  try {
    const u = new URL(url);
    u.hash = '';
    return u.href.replace(/\/$/, '');
  } catch {
    return undefined;
  }
};

/**
 * RFC 8707 resource indicators. An access token names the one resource it is for in `aud`: this server's
 * MCP endpoint (`PUBLIC_URL/mcp`, also what a request that names none gets) or its API (`PUBLIC_URL`).
 * /mcp takes only tokens for itself, so a token minted for something else, here or at another deployment
 * sharing the key, is refused there.
 */
export function createResourceRules(publicUrl: string) {
  const mcp = normalize(`${publicUrl}${MCP_RESOURCE_PATH}`)!;
  const accepted = new Set([mcp, normalize(publicUrl)!]);
  return {
    mcp,
    /** Is `resource` (a request's parameter) one this server issues tokens for? Absent counts as yes. */
    accepts(resource: string | undefined): boolean {
      if (resource === undefined) return true;
      const n = normalize(resource);
      return n !== undefined && accepted.has(n);
    },
    /** The audience of a token requested for `resource`; a resource of anyone else is `invalid_target`. */
    audienceFor(resource: string | undefined): string {
      if (resource === undefined) return mcp;
      const n = normalize(resource);
      if (n === undefined || !accepted.has(n))
        throw oauthError(
          'invalid_target',
          `This server issues tokens for ${mcp} and ${[...accepted][1]} only (RFC 8707 resource)`,
        );
      return n;
    },
    /** Is a token with this audience one for /mcp? */
    isMcp: (audience: string | undefined) => audience !== undefined && normalize(audience) === mcp,
  };
}
export type ResourceRules = ReturnType<typeof createResourceRules>;
