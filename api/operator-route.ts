import type { Express, Request } from 'express';
import type { Config } from '../core/config.js';
import { bearerMatches } from '../core/secrets.js';

/**
 * An operator route (Authorization: Bearer OPERATOR_TOKEN): 404 while OPERATOR_TOKEN is unset, 401 for any
 * other credential (`needs` says what: "Resuming a domain needs"), else `handler`'s answer as JSON; its errors go to the error edge.
 */
export function operatorRoute(
  app: Express,
  config: Pick<Config, 'operatorToken'>,
  route: { method: 'get' | 'post'; path: string; off: string; needs: string },
  handler: (req: Request) => Promise<unknown>,
): void {
  app[route.method](route.path, async (req, res, next) => {
    const expected = config.operatorToken;
    if (!expected) return void res.status(404).json({ error: route.off, code: 'not_found' });
    if (!bearerMatches(req.headers.authorization, expected))
      return void res
        .status(401)
        .json({ error: `${route.needs} Authorization: Bearer <OPERATOR_TOKEN>`, code: 'unauthorized' });
    try {
      res.json(await handler(req));
    } catch (err) {
      next(err);
    }
  });
}
